package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// derived is a call whose caller sent no call id: its id is the derived base (what the
// MCP server computes; any fixed string will do here).
func (h *harness) derived(tool, args string) runtime.Call {
	c := h.call(tool, "auto-base", args)
	c.Derived = true
	return c
}

// Call identity without client ids (SES-2), on every store.
func TestIdentity_DerivedCalls(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Run("ReadAgainReadsAgain", func(t *testing.T) { testReadAgainReadsAgain(t, d.open(t)) })
			t.Run("ConcurrentIdenticalReadsRecordOnce", func(t *testing.T) { testConcurrentIdenticalReads(t, d.open(t)) })
			t.Run("WriteRetryWithinTheWindowReplays", func(t *testing.T) { testWriteRetryReplays(t, d.open(t)) })
			t.Run("RefusalIsDecidedAgain", func(t *testing.T) { testRefusalDecidedAgain(t, d.open(t)) })
			t.Run("HeldWriteIsJoinedNotHeldTwice", func(t *testing.T) { testHeldWriteJoined(t, d.open(t)) })
			t.Run("FailedBeforeTheWatermarkRunsAgain", func(t *testing.T) { testFailedBeforeWatermarkRunsAgain(t, d.open(t)) })
			t.Run("ResolvedNotHappenedRunsOnceMoreUnderItsKey", func(t *testing.T) { testResolvedNotHappened(t, d.open(t)) })
			t.Run("ResolvedHappenedReplaysASuccess", func(t *testing.T) { testResolvedHappened(t, d.open(t)) })
			t.Run("NewRunReadsNothingBefore", func(t *testing.T) { testNewRunReadsNothing(t, d.open(t)) })
		})
	}
}

// A read made again reads again: never a recorded outcome (stale content).
func testReadAgainReadsAgain(t *testing.T, st store.Store) {
	read := newTestTool("demo.read", runtime.SideEffectRead, runtime.Idempotent)
	h := newHarnessOn(t, st, runtime.Config{}, read)
	for i, want := range []string{"auto-base", "auto-base-1", "auto-base-2"} {
		o := h.exec(h.derived("demo.read", `{"n":1}`))
		wantStatus(t, o, runtime.OutcomeSucceeded, "")
		if o.Replayed || o.CallID != want {
			t.Fatalf("read %d: call %s replayed=%v, want %s executed", i, o.CallID, o.Replayed, want)
		}
	}
	if n := read.effects.Load(); n != 3 {
		t.Fatalf("the read ran %d times, want 3", n)
	}
	// Each derived id was after the latest generation: no row could have its key, so
	// no dedupe read was made (the record is written once, at the end).
	if n := h.counting.Reads("InvocationGetByKey"); n != 0 {
		t.Fatalf("%d dedupe reads for reads of new generations, want 0", n)
	}
	// A client that names its call says it is the same one: that is a retry. The
	// breaker's read said whether its key had a row (PriorCallsParams.Key): the first
	// call makes no dedupe read, the retry one, and replays.
	named := h.call("demo.read", "mine", `{"n":1}`)
	h.exec(named)
	if n := h.counting.Reads("InvocationGetByKey"); n != 0 {
		t.Fatalf("%d dedupe reads for a named read of a free key, want 0", n)
	}
	if o := h.exec(named); !o.Replayed {
		t.Fatal("a named call retried was executed again")
	}
	if n, runs := h.counting.Reads("InvocationGetByKey"), read.effects.Load(); n != 1 || runs != 4 {
		t.Fatalf("a named read retried: %d dedupe reads and %d runs, want 1 and 4", n, runs)
	}
}

