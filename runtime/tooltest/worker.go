package tooltest

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/toolgen/toolgen/internal/names"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// The identity a Worker's calls carry unless told otherwise.
const (
	DefaultTenant   = "tooltest"
	DefaultCaller   = "tooltest-caller"
	DefaultApprover = "tooltest-approver" // a principal other than the caller (POL-3)
	DefaultSession  = "tooltest-session"
	DefaultRun      = "tooltest-run"
)

// A Database is where a [Worker] keeps its invocations. Open is called once per Worker
// — once by [NewWorker], once more by each [Worker.Reopen] — each time for a new handle
// on the same database, as another process would open it; the Worker closes the handle
// when the test ends.
type Database interface {
	Open(ctx context.Context) (store.Store, error)
}

// NewDatabase makes a new, empty database for t: the contract suite ([Run], [Check])
// makes one for each property it checks. tooltestsqlite.TempFile is a new SQLite file
// in a temporary directory of t.
type NewDatabase func(t TB) Database

// WorkerOptions configures a [Worker]. The zero value is a working configuration.
type WorkerOptions struct {
	// Database holds the invocations. Required: tooltestsqlite.TempFile(t) for a new
	// SQLite file in a temporary directory, tooltestpg.NewSchema(t, dsn) for a fresh
	// PostgreSQL schema. tooltest links no store driver of its own: the test that
	// imports one of those packages asks for it.
	Database Database
	// Tools are registered beside the tool under test, in the same registry, on the
	// same pipeline and store: for a test whose calls use several tools (write a file,
	// then read it back). A call names one of them with [ToolNamed].
	Tools []runtime.Tool
	// Principal is the caller of every call that does not say [As]. Zero (no ID): ID
	// DefaultCaller in tenant DefaultTenant, holding exactly the required scopes of
	// the registered tools. A principal without a tenant is put in DefaultTenant.
	Principal runtime.Principal
	// Approver approves every call the policy holds, unless the call says
	// [LeaveHeld]. Zero (no ID): DefaultApprover. It always acts in the caller's
	// tenant, and must not be the caller (POL-3).
	Approver runtime.Principal
	// Workspace is every call's workspace (tc.Workspace()). "": a new empty directory.
	Workspace string
	// Credentials are what tc.Credentials() resolves, by name.
	Credentials map[string]string
	// Target is every call's tc.Target().
	Target string
}

// Worker runs calls of one tool through a real [runtime.Pipeline] on a real store,
// one call per [Worker.Call], and reads back what the store recorded — River's
// rivertest.Worker for toolgen. It is the machinery the contract suite ([Run],
// [Check]) runs on, without the suite's judgement: a Worker proves nothing by itself;
// the test asserts on the [Result].
//
// A Worker is bound to the test that made it (its failures are that test's), and is
// safe for concurrent calls.
type Worker struct {
	t      TB
	tool   runtime.Tool
	opts   WorkerOptions // defaults filled
	shared *workerShared
	st     *watchedStore
	p      *runtime.Pipeline
}

// workerShared is what a Worker and its reopened peers share: the database and the
// counters that keep their worker ids and default call ids apart.
type workerShared struct {
	db      Database
	tools   []runtime.Tool // the tool under test first
	workers atomic.Int64
	calls   atomic.Int64
}

// NewWorker returns a Worker for tool: a registry holding it (and opts.Tools), a
// pipeline over a new store handle on opts.Database, with the workspace, credentials
// and identities of opts. A tool in a reserved adapter domain (mcp., device.,
// sandbox.) is registered as its adapter would register it. Anything that keeps the
// Worker from being built fails t at once.
func NewWorker(t TB, tool runtime.Tool, opts WorkerOptions) *Worker {
	t.Helper()
	if tool == nil || tool.Spec() == nil {
		t.Fatalf("tooltest: NewWorker needs a tool with a spec")
	}
	all := append([]runtime.Tool{tool}, opts.Tools...)
	if opts.Database == nil {
		t.Fatalf("tooltest: NewWorker needs WorkerOptions.Database: tooltestsqlite.TempFile(t) for SQLite, tooltestpg.NewSchema(t, dsn) for PostgreSQL")
	}
	if opts.Workspace == "" {
		opts.Workspace = t.TempDir()
	}
	if opts.Principal.ID == "" {
		var scopes []string
		for _, tl := range all {
			scopes = append(scopes, tl.Spec().RequiredScopes...)
		}
		slices.Sort(scopes)
		opts.Principal = runtime.Principal{ID: DefaultCaller, Tenant: opts.Principal.Tenant, Scopes: slices.Compact(scopes)}
	}
	if opts.Principal.Tenant == "" {
		opts.Principal.Tenant = DefaultTenant
	}
	if opts.Approver.ID == "" {
		opts.Approver = runtime.Principal{ID: DefaultApprover, Scopes: []string{"approvals.decide"}}
	}
	w := &Worker{t: t, tool: tool, opts: opts, shared: &workerShared{db: opts.Database, tools: all}}
	w.open()
	return w
}

