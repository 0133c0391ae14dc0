package faulttest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/internal/faultstore"
	"github.com/toolgen/toolgen/runtime/internal/testtools"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/postgres/pgtest"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
)

// The test tools and classes are shared with the other reliability suites
// (runtime/internal/testtools). Their effect here appends a receipt.
const (
	toolPut     = testtools.Put
	toolSave    = testtools.Save
	toolSend    = testtools.Send
	toolRead    = testtools.Read
	toolDeploy  = testtools.Deploy
	inputSchema = testtools.InputSchema
)

// class is one idempotency class: a tool and the arguments' mode.
type class = testtools.Class

var (
	classPut    = class{Name: "idempotent", Tool: toolPut, Mode: "overwrite"}
	classSaveT  = class{Name: "cond(true)", Tool: toolSave, Mode: "overwrite"}
	classSaveF  = class{Name: "cond(false)", Tool: toolSave, Mode: "append"}
	classSend   = class{Name: "non_idempotent", Tool: toolSend, Mode: "append"}
	classRead   = class{Name: "read", Tool: toolRead, Mode: "overwrite"}
	classDeploy = class{Name: "held non_idempotent", Tool: toolDeploy, Mode: "append"}
	classes     = []class{classPut, classSaveT, classSaveF, classSend, classRead, classDeploy}
	// writeClasses are the classes whose row is recorded before they run.
	writeClasses = []class{classPut, classSaveT, classSaveF, classSend, classDeploy}
)

func specs() []runtime.ToolSpec { return testtools.Specs() }

// behaviour is what the tool does for one call (by key), on each of its attempts.
type behaviour struct {
	mu       sync.Mutex
	attempts int
	flaky    int    // the first flaky attempts fail retryably, before the watermark
	stall    func() // run at the start of the first attempt
}

func (b *behaviour) begin() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.attempts++
	return b.attempts
}

// faultTool is a runtime.Tool whose effect appends a receipt.
type faultTool struct {
	spec runtime.ToolSpec
	h    *harness
}

func (t *faultTool) Spec() *runtime.ToolSpec { return &t.spec }

func (t *faultTool) Execute(ctx context.Context, tc *runtime.ExecContext, _ json.RawMessage) (runtime.ToolResult, error) {
	key := tc.IdempotencyKey()
	b := t.h.behaviour(key)
	attempt := b.begin()
	if attempt == 1 && b.stall != nil {
		b.stall()
	}
	if attempt <= b.flaky {
		// Prepare failed: nothing was sent, a retry may succeed.
		return runtime.ToolResult{Failure: &runtime.ToolFailure{Code: "busy", Message: "try again", Retryable: true}}, nil
	}
	if t.spec.Idempotency.NeedsWatermark() {
		if err := tc.MarkEffectSent(ctx); err != nil {
			return runtime.ToolResult{}, err // the contract: no effect without the watermark
		}
	}
	if err := t.h.effect(key, t.spec.Idempotency.NeedsWatermark()); err != nil {
		return runtime.ToolResult{}, err
	}
	return runtime.StructuredResult(&t.spec, map[string]any{"ok": true})
}

// receiptLog is the effect ledger outside the store: one line per effect, appended to a
// file, with an in-memory count per key that the test reads (and checks against the
// file at the end).
type receiptLog struct {
	mu     sync.Mutex
	path   string
	f      *os.File
	counts map[string]int
}

func newReceiptLog(t *testing.T) *receiptLog {
	path := filepath.Join(t.TempDir(), "receipts.log")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	r := &receiptLog{path: path, f: f, counts: map[string]int{}}
	t.Cleanup(func() {
		r.f.Close()
		r.verify(t)
	})
	return r
}

func (r *receiptLog) append(key, owner string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := fmt.Fprintf(r.f, "effect %s %s\n", key, owner); err != nil {
		return err
	}
	r.counts[key]++
	return nil
}

func (r *receiptLog) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[key]
}

// verify re-reads the file: the counts the checks used must be what it holds.
func (r *receiptLog) verify(t *testing.T) {
	b, err := os.ReadFile(r.path)
	if err != nil {
		t.Errorf("receipts: %v", err)
		return
	}
	got := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "effect" {
			t.Errorf("receipts: malformed line %q", line)
			continue
		}
		got[f[1]]++
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(got) != len(r.counts) {
		t.Errorf("receipts: the file has %d keys, the checks counted %d", len(got), len(r.counts))
	}
	for k, n := range r.counts {
		if got[k] != n {
			t.Errorf("receipts: key %s: the file has %d effects, the checks counted %d", k, got[k], n)
		}
	}
}

