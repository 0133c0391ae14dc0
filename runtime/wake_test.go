package runtime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/postgres"
	"github.com/toolgen/toolgen/runtime/store/postgres/pgtest"
)

// The approval hold waits for wake-ups (store.Waker, issue 16 point 4). These tests
// set ApprovalPoll to an hour, so the hold can only see a decision at its first read
// or when the store wakes it: a hold that still polled would end approval_pending
// at ApprovalHold instead. What they assert is the number of reads the hold made.

const noPoll = time.Hour

// readSignal is a store that closes firstRead when the first ApprovalGet returned: the
// hold is waiting from then on.
type readSignal struct {
	store.Store
	once      sync.Once
	firstRead chan struct{}
}

func (r *readSignal) ApprovalGet(ctx context.Context, key string) (*store.Approval, error) {
	a, err := r.Store.ApprovalGet(ctx, key)
	r.once.Do(func() { close(r.firstRead) })
	return a, err
}

func (r *readSignal) Unwrap() store.Store { return r.Store }

// heldCall starts a held call on h in the background; its outcome arrives on the channel.
func heldCall(h *harness) <-chan runtime.Outcome {
	done := make(chan runtime.Outcome, 1)
	go func() { done <- h.exec(h.call("demo.deploy", "c-deploy", `{"n":1}`)) }()
	return done
}

func heldKey() string {
	return runtime.IdempotencyKey(runtime.KeyInput{Tenant: "acme", RunID: "r1", Step: 1, CallID: "c-deploy",
		Tool: "demo.deploy", ToolVersion: 1, CanonicalArgs: []byte(`{"n":1}`)})
}

func newHeldHarness(t *testing.T, st store.Store) (*harness, *readSignal, *testTool) {
	held := newTestTool("demo.deploy", runtime.SideEffectWrite, runtime.NonIdempotent)
	held.spec.Risk = runtime.RiskCritical
	sig := &readSignal{Store: st, firstRead: make(chan struct{})}
	h := newHarnessOn(t, sig, runtime.Config{ApprovalPoll: noPoll, ApprovalHold: 2 * time.Minute}, held)
	return h, sig, held
}

func decide(t *testing.T, st store.Store) {
	t.Helper()
	if err := st.ApprovalDecide(context.Background(), store.Approval{Key: heldKey(), Tenant: "acme", Approved: true, DecidedBy: "bob"}, nil); err != nil {
		t.Fatal(err)
	}
}

func wantApprovedRun(t *testing.T, h *harness, done <-chan runtime.Outcome, tool *testTool, maxReads int) {
	t.Helper()
	o := <-done
	wantStatus(t, o, runtime.OutcomeSucceeded, "")
	if n := tool.effects.Load(); n != 1 {
		t.Errorf("executed %d times, want 1", n)
	}
	reads := h.counting.Reads("ApprovalGet")
	t.Logf("the hold read the decision %d times", reads)
	if reads > maxReads {
		t.Errorf("the hold read the store %d times, want at most %d (its first read and its wake-ups)", reads, maxReads)
	}
}

// TestHold_WokenByAnotherProcessDecision_Postgres: a call held on one handle is woken
// by a decision committed through another (another process's pool): the decision's
// notification, not a poll, ends the hold.
func TestHold_WokenByAnotherProcessDecision_Postgres(t *testing.T) {
	st, schema := pgtest.Open(t)
	other, err := postgres.Open(t.Context(), pgtest.DSN(t), postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	h, sig, tool := newHeldHarness(t, st)
	done := heldCall(h)
	<-sig.firstRead
	// Wait until the listener listens (the hold started it): before that the decision
	// would be found by the hold's wake-up when the listener comes up, a path
	// TestHold_ListenerDroppedMeanwhile_Postgres covers.
	sub := st.Subscribe(store.CatalogTopic())
	defer sub.Close()
	<-sub.Ready()
	decide(t, other)
	// reads: the first, the listener coming up (if it came up after the hold
	// subscribed), the decision's notification
	wantApprovedRun(t, h, done, tool, 3)
	if n := st.WakeStats().Notifications; n < 1 {
		t.Errorf("the listener received %d notifications", n)
	}
}

// TestHold_ListenerDroppedMeanwhile_Postgres: the listener's backend is terminated
// while a call is held, and the decision is committed by another process right after:
// whether its notification reached the reconnected listener or was lost with the old
// connection, the hold sees it (a lost one through the wake-up every waiter gets when
// the listener is back).
func TestHold_ListenerDroppedMeanwhile_Postgres(t *testing.T) {
	st, schema := pgtest.Open(t)
	other, err := postgres.Open(t.Context(), pgtest.DSN(t), postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	h, sig, tool := newHeldHarness(t, st)
	done := heldCall(h)
	<-sig.firstRead
	sub := st.Subscribe(store.CatalogTopic())
	defer sub.Close()
	<-sub.Ready()
	pid := st.WakeStats().BackendPID
	conn, err := pgx.Connect(t.Context(), pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var terminated bool
	if err := conn.QueryRow(t.Context(), `SELECT pg_terminate_backend($1, 10000)`, int64(pid)).Scan(&terminated); err != nil || !terminated {
		t.Fatalf("terminate the listener's backend %d: %v %v", pid, terminated, err)
	}
	decide(t, other)
	// reads: the first, up to two listener transitions before the drop (up) and two
	// after it (down, up), the decision's notification
	wantApprovedRun(t, h, done, tool, 5)
	if st := st.WakeStats(); st.Failures < 1 || st.Connects < 2 {
		t.Errorf("WakeStats %+v: want the dropped connection and a reconnection", st)
	}
}

// TestHold_WokenInProcess_SQLite: on SQLite a decision through the same store handle
// (the console or the operator API of the serving process) wakes the hold at once.
func TestHold_WokenInProcess_SQLite(t *testing.T) {
	st := drivers[0].open(t)
	h, sig, tool := newHeldHarness(t, st)
	done := heldCall(h)
	<-sig.firstRead
	decide(t, st)
	wantApprovedRun(t, h, done, tool, 2)
}