// Reopen returns a second Worker over the same database: a new store handle, registry
// and pipeline, under another worker id, as a restarted or second process would have
// them. The first Worker stays usable. A call made again through it (same run, step,
// call id and arguments: [SameCallAs]) finds the recorded outcome at step 8 — the
// dedupe lives in the store, not in a process.
func (w *Worker) Reopen() *Worker {
	w.t.Helper()
	w2 := &Worker{t: w.t, tool: w.tool, opts: w.opts, shared: w.shared}
	w2.open()
	return w2
}

// open builds this Worker's store handle, registry and pipeline.
func (w *Worker) open() {
	w.t.Helper()
	ctx := context.Background()
	inner, err := w.shared.db.Open(ctx)
	if err != nil {
		w.t.Fatalf("tooltest: open the store: %v", err)
	}
	w.t.Cleanup(func() { inner.Close() })
	w.st = &watchedStore{Store: inner, byID: map[int64]*callState{}}
	reg := runtime.NewRegistry()
	for _, tl := range w.shared.tools {
		name := tl.Spec().Name
		if names.Reserved(name) {
			err = reg.RegisterAdapter(names.Domain(name), watchedTool{tl})
		} else {
			err = reg.Register(watchedTool{tl})
		}
		if err != nil {
			w.t.Fatalf("tooltest: register %s: %v", name, err)
		}
	}
	creds := mapCredentials(w.opts.Credentials)
	w.p, err = runtime.NewPipeline(runtime.Config{
		Registry: reg,
		Store:    w.st,
		WorkerID: fmt.Sprintf("tooltest-worker-%d", w.shared.workers.Add(1)),
		// A held call is decided at its first look at the store (see watchedStore), so
		// neither bound is waited out; they only keep a broken decision from hanging.
		ApprovalPoll: 5 * time.Millisecond,
		ApprovalHold: time.Minute,
		Artifacts:    runtime.NewFSArtifactWriter(filepath.Join(w.t.TempDir(), "artifacts")),
		Credentials:  creds,
		WorkspaceFor: func(string, string) string { return w.opts.Workspace },
	})
	if err != nil {
		w.t.Fatalf("tooltest: build the pipeline: %v", err)
	}
}

// Store is this Worker's handle on its database: to read other rows, decide a call
// left held (runtime.DecideApproval), or resolve an UNCERTAIN one.
func (w *Worker) Store() store.Store { return w.st.Store }

// Workspace is the workspace every call runs in.
func (w *Worker) Workspace() string { return w.opts.Workspace }

// Result is what one [Worker.Call] did.
type Result struct {
	// Call is the call as the Worker made it: identity, tool and arguments.
	Call runtime.Call
	// Outcome is what runtime.Pipeline.Execute returned.
	Outcome runtime.Outcome
	// Row is the call's invocation as the store holds it after the call, read back
	// by its idempotency key. It is nil when the pipeline recorded nothing: a call
	// refused before its key was computed (unknown tool, invalid arguments), or an
	// idempotent none/read call whose outcome was retryable (RT-3: no row, the caller
	// simply retries).
	Row *store.Invocation
	// Executed reports whether the tool's Execute ran during this call: false for a
	// replay at step 8, a refusal, or a call left held.
	Executed bool
	// Held reports whether the policy held the call for approval (approved by the
	// Worker's Approver unless the call said [LeaveHeld]).
	Held bool

	state *callState // what the suite reads: marks, the tool's own return
}

// A CallOption changes one call of [Worker.Call].
type CallOption func(*callConfig)

type callConfig struct {
	tool          string
	principal     runtime.Principal
	runID, callID string
	step          int
	argumentTrust runtime.Trust
	contextTrust  []runtime.Trust
	leaveHeld     bool
	onMark        func() error // the suite's hook at the watermark write (harness.go)
}

// CallID names the call (default: tooltest-call-N, a new N for every call of the
// Worker and its reopened peers, so every call is a new call).
func CallID(id string) CallOption { return func(c *callConfig) { c.callID = id } }

// InRun puts the call in run runID at step (default DefaultRun, step 1). The run is
// the scope of the breaker (RT-8) and an input of the idempotency key (RT-5).
func InRun(runID string, step int) CallOption {
	return func(c *callConfig) { c.runID, c.step = runID, step }
}

