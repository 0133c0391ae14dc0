package tooltest_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolgen/toolgen/gen"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/tooltest"
	"github.com/toolgen/toolgen/runtime/tooltest/tooltestsqlite"
	"github.com/toolgen/toolgen/tools"
)

// sendTool is an author's hand-written tool: it marks the watermark, then writes
// out.txt in its workspace with what its ExecContext gave it.
type sendTool struct {
	spec  runtime.ToolSpec
	execs atomic.Int64
}

func newSend(name string, risk runtime.Risk) *sendTool {
	return &sendTool{spec: runtime.ToolSpec{
		Name: name, Version: 1, Kind: runtime.KindAction, SideEffect: runtime.SideEffectWrite,
		Idempotency: runtime.NonIdempotent, Risk: risk, RequiredScopes: []string{"demo.send"},
		OutputTrust: runtime.TrustTool, OutputMaxBytes: 65536, SchemaSHA256: "sha-" + name,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":false}`),
	}}
}

func (s *sendTool) Spec() *runtime.ToolSpec { return &s.spec }

func (s *sendTool) Execute(ctx context.Context, tc *runtime.ExecContext, args json.RawMessage) (runtime.ToolResult, error) {
	key, err := tc.Credentials().Credential(ctx, "api_key")
	if err != nil {
		return runtime.FailureResult(runtime.Failf("no_credential", "%v", err))
	}
	if err := tc.MarkEffectSent(ctx); err != nil {
		return runtime.ToolResult{}, err
	}
	s.execs.Add(1)
	line := strings.Join([]string{tc.Identity().Principal, key, tc.Target(), string(args)}, " ")
	if err := os.WriteFile(filepath.Join(tc.Workspace(), "out.txt"), []byte(line), 0o644); err != nil {
		return runtime.ToolResult{}, err
	}
	return runtime.ToolResult{OK: true, Structured: json.RawMessage(`{"sent":true}`)}, nil
}

func wantOutcome(t *testing.T, r tooltest.Result, status runtime.OutcomeStatus, reason runtime.ReasonCode) {
	t.Helper()
	if o := r.Outcome; o.Status != status || o.ReasonCode != reason {
		t.Fatalf("outcome %s/%s (%v), want %s/%s", o.Status, o.ReasonCode, o.ExternalDetail, status, reason)
	}
}

