package store

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// Wake-ups (issue 16, point 4). A waiter — an approval hold, a stream of events, a
// host watching the catalog history — used to read the store at a fixed interval. A
// store that implements the role [Waker] tells it instead when a write it waits for
// has committed, and the waiter reads the store then; the interval read stays, as the
// fallback ([WaitInterval]), for whatever a wake-up can miss. A store that does not
// implement it (a wrapper, a test double) leaves its waiters polling, exactly as
// before: [WakerOf] gives them a Waker that never wakes.
//
// The shape is River's (riverdriver's Listener and the notifier's subscriptions): a
// small role interface a consumer asks the store for, topics, and one fan-out in each
// process (a [Hub]) rather than a database connection per waiter.

// TopicKind is the kind of write a [Topic] waits for.
type TopicKind uint8

const (
	// TopicApproval: a decision (approval or denial) on one held call
	// (Reviews.ApprovalDecide).
	TopicApproval TopicKind = iota + 1
	// TopicCall: one call's row changed status (claimed, settled, released,
	// resolved, ...).
	TopicCall
	// TopicEvents: an event of one tenant was appended (a call's milestone,
	// Events.EventAppend, a catalog change's catalog_drift), or of any tenant.
	TopicEvents
	// TopicCatalog: a catalog change was appended (CatalogHistory.CatalogHistoryAppend: drift,
	// forced epochs).
	TopicCatalog
)

// Topic is what a waiter waits for: a kind of write narrowed to a tenant and, for a
// call, to its idempotency key. Build one with [ApprovalTopic], [CallTopic],
// [EventsTopic] or [CatalogTopic].
//
// On the wire (a PostgreSQL notification's payload, a Hub's routing) a topic is its
// [Topic.Wire] name: the kind and a hash of the tenant and key, never the ids
// themselves, so a notification names no tenant, session or call to whoever else
// listens on the database, and a waiter is woken only by its own topic's writes.
type Topic struct {
	Kind   TopicKind
	Tenant string
	Key    string
	// all: TopicEvents of every tenant (an unfiltered stream).
	all bool
}

// ApprovalTopic is the decision on the held call key of tenant.
func ApprovalTopic(tenant, key string) Topic {
	return Topic{Kind: TopicApproval, Tenant: tenant, Key: key}
}

// CallTopic is the status of the call key of tenant.
func CallTopic(tenant, key string) Topic { return Topic{Kind: TopicCall, Tenant: tenant, Key: key} }

// EventsTopic is the events of tenant; "" is the events of every tenant (a stream
// without a tenant filter reads them all, including those no tenant owns).
func EventsTopic(tenant string) Topic {
	return Topic{Kind: TopicEvents, Tenant: tenant, all: tenant == ""}
}

// CatalogTopic is the catalog history (every server's).
func CatalogTopic() Topic { return Topic{Kind: TopicCatalog} }

// Wire-name prefixes: one byte per kind.
const (
	wireApproval = 'a'
	wireCall     = 'k'
	wireEvents   = 'e'
	wireCatalog  = 'c'
	// WireEventsAll is the wire name of EventsTopic(""): a notification of any
	// tenant's events also wakes its waiters.
	WireEventsAll = "e*"
)

// Wire is t's name in notifications: a kind byte, then the first 32 lowercase hex
// digits of the SHA-256 of "<characters in tenant>:<tenant><key>" (what PostgreSQL
// computes as left(encode(sha256(convert_to(length(tenant) || ':' || tenant || key,
// 'UTF8')), 'hex'), 32)); "c" for the catalog and WireEventsAll for every tenant's
// events. The hash is for routing, not secrecy: two
// topics that collide only wake each other's waiters, which read the store and find
// nothing new.
func (t Topic) Wire() string {
	switch t.Kind {
	case TopicCatalog:
		return string(rune(wireCatalog))
	case TopicEvents:
		if t.all {
			return WireEventsAll
		}
		return string(rune(wireEvents)) + wireHash(t.Tenant, "")
	case TopicApproval:
		return string(rune(wireApproval)) + wireHash(t.Tenant, t.Key)
	case TopicCall:
		return string(rune(wireCall)) + wireHash(t.Tenant, t.Key)
	}
	return ""
}

func wireHash(tenant, key string) string {
	sum := sha256.Sum256([]byte(strconv.Itoa(utf8.RuneCountInString(tenant)) + ":" + tenant + key))
	return hex.EncodeToString(sum[:16])
}