// As makes p the caller (default: WorkerOptions.Principal). A principal without a
// tenant is put in DefaultTenant.
func As(p runtime.Principal) CallOption { return func(c *callConfig) { c.principal = p } }

// ArgumentTrust is the label the arguments carry (default user; "" is unknown
// provenance, external_untrusted — RT-6).
func ArgumentTrust(t runtime.Trust) CallOption { return func(c *callConfig) { c.argumentTrust = t } }

// ContextTrust are the labels of the context items that produced the call (default
// user); origin_trust is their minimum (RT-6).
func ContextTrust(labels ...runtime.Trust) CallOption {
	return func(c *callConfig) { c.contextTrust = slices.Clone(labels) }
}

// LeaveHeld leaves a call the policy holds undecided: the call returns as soon as it
// is held, with unavailable/approval_pending (what a hold past its bound returns) and
// its row PENDING, without any time passing. Decide it with runtime.DecideApproval on
// [Worker.Store]; the same call made again ([SameCallAs]) then resumes the hold and
// finds the decision. A decision already recorded still stands.
func LeaveHeld() CallOption { return func(c *callConfig) { c.leaveHeld = true } }

// SameCallAs makes the call the same call as r — same tool, caller, run, step and call
// id — so that, with the same canonical arguments, it has the same idempotency key:
// the replay of r (or the retry of a call r left held or released).
func SameCallAs(r Result) CallOption {
	return func(c *callConfig) {
		c.tool, c.principal, c.runID, c.step, c.callID = r.Call.Tool, r.Call.Principal, r.Call.RunID, r.Call.Step, r.Call.CallID
	}
}

// ToolNamed calls the registered tool called name (one of WorkerOptions.Tools, or any
// name, to see it refused) instead of the tool under test.
func ToolNamed(name string) CallOption { return func(c *callConfig) { c.tool = name } }

// Call makes one call of the tool with the JSON arguments args through the pipeline,
// waits for it, and reads its row back from the store. A held call is approved by the
// Approver while it waits (unless [LeaveHeld]). A call the pipeline could not record
// (Execute's error: the store is unusable) fails the test; every outcome, refusals
// included, is returned for the test to judge.
func (w *Worker) Call(ctx context.Context, args string, opts ...CallOption) Result {
	w.t.Helper()
	cfg := callConfig{
		tool: w.tool.Spec().Name, principal: w.opts.Principal, runID: DefaultRun, step: 1,
		// User-labelled provenance: the trust-based approvals of POL-1 do not apply,
		// so only a spec's approval_when, critical risk or an operator rule holds a call.
		argumentTrust: runtime.TrustUser, contextTrust: []runtime.Trust{runtime.TrustUser},
	}
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.callID == "" {
		cfg.callID = fmt.Sprintf("tooltest-call-%d", w.shared.calls.Add(1))
	}
	if cfg.principal.Tenant == "" {
		cfg.principal.Tenant = DefaultTenant
	}
	c := runtime.Call{
		Tenant: cfg.principal.Tenant, Principal: cfg.principal, SessionID: DefaultSession,
		RunID: cfg.runID, Step: cfg.step, CallID: cfg.callID, Tool: cfg.tool,
		Args: json.RawMessage(args), ContextTrust: cfg.contextTrust, ArgumentTrust: cfg.argumentTrust,
		Workspace: w.opts.Workspace, Target: w.opts.Target,
	}
	approver := w.opts.Approver
	approver.Tenant = c.Tenant
	cs := &callState{leaveHeld: cfg.leaveHeld, approver: approver, onMark: cfg.onMark}
	callCtx, cancel := context.WithCancel(context.WithValue(ctx, callStateKey{}, cs))
	cs.cancel = cancel
	o, err := w.p.Execute(callCtx, c)
	cancel()
	w.st.forget(cs)
	if err != nil {
		w.t.Fatalf("tooltest: %s: the pipeline could not record the call: %v", c.Tool, err)
	}
	if err := cs.approvalError(); err != nil {
		w.t.Fatalf("tooltest: %s: approve the held call as %s: %v", c.Tool, approver.ID, err)
	}
	res := Result{Call: c, Outcome: o, state: cs}
	res.Executed, res.Held = cs.ran(), cs.wasHeld()
	if key := cs.idempotencyKey(); key != "" {
		var err error
		if res.Row, err = w.st.row(context.WithoutCancel(ctx), key); err != nil {
			w.t.Fatalf("tooltest: %s: read the call's row back: %v", c.Tool, err)
		}
	}
	return res
}
