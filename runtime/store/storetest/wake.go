package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// Wake-ups (store.Waker, issue 16 point 4): a driver that implements the role wakes a
// subscription after each commit of its topic's writes — of this handle's writes
// always, of other handles' (processes') when it says so (WakeFallback > 0) — and not
// after writes of other topics. A driver that does not implement it skips these.
//
// No case waits for time to pass: "not woken" is checked after a later write of a
// barrier topic has woken its own subscription. Wake-ups reach subscriptions in
// commit order (PostgreSQL delivers notifications in commit order on the listener's
// one connection, which dispatches them one by one; SQLite wakes in the writer's
// goroutine before the write returns), so a wake-up the earlier write caused would
// already have arrived.

var wakeTests = []struct {
	name string
	fn   func(t *testing.T, e *env)
}{
	{"Wake_Approval_OnlyItsKey", testWakeApprovalOnlyItsKey},
	{"Wake_Call_StatusChangesOfItsKey", testWakeCallStatusChanges},
	{"Wake_Events_TenantScoped", testWakeEventsTenantScoped},
	{"Wake_Catalog_AppendWakes", testWakeCatalog},
	{"Wake_OtherHandle_WakesWhenCrossProcess", testWakeOtherHandle},
	{"Wake_Close_StopsWakeups", testWakeCloseStops},
	{"Wake_Topics_WireNames", testWakeTopicWireNames},
}

func init() { tests = append(tests, wakeTests...) }

// waker is e.s's Waker, or skips t.
func (e *env) waker(t *testing.T) store.Waker {
	t.Helper()
	w, ok := e.s.(store.Waker)
	if !ok {
		t.Skip("the driver implements no store.Waker: its waiters poll")
	}
	return w
}

// subscribe subscribes to topic and waits until the subscription is ready, then
// drops the wake-up that readiness may have sent.
func subscribe(t *testing.T, w store.Waker, topic store.Topic) *store.Subscription {
	t.Helper()
	sub := w.Subscribe(topic)
	t.Cleanup(sub.Close)
	select {
	case <-sub.Ready():
	case <-time.After(pollTimeout):
		t.Fatalf("subscription to %v not ready after %v", topic, pollTimeout)
	}
	drain(sub)
	return sub
}

func drain(sub *store.Subscription) {
	select {
	case <-sub.C():
	default:
	}
}

// woken waits for sub's wake-up (pollTimeout at most: a missing wake-up fails).
func woken(t *testing.T, sub *store.Subscription, what string) {
	t.Helper()
	select {
	case <-sub.C():
	case <-time.After(pollTimeout):
		t.Fatalf("%s: no wake-up within %v", what, pollTimeout)
	}
}

// notWoken checks that sub has no wake-up waiting (call it after a barrier).
func notWoken(t *testing.T, sub *store.Subscription, what string) {
	t.Helper()
	select {
	case <-sub.C():
		t.Fatalf("%s: woken", what)
	default:
	}
}

// barrier appends a catalog change and waits for its wake-up: every wake-up of an
// earlier commit has been delivered by then.
func (e *env) barrier(t *testing.T, catalog *store.Subscription) {
	t.Helper()
	_, err := e.s.CatalogHistoryAppend(e.ctx, store.CatalogChange{ServerID: "barrier", Tool: "x", Change: "added"})
	noErr(t, "barrier", err)
	woken(t, catalog, "the barrier's catalog change")
}

func held(tenant string) func(*row) {
	return func(p *row) { p.Tenant, p.Decision = tenant, store.DecisionNeedsApproval }
}

// testWakeApprovalOnlyItsKey: a decision wakes the waiters of its call's key, and
// those only.
func testWakeApprovalOnlyItsKey(t *testing.T, e *env) {
	w := e.waker(t)
	k1, k2 := e.insert(t, held("tenant-a")), e.insert(t, held("tenant-a"))
	other := e.insert(t, held("tenant-b"))
	sub1 := subscribe(t, w, store.ApprovalTopic("tenant-a", k1.Key))
	sub2 := subscribe(t, w, store.ApprovalTopic("tenant-a", k2.Key))
	// the same key under another tenant is another topic
	subWrongTenant := subscribe(t, w, store.ApprovalTopic("tenant-b", k1.Key))
	subOther := subscribe(t, w, store.ApprovalTopic("tenant-b", other.Key))
	catalog := subscribe(t, w, store.CatalogTopic())

	noErr(t, "decide k1", e.s.ApprovalDecide(e.ctx, store.Approval{Key: k1.Key, Tenant: "tenant-a", Approved: true, DecidedBy: "bob"}, nil))
	woken(t, sub1, "k1's waiter after k1's decision")
	e.barrier(t, catalog)
	notWoken(t, sub2, "k2's waiter after k1's decision")
	notWoken(t, subWrongTenant, "another tenant's waiter of the same key")
	notWoken(t, subOther, "another tenant's waiter")

	// A refused decision (decided twice) commits nothing and wakes nobody.
	wantErr(t, "decide k1 again", e.s.ApprovalDecide(e.ctx, store.Approval{Key: k1.Key, Tenant: "tenant-a", Approved: false, DecidedBy: "bob"}, nil), store.ErrConflict)
	e.barrier(t, catalog)
	notWoken(t, sub1, "k1's waiter after a refused decision")

	noErr(t, "decide other", e.s.ApprovalDecide(e.ctx, store.Approval{Key: other.Key, Tenant: "tenant-b", Approved: false, DecidedBy: "carol"}, nil))
	woken(t, subOther, "the other tenant's waiter after its decision")
	e.barrier(t, catalog)
	notWoken(t, sub1, "k1's waiter after another tenant's decision")
	notWoken(t, sub2, "k2's waiter after another tenant's decision")
}

