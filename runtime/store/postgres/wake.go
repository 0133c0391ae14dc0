package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgen/toolgen/runtime/store"
)

// Wake-ups (store.Waker) through LISTEN/NOTIFY. The notifications are sent by the
// triggers of migration 010 in the transaction of each write, so every writer —
// another replica, toolrun approve, an older binary, psql — wakes the waiters. One
// listener connection per Store, opened at the first Subscribe (a store nobody waits
// on never opens it), fans them out to the in-process subscriptions through a
// store.Hub.
//
// The listener's connection is its own (not the pool's): it LISTENs on the schema's
// channel, registers the hot topics its subscriptions wait for (wake_interest), and
// otherwise waits for notifications. Every wakeRefresh it refreshes the registrations,
// which is also its check that the connection is alive (a statement bounded by
// wakeStatementTimeout). When the connection fails — the server restarted, the
// backend was terminated, the network dropped — the hub goes down (every waiter is
// woken once and then reads at its own interval: WakeFallback is 0), the listener
// reconnects with a jittered backoff (wakeBackoffMin doubling to wakeBackoffMax),
// LISTENs, registers, and the hub comes up again, waking every waiter to read what it
// may have missed. A notification lost to a dropped connection therefore costs the
// reconnection, at most; the fallback interval only covers what the listener cannot
// see (a connection that died without an error, until its next refresh).

// DefaultWakeFallback is how long a waiter goes without a wake-up before it reads the
// store anyway while the listener is up (see WithWakeFallback): 25 times fewer reads
// than the 200 ms polling it replaces.
const DefaultWakeFallback = 5 * time.Second

const (
	wakeRefresh          = 10 * time.Second // registration refresh and liveness check
	wakeInterestTTL      = time.Minute      // a registration not refreshed for this long is ignored
	wakeStatementTimeout = 10 * time.Second
	wakeBackoffMin       = 50 * time.Millisecond
	wakeBackoffMax       = 5 * time.Second
	// wakeApplicationName names the listener's backend in pg_stat_activity.
	wakeApplicationName = "toolgen-wake"
)

// WithWakeFallback sets how long a waiter goes without a wake-up before it reads the
// store anyway while the listener is up (default DefaultWakeFallback). While it is
// down, waiters read at their own interval.
func WithWakeFallback(d time.Duration) Option {
	return func(o *options) { o.wakeFallback = d }
}

// WithoutWakeups turns the listener off: the store still implements store.Waker, but
// its subscriptions never wake and WakeFallback is 0, so waiters poll as they did
// before migration 010 (for a connection pooler in transaction mode, which cannot
// carry LISTEN). Writers still notify; that costs nothing while nobody registers.
func WithoutWakeups() Option {
	return func(o *options) { o.noWakeups = true }
}

var _ store.Waker = (*Store)(nil)

// Subscribe is store.Waker's. The first call starts the listener.
func (s *Store) Subscribe(t store.Topic) *store.Subscription {
	l := s.listener()
	if l == nil {
		return store.WakerOf(nil).Subscribe(t)
	}
	return l.hub.Subscribe(t)
}

// WakeFallback is store.Waker's: the fallback interval while the listener is up, 0
// otherwise (and before anything subscribed).
func (s *Store) WakeFallback() time.Duration {
	if l := s.wake.Load(); l != nil && l.hub.Up() {
		return s.wakeFallback
	}
	return 0
}

// WakeStats counts what the listener of a Store did since Open.
type WakeStats struct {
	Connects      int64 // connections that reached LISTEN
	Failures      int64 // connections lost or refused
	Statements    int64 // statements run on the listener's connection (LISTEN, registrations, refreshes)
	Notifications int64 // notifications received
	// BackendPID is the process id (pg_stat_activity.pid) of the listener's current
	// connection; 0 before it connected. Its application_name is toolgen-wake.
	BackendPID uint32
}

// WakeStats reports the listener's counts (zero before the first Subscribe).
func (s *Store) WakeStats() WakeStats {
	l := s.wake.Load()
	if l == nil {
		return WakeStats{}
	}
	return WakeStats{Connects: l.connects.Load(), Failures: l.failures.Load(),
		Statements: l.statements.Load(), Notifications: l.notifications.Load(), BackendPID: l.backendPID()}
}

// listener returns the store's listener, starting it on first use; nil with
// WithoutWakeups or after Close.
func (s *Store) listener() *listener {
	if s.noWakeups {
		return nil
	}
	s.wakeOnce.Do(func() {
		if s.closed.Load() {
			return
		}
		l := newListener(s.connConfig, s.wakeHooks)
		s.wake.Store(l)
		go l.run()
	})
	return s.wake.Load()
}

// stopListener ends the listener (Close).
func (s *Store) stopListener() {
	s.closed.Store(true)
	s.wakeOnce.Do(func() {}) // no listener may start after Close
	if l := s.wake.Load(); l != nil {
		l.cancel()
		<-l.done
	}
}

// wakeHooks let tests hold the listener between its connections.
type wakeHooks struct {
	// beforeConnect runs before each connection attempt but the first; an error ends
	// the listener.
	beforeConnect func(ctx context.Context) error
}

type listener struct {
	cfg   *pgx.ConnConfig
	hub   *store.Hub
	id    string // this listener's name in wake_interest
	hooks *wakeHooks

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	kick   chan struct{} // room for one: the gated topics grew

	mu         sync.Mutex
	cancelWait context.CancelFunc // interrupts the current wait for a notification
	pid        uint32             // the backend of the current connection

	connects, failures, statements, notifications atomic.Int64
}