// harness runs calls over one database.
type harness struct {
	t    *testing.T
	name string // sqlite | postgres
	raw  store.Store
	// expire ends every RUNNING lease now: the workers that held them are gone.
	expire   func(ctx context.Context) error
	reg      *runtime.Registry
	receipts *receiptLog
	arts     runtime.ArtifactWriter

	mu         sync.Mutex
	behaviours map[string]*behaviour
	violations map[string][]string
}

func newHarness(t *testing.T, name string) *harness {
	h := &harness{
		t: t, name: name, receipts: newReceiptLog(t),
		arts:       runtime.NewFSArtifactWriter(filepath.Join(t.TempDir(), "artifacts")),
		behaviours: map[string]*behaviour{}, violations: map[string][]string{},
	}
	switch name {
	case "sqlite":
		h.openSQLite(t)
	case "postgres":
		h.openPostgres(t)
	default:
		t.Fatalf("unknown store %q", name)
	}
	h.reg = runtime.NewRegistry()
	var tools []runtime.Tool
	for _, s := range specs() {
		tools = append(tools, &faultTool{spec: s, h: h})
	}
	if err := h.reg.Register(tools...); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) openSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "faults.db")
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	// A second handle on the file, for the one piece of state surgery: ending leases.
	// modernc.org/sqlite registered the driver (the store imports it).
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		s.Close()
	})
	h.raw = s
	h.expire = func(ctx context.Context) error {
		// Times are microseconds since the epoch (runtime/store/sqlite/sql/queries.sql).
		_, err := db.ExecContext(ctx, `UPDATE tool_invocations SET lease_expires_at = lease_expires_at - 3600000000
			WHERE status = 'RUNNING' AND lease_expires_at IS NOT NULL`)
		return err
	}
}