// Waker is the role of a store that wakes waiters when a write they wait for commits.
// Ask for it with [WakerOf].
//
// The contract (storetest checks it on every driver that implements it):
//
//   - A subscription's C receives after each commit of a write of its topic that
//     commits once the subscription is ready (Ready closed): a write through this
//     handle always; a write by another handle or process when the driver carries
//     wake-ups across processes (PostgreSQL's LISTEN/NOTIFY; SQLite only wakes its own
//     handle's waiters, and other processes' writes are found by the fallback read).
//   - Values coalesce (C has room for one) and may be spurious: a woken waiter reads
//     the store and decides. A write of another topic does not wake it (up to hash
//     collisions), so a waiter is never woken by another tenant's writes.
//   - When the store cannot vouch that it delivered every wake-up since a
//     subscription began — its notification channel was lost, or came (back) up —
//     every subscription receives, so its waiter reads again: a wake-up lost to a
//     dropped connection costs a reconnection, not a fallback interval.
//   - Subscribe never blocks on the database and never fails; a subscription that is
//     not ready yet is woken when it becomes ready.
type Waker interface {
	// Subscribe starts delivering t's wake-ups to the returned subscription. Close it
	// when done.
	Subscribe(t Topic) *Subscription
	// WakeFallback is how long a waiter may now go without a wake-up before it reads
	// the store anyway: long (seconds) while wake-ups of every process's writes are
	// being delivered, 0 when they are not (the listener is down, or the driver only
	// wakes its own handle's waiters) — then the waiter reads at its own interval.
	// See WaitInterval.
	WakeFallback() time.Duration
}

// WakerOf returns st's Waker — st's own, or that of the store it wraps (a wrapper
// with an Unwrap() Store method, as faultstore and storetest's CountingStore have) —
// or a Waker whose subscriptions never wake and whose fallback is 0, so its waiters
// poll as before.
func WakerOf(st any) Waker {
	for range 16 { // wrappers of wrappers, bounded
		if w, ok := st.(Waker); ok {
			return w
		}
		u, ok := st.(interface{ Unwrap() Store })
		if !ok {
			break
		}
		st = u.Unwrap()
	}
	return nopWaker{}
}

type nopWaker struct{}

func (nopWaker) Subscribe(Topic) *Subscription { return &Subscription{ready: make(chan struct{})} }
func (nopWaker) WakeFallback() time.Duration   { return 0 }

// WaitInterval is how long a waiter of w whose own polling interval is poll waits
// before it reads the store without a wake-up: poll when w delivers no wake-ups of
// other processes now (WakeFallback 0), else w's fallback (at least poll), spread by
// ±10 % so that many waiters woken together (after a reconnection) do not all read
// again at the same instant.
func WaitInterval(w Waker, poll time.Duration) time.Duration {
	f := w.WakeFallback()
	if f <= 0 {
		return poll
	}
	f = max(f, poll)
	return f - f/10 + time.Duration(rand.Int64N(int64(f/5)+1))
}

// Subscription receives the wake-ups of one topic (see Waker). The zero value never
// wakes.
type Subscription struct {
	hub   *Hub
	wire  string
	c     chan struct{}
	ready chan struct{}

	// guarded by hub.mu
	isReady, closed bool
}

// C receives a value when the subscription's topic may have a new write (coalesced:
// one value stands for any number of wake-ups since the last receive).
func (s *Subscription) C() <-chan struct{} { return s.c }

// Ready is closed once every commit of the topic wakes the subscription (see Waker):
// at once on a store that wakes its own waiters in-process, once the listener
// listens (and has registered the topic) on PostgreSQL. It stays closed if the
// listener later loses its connection (every subscription is woken then instead).
// Waiters need not wait for it — they are woken when it closes — but tests that
// count wake-ups do.
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// Close stops the subscription's wake-ups. It may be called more than once.
func (s *Subscription) Close() {
	if s.hub != nil {
		s.hub.remove(s)
	}
}

func (s *Subscription) wake() {
	select {
	case s.c <- struct{}{}:
	default: // a wake-up is already waiting
	}
}

// Hub fans the wake-ups a driver receives out to the subscriptions of one store
// handle, by wire name: one listener per store, however many waiters. Drivers build
// their Waker on it; consumers never see it.
//
// A Hub starts down: its subscriptions are not ready until the driver calls SetUp. A
// gated topic (see NewHub) is ready only once the driver has also told the Hub it is
// registered (Registered).
type Hub struct {
	mu    sync.Mutex
	up    bool
	gated func(wire string) bool
	live  map[string]bool // gated topics registered by the driver
	subs  map[string]map[*Subscription]struct{}
	grew  func() // called when a gated topic gets its first subscription
}

