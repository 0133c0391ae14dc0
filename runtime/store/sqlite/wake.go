package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// Wake-ups on SQLite are in-process only (store.Waker): a commit through this handle
// wakes this handle's subscriptions of its topics at once, after the commit; a write by
// another process (toolrun approve, a second worker on the file) is found by the
// waiter's own polling, since SQLite has no channel between processes. WakeFallback is
// therefore always 0: waiters keep their own interval (the approval hold's 200 ms, the
// event stream's 200 ms, the catalog watcher's second).

var _ store.Waker = (*Store)(nil)

// Subscribe is store.Waker's: the subscription is ready at once.
func (s *Store) Subscribe(t store.Topic) *store.Subscription { return s.hub.Subscribe(t) }

// WakeFallback is store.Waker's: 0, writes of other processes wake nobody here.
func (s *Store) WakeFallback() time.Duration { return 0 }

func newHub() *store.Hub {
	h := store.NewHub(nil, nil)
	h.SetUp(nil)
	return h
}

// woke wakes the waiters of a call's row and of its tenant's events: every write of
// an invocation that commits a milestone (its events are written by the triggers of
// migration 003 in the same statement).
func (s *Store) woke(invs ...*store.Invocation) {
	for _, inv := range invs {
		s.wokeCall(inv.Tenant, inv.Key)
	}
}

func (s *Store) wokeCall(tenant, key string) {
	s.hub.NotifyTopics(store.CallTopic(tenant, key), store.EventsTopic(tenant))
}

// execFenced runs a fenced autocommit write that returns its row's tenant and key
// (wokenColumns), as a point write, wakes that row's waiters when it wrote, and
// returns the number of rows it wrote (0 or 1).
func (s *Store) execFenced(ctx context.Context, stmt *sql.Stmt, args ...any) (int64, error) {
	var tenant, key string
	err := s.pointWrite(ctx, func(ctx context.Context) error {
		return toEnd(stmt.QueryContext(ctx, args...)).Scan(&tenant, &key)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, mapErr(err)
	}
	s.wokeCall(tenant, key)
	return 1, nil
}
