package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgen/toolgen/runtime/store"
)

const wakeTimeout = 15 * time.Second

func waitReady(t *testing.T, sub *store.Subscription) {
	t.Helper()
	select {
	case <-sub.Ready():
	case <-time.After(wakeTimeout):
		t.Fatal("subscription not ready")
	}
	select { // the readiness wake-up
	case <-sub.C():
	default:
	}
}

func waitWoken(t *testing.T, sub *store.Subscription, what string) {
	t.Helper()
	select {
	case <-sub.C():
	case <-time.After(wakeTimeout):
		t.Fatalf("%s: no wake-up", what)
	}
}

func reopen(t *testing.T, s *Store, opts ...Option) *Store {
	t.Helper()
	other, err := Open(t.Context(), dsn(t), append([]Option{WithSchema(s.schema)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	return other
}

func heldRow(t *testing.T, s *Store, tenant string) *store.Invocation {
	t.Helper()
	inv, _, err := s.InvocationInsert(t.Context(), store.InsertHeld(store.Call{Key: "k-" + time.Now().Format(time.RFC3339Nano),
		Tenant: tenant, Tool: "demo.write", ToolVersion: 1}))
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// TestWake_WireNamesAreMigration010s: the payloads the triggers compute in SQL are the
// wire names store.Topic computes in Go, non-ASCII tenants included.
func TestWake_WireNamesAreMigration010s(t *testing.T) {
	s := newTestStore(t)
	for _, c := range []struct{ tenant, key string }{{"", ""}, {"acme", "0f3a"}, {"tenant-ä", "k:1"}, {"日本", "x"}} {
		var approval, events string
		err := s.pool.QueryRow(t.Context(), `SELECT
			'a' || left(encode(sha256(convert_to(length($1::text) || ':' || $1 || $2, 'UTF8')), 'hex'), 32),
			'e' || left(encode(sha256(convert_to(length($1::text) || ':' || $1, 'UTF8')), 'hex'), 32)`,
			c.tenant, c.key).Scan(&approval, &events)
		if err != nil {
			t.Fatal(err)
		}
		if got := store.ApprovalTopic(c.tenant, c.key).Wire(); got != approval {
			t.Errorf("ApprovalTopic(%q, %q).Wire() = %q, SQL %q", c.tenant, c.key, got, approval)
		}
		if c.tenant != "" {
			if got := store.EventsTopic(c.tenant).Wire(); got != events {
				t.Errorf("EventsTopic(%q).Wire() = %q, SQL %q", c.tenant, got, events)
			}
		}
	}
}

// TestWake_TerminatedListenerRecovers: the listener's backend is terminated
// (pg_terminate_backend), a decision is committed while it is away — its notification
// goes nowhere — and the listener's reconnection wakes the waiter, which reads the
// decision: a lost notification costs the reconnection, not a fallback interval.
func TestWake_TerminatedListenerRecovers(t *testing.T) {
	s := newTestStore(t)
	reconnecting, release := make(chan struct{}), make(chan struct{})
	s.wakeHooks = &wakeHooks{beforeConnect: func(ctx context.Context) error {
		close(reconnecting)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	other := reopen(t, s) // another process's handle: it decides
	inv := heldRow(t, s, "acme")
	sub := s.Subscribe(store.ApprovalTopic("acme", inv.Key))
	defer sub.Close()
	waitReady(t, sub)
	if s.WakeFallback() != DefaultWakeFallback {
		t.Fatalf("WakeFallback = %v while listening, want %v", s.WakeFallback(), DefaultWakeFallback)
	}
	pid := s.wake.Load().backendPID()
	var terminated bool
	if err := other.pool.QueryRow(t.Context(), `SELECT pg_terminate_backend($1, 10000)`, int64(pid)).Scan(&terminated); err != nil || !terminated {
		t.Fatalf("terminate the listener's backend %d: %v %v", pid, terminated, err)
	}
	<-reconnecting // the listener saw the failure and waits to reconnect
	if s.WakeFallback() != 0 {
		t.Errorf("WakeFallback = %v while the listener is down, want 0 (waiters poll)", s.WakeFallback())
	}
	waitWoken(t, sub, "the waiter when the listener went down")
	if _, err := s.ApprovalGet(t.Context(), inv.Key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ApprovalGet before the decision: %v", err)
	}
	if err := other.ApprovalDecide(t.Context(), store.Approval{Key: inv.Key, Tenant: "acme", Approved: true, DecidedBy: "bob"}, nil); err != nil {
		t.Fatal(err)
	}
	close(release)
	waitWoken(t, sub, "the waiter when the listener came back")
	a, err := s.ApprovalGet(t.Context(), inv.Key)
	if err != nil || !a.Approved {
		t.Fatalf("the decision made while the listener was down: %+v %v", a, err)
	}
	st := s.WakeStats()
	if st.Connects != 2 || st.Failures != 1 {
		t.Errorf("WakeStats = %+v, want 2 connects and 1 failure", st)
	}
	if s.WakeFallback() != DefaultWakeFallback {
		t.Errorf("WakeFallback = %v after the reconnection", s.WakeFallback())
	}
}

// TestWake_HotTopicsNotifyOnlyWhileRegistered: a tenant's events and a call's status
// are notified only while a listener has registered them (wake_interest), so calls
// nobody waits for take no notification lock at commit; decisions and catalog changes
// always notify.
func TestWake_HotTopicsNotifyOnlyWhileRegistered(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	cfg, err := pgx.ParseConfig(dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = pgx.Identifier{s.schema}.Sanitize()
	raw, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close(context.Background())
	var channel string
	if err := raw.QueryRow(ctx, wakeChannelSQL).Scan(&channel); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	// next returns the payload of the next notification on the raw connection.
	next := func() string {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, wakeTimeout)
		defer cancel()
		n, err := raw.WaitForNotification(wctx)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return n.Payload
	}
	catalogChange := func() {
		t.Helper()
		if _, err := s.CatalogHistoryAppend(ctx, store.CatalogChange{ServerID: "files", Change: "added"}); err != nil {
			t.Fatal(err)
		}
	}

	// Nobody registered: a call and its events notify nothing; the catalog change after
	// them is the first notification.
	inv := heldRow(t, s, "acme")
	catalogChange()
	if got := next(); got != "c" {
		t.Fatalf("first notification %q, want the catalog change's (a call nobody waits for notified)", got)
	}
	// A decision always notifies.
	if err := s.ApprovalDecide(ctx, store.Approval{Key: inv.Key, Tenant: "acme", Approved: true, DecidedBy: "bob"}, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := next(), store.ApprovalTopic("acme", inv.Key).Wire(); got != want {
		t.Fatalf("notification %q, want the decision's %q", got, want)
	}

	// Registered: acme's events notify, with the call's status when that is registered.
	events := s.Subscribe(store.EventsTopic("acme"))
	defer events.Close()
	call := s.Subscribe(store.CallTopic("acme", inv.Key))
	defer call.Close()
	waitReady(t, events)
	waitReady(t, call)
	if _, err := s.InvocationClaimIfPending(ctx, inv.ID, "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{next(): true, next(): true}
	if want := []string{store.EventsTopic("acme").Wire(), store.CallTopic("acme", inv.Key).Wire()}; !got[want[0]] || !got[want[1]] {
		t.Fatalf("notifications %v, want %v", got, want)
	}
	waitWoken(t, events, "acme's stream")
	waitWoken(t, call, "the call's waiter")
	// Another tenant's call is still silent.
	heldRow(t, s, "globex")
	catalogChange()
	if got := next(); got != "c" {
		t.Fatalf("notification %q, want the catalog change's (globex's call notified)", got)
	}
}

// TestWake_WithoutWakeups: the listener never starts; waiters poll.
func TestWake_WithoutWakeups(t *testing.T) {
	s := reopen(t, newTestStore(t), WithoutWakeups())
	sub := s.Subscribe(store.CatalogTopic())
	defer sub.Close()
	if _, err := s.CatalogHistoryAppend(t.Context(), store.CatalogChange{ServerID: "files", Change: "added"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.C():
		t.Fatal("woken without wake-ups")
	case <-sub.Ready():
		t.Fatal("ready without wake-ups")
	default:
	}
	if s.WakeFallback() != 0 || s.wake.Load() != nil {
		t.Fatal("a listener without wake-ups")
	}
}

// TestWake_RegistrationsFollowSubscriptions: a hot topic is registered while it has
// subscriptions, and a closing store drops its registrations.
func TestWake_RegistrationsFollowSubscriptions(t *testing.T) {
	s := newTestStore(t)
	other := reopen(t, s)
	registered := func() int {
		t.Helper()
		var n int
		if err := s.pool.QueryRow(t.Context(), `SELECT count(*) FROM wake_interest WHERE expires_at > now()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	a := other.Subscribe(store.EventsTopic("acme"))
	b := other.Subscribe(store.EventsTopic("acme")) // the same topic: one registration
	c := other.Subscribe(store.CallTopic("acme", "k1"))
	d := other.Subscribe(store.ApprovalTopic("acme", "k1")) // always notified: none
	for _, sub := range []*store.Subscription{a, b, c, d} {
		waitReady(t, sub)
	}
	if n := registered(); n != 2 {
		t.Errorf("%d registrations for two hot topics", n)
	}
	for _, sub := range []*store.Subscription{a, b, c, d} {
		sub.Close()
	}
	other.Close()
	if n := registered(); n != 0 {
		t.Errorf("%d registrations after the store closed", n)
	}
}