func TestWorker_CallRunsTheToolAndReadsItsRowBack(t *testing.T) {
	ctx := context.Background()
	send := newSend("demo.send", runtime.RiskLow)
	w := tooltest.NewWorker(t, send, tooltest.WorkerOptions{Database: tooltestsqlite.TempFile(t), Credentials: map[string]string{"api_key": "k-1"}, Target: "prod"})
	r := w.Call(ctx, `{"n": 1}`)
	wantOutcome(t, r, runtime.OutcomeSucceeded, "")
	if !r.Executed || r.Held || r.Outcome.Replayed {
		t.Errorf("executed %v, held %v, replayed %v; want true, false, false", r.Executed, r.Held, r.Outcome.Replayed)
	}
	inv := r.Row
	if inv == nil {
		t.Fatal("no row")
	}
	wantKey := runtime.IdempotencyKey(runtime.KeyInput{Tenant: tooltest.DefaultTenant, RunID: tooltest.DefaultRun, Step: 1,
		CallID: r.Call.CallID, Tool: "demo.send", ToolVersion: 1, CanonicalArgs: []byte(`{"n":1}`)})
	if inv.Key != wantKey || inv.Status != store.StatusSucceeded || inv.EffectSentAt == nil || inv.WatermarkMissing {
		t.Errorf("row: key %s status %s effect_sent_at %v watermark_missing %v; want %s SUCCEEDED with a watermark",
			inv.Key, inv.Status, inv.EffectSentAt, inv.WatermarkMissing, wantKey)
	}
	if inv.Tenant != tooltest.DefaultTenant || inv.Principal != tooltest.DefaultCaller || inv.ArgumentTrust != "user" || inv.OriginTrust != "user" {
		t.Errorf("row: tenant %s principal %s trust %s/%s", inv.Tenant, inv.Principal, inv.ArgumentTrust, inv.OriginTrust)
	}
	out, err := os.ReadFile(filepath.Join(w.Workspace(), "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if want := tooltest.DefaultCaller + ` k-1 prod {"n":1}`; string(out) != want {
		t.Errorf("the tool saw %q, want %q (principal, credential, target, canonical args)", out, want)
	}
	// Every call is a new call unless told otherwise.
	r2 := w.Call(ctx, `{"n": 1}`)
	if !r2.Executed || r2.Row.ID == inv.ID || r2.Call.CallID == r.Call.CallID {
		t.Errorf("second call: executed %v, row %d (first %d), call id %s (first %s); want a new call",
			r2.Executed, r2.Row.ID, inv.ID, r2.Call.CallID, r.Call.CallID)
	}
}

func TestWorker_SameCallReplaysThroughThisAndAReopenedWorker(t *testing.T) {
	ctx := context.Background()
	send := newSend("demo.send", runtime.RiskLow)
	w := tooltest.NewWorker(t, send, tooltest.WorkerOptions{Database: tooltestsqlite.TempFile(t), Credentials: map[string]string{"api_key": "k"}})
	first := w.Call(ctx, `{"n": 2}`, tooltest.InRun("run-9", 3), tooltest.CallID("c-7"))
	wantOutcome(t, first, runtime.OutcomeSucceeded, "")
	if inv := first.Row; inv.RunID != "run-9" || inv.Step != 3 || inv.CallID != "c-7" {
		t.Errorf("row: run %s step %d call %s, want run-9 3 c-7", inv.RunID, inv.Step, inv.CallID)
	}
	for _, via := range []struct {
		name string
		w    *tooltest.Worker
	}{{"the same worker", w}, {"a reopened worker", w.Reopen()}} {
		again := via.w.Call(ctx, "{\n \"n\" :2 }", tooltest.SameCallAs(first))
		wantOutcome(t, again, runtime.OutcomeSucceeded, "")
		if !again.Outcome.Replayed || again.Executed || again.Row == nil || again.Row.ID != first.Row.ID {
			t.Errorf("%s: replayed %v, executed %v, row %v; want the recorded outcome of row %d",
				via.name, again.Outcome.Replayed, again.Executed, again.Row, first.Row.ID)
		}
	}
	if n := send.execs.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}

func TestWorker_HeldCallIsApprovedByAnotherPrincipal(t *testing.T) {
	ctx := context.Background()
	deploy := newSend("demo.deploy", runtime.RiskCritical) // always held (POL-1)
	w := tooltest.NewWorker(t, deploy, tooltest.WorkerOptions{Database: tooltestsqlite.TempFile(t), Credentials: map[string]string{"api_key": "k"}})
	r := w.Call(ctx, `{}`)
	wantOutcome(t, r, runtime.OutcomeSucceeded, "")
	if !r.Held || !r.Executed || r.Row.Status != store.StatusSucceeded || r.Row.Decision != runtime.VerdictNeedsApproval {
		t.Errorf("held %v, executed %v, row %s/%s; want a held, approved, executed call", r.Held, r.Executed, r.Row.Status, r.Row.Decision)
	}
	a, err := w.Store().ApprovalGet(ctx, r.Row.Key)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Approved || a.DecidedBy != tooltest.DefaultApprover {
		t.Errorf("approval %+v, want approved by %s", a, tooltest.DefaultApprover)
	}
}

func TestWorker_LeaveHeldThenDecide(t *testing.T) {
	ctx := context.Background()
	deploy := newSend("demo.deploy", runtime.RiskCritical)
	w := tooltest.NewWorker(t, deploy, tooltest.WorkerOptions{Database: tooltestsqlite.TempFile(t), Credentials: map[string]string{"api_key": "k"}})
	bob := runtime.Principal{ID: "bob", Tenant: tooltest.DefaultTenant}
	for _, approve := range []bool{true, false} {
		held := w.Call(ctx, `{}`, tooltest.LeaveHeld())
		wantOutcome(t, held, runtime.OutcomeUnavailable, runtime.ReasonApprovalPending)
		if !held.Held || held.Executed || held.Row.Status != store.StatusPending {
			t.Fatalf("held %v, executed %v, row %s; want held, not executed, PENDING", held.Held, held.Executed, held.Row.Status)
		}
		if err := runtime.DecideApproval(ctx, w.Store(), held.Row.Key, bob, approve, "", nil); err != nil {
			t.Fatal(err)
		}
		// The retry resumes the hold and finds bob's decision (LeaveHeld: the Worker's
		// Approver does not step in).
		again := w.Call(ctx, `{}`, tooltest.SameCallAs(held), tooltest.LeaveHeld())
		if approve {
			wantOutcome(t, again, runtime.OutcomeSucceeded, "")
			if !again.Executed || again.Row.ID != held.Row.ID {
				t.Errorf("approved retry: executed %v, row %d; want the held row %d run", again.Executed, again.Row.ID, held.Row.ID)
			}
		} else {
			wantOutcome(t, again, runtime.OutcomeDenied, runtime.ReasonApprovalDenied)
			if again.Executed || again.Row.Status != store.StatusDenied {
				t.Errorf("denied retry: executed %v, row %s; want not executed, DENIED", again.Executed, again.Row.Status)
			}
		}
	}
	if n := deploy.execs.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want 1 (the approved call)", n)
	}
}

