package sandbox_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/postgres"
	"github.com/toolgen/toolgen/runtime/store/postgres/pgtest"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
)

// suspendScript's third call needs approval (t.deploy is critical).
const suspendScript = `
a = tools.t.write(text = "one")
b = tools.t.write(text = "two")
c = tools.t.deploy(target = "prod")
d = tools.t.write(text = "four")
result = [a.ok, b.ok, c.ok, c.reason_code, d.ok]
`

// opener opens the store of a test and, for the same database, the handle of another
// process.
type opener func(t *testing.T) (first, second store.Store)

func sqliteStores(t *testing.T) (store.Store, store.Store) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	a, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b
}

func postgresStores(t *testing.T) (store.Store, store.Store) {
	a, schema := pgtest.Open(t)
	b, err := postgres.Open(context.Background(), pgtest.DSN(t), postgres.WithSchema(schema), postgres.WithMaxConns(4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b
}

// TestHoldSuspendsScriptRecoveryReexecutes is issue 19, point 3: a script whose third
// call needs approval is torn down past the hold bound and its row suspended until
// that call is decided; nothing re-runs it before the decision. Once another process
// approves (or denies) the call, that process's recovery pass re-executes the script
// from the start: the first two calls replay (no effect twice), the third runs (or is
// the denial the script sees), the fourth runs, and the script's outcome is recorded on
// its row, where the agent's retry of the same call finds it.
func TestHoldSuspendsScriptRecoveryReexecutes(t *testing.T) {
	for _, st := range []struct {
		name string
		open opener
	}{{"sqlite", sqliteStores}, {"postgres", postgresStores}} {
		for _, approve := range []bool{true, false} {
			name := st.name + "/approve"
			if !approve {
				name = st.name + "/deny"
			}
			t.Run(name, func(t *testing.T) { testHoldSuspend(t, st.open, approve, false) })
		}
		t.Run(st.name+"/approve_concurrent_passes", func(t *testing.T) { testHoldSuspend(t, st.open, true, true) })
	}
}

// concurrent: two processes run their recovery pass at once after the decision; the
// script is given back once, and nothing runs twice.
func testHoldSuspend(t *testing.T, open opener, approve, concurrent bool) {
	ctx := context.Background()
	first, second := open(t)
	h := newHarnessOn(t, first, time.Millisecond) // a short bound: the held call is torn down at once

	o, _ := h.run("s", suspendScript, nil)
	if o.Status != runtime.OutcomeUnavailable || o.ReasonCode != "script_suspended" || !o.Retryable {
		t.Fatalf("first run: %s/%s retryable=%v %v", o.Status, o.ReasonCode, o.Retryable, o.ExternalDetail)
	}
	if o.ExternalDetail == nil || !strings.Contains(o.ExternalDetail.Text, "3 t.deploy unavailable approval_pending") {
		t.Fatalf("detail %v", o.ExternalDetail)
	}
	if h.write.runs.Load() != 2 || h.crit.runs.Load() != 0 {
		t.Fatalf("writes %d deploys %d", h.write.runs.Load(), h.crit.runs.Load())
	}
	script, held := h.rows(ctx)
	if script.Status != store.StatusRunning || script.SuspendedAt == nil {
		t.Fatalf("script row is not suspended: %s suspended_at %v", script.Status, script.SuspendedAt)
	}
	if k, ok := store.AwaitedApproval(script.ResumeToken); !ok || k != held.Key {
		t.Fatalf("script row awaits %q (%v), want the held call %s", k, ok, held.Key)
	}

	// Undecided: the agent's retry answers from the record, recovery leaves the script.
	o, _ = h.run("s", suspendScript, nil)
	if o.ReasonCode != "script_suspended" || !o.Replayed {
		t.Fatalf("retry while suspended: %s/%s replayed=%v", o.Status, o.ReasonCode, o.Replayed)
	}
	rep, err := h.p.Recover(ctx)
	if err != nil || rep.Unsuspended != 0 || rep.Retried != 0 {
		t.Fatalf("recovery before the decision: %+v %v", rep, err)
	}
	if script, _ := h.rows(ctx); script.SuspendedAt == nil || h.write.runs.Load() != 2 {
		t.Fatalf("the undecided script was re-run: %+v, %d writes", script, h.write.runs.Load())
	}

	// Another process decides, and its recovery pass re-executes the script.
	other := h.pipeline(second, time.Millisecond)
	if err := runtime.DecideApproval(ctx, second, held.Key, runtime.Principal{ID: "reviewer", Tenant: "t1"}, approve, "decided", nil); err != nil {
		t.Fatal(err)
	}
	if concurrent {
		var wg sync.WaitGroup
		reps := make([]runtime.RecoveryReport, 2)
		errs := make([]error, 2)
		for i, p := range []*runtime.Pipeline{h.p, other} {
			wg.Add(1)
			go func() { defer wg.Done(); reps[i], errs[i] = p.Recover(ctx) }()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil || reps[0].Unsuspended+reps[1].Unsuspended != 1 {
			t.Fatalf("concurrent passes: %+v %+v, %v %v", reps[0], reps[1], errs[0], errs[1])
		}
		// The script may have stopped at the held call while the other pass ran it
		// (script_call_in_progress, released): a later pass finishes it.
		for i := 0; i < 3; i++ {
			if script, _ := h.rows(ctx); script.Status.Terminal() {
				break
			}
			if _, err := other.Recover(ctx); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		rep, err = other.Recover(ctx)
		if err != nil || rep.Unsuspended != 1 || rep.Retried < 1 {
			t.Fatalf("recovery after the decision: %+v %v", rep, err)
		}
	}
	deploys, want := int64(0), `[true,true,false,"approval_denied",true]`
	if approve {
		deploys, want = 1, `[true,true,true,"",true]`
	}
	if h.write.runs.Load() != 3 || h.crit.runs.Load() != deploys {
		sc, _ := h.rows(ctx)
		t.Fatalf("writes %d deploys %d; want 3, %d; script %s %s", h.write.runs.Load(), h.crit.runs.Load(), deploys, sc.Status, sc.Outcome)
	}
	if got := strings.Join(h.wrote, ","); got != "one,two,four" {
		t.Fatalf("wrote %s", got)
	}
	script, _ = h.rows(ctx)
	if script.Status != store.StatusSucceeded || script.SuspendedAt != nil {
		t.Fatalf("script row after re-execution: %s suspended_at %v", script.Status, script.SuspendedAt)
	}
	var rec runtime.Outcome
	if err := json.Unmarshal(script.Outcome, &rec); err != nil {
		t.Fatal(err)
	}
	var res result
	if err := json.Unmarshal(rec.Result.Structured, &res); err != nil {
		t.Fatal(err)
	}
	if res.Result != want || len(res.Calls) != 4 {
		t.Fatalf("recorded result %s, %d calls; want %s", res.Result, len(res.Calls), want)
	}
	// With concurrent passes the other one may have run the approved call itself: the
	// script then found it recorded.
	if !res.Calls[0].Replayed || !res.Calls[1].Replayed || (res.Calls[2].Replayed && !concurrent) || res.Calls[3].Replayed {
		t.Fatalf("calls %+v: want the first two replayed", res.Calls)
	}

	// The agent's retry of the same call answers from the record; nothing runs again.
	o, res = h.run("s", suspendScript, nil)
	if o.Status != runtime.OutcomeSucceeded || !o.Replayed || res.Result != want {
		t.Fatalf("agent's retry: %s/%s replayed=%v %s", o.Status, o.ReasonCode, o.Replayed, res.Result)
	}
	if rep, err := h.p.Recover(ctx); err != nil || rep.Retried != 0 || h.write.runs.Load() != 3 || h.crit.runs.Load() != deploys {
		t.Fatalf("a later pass: %+v %v, writes %d deploys %d", rep, err, h.write.runs.Load(), h.crit.runs.Load())
	}
}

// rows returns the script's row and its held call's row (the only t.deploy call).
func (h *harness) rows(ctx context.Context) (script, held *store.Invocation) {
	h.t.Helper()
	all, err := h.st.InvocationList(ctx, store.InvocationFilter{Tenant: "t1"})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, inv := range all {
		switch inv.Tool {
		case "sandbox.run_script":
			script = inv
		case "t.deploy":
			held = inv
		}
	}
	if script == nil || held == nil {
		h.t.Fatalf("no script row or no held row among %d", len(all))
	}
	return script, held
}
