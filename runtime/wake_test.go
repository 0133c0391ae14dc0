package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/postgres"
	"github.com/toolgen/toolgen/runtime/store/postgres/pgtest"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
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

// latencyStore times, for one held call at a time, the hold's first read and its
// claim of the approved call.
type latencyStore struct {
	store.Store
	mu      sync.Mutex
	read    chan struct{} // closed at the first ApprovalGet of the armed call
	claimed chan time.Time
	reads   int // ApprovalGet calls
}

func (l *latencyStore) Unwrap() store.Store { return l.Store }

func (l *latencyStore) arm() (read <-chan struct{}, claimed <-chan time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.read, l.claimed = make(chan struct{}), make(chan time.Time, 1)
	return l.read, l.claimed
}

func (l *latencyStore) ApprovalGet(ctx context.Context, key string) (*store.Approval, error) {
	a, err := l.Store.ApprovalGet(ctx, key)
	l.mu.Lock()
	l.reads++
	if l.read != nil {
		close(l.read)
		l.read = nil
	}
	l.mu.Unlock()
	return a, err
}

func (l *latencyStore) InvocationClaimIfPending(ctx context.Context, id int64, owner string, lease time.Duration) (*store.Invocation, error) {
	at := time.Now()
	l.mu.Lock()
	select {
	case l.claimed <- at:
	default:
	}
	l.mu.Unlock()
	return l.Store.InvocationClaimIfPending(ctx, id, owner, lease)
}

// BenchmarkApprovalWakeup: how long after another process's decision committed (its
// ApprovalDecide returned) a held call's hold claims the approved call: PostgreSQL
// with LISTEN/NOTIFY against the same store polled every 200 ms (the default
// ApprovalPoll, WithoutWakeups), and SQLite with an in-process decision against its
// poll. Each op is one held call, decided at a random instant (uniform over 250 ms)
// after the hold's first read; the latency percentiles are reported as metrics.
//
//	TOOLGEN_PG_DSN=... go test -run XXX -bench BenchmarkApprovalWakeup -benchtime 100x ./runtime/
func BenchmarkApprovalWakeup(b *testing.B) {
	b.Run("postgres/notify", func(b *testing.B) { benchApprovalWakeup(b, "postgres", true) })
	b.Run("postgres/poll-200ms", func(b *testing.B) { benchApprovalWakeup(b, "postgres", false) })
	b.Run("sqlite/in-process", func(b *testing.B) { benchApprovalWakeup(b, "sqlite", true) })
	b.Run("sqlite/poll-200ms", func(b *testing.B) { benchApprovalWakeup(b, "sqlite-other", false) })
}

func benchApprovalWakeup(b *testing.B, driver string, wake bool) {
	var st, decider store.Store
	switch driver {
	case "postgres":
		pg, schema := pgtest.Open(b)
		var opts []postgres.Option
		if !wake {
			opts = append(opts, postgres.WithoutWakeups())
		}
		mine, err := postgres.Open(context.Background(), pgtest.DSN(b), append(opts, postgres.WithSchema(schema))...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { mine.Close() })
		st, decider = mine, pg // pg: the other process, which decides
		if wake {
			sub := mine.Subscribe(store.CatalogTopic())
			defer sub.Close()
			<-sub.Ready()
		}
	case "sqlite":
		var err error
		if st, err = sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "toolgen.db")); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		decider = st
	case "sqlite-other": // the decision through another handle: found by the poll
		path := filepath.Join(b.TempDir(), "toolgen.db")
		var err error
		if st, err = sqlite.Open(context.Background(), path); err != nil {
			b.Fatal(err)
		}
		if decider, err = sqlite.Open(context.Background(), path); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close(); decider.Close() })
	}
	held := newTestTool("demo.deploy", runtime.SideEffectWrite, runtime.NonIdempotent)
	held.spec.Risk = runtime.RiskCritical
	lat := &latencyStore{Store: st}
	reg := runtime.NewRegistry()
	if err := reg.Register(held); err != nil {
		b.Fatal(err)
	}
	p, err := runtime.NewPipeline(runtime.Config{Registry: reg, Store: lat, WorkerID: "w1",
		Artifacts: runtime.NewFSArtifactWriter(b.TempDir())})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var lats []time.Duration
	runID := fmt.Sprintf("r-%d", time.Now().UnixNano()) // the benchmark runs again with a larger b.N
	b.ResetTimer()
	for i := range b.N {
		// distinct arguments: the breaker refuses the fifth identical call of a run
		callID, args := fmt.Sprintf("c-%d", i), fmt.Sprintf(`{"n":%d}`, i)
		read, claimed := lat.arm()
		done := make(chan error, 1)
		go func() {
			o, err := p.Execute(ctx, runtime.Call{Tenant: "acme", Principal: alice, SessionID: "s1", RunID: runID, Step: 1,
				CallID: callID, Tool: "demo.deploy", Args: json.RawMessage(args),
				ContextTrust: []runtime.Trust{runtime.TrustUser}, ArgumentTrust: runtime.TrustUser})
			if err == nil && o.Status != runtime.OutcomeSucceeded {
				err = fmt.Errorf("outcome %s/%s", o.Status, o.ReasonCode)
			}
			done <- err
		}()
		<-read
		// The approver arrives at a random instant of the hold, not right after a read:
		// uniform over 250 ms, longer than one poll.
		time.Sleep(time.Duration(rand.Int64N(int64(250 * time.Millisecond))))
		key := runtime.IdempotencyKey(runtime.KeyInput{Tenant: "acme", RunID: runID, Step: 1, CallID: callID,
			Tool: "demo.deploy", ToolVersion: 1, CanonicalArgs: []byte(args)})
		if err := decider.ApprovalDecide(ctx, store.Approval{Key: key, Tenant: "acme", Approved: true, DecidedBy: "bob"}, nil); err != nil {
			b.Fatal(err)
		}
		decided := time.Now()
		at := <-claimed
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		lats = append(lats, at.Sub(decided))
	}
	b.StopTimer()
	slices.Sort(lats)
	pct := func(q float64) float64 {
		return float64(lats[min(len(lats)-1, int(q*float64(len(lats))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.9), "p90-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(lats[len(lats)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(float64(lat.reads)/float64(b.N), "reads/hold")
}
