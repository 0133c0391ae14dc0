package runtime_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// recoverUntil runs recovery passes of h until the report satisfies done (the lease
// of the call it waits for has expired by the database clock), and returns it.
func recoverUntil(t *testing.T, h *harness, what string, done func(runtime.RecoveryReport) bool) runtime.RecoveryReport {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		rep, err := h.p.Recover(h.ctx)
		if err != nil {
			t.Fatalf("Recover: %v", err)
		}
		if done(rep) {
			return rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: last report %+v", what, rep)
		}
		time.Sleep(5 * time.Millisecond) // between passes only; the report is the condition
	}
}

// onlyRow reads the store's one invocation.
func onlyRow(t *testing.T, st store.Store) *store.Invocation {
	t.Helper()
	row, err := st.InvocationGetByKey(context.Background(), onlyKey(t, st))
	if err != nil {
		t.Fatal(err)
	}
	return row
}

// TestRecover_OnlyTheWorkersTools is issue 13 on one shared store: a host died in a
// call of demo.a. A pipeline that lacks demo.a, or has it at another definition hash
// or version, leaves the call exactly as it was and reports it skipped — it never
// settles it as tool_withdrawn or tool_changed — and the pipeline that has demo.a as
// recorded recovers it (LIFE-1).
func TestRecover_OnlyTheWorkersTools(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			st := d.open(t)
			ctx := context.Background()
			// The dying host: its settle never lands, so the row stays RUNNING under its
			// lease, which nobody renews. Its renewals are dropped too: one already in
			// flight as Execute returns could otherwise land after the row is read below.
			dying := newHarnessOn(t, deadHostStore{settleDownStore{st}}, runtime.Config{WorkerID: "dying", Lease: 100 * time.Millisecond},
				newTestTool("demo.a", runtime.SideEffectWrite, runtime.Idempotent))
			if _, err := dying.p.Execute(ctx, dying.call("demo.a", "c1", `{}`)); err == nil {
				t.Fatal("Execute succeeded although the settle failed")
			}
			before := onlyRow(t, st)
			if before.Status != store.StatusRunning || before.Tool != "demo.a" || before.ToolVersion != 1 ||
				before.ToolSHA256 != "sha-demo.a" || before.LeaseOwner != "dying" {
				t.Fatalf("the dead host's row: %+v", before)
			}

			other := newTestTool("demo.b", runtime.SideEffectWrite, runtime.Idempotent)
			lacksA := newHarnessOn(t, st, runtime.Config{WorkerID: "lacks-a"}, other)
			rep := recoverUntil(t, lacksA, "the expired call counted as not registered", func(r runtime.RecoveryReport) bool {
				return r.SkippedNotRegistered == 1
			})
			if rep != (runtime.RecoveryReport{SkippedNotRegistered: 1}) {
				t.Errorf("report of the worker without demo.a: %+v", rep)
			}
			if got := onlyRow(t, st); !reflect.DeepEqual(got, before) {
				t.Fatalf("the worker without demo.a wrote the row:\n got %+v\nwant %+v", got, before)
			}

			changedHash := newTestTool("demo.a", runtime.SideEffectWrite, runtime.Idempotent)
			changedHash.spec.SchemaSHA256 = "sha-demo.a-v2"
			changedVersion := newTestTool("demo.a", runtime.SideEffectWrite, runtime.Idempotent)
			changedVersion.spec.Version = 2
			for name, tool := range map[string]*testTool{"another hash": changedHash, "another version": changedVersion} {
				h := newHarnessOn(t, st, runtime.Config{WorkerID: "changed"}, tool, other)
				rep, err := h.p.Recover(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if rep != (runtime.RecoveryReport{SkippedChanged: 1}) {
					t.Errorf("%s: report %+v, want 1 skipped as changed", name, rep)
				}
				if n := tool.effects.Load(); n != 0 {
					t.Errorf("%s: re-executed %d times", name, n)
				}
				if got := onlyRow(t, st); !reflect.DeepEqual(got, before) {
					t.Fatalf("%s: the row was written:\n got %+v\nwant %+v", name, got, before)
				}
			}

			a := newTestTool("demo.a", runtime.SideEffectWrite, runtime.Idempotent)
			hasA := newHarnessOn(t, st, runtime.Config{WorkerID: "has-a"}, a)
			rep, err := hasA.p.Recover(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if rep != (runtime.RecoveryReport{Reclaimed: 1, Retried: 1}) || a.effects.Load() != 1 {
				t.Errorf("the worker with demo.a: report %+v, %d runs; want it reclaimed and retried once", rep, a.effects.Load())
			}
			if got := onlyRow(t, st); got.Status != store.StatusSucceeded || got.Attempt != 2 || got.LeaseOwner != "has-a" {
				t.Errorf("recovered row: %+v", got)
			}
			if rep, err := lacksA.p.Recover(ctx); err != nil || rep != (runtime.RecoveryReport{}) {
				t.Errorf("after recovery, the worker without demo.a: %+v, %v", rep, err)
			}
		})
	}
}