// testWakeCallStatusChanges: a call's waiters are woken by each status change of its
// row (claim, settle), not by another call's.
func testWakeCallStatusChanges(t *testing.T, e *env) {
	w := e.waker(t)
	inv := e.insert(t, held("tenant-a"))
	bystander := e.insert(t, held("tenant-a"))
	sub := subscribe(t, w, store.CallTopic("tenant-a", inv.Key))
	subBystander := subscribe(t, w, store.CallTopic("tenant-a", bystander.Key))
	catalog := subscribe(t, w, store.CatalogTopic())

	claimed, err := e.s.InvocationClaimIfPending(e.ctx, inv.ID, "w", longLease)
	noErr(t, "claim", err)
	woken(t, sub, "the call's waiter after its claim")
	noErr(t, "settle", e.s.InvocationSettleIfLeased(e.ctx, claimed.Fence(), settled(store.StatusSucceeded, `{"ok":true}`)))
	woken(t, sub, "the call's waiter after its settlement")
	e.barrier(t, catalog)
	notWoken(t, subBystander, "another call's waiter")

	// A fenced write that matched nothing (a zombie's settle) commits nothing.
	wantErr(t, "zombie settle", e.s.InvocationSettleIfLeased(e.ctx, store.Fence{ID: bystander.ID, Owner: "zombie", Attempt: 1},
		settled(store.StatusFailed, `{}`)), store.ErrLeaseLost)
	e.barrier(t, catalog)
	notWoken(t, subBystander, "a call's waiter after a write that matched nothing")
}

// testWakeEventsTenantScoped: a tenant's events wake its streams and the streams of
// every tenant, never another tenant's.
func testWakeEventsTenantScoped(t *testing.T, e *env) {
	w := e.waker(t)
	subA := subscribe(t, w, store.EventsTopic("tenant-a"))
	subB := subscribe(t, w, store.EventsTopic("tenant-b"))
	subAll := subscribe(t, w, store.EventsTopic(""))
	catalog := subscribe(t, w, store.CatalogTopic())

	// a call's milestone (written by the store with the row)
	inv := e.insert(t, held("tenant-a"))
	woken(t, subA, "tenant-a's stream after its call was recorded")
	woken(t, subAll, "the all-tenants stream after tenant-a's call was recorded")
	e.barrier(t, catalog)
	drain(subAll) // the barrier's catalog_drift event is every tenant's
	notWoken(t, subB, "tenant-b's stream after tenant-a's call")

	// an event no row reports
	_, err := e.s.EventAppend(e.ctx, store.Event{Kind: "device_connected", Tenant: "tenant-b", Server: "dev-1"})
	noErr(t, "EventAppend", err)
	woken(t, subB, "tenant-b's stream after its appended event")
	woken(t, subAll, "the all-tenants stream after tenant-b's appended event")
	e.barrier(t, catalog)
	drain(subAll)
	notWoken(t, subA, "tenant-a's stream after tenant-b's event")

	// a renewal crosses no milestone and writes no event
	claimed, err := e.s.InvocationClaimIfPending(e.ctx, inv.ID, "w", longLease)
	noErr(t, "claim", err)
	woken(t, subA, "tenant-a's stream after the claim (started)")
	n, err := e.s.InvocationRenewLeases(e.ctx, "w", []int64{claimed.ID}, longLease)
	noErr(t, "renew", err)
	if n != 1 {
		t.Fatalf("renewed %d rows, want 1", n)
	}
	e.barrier(t, catalog)
	notWoken(t, subA, "tenant-a's stream after a lease renewal")

	// a catalog change's drift event belongs to no tenant: the all-tenants stream only
	drain(subAll)
	e.barrier(t, catalog)
	woken(t, subAll, "the all-tenants stream after a catalog change")
	notWoken(t, subA, "tenant-a's stream after a catalog change")
}