func TestWorker_CallerAndTrustOptions(t *testing.T) {
	ctx := context.Background()
	send := newSend("demo.send", runtime.RiskMedium)
	w := tooltest.NewWorker(t, send, tooltest.WorkerOptions{Database: tooltestsqlite.TempFile(t), Credentials: map[string]string{"api_key": "k"}})

	mallory := runtime.Principal{ID: "mallory"} // no scopes, no tenant
	r := w.Call(ctx, `{}`, tooltest.As(mallory))
	wantOutcome(t, r, runtime.OutcomeDenied, runtime.ReasonMissingScope)
	if r.Executed || r.Row.Status != store.StatusDenied || r.Row.Principal != "mallory" || r.Row.Tenant != tooltest.DefaultTenant {
		t.Errorf("executed %v, row %s by %s in %s", r.Executed, r.Row.Status, r.Row.Principal, r.Row.Tenant)
	}

	// A medium-risk write with external_untrusted arguments needs approval (POL-1).
	r = w.Call(ctx, `{}`, tooltest.ArgumentTrust(runtime.TrustExternalUntrusted), tooltest.ContextTrust(runtime.TrustUser, runtime.TrustTool))
	wantOutcome(t, r, runtime.OutcomeSucceeded, "")
	if !r.Held || r.Row.ArgumentTrust != "external_untrusted" || r.Row.OriginTrust != "tool" {
		t.Errorf("held %v, row trust %s/%s; want held, external_untrusted/tool", r.Held, r.Row.ArgumentTrust, r.Row.OriginTrust)
	}
}

func builtin(t *testing.T, name string) runtime.Tool {
	t.Helper()
	for _, tool := range tools.Builtins() {
		if tool.Spec().Name == name {
			return tool
		}
	}
	t.Fatalf("no builtin %s", name)
	return nil
}

func TestWorker_SeveralToolsOnOneStore(t *testing.T) {
	ctx := context.Background()
	w := tooltest.NewWorker(t, builtin(t, "workspace.write_text"),
		tooltest.WorkerOptions{Database: tooltestsqlite.TempFile(t), Tools: []runtime.Tool{builtin(t, "workspace.read_text")}})
	wantOutcome(t, w.Call(ctx, `{"path": "a.txt", "text": "hello\n"}`), runtime.OutcomeSucceeded, "")
	r := w.Call(ctx, `{"path": "a.txt"}`, tooltest.ToolNamed("workspace.read_text"))
	wantOutcome(t, r, runtime.OutcomeSucceeded, "")
	var read gen.WorkspaceReadTextResult
	if err := json.Unmarshal(r.Outcome.Result.Structured, &read); err != nil || read.Text != "hello\n" {
		t.Fatalf("read %s (%v), want hello", r.Outcome.Result.Structured, err)
	}
	// A read is recorded once, at step 13 (RT-3).
	if r.Row == nil || r.Row.Status != store.StatusSucceeded || r.Row.Tool != "workspace.read_text" {
		t.Errorf("read row %+v", r.Row)
	}
	// Refused before its key: nothing recorded.
	r = w.Call(ctx, `{}`, tooltest.ToolNamed("demo.nope"))
	wantOutcome(t, r, runtime.OutcomeDenied, runtime.ReasonUnknownTool)
	if r.Row != nil {
		t.Errorf("an unknown tool's call has row %+v, want none", r.Row)
	}
}

// identity.whoami binds every argument from the caller (SPEC-4): the key is computed
// over the filled arguments, and the Worker still finds the row.
func TestWorker_BoundArgumentsRowIsFound(t *testing.T) {
	w := tooltest.NewWorker(t, builtin(t, "identity.whoami"), tooltest.WorkerOptions{Database: tooltestsqlite.TempFile(t)})
	r := w.Call(context.Background(), `{}`)
	wantOutcome(t, r, runtime.OutcomeSucceeded, "")
	if r.Row == nil || !strings.Contains(string(r.Row.Args), tooltest.DefaultCaller) {
		t.Fatalf("row %+v, want one whose arguments carry the bound principal", r.Row)
	}
}

// A Worker's calls may run concurrently: each one's row, execution and approval are
// its own.
func TestWorker_ConcurrentCallsKeepTheirOwnResults(t *testing.T) {
	ctx := context.Background()
	send, deploy := newSend("demo.send", runtime.RiskLow), newSend("demo.deploy", runtime.RiskCritical)
	w := tooltest.NewWorker(t, send, tooltest.WorkerOptions{Database: tooltestsqlite.TempFile(t), Tools: []runtime.Tool{deploy}, Credentials: map[string]string{"api_key": "k"}})
	const n = 8
	results := make(chan tooltest.Result, n)
	for i := range n {
		go func() {
			tool := "demo.send"
			if i%2 == 1 {
				tool = "demo.deploy"
			}
			results <- w.Call(ctx, `{"n": `+string(rune('0'+i))+`}`, tooltest.ToolNamed(tool))
		}()
	}
	rows := map[int64]bool{}
	for range n {
		r := <-results
		wantOutcome(t, r, runtime.OutcomeSucceeded, "")
		if !r.Executed || r.Held != (r.Call.Tool == "demo.deploy") || r.Row == nil || r.Row.Tool != r.Call.Tool || r.Row.CallID != r.Call.CallID {
			t.Errorf("%s %s: executed %v, held %v, row %+v", r.Call.Tool, r.Call.CallID, r.Executed, r.Held, r.Row)
			continue
		}
		rows[r.Row.ID] = true
	}
	if len(rows) != n || send.execs.Load() != n/2 || deploy.execs.Load() != n/2 {
		t.Errorf("%d rows, %d + %d executions; want %d rows, %d each", len(rows), send.execs.Load(), deploy.execs.Load(), n, n/2)
	}
}