// Identical derived reads at the same moment may get the same generation: each runs,
// the first to record wins, and the others answer with its record — one row, and no
// read fails.
func testConcurrentIdenticalReads(t *testing.T, st store.Store) {
	read := newTestTool("demo.read", runtime.SideEffectRead, runtime.Idempotent)
	h := newHarnessOn(t, st, runtime.Config{}, read)
	const n = 4 // the fifth identical call of a run is the breaker's loop_detected (RT-8)
	outcomes := make([]runtime.Outcome, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			o, err := h.p.Execute(h.ctx, h.derived("demo.read", `{"n":1}`))
			if err != nil {
				t.Error(err)
			}
			outcomes[i] = o
		})
	}
	close(start)
	wg.Wait()
	ids := map[string]bool{}
	for _, o := range outcomes {
		wantStatus(t, o, runtime.OutcomeSucceeded, "")
		ids[o.CallID] = true
	}
	rows, err := st.InvocationList(h.ctx, store.InvocationFilter{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(ids) {
		t.Fatalf("%d rows for %d call ids (%v): want one record per call id", len(rows), len(ids), ids)
	}
	for _, inv := range rows {
		if inv.Status != store.StatusSucceeded || !ids[inv.CallID] {
			t.Fatalf("row %s %s: want a succeeded record of one of %v", inv.CallID, inv.Status, ids)
		}
	}
}

// A write's retry after a lost answer replays its record within the window, and never
// runs twice; past the window an identical write is a new call.
func testWriteRetryReplays(t *testing.T, st store.Store) {
	send := newTestTool("demo.send", runtime.SideEffectWrite, runtime.NonIdempotent)
	h := newHarnessOn(t, st, runtime.Config{}, send)
	first := h.exec(h.derived("demo.send", `{"n":1}`))
	wantStatus(t, first, runtime.OutcomeSucceeded, "")
	retry := h.exec(h.derived("demo.send", `{"n":1}`))
	if !retry.Replayed || retry.CallID != first.CallID || send.effects.Load() != 1 {
		t.Fatalf("retry %s replayed=%v, effects %d: want the record of %s", retry.CallID, retry.Replayed, send.effects.Load(), first.CallID)
	}
	// Another argument is another call.
	if o := h.exec(h.derived("demo.send", `{"n":2}`)); o.Replayed || send.effects.Load() != 2 {
		t.Fatalf("another argument: replayed=%v, effects %d", o.Replayed, send.effects.Load())
	}

	// The same store, a pipeline whose window has passed the moment a write settles: the
	// identical write is a deliberate repeat, the next generation.
	past := newHarnessOn(t, st, runtime.Config{RetryWindow: time.Nanosecond, WorkerID: "w2"}, send)
	again := past.exec(past.derived("demo.send", `{"n":1}`))
	if again.Replayed || again.CallID != first.CallID+"-1" || send.effects.Load() != 3 {
		t.Fatalf("after the window: %s replayed=%v effects %d, want %s-1 executed", again.CallID, again.Replayed, send.effects.Load(), first.CallID)
	}
}

// A refusal is never replayed: the same call, once the caller may make it, runs.
func testRefusalDecidedAgain(t *testing.T, st store.Store) {
	scoped := newTestTool("demo.put", runtime.SideEffectWrite, runtime.Idempotent)
	scoped.spec.RequiredScopes = []string{"demo.write"}
	h := newHarnessOn(t, st, runtime.Config{}, scoped)
	refused := h.derived("demo.put", `{"n":1}`)
	wantStatus(t, h.exec(refused), runtime.OutcomeDenied, runtime.ReasonMissingScope)
	// A named call too: the refusal does not occupy its key.
	named := h.call("demo.put", "c-named", `{"n":2}`)
	wantStatus(t, h.exec(named), runtime.OutcomeDenied, runtime.ReasonMissingScope)

	granted := runtime.Principal{ID: "alice", Tenant: "acme", Scopes: []string{"demo.write"}}
	refused.Principal, named.Principal = granted, granted
	for _, c := range []runtime.Call{refused, named} {
		o := h.exec(c)
		wantStatus(t, o, runtime.OutcomeSucceeded, "")
		if o.Replayed {
			t.Fatalf("%s: the call after the grant was answered from a record", c.CallID)
		}
	}
	if n := scoped.effects.Load(); n != 2 {
		t.Fatalf("effects %d, want 2", n)
	}
}

// A held write retried is the same call: it waits for the one approval, and is held
// once.
func testHeldWriteJoined(t *testing.T, st store.Store) {
	deploy := newTestTool("demo.deploy", runtime.SideEffectWrite, runtime.NonIdempotent)
	deploy.spec.Risk = runtime.RiskCritical
	h := newHarnessOn(t, st, runtime.Config{ApprovalHold: time.Millisecond, ApprovalPoll: time.Millisecond}, deploy)
	first := h.exec(h.derived("demo.deploy", `{"n":1}`))
	wantStatus(t, first, runtime.OutcomeUnavailable, runtime.ReasonApprovalPending)
	retry := h.exec(h.derived("demo.deploy", `{"n":1}`))
	wantStatus(t, retry, runtime.OutcomeUnavailable, runtime.ReasonApprovalPending)
	if retry.CallID != first.CallID {
		t.Fatalf("the retry of a held call is %s, want %s (the same call)", retry.CallID, first.CallID)
	}
	rows, err := st.InvocationList(h.ctx, store.InvocationFilter{AwaitingApproval: true})
	if err != nil || len(rows) != 1 {
		t.Fatalf("held rows: %d, %v; want one", len(rows), err)
	}
}

// A write that failed before its watermark sent nothing: made again, it runs.
func testFailedBeforeWatermarkRunsAgain(t *testing.T, st store.Store) {
	flaky := newTestTool("demo.send", runtime.SideEffectWrite, runtime.NonIdempotent)
	fails := true
	flaky.run = func(ctx context.Context, tc *runtime.ExecContext, args json.RawMessage) (runtime.ToolResult, error) {
		if fails {
			return runtime.ToolResult{}, runtime.Failf("not_ready", "the target is not ready")
		}
		if err := tc.MarkEffectSent(ctx); err != nil {
			return runtime.ToolResult{}, err
		}
		flaky.effects.Add(1)
		return runtime.StructuredResult(&flaky.spec, map[string]any{"ok": true})
	}
	h := newHarnessOn(t, st, runtime.Config{}, flaky)
	if o := h.exec(h.derived("demo.send", `{"n":1}`)); o.Status != runtime.OutcomeFailed {
		t.Fatalf("the first attempt: %s/%s, want failed", o.Status, o.ReasonCode)
	}
	fails = false
	o := h.exec(h.derived("demo.send", `{"n":1}`))
	wantStatus(t, o, runtime.OutcomeSucceeded, "")
	if o.Replayed || o.CallID != "auto-base-1" || flaky.effects.Load() != 1 {
		t.Fatalf("made again: %s replayed=%v effects %d", o.CallID, o.Replayed, flaky.effects.Load())
	}
}

// uncertainCall leaves an UNCERTAIN row for a derived non-idempotent call: its attempt
// dies after the watermark, and the sweep decides it.
func uncertainCall(t *testing.T, st store.Store) (*harness, *testTool, *store.Invocation) {
	send := newTestTool("demo.send", runtime.SideEffectWrite, runtime.NonIdempotent)
	crash := true
	send.run = func(ctx context.Context, tc *runtime.ExecContext, args json.RawMessage) (runtime.ToolResult, error) {
		if err := tc.MarkEffectSent(ctx); err != nil {
			return runtime.ToolResult{}, err
		}
		if crash {
			return runtime.ToolResult{}, errPostEffect
		}
		send.effects.Add(1)
		return runtime.StructuredResult(&send.spec, map[string]any{"ok": true})
	}
	h := newHarnessOn(t, st, runtime.Config{}, send)
	o := h.exec(h.derived("demo.send", `{"n":1}`))
	wantStatus(t, o, runtime.OutcomeUncertain, runtime.ReasonEffectMayHaveHappened)
	crash = false
	inv, err := st.InvocationGetByKey(h.ctx, sendKey(t, o.CallID))
	if err != nil {
		t.Fatal(err)
	}
	return h, send, inv
}

var errPostEffect = errors.New("the connection dropped after the request was sent")

func sendKey(t *testing.T, callID string) string {
	t.Helper()
	canon, err := runtime.CanonicalJSON([]byte(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	return runtime.IdempotencyKey(runtime.KeyInput{Tenant: "acme", RunID: "r1", Step: 1, CallID: callID,
		Tool: "demo.send", ToolVersion: 1, CanonicalArgs: canon})
}

// After a person says the effect did not happen, the same call — same key, which a
// downstream deduplicates on — runs once more; the breaker no longer holds it.
func testResolvedNotHappened(t *testing.T, st store.Store) {
	h, send, inv := uncertainCall(t, st)
	if o := h.exec(h.derived("demo.send", `{"n":1}`)); o.Status != runtime.OutcomeUncertain || !o.Replayed {
		t.Fatalf("before the review: %s/%s replayed=%v, want the UNCERTAIN record", o.Status, o.ReasonCode, o.Replayed)
	}
	if _, err := st.InvocationResolveUncertain(h.ctx, inv.ID, store.ResolutionDidNotHappen, "carol", nil, nil); err != nil {
		t.Fatal(err)
	}
	var keys []string
	send.run = wrapKeys(send.run, &keys)
	o := h.exec(h.derived("demo.send", `{"n":1}`))
	wantStatus(t, o, runtime.OutcomeSucceeded, "")
	if o.Replayed || o.CallID != inv.CallID || len(keys) != 1 || keys[0] != inv.Key {
		t.Fatalf("after did-not-happen: %s replayed=%v keys %v, want %s run once under key %s", o.CallID, o.Replayed, keys, inv.CallID, inv.Key)
	}
	if o := h.exec(h.derived("demo.send", `{"n":1}`)); !o.Replayed || send.effects.Load() != 1 {
		t.Fatalf("its retry: replayed=%v effects %d, want the record", o.Replayed, send.effects.Load())
	}
}

// wrapKeys records the idempotency key of every execution of run.
func wrapKeys(run func(context.Context, *runtime.ExecContext, json.RawMessage) (runtime.ToolResult, error), keys *[]string) func(context.Context, *runtime.ExecContext, json.RawMessage) (runtime.ToolResult, error) {
	return func(ctx context.Context, tc *runtime.ExecContext, args json.RawMessage) (runtime.ToolResult, error) {
		*keys = append(*keys, tc.IdempotencyKey())
		return run(ctx, tc, args)
	}
}

// After a person says it happened, the call is a success: a retry is answered so.
func testResolvedHappened(t *testing.T, st store.Store) {
	h, send, inv := uncertainCall(t, st)
	ob, err := json.Marshal(runtime.ConfirmedHappened(inv.CallID, "carol"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.InvocationResolveUncertain(h.ctx, inv.ID, store.ResolutionHappened, "carol", ob, nil); err != nil {
		t.Fatal(err)
	}
	o := h.exec(h.derived("demo.send", `{"n":1}`))
	wantStatus(t, o, runtime.OutcomeSucceeded, "")
	if !o.Replayed || o.CallID != inv.CallID || send.effects.Load() != 0 || o.Result == nil || len(o.Result.Content) == 0 {
		t.Fatalf("after happened: %+v effects %d, want the confirmation replayed", o, send.effects.Load())
	}
}

// A call in a new run (Call.NewRun) reads none of the run's earlier calls: it is the
// first generation with an empty breaker counter, recorded as any call is. The run's
// next call, no longer new, is read as usual: a write's retry replays its record.
func testNewRunReadsNothing(t *testing.T, st store.Store) {
	read := newTestTool("demo.read", runtime.SideEffectRead, runtime.Idempotent)
	send := newTestTool("demo.send", runtime.SideEffectWrite, runtime.NonIdempotent)
	h := newHarnessOn(t, st, runtime.Config{}, read, send)
	inRun := func(c runtime.Call, run string, isNew bool) runtime.Call {
		c.RunID, c.NewRun = run, isNew
		return c
	}
	r := h.exec(inRun(h.derived("demo.read", `{"n":1}`), "fresh-1", true))
	w := h.exec(inRun(h.derived("demo.send", `{"n":1}`), "fresh-2", true))
	named := h.exec(inRun(h.call("demo.send", "mine", `{"n":2}`), "fresh-3", true))
	for _, o := range []runtime.Outcome{r, w, named} {
		wantStatus(t, o, runtime.OutcomeSucceeded, "")
	}
	if r.CallID != "auto-base" || w.CallID != "auto-base" || r.Replayed || w.Replayed || named.Replayed {
		t.Fatalf("calls in new runs: %s %s %s, want first generations executed", r.CallID, w.CallID, named.CallID)
	}
	if n := h.counting.Reads("InvocationPriorCalls"); n != 0 {
		t.Fatalf("calls in new runs read their runs' earlier calls %d times, want 0", n)
	}
	key := runtime.IdempotencyKey(runtime.KeyInput{Tenant: "acme", RunID: "fresh-2", Step: 1, CallID: w.CallID,
		Tool: "demo.send", ToolVersion: 1, CanonicalArgs: []byte(`{"n":1}`)})
	if inv, err := st.InvocationGetByKey(h.ctx, key); err != nil || inv.RunID != "fresh-2" || inv.Status != store.StatusSucceeded {
		t.Fatalf("the write in a new run: %+v, %v; want its row SUCCEEDED in run fresh-2", inv, err)
	}
	retry := h.exec(inRun(h.derived("demo.send", `{"n":1}`), "fresh-2", false))
	again := h.exec(inRun(h.call("demo.send", "mine", `{"n":2}`), "fresh-3", false))
	if !retry.Replayed || retry.CallID != w.CallID || !again.Replayed || send.effects.Load() != 2 {
		t.Fatalf("the writes' retries: replayed %v %v, effects %d; want both replayed, 2 effects", retry.Replayed, again.Replayed, send.effects.Load())
	}
	if n := h.counting.Reads("InvocationPriorCalls"); n != 2 {
		t.Fatalf("the retries read their runs' earlier calls %d times, want 2", n)
	}
	// A caller that says NewRun of a run it used before gets the run's first decision,
	// and the key still keeps the write from running twice.
	if o := h.exec(inRun(h.derived("demo.send", `{"n":1}`), "fresh-2", true)); !o.Replayed || send.effects.Load() != 2 {
		t.Fatalf("NewRun on a used run: replayed %v, effects %d; want the record replayed, 2 effects", o.Replayed, send.effects.Load())
	}
}