func newListener(cfg *pgx.ConnConfig, hooks *wakeHooks) *listener {
	cfg = cfg.Copy()
	cfg.RuntimeParams["application_name"] = wakeApplicationName
	b := make([]byte, 8)
	rand.Read(b)
	l := &listener{cfg: cfg, id: hex.EncodeToString(b), hooks: hooks, done: make(chan struct{}), kick: make(chan struct{}, 1)}
	if l.hooks == nil {
		l.hooks = &wakeHooks{}
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.hub = store.NewHub(gatedTopic, l.topicsGrew)
	return l
}

// gatedTopic: the hot topics (a tenant's events, a call's status) notify only while
// registered (migration 010).
func gatedTopic(wire string) bool {
	return wire != "" && (wire[0] == 'e' || wire[0] == 'k')
}

// topicsGrew asks the listener to register the new topics now.
func (l *listener) topicsGrew() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
	l.mu.Lock()
	if l.cancelWait != nil {
		l.cancelWait()
	}
	l.mu.Unlock()
}

func (l *listener) run() {
	defer close(l.done)
	backoff := wakeBackoffMin
	for attempt := 0; ; attempt++ {
		if attempt > 0 && l.hooks.beforeConnect != nil {
			if err := l.hooks.beforeConnect(l.ctx); err != nil {
				return
			}
		}
		wasUp, _ := l.session()
		l.hub.SetDown()
		if l.ctx.Err() != nil {
			return
		}
		l.failures.Add(1)
		if wasUp {
			backoff = wakeBackoffMin
		}
		wait := backoff/2 + time.Duration(mrand.Int64N(int64(backoff)))
		t := time.NewTimer(wait)
		select {
		case <-l.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, wakeBackoffMax)
	}
}

// session serves one connection until it fails (or the listener stops): connect,
// LISTEN, register, then wait for notifications, re-registering when the topics grow
// and every wakeRefresh. wasUp reports whether the hub came up on it.
func (l *listener) session() (wasUp bool, err error) {
	ctx, cancel := context.WithTimeout(l.ctx, wakeStatementTimeout)
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	cancel()
	if err != nil {
		return false, err
	}
	defer func() {
		if l.ctx.Err() != nil && !conn.IsClosed() {
			// The store is closing: drop this listener's registrations now rather than
			// let writers notify them until they expire.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			conn.Exec(ctx, wakeUnregisterSQL, l.id)
			cancel()
		}
		conn.Close(context.Background())
	}()
	l.mu.Lock()
	l.pid = conn.PgConn().PID()
	l.mu.Unlock()

	var channel string
	if err := l.statement(func(ctx context.Context) error {
		return conn.QueryRow(ctx, wakeChannelSQL).Scan(&channel)
	}); err != nil {
		return false, err
	}
	if err := l.statement(func(ctx context.Context) error {
		_, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize())
		return err
	}); err != nil {
		return false, err
	}
	// Drain a kick that came before this registration: it registers every topic.
	select {
	case <-l.kick:
	default:
	}
	registered, err := l.register(conn)
	if err != nil {
		return false, err
	}
	l.connects.Add(1)
	l.hub.SetUp(registered)
	refreshed := time.Now()
	for {
		if time.Since(refreshed) >= wakeRefresh {
			registered, err := l.register(conn)
			if err != nil {
				return true, err
			}
			l.hub.Registered(registered)
			refreshed = time.Now()
		}
		wctx, wcancel := context.WithDeadline(l.ctx, refreshed.Add(wakeRefresh))
		l.setCancelWait(wcancel)
		// A kick sent before cancelWait was set is waiting in the channel; one sent
		// after it interrupts the wait below.
		select {
		case <-l.kick:
			l.setCancelWait(nil)
			wcancel()
			registered, err := l.register(conn)
			if err != nil {
				return true, err
			}
			l.hub.Registered(registered)
			refreshed = time.Now()
			continue
		default:
		}
		n, err := conn.WaitForNotification(wctx)
		interrupted := wctx.Err() != nil
		l.setCancelWait(nil)
		wcancel()
		switch {
		case err == nil:
			l.notifications.Add(1)
			l.hub.Notify(n.Payload)
		case l.ctx.Err() != nil:
			return true, l.ctx.Err()
		case conn.IsClosed() || !interrupted:
			return true, err
		default:
			// the refresh is due or the topics grew; the connection is intact (pgx
			// interrupts a wait with a read deadline and keeps the connection)
		}
	}
}

func (l *listener) setCancelWait(cancel context.CancelFunc) {
	l.mu.Lock()
	l.cancelWait = cancel
	l.mu.Unlock()
}

// statement runs one statement on the listener's connection, bounded by
// wakeStatementTimeout: a connection that stopped answering is a failed one.
func (l *listener) statement(fn func(ctx context.Context) error) error {
	l.statements.Add(1)
	ctx, cancel := context.WithTimeout(l.ctx, wakeStatementTimeout)
	defer cancel()
	return fn(ctx)
}

// register makes wake_interest hold exactly the hub's gated topics for this listener
// (refreshing their expiry) and drops every expired registration; it returns the
// topics it registered.
func (l *listener) register(conn *pgx.Conn) ([]string, error) {
	topics := l.hub.Gated()
	if topics == nil {
		topics = []string{}
	}
	err := l.statement(func(ctx context.Context) error {
		_, err := conn.Exec(ctx, wakeRegisterSQL, l.id, topics, wakeInterestTTL.Microseconds())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: registering wake-up topics: %w", err)
	}
	return topics, nil
}

// backendPID is the listener's current backend (tests terminate it).
func (l *listener) backendPID() uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pid
}

var (
	wakeChannelSQL    = queries.Get("WakeChannel")
	wakeRegisterSQL   = queries.Get("WakeRegister")
	wakeUnregisterSQL = queries.Get("WakeUnregister")
)