func (h *harness) openPostgres(t *testing.T) {
	s, schema := pgtest.Open(t)
	conn, err := pgx.Connect(context.Background(), pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	table := pgx.Identifier{schema, "tool_invocations"}.Sanitize()
	h.raw = s
	h.expire = func(ctx context.Context) error {
		_, err := conn.Exec(ctx, `UPDATE `+table+` SET lease_expires_at = lease_expires_at - interval '1 hour'
			WHERE status = 'RUNNING' AND lease_expires_at IS NOT NULL`)
		return err
	}
}

func (h *harness) behaviour(key string) *behaviour {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := h.behaviours[key]
	if b == nil {
		b = &behaviour{}
		h.behaviours[key] = b
	}
	return b
}

func (h *harness) setBehaviour(key string, b *behaviour) {
	h.mu.Lock()
	h.behaviours[key] = b
	h.mu.Unlock()
}

func (h *harness) violate(key, format string, a ...any) {
	h.mu.Lock()
	h.violations[key] = append(h.violations[key], fmt.Sprintf(format, a...))
	h.mu.Unlock()
}

func (h *harness) violationsOf(key string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.violations[key]
}

// effect is the call's effect. Before it appends the receipt it checks, in the store
// itself (never through the fault injection), that the watermark of the running attempt
// is committed: the pipeline must never let an effect out before that.
func (h *harness) effect(key string, watermarked bool) error {
	owner := "-"
	if watermarked {
		inv, err := h.raw.InvocationGetByKey(context.Background(), key)
		switch {
		case err != nil:
			h.violate(key, "effect sent with no committed row: %v", err)
		case inv.EffectSentAt == nil:
			h.violate(key, "effect sent before its watermark was committed (row %s, attempt %d)", inv.Status, inv.Attempt)
		case inv.Status != store.StatusRunning:
			h.violate(key, "effect sent while the row is %s", inv.Status)
		default:
			owner = inv.LeaseOwner
		}
	}
	return h.receipts.append(key, owner)
}

// The calls.

const (
	tenant = "acme"
	runID  = "r1"
)

func argsOf(c class, n int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"n":%d,"mode":%q}`, n, c.Mode))
}

func callOf(c class, callID string, n int) runtime.Call {
	return runtime.Call{
		Tenant: tenant, Principal: runtime.Principal{ID: "alice", Tenant: tenant},
		SessionID: "s1", RunID: runID, Step: 1, CallID: callID, Tool: c.Tool, Args: argsOf(c, n),
		ContextTrust: []runtime.Trust{runtime.TrustUser}, ArgumentTrust: runtime.TrustUser,
	}
}

// keyOf is the idempotency key the pipeline gives callOf(c, callID, n) (RT-5).
func keyOf(c class, callID string, n int) string {
	canon, err := runtime.CanonicalJSON(argsOf(c, n))
	if err != nil {
		panic(err)
	}
	return runtime.IdempotencyKey(runtime.KeyInput{Tenant: tenant, RunID: runID, Step: 1, CallID: callID,
		Tool: c.Tool, ToolVersion: 1, CanonicalArgs: canon})
}

// path is how a call reaches the write point under test.
type path string

const (
	pathDirect path = "direct" // one call
	// pathFlaky: the first attempt fails retryably before its watermark, so the row is
	// released and the caller's retry claims it again.
	pathFlaky path = "flaky"
	// pathCrashBefore: the first worker is gone after the claim, before the effect;
	// pathCrashAfter: after the effect, before the settle. Another worker's recovery
	// pass reclaims the row once its lease has expired.
	pathCrashBefore path = "crash-before-effect"
	pathCrashAfter  path = "crash-after-effect"
	// pathRenew: the first attempt stalls before its watermark while the worker's lease
	// renewals run (and fail); another worker's recovery pass runs during the stall.
	pathRenew path = "stalled-renewal"
)

// caseSpec is one case: a call of a class, on a path, with faults.
type caseSpec struct {
	Point faultstore.Point // "" in the rate run
	Path  path
	Kind  faultstore.Kind // 0 in the rate run
	Class class
}

// caseResult is what one case did.
type caseResult struct {
	caseSpec
	Store          string
	Key            string
	Injected       int // faults injected during the case
	InjectedFirst  int // ... during the first Execute
	Effects        int
	FinalStatus    string // the row's status; "none" if there is no row
	FinalReason    string
	Executes       int    // Execute calls that did not end in the approval hold
	ApprovalWaits  int    // Execute calls that returned approval_pending
	Recovers       int    // recovery passes the case ran
	First          string // the first Execute's outcome: status/reason, "error" or "abandoned"
	FalseUncertain bool   // UNCERTAIN although the effect was never sent (allowed: the pipeline could not know)
	// AbandonedAfterEffect: a worker was stopped after its attempt had sent the effect.
	AbandonedAfterEffect bool
	Problems             []string
	// Trace is one line per Execute: what it returned and which faults it met.
	Trace []string
}

func (r *caseResult) problem(format string, a ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, a...))
}

// errAbandon stops a worker in the middle of a call: the panic unwinds Execute from an
// AfterStep hook, leaving the row as a killed worker would (nothing after that step
// runs). The SIGKILL version of this is runtime/crashtest.
var errAbandon = errors.New("faulttest: worker abandoned the call")

// runOpts tune one case.
type runOpts struct {
	// deadline of each Execute and Recover context; hangs at writes that use the
	// caller's context last this long.
	deadline time.Duration
	// afterFault, if set, replaces deadline once the case's faults were injected
	// (single-fault cases): the rest of the case then never meets a deadline by chance
	// on a loaded machine.
	afterFault time.Duration
	maxIter    int // caller attempts before the case is declared stuck
}

// deadlineNow is the deadline of the case's next Execute or Recover.
func (o runOpts) deadlineNow(injected bool) time.Duration {
	if injected && o.afterFault > 0 {
		return o.afterFault
	}
	return o.deadline
}

// runCase drives one call to its end: the caller's Execute, and after every outcome
// that leaves the call open (an error, a retryable outcome, an abandoned worker) the
// caller's retry with the same key, preceded by a recovery pass on another worker
// (after the leases expired) where the row may be stuck RUNNING.
func (h *harness) runCase(fs *faultstore.Store, sp caseSpec, callID string, n int, o runOpts) caseResult {
	res := caseResult{caseSpec: sp, Store: h.name}
	key := keyOf(sp.Class, callID, n)
	res.Key = key
	call := callOf(sp.Class, callID, n)

	lease := 30 * time.Second // expired by state surgery, never by waiting
	if sp.Path == pathRenew {
		lease = 150 * time.Millisecond // renewals must keep it: it expires by itself
	}
	abandonAt, abandoned := "", false
	switch sp.Path {
	case pathCrashBefore:
		abandonAt = "persist" // after the RUNNING insert
		if sp.Class.Held() {
			abandonAt = "hold" // after the claim that follows the approval
		}
	case pathCrashAfter:
		abandonAt = "execute" // the tool returned: its effect is sent, nothing is settled
	}
	a := h.pipeline(fs, "A-"+callID, lease, func(step string) {
		if step == abandonAt && !abandoned {
			abandoned = true
			panic(errAbandon)
		}
	})
	b := h.pipeline(fs, "B-"+callID, lease, nil)

	bh := &behaviour{}
	if sp.Path == pathFlaky {
		bh.flaky = 1
	}
	if sp.Path == pathRenew {
		bh.stall = func() {
			// Stall until four renewals were attempted: more than a lease has passed, so
			// the lease is alive only if they landed. Then another worker recovers.
			start := fs.Calls(faultstore.Renew)
			until := time.Now().Add(30 * time.Second)
			for fs.Calls(faultstore.Renew) < start+4 && time.Now().Before(until) {
				time.Sleep(5 * time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = b.Recover(ctx) // a failed pass is retried by the next one
		}
	}
	h.setBehaviour(key, bh)

	injected0 := fs.InjectedTotal()
	approved := false
	var last runtime.Outcome
	done := false
	for iter := 0; iter < o.maxIter && !done; iter++ {
		before := h.receipts.count(key)
		inj := fs.InjectedTotal()
		out, err, gone := h.execute(a, call, o.deadlineNow(inj > injected0))
		sent := h.receipts.count(key) - before
		if !gone && err == nil && out.ReasonCode == runtime.ReasonApprovalPending {
			// The held call waits for its approval: the call proper starts after it. (A
			// hold can also end before its read of the approval returns, on a slow store.)
			res.ApprovalWaits++
		} else {
			res.Executes++
		}
		if res.Executes == 1 && res.First == "" {
			res.InjectedFirst = fs.InjectedTotal() - inj
			switch {
			case gone:
				res.First = "abandoned"
			case err != nil:
				res.First = "error"
			default:
				res.First = string(out.Status) + "/" + string(out.ReasonCode)
			}
		}
		res.Trace = append(res.Trace, fmt.Sprintf("execute %d: abandoned=%v err=%v outcome=%s/%s effects=%d faults=%d",
			iter+1, gone, err, out.Status, out.ReasonCode, sent, fs.InjectedTotal()-inj))
		if gone && sent > 0 {
			res.AbandonedAfterEffect = true
		}
		if !gone && err == nil && out.Retryable && sent > 0 && !sp.Class.RetrySafe() && out.ReasonCode != runtime.ReasonLeaseLost {
			// A retry of this outcome would send the effect again.
			res.problem("attempt %d sent the effect and returned retryable %s", iter+1, out.ReasonCode)
		}
		switch {
		case gone || err != nil || out.ReasonCode == runtime.ReasonCallInProgress:
			// The row may be RUNNING under a lease nobody will settle: recovery decides
			// once the lease has expired.
			h.recoverAll(b, &res, o, func() bool { return fs.InjectedTotal() > injected0 })
		case out.ReasonCode == runtime.ReasonApprovalPending:
			if !approved {
				if err := h.raw.ApprovalDecide(context.Background(), store.Approval{
					Key: key, Tenant: tenant, Approved: true, DecidedBy: "bob",
				}, nil); err != nil && !errors.Is(err, store.ErrConflict) {
					res.problem("approve: %v", err)
				}
				approved = true
			}
		case out.Retryable:
			// The caller retries with the same key.
		default:
			last, done = out, true
		}
	}
	res.Injected = fs.InjectedTotal() - injected0
	res.Effects = h.receipts.count(key)
	if !done {
		res.problem("no final outcome after %d attempts", o.maxIter)
	}
	h.check(&res, last, done)
	return res
}

// check applies the invariants to a finished case.
func (h *harness) check(res *caseResult, last runtime.Outcome, done bool) {
	for _, v := range h.violationsOf(res.Key) {
		res.problem("%s", v)
	}
	c := res.Class
	if !c.RetrySafe() && res.Effects > 1 {
		res.problem("effect sent %d times; its class allows at most once", res.Effects)
	}
	inv, err := h.raw.InvocationGetByKey(context.Background(), res.Key)
	if err != nil {
		res.FinalStatus = "none"
		res.problem("no row at the end: %v", err)
		return
	}
	res.FinalStatus, res.FinalReason = string(inv.Status), inv.ReasonCode
	switch {
	case inv.Status == store.StatusSucceeded:
		if res.Effects == 0 {
			res.problem("SUCCEEDED without an effect")
		}
		if done && last.Status != runtime.OutcomeSucceeded {
			res.problem("row SUCCEEDED, caller got %s/%s", last.Status, last.ReasonCode)
		}
	case inv.Status == store.StatusUncertain:
		if c.RetrySafe() {
			res.problem("UNCERTAIN for a class that is safe to retry")
		}
		if inv.EffectSentAt == nil {
			res.problem("UNCERTAIN without a committed watermark")
		}
		if res.Effects == 0 {
			res.FalseUncertain = true
		}
		if done && last.Status != runtime.OutcomeUncertain {
			res.problem("row UNCERTAIN, caller got %s/%s", last.Status, last.ReasonCode)
		}
	case inv.Status == store.StatusFailed && inv.ReasonCode == string(runtime.ReasonCrashLoop):
		// The crash-loop bound: allowed only where no effect of a class that may not
		// repeat was sent (a watermark would have made it UNCERTAIN).
		if !c.RetrySafe() && res.Effects > 0 {
			res.problem("crash_loop after the effect was sent")
		}
	default:
		res.problem("final state %s/%s", inv.Status, inv.ReasonCode)
	}
	if res.AbandonedAfterEffect && !c.RetrySafe() && (inv.Status != store.StatusUncertain || res.Effects != 1) {
		// The watermark was committed (the effect checked it) and nobody settled.
		res.problem("abandoned after the effect: got %s with %d effects, want UNCERTAIN with 1", inv.Status, res.Effects)
	}
}

// execute is one Execute by the caller, with a deadline; abandoned reports that the
// worker was stopped by its AfterStep hook.
func (h *harness) execute(p *runtime.Pipeline, c runtime.Call, d time.Duration) (o runtime.Outcome, err error, abandoned bool) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			if r != errAbandon {
				panic(r)
			}
			abandoned = true
		}
	}()
	o, err = p.Execute(ctx, c)
	return o, err, false
}

// recoverAll ends the abandoned leases and runs recovery passes on worker b until one
// completes without a store error (a faulted pass is simply run again, as the periodic
// sweep would). injected says whether the case's faults were injected by now: asked
// before every pass, so that once a recovery pass itself met the fault (a hang in the
// sweep), the passes after it get the long deadline — a whole pass on a loaded machine
// must not race the short one a hanging write is given.
func (h *harness) recoverAll(b *runtime.Pipeline, res *caseResult, o runOpts, injected func() bool) {
	if err := h.expire(context.Background()); err != nil {
		res.problem("expire leases: %v", err)
		return
	}
	for i := 0; i < o.maxIter; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), o.deadlineNow(injected()))
		_, err := b.Recover(ctx)
		cancel()
		res.Recovers++
		if err == nil {
			return
		}
	}
	res.problem("recovery failed %d times in a row", o.maxIter)
}

func (h *harness) pipeline(fs store.Store, worker string, lease time.Duration, after func(string)) *runtime.Pipeline {
	p, err := runtime.NewPipeline(runtime.Config{
		Registry: h.reg, Store: fs, WorkerID: worker, Lease: lease,
		ApprovalHold: 50 * time.Millisecond, ApprovalPoll: 5 * time.Millisecond,
		Artifacts: h.arts, AfterStep: after,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// openRows lists the rows that are not terminal (a finished run has none).
func (h *harness) openRows() ([]*store.Invocation, error) {
	rows, err := h.raw.InvocationList(context.Background(), store.InvocationFilter{})
	if err != nil {
		return nil, err
	}
	var open []*store.Invocation
	for _, r := range rows {
		if !r.Status.Terminal() {
			open = append(open, r)
		}
	}
	return open, nil
}

// stores lists the stores to run on: SQLite always, PostgreSQL when TOOLGEN_PG_DSN is set.
func stores() []string {
	if os.Getenv(pgtest.EnvDSN) != "" {
		return []string{"sqlite", "postgres"}
	}
	return []string{"sqlite"}
}