// deadHostStore is a host whose store went down after the claim: settles (through
// settleDownStore) and lease renewals never land.
type deadHostStore struct{ settleDownStore }

func (deadHostStore) InvocationRenewLeases(context.Context, string, []int64, time.Duration) (int, error) {
	return 0, errors.New("connection refused")
}

// withdrawOnClaim withdraws a tool from the registry as the first claim starts: the
// registry changing between the retryable list and the claim.
type withdrawOnClaim struct {
	store.Store
	once     sync.Once
	withdraw func()
}

func (w *withdrawOnClaim) InvocationClaimIfPending(ctx context.Context, id int64, owner string, lease time.Duration) (*store.Invocation, error) {
	w.once.Do(w.withdraw)
	return w.Store.InvocationClaimIfPending(ctx, id, owner, lease)
}

// TestRunRetryable_ToolWithdrawnAfterList_GivesCallBack: a call whose tool leaves the
// registry between the list and the claim is released, not settled as tool_withdrawn:
// PENDING with its decision, counted as skipped, and run once the tool is back.
func TestRunRetryable_ToolWithdrawnAfterList_GivesCallBack(t *testing.T) {
	st := drivers[0].open(t)
	ctx := context.Background()
	inv, _, err := st.InvocationInsert(ctx, store.InsertRunning(store.Call{
		Key: "k1", Tenant: "acme", RunID: "r1", Step: 1, CallID: "c1", Tool: "demo.a", ToolVersion: 1,
		ToolSHA256: "sha-demo.a", Idempotency: string(runtime.Idempotent), Args: []byte(`{}`), ArgsHash: "h1",
		Decision: runtime.VerdictAllow,
	}, "dead", time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	w := &withdrawOnClaim{Store: st}
	h := newHarnessOn(t, w, runtime.Config{WorkerID: "w1"}, newTestTool("demo.a", runtime.SideEffectWrite, runtime.Idempotent))
	w.withdraw = func() { h.reg.Withdraw("demo.a") }
	rep := recoverUntil(t, h, "the call swept and given back", func(r runtime.RecoveryReport) bool { return r.Reclaimed == 1 })
	if rep != (runtime.RecoveryReport{Reclaimed: 1, SkippedNotRegistered: 1}) {
		t.Errorf("report %+v, want reclaimed 1, retried 0, skipped 1 (not registered)", rep)
	}
	got, err := st.InvocationGet(ctx, inv.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The claim's attempt is kept: attempts only grow (see reexecute).
	if got.Status != store.StatusPending || got.Decision != runtime.VerdictAllow || got.ReasonCode != "" ||
		got.Outcome != nil || got.LeaseOwner != "" || got.Attempt != 2 {
		t.Fatalf("given-back row: %+v", got)
	}

	back := newTestTool("demo.a", runtime.SideEffectWrite, runtime.Idempotent)
	if err := h.reg.Register(back); err != nil {
		t.Fatal(err)
	}
	if n, err := h.p.RunRetryable(ctx); err != nil || n != 1 || back.effects.Load() != 1 {
		t.Fatalf("RunRetryable with the tool back: %d, %v, %d runs", n, err, back.effects.Load())
	}
	if got, _ := st.InvocationGet(ctx, inv.ID); got.Status != store.StatusSucceeded || got.Attempt != 3 {
		t.Fatalf("row after the re-run: %+v", got)
	}
}

// TestRecover_NoToolRegistered_OnlyCounts: a pipeline without tools decides for no
// row; it reports what it leaves.
func TestRecover_NoToolRegistered_OnlyCounts(t *testing.T) {
	st := drivers[0].open(t)
	ctx := context.Background()
	if _, _, err := st.InvocationInsert(ctx, store.InsertPending(store.Call{
		Key: "k1", Tool: "demo.a", ToolVersion: 1, Decision: runtime.VerdictAllow,
	})); err != nil {
		t.Fatal(err)
	}
	h := newHarnessOn(t, st, runtime.Config{})
	rep, err := h.p.Recover(ctx)
	if err != nil || rep != (runtime.RecoveryReport{SkippedNotRegistered: 1}) {
		t.Fatalf("Recover = %+v, %v", rep, err)
	}
	if n, err := h.p.RunRetryable(ctx); err != nil || n != 0 {
		t.Fatalf("RunRetryable = %d, %v", n, err)
	}
	if got := onlyRow(t, st); got.Status != store.StatusPending || got.Attempt != 0 {
		t.Fatalf("row: %+v", got)
	}
}