// testWakeCatalog: a catalog change wakes the catalog's waiters; other writes do not.
func testWakeCatalog(t *testing.T, e *env) {
	w := e.waker(t)
	catalog := subscribe(t, w, store.CatalogTopic())
	inv := e.insert(t, held("tenant-a"))
	approval := subscribe(t, w, store.ApprovalTopic("tenant-a", inv.Key))
	noErr(t, "decide", e.s.ApprovalDecide(e.ctx, store.Approval{Key: inv.Key, Tenant: "tenant-a", Approved: true, DecidedBy: "bob"}, nil))
	woken(t, approval, "the approval's waiter (the barrier)")
	notWoken(t, catalog, "the catalog's waiter after a call and a decision")
	_, err := e.s.CatalogHistoryAppend(e.ctx, store.CatalogChange{ServerID: "files", Tool: "mcp.files.read", Change: "forced_epoch"})
	noErr(t, "append", err)
	woken(t, catalog, "the catalog's waiter after a catalog change")
}

// testWakeOtherHandle: a driver that delivers other processes' wake-ups (WakeFallback
// > 0 once ready) wakes this handle's waiters after another handle's commits.
func testWakeOtherHandle(t *testing.T, e *env) {
	w := e.waker(t)
	if e.other == e.s {
		t.Skip("the suite has no second handle (WithReopen)")
	}
	inv := e.insert(t, held("tenant-a"))
	approval := subscribe(t, w, store.ApprovalTopic("tenant-a", inv.Key))
	events := subscribe(t, w, store.EventsTopic("tenant-a"))
	catalog := subscribe(t, w, store.CatalogTopic())
	if w.WakeFallback() <= 0 {
		t.Skip("the driver wakes only its own handle's waiters (WakeFallback 0): other processes' writes are found by polling")
	}
	noErr(t, "decide through the other handle", e.other.ApprovalDecide(e.ctx,
		store.Approval{Key: inv.Key, Tenant: "tenant-a", Approved: true, DecidedBy: "bob"}, nil))
	woken(t, approval, "the waiter after another handle's decision")
	_, err := e.other.EventAppend(e.ctx, store.Event{Kind: "device_connected", Tenant: "tenant-a", Server: "dev-1"})
	noErr(t, "EventAppend through the other handle", err)
	woken(t, events, "the stream after another handle's event")
	_, err = e.other.CatalogHistoryAppend(e.ctx, store.CatalogChange{ServerID: "files", Change: "forced_epoch"})
	noErr(t, "append through the other handle", err)
	woken(t, catalog, "the catalog's waiter after another handle's change")
}

// testWakeCloseStops: a closed subscription is never woken; another of the same topic
// still is.
func testWakeCloseStops(t *testing.T, e *env) {
	w := e.waker(t)
	inv := e.insert(t, held("tenant-a"))
	closed := subscribe(t, w, store.ApprovalTopic("tenant-a", inv.Key))
	open := subscribe(t, w, store.ApprovalTopic("tenant-a", inv.Key))
	closed.Close()
	closed.Close() // twice is fine
	noErr(t, "decide", e.s.ApprovalDecide(e.ctx, store.Approval{Key: inv.Key, Tenant: "tenant-a", Approved: true, DecidedBy: "bob"}, nil))
	woken(t, open, "the open subscription")
	notWoken(t, closed, "the closed subscription")
}

// testWakeTopicWireNames: topics are told apart by tenant, key and kind on the wire,
// and carry neither in clear.
func testWakeTopicWireNames(t *testing.T, e *env) {
	topics := []store.Topic{
		store.ApprovalTopic("t", "k"), store.ApprovalTopic("t", "k2"), store.ApprovalTopic("t2", "k"),
		store.ApprovalTopic("tk", ""), store.CallTopic("t", "k"), store.EventsTopic("t"), store.EventsTopic("t2"),
		store.EventsTopic(""), store.CatalogTopic(),
	}
	seen := map[string]store.Topic{}
	for _, tp := range topics {
		wire := tp.Wire()
		if prev, dup := seen[wire]; dup {
			t.Errorf("%v and %v share the wire name %q", prev, tp, wire)
		}
		seen[wire] = tp
		if len(wire) > 33 {
			t.Errorf("%v: wire name %q longer than a kind byte and 32 hex digits", tp, wire)
		}
	}
	if got := store.EventsTopic("").Wire(); got != store.WireEventsAll {
		t.Errorf("EventsTopic(\"\").Wire() = %q, want %q", got, store.WireEventsAll)
	}
	// what migration 010 computes in SQL, with the tenant's length in characters
	if got, want := store.ApprovalTopic("tenant-ä", "k1").Wire(), "a"+sha256hex("8:tenant-äk1")[:32]; got != want {
		t.Errorf("ApprovalTopic wire = %q, want %q", got, want)
	}
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
