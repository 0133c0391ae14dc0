package tooltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/toolgen/toolgen/internal/names"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
)

// The identity every call of the suite runs as.
const (
	suiteTenant   = "tooltest"
	suiteCaller   = "tooltest-caller"
	suiteApprover = "tooltest-approver" // a principal other than the caller (POL-3)
	suiteSession  = "tooltest-session"
	suiteRun      = "tooltest-run"
	suiteStep     = 1
	suiteCallID   = "tooltest-call-1"
)

// markHook runs inside the store's watermark write, before it is delegated: the
// instant MarkEffectSent is called. A non-nil error fails the write without touching
// the database.
type markHook func() error

// hookedStore is the real store with a hook in front of the watermark write.
type hookedStore struct {
	store.Store
	mu    sync.Mutex
	hook  markHook
	calls int // watermark writes asked for (the pipeline retries an ambiguous failure)
}

func (h *hookedStore) InvocationMarkEffectSentIfLeased(ctx context.Context, f store.Fence, token string) error {
	h.mu.Lock()
	h.calls++
	hook := h.hook
	h.mu.Unlock()
	if hook != nil {
		if err := hook(); err != nil {
			return err
		}
	}
	return h.Store.InvocationMarkEffectSentIfLeased(ctx, f, token)
}

func (h *hookedStore) markCalls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

// countingTool wraps the tool under test: it counts executions and keeps what the
// last one returned and whether it marked, as the pipeline saw it.
type countingTool struct {
	runtime.Tool
	mu        sync.Mutex
	runs      int
	marked    bool
	suspended bool
	res       runtime.ToolResult
	err       error
}

func (c *countingTool) Execute(ctx context.Context, tc *runtime.ExecContext, args json.RawMessage) (runtime.ToolResult, error) {
	c.mu.Lock()
	c.runs++
	c.mu.Unlock()
	res, err := c.Tool.Execute(ctx, tc, args)
	_, suspended := tc.SuspendRequested()
	c.mu.Lock()
	c.marked, c.suspended, c.res, c.err = tc.EffectMarked(), suspended, res, err
	c.mu.Unlock()
	return res, err
}

// last returns the number of executions and what the last one did.
func (c *countingTool) last() (runs int, marked bool, res runtime.ToolResult, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs, c.marked, c.res, c.err
}

// harness is one pipeline over one SQLite database, running the tool under test.
type harness struct {
	t       TB
	env     *Env
	db      *sqlite.Store
	st      *hookedStore
	tool    *countingTool
	p       *runtime.Pipeline
	held    bool // the suite approved a held call
	spec    *runtime.ToolSpec
	dbPath  string
	closers []func() error
}

// newHarness opens (or, for a second worker, reopens) the database at dbPath and
// builds a pipeline over it that runs tool for env. A failure to build it is fatal:
// nothing about the tool can be proven without it.
func newHarness(t TB, tool runtime.Tool, env *Env, dbPath, worker string) *harness {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, dbPath)
	if err != nil {
		t.Fatalf("tooltest: open the SQLite store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	h := &harness{t: t, env: env, db: db, st: &hookedStore{Store: db}, tool: &countingTool{Tool: tool}, spec: tool.Spec(), dbPath: dbPath}
	reg := runtime.NewRegistry()
	if d := names.Domain(h.spec.Name); names.Reserved(h.spec.Name) {
		err = reg.RegisterAdapter(d, h.tool)
	} else {
		err = reg.Register(h.tool)
	}
	if err != nil {
		t.Fatalf("tooltest: register %s: %v", h.spec.Name, err)
	}
	h.p, err = runtime.NewPipeline(runtime.Config{
		Registry:     reg,
		Store:        h.st,
		WorkerID:     worker,
		ApprovalPoll: 5 * time.Millisecond,
		ApprovalHold: time.Minute,
		Artifacts:    runtime.NewFSArtifactWriter(filepath.Join(t.TempDir(), "artifacts")),
		Credentials:  mapCredentials(env.Credentials),
		WorkspaceFor: func(string, string) string { return env.Workspace },
	})
	if err != nil {
		t.Fatalf("tooltest: build the pipeline: %v", err)
	}
	return h
}

// call is the suite's call of the tool with args.
func (h *harness) call(args string) runtime.Call {
	return runtime.Call{
		Tenant: suiteTenant, Principal: h.env.Principal, SessionID: suiteSession,
		RunID: suiteRun, Step: suiteStep, CallID: suiteCallID, Tool: h.spec.Name,
		Args: json.RawMessage(args),
		// User-labelled provenance: the trust-based approvals of POL-1 do not apply,
		// so only a spec's approval_when, critical risk or an operator rule holds a call.
		ContextTrust: []runtime.Trust{runtime.TrustUser}, ArgumentTrust: runtime.TrustUser,
		Workspace: h.env.Workspace, Target: h.env.Target,
	}
}

// execute runs c through the pipeline. A call the policy holds for approval is
// approved by another principal while it waits, so held tools can be checked too.
func (h *harness) execute(c runtime.Call) runtime.Outcome {
	h.t.Helper()
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if canon, err := runtime.CanonicalJSON(c.Args); err == nil {
		key := runtime.IdempotencyKey(runtime.KeyInput{
			Tenant: c.Tenant, RunID: c.RunID, Step: c.Step, CallID: c.CallID,
			Tool: h.spec.Name, ToolVersion: h.spec.Version, CanonicalArgs: canon,
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.approveWhenHeld(ctx, key, stop)
		}()
	}
	o, err := h.p.Execute(ctx, c)
	close(stop)
	wg.Wait()
	if err != nil {
		h.t.Fatalf("tooltest: %s: the pipeline could not record the call: %v", h.spec.Name, err)
	}
	return o
}

func (h *harness) approveWhenHeld(ctx context.Context, key string, stop <-chan struct{}) {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		inv, err := h.db.InvocationGetByKey(ctx, key)
		if err != nil || inv.Status != store.StatusPending || inv.Decision != runtime.VerdictNeedsApproval {
			continue
		}
		err = h.db.ApprovalDecide(ctx, store.Approval{Key: key, Tenant: inv.Tenant, Approved: true, DecidedBy: suiteApprover, Reason: "tooltest"}, nil)
		if err == nil || errors.Is(err, store.ErrConflict) {
			h.held = true
			return
		}
	}
}

// mapCredentials resolves credentials from a map.
type mapCredentials map[string]string

func (m mapCredentials) Credential(_ context.Context, name string) (string, error) {
	if v, ok := m[name]; ok {
		return v, nil
	}
	return "", fmt.Errorf("tooltest: no credential %q in Env.Credentials", name)
}

// markFailure is one way the watermark write fails, and the outcome it must produce.
type markFailure struct {
	what string
	err  error
	want runtime.ReasonCode
}

var (
	// errStoreDown is an ambiguous store failure: the pipeline retries it, then gives up.
	errStoreDown = markFailure{what: "a failing watermark write", err: errors.New("tooltest: the store is unavailable"), want: runtime.ReasonWatermarkFailed}
	// errLeaseLost is a fence that no longer holds: another worker took the call over.
	errLeaseLost = markFailure{what: "a lost lease", err: fmt.Errorf("tooltest: %w", store.ErrLeaseLost), want: runtime.ReasonLeaseLost}
)

func (h *hookedStore) setHook(hook markHook) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hook = hook
}