// NewHub returns a hub. gated, when not nil, says which wire names need registering
// with the database before their writes notify (PostgreSQL notifies a topic whose
// writes are hot only while someone waits for it); grew, when not nil, is called
// (without the hub's lock held) when such a topic gets its first subscription, so the
// driver registers it.
func NewHub(gated func(wire string) bool, grew func()) *Hub {
	return &Hub{gated: gated, grew: grew, live: map[string]bool{}, subs: map[string]map[*Subscription]struct{}{}}
}

// Subscribe adds a subscription to t's wake-ups.
func (h *Hub) Subscribe(t Topic) *Subscription {
	s := &Subscription{hub: h, wire: t.Wire(), c: make(chan struct{}, 1), ready: make(chan struct{})}
	h.mu.Lock()
	set := h.subs[s.wire]
	if set == nil {
		set = map[*Subscription]struct{}{}
		h.subs[s.wire] = set
	}
	set[s] = struct{}{}
	needs := h.isGated(s.wire) && !h.live[s.wire]
	if h.up && !needs {
		h.makeReady(s)
	}
	grew := needs && len(set) == 1
	h.mu.Unlock()
	if grew && h.grew != nil {
		h.grew()
	}
	return s
}

func (h *Hub) isGated(wire string) bool { return h.gated != nil && h.gated(wire) }

func (h *Hub) makeReady(s *Subscription) {
	if !s.isReady {
		s.isReady = true
		close(s.ready)
	}
}

func (h *Hub) remove(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	set := h.subs[s.wire]
	delete(set, s)
	if len(set) == 0 {
		delete(h.subs, s.wire)
		delete(h.live, s.wire)
	}
}

// Notify wakes the subscriptions of wire (and, for a tenant's events, those of every
// tenant's events).
func (h *Hub) Notify(wire string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[wire] {
		s.wake()
	}
	if len(wire) > 0 && wire[0] == wireEvents && wire != WireEventsAll {
		for s := range h.subs[WireEventsAll] {
			s.wake()
		}
	}
}

// NotifyTopics wakes the subscriptions of each topic (a driver's in-process wake-up
// after its own commit).
func (h *Hub) NotifyTopics(ts ...Topic) {
	for _, t := range ts {
		h.Notify(t.Wire())
	}
}

// Gated returns the gated wire names that have subscriptions: what the driver must
// keep registered.
func (h *Hub) Gated() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for wire := range h.subs {
		if h.isGated(wire) {
			out = append(out, wire)
		}
	}
	return out
}

// Registered records that the gated wire names are registered now (their writes
// notify): their subscriptions are woken, to read what was written before, and
// become ready — in that order, so that a waiter that has seen Ready closed has the
// wake-up waiting already and can drop it (else it could arrive later and pass for a
// commit's). Names that lost their last subscription meanwhile are ignored.
func (h *Hub) Registered(wires []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, wire := range wires {
		set, ok := h.subs[wire]
		if !ok || h.live[wire] {
			continue
		}
		h.live[wire] = true
		if !h.up {
			continue
		}
		for s := range set {
			s.wake() // before Ready closes: whoever sees it closed sees the wake-up too
			h.makeReady(s)
		}
	}
}

// SetUp records that wake-ups are delivered now, with the gated wire names
// registered: every subscription that can be is made ready, and every subscription
// is woken, since anything written while the hub was down was not delivered.
func (h *Hub) SetUp(registered []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.up = true
	clear(h.live)
	for _, wire := range registered {
		if _, ok := h.subs[wire]; ok {
			h.live[wire] = true
		}
	}
	for wire, set := range h.subs {
		ready := !h.isGated(wire) || h.live[wire]
		for s := range set {
			s.wake() // before Ready closes, as in Registered
			if ready {
				h.makeReady(s)
			}
		}
	}
}

// SetDown records that wake-ups are not delivered (the listener's connection was
// lost): every subscription is woken, so its waiter reads once more and then waits
// only its own polling interval (WakeFallback is 0 while down).
func (h *Hub) SetDown() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.up {
		return
	}
	h.up = false
	clear(h.live)
	for _, set := range h.subs {
		for s := range set {
			s.wake()
		}
	}
}

// Up reports whether wake-ups are delivered now.
func (h *Hub) Up() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.up
}
