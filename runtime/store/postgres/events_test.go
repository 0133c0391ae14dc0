package postgres

import (
	"slices"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// TestEventList_LateCommitOfLowerIDNotMissed is the case ids alone get wrong: a
// transaction takes event id N, another takes N+1 and commits first. A reader paging by
// id would read N+1, move its cursor past N, and never see N once it commits. EventList
// holds N+1 back until the transaction of N has ended, then returns both, N first.
func TestEventList_LateCommitOfLowerIDNotMissed(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	list := func(after store.EventCursor) []store.Event {
		t.Helper()
		evs, err := s.EventList(ctx, store.EventFilter{After: after})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	// waitFor polls until n events follow after: other transactions of the cluster
	// (other tests) may hold the snapshot's xmin back for a moment.
	waitFor := func(after store.EventCursor, n int) []store.Event {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			evs := list(after)
			if len(evs) >= n {
				return evs
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %d events after %v: %+v", n, after, evs)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	first, err := s.EventAppend(ctx, store.Event{Kind: store.EventDeviceConnected, Server: "d0"})
	if err != nil {
		t.Fatal(err)
	}
	read := waitFor(store.EventCursor{}, 1)
	cursor := read[0].Cursor
	if cursor.ID != first || cursor.TX <= 0 {
		t.Fatalf("first event's cursor %+v, want id %d and a transaction id", cursor, first)
	}

	// A transaction records an invocation (its trigger takes event id N) and stays open.
	slow, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback(ctx)
	var slowInv int64
	if err := slow.QueryRow(ctx, `INSERT INTO tool_invocations (key, status, created_at, updated_at)
		VALUES ('slow', 'PENDING', now(), now()) RETURNING id`).Scan(&slowInv); err != nil {
		t.Fatal(err)
	}
	// Another takes N+1 and commits.
	fast, err := s.EventAppend(ctx, store.Event{Kind: store.EventDeviceConnected, Server: "d1"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	rows, err := s.pool.Query(ctx, `SELECT id FROM events WHERE id > $1 ORDER BY id`, first)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		rows.Scan(&id)
		ids = append(ids, id)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	// What a reader paging by id would see now: N+1 alone (the hazard).
	if !slices.Equal(ids, []int64{fast}) {
		t.Fatalf("by id alone, after %d: %v, want [%d] (the lower id not yet committed)", first, ids, fast)
	}
	// EventList does not hand out N+1 while N's transaction may still commit.
	if evs := list(cursor); len(evs) != 0 {
		t.Fatalf("while the lower id's transaction is open, EventList returned %+v", evs)
	}
	if err := slow.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	evs := waitFor(cursor, 2)
	if len(evs) != 2 || evs[0].InvocationID != slowInv || evs[0].Kind != store.EventRecorded || evs[1].Cursor.ID != fast ||
		!cursor.Less(evs[0].Cursor) || !evs[0].Cursor.Less(evs[1].Cursor) || evs[0].Cursor.ID > fast {
		t.Fatalf("after the commit: %+v; want the recorded event of %d (the lower id) then event %d", evs, slowInv, fast)
	}

	// A transaction that rolls back leaves no event and holds nothing back once it ended.
	cursor = evs[1].Cursor
	aborted, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := aborted.Exec(ctx, `INSERT INTO events (kind, at) VALUES ('device_connected', now())`); err != nil {
		t.Fatal(err)
	}
	after, err := s.EventAppend(ctx, store.Event{Kind: store.EventDeviceDisconnected, Server: "d1"})
	if err != nil {
		t.Fatal(err)
	}
	if evs := list(cursor); len(evs) != 0 {
		t.Fatalf("while an older transaction is open, EventList returned %+v", evs)
	}
	if err := aborted.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	evs = waitFor(cursor, 1)
	if len(evs) != 1 || evs[0].Cursor.ID != after {
		t.Fatalf("after the rollback: %+v, want event %d alone", evs, after)
	}
}

func TestEventList_SQLiteCursorAccepted(t *testing.T) {
	// A bare id (TX 0, as SQLite formats it) is before every PostgreSQL event.
	s := newTestStore(t)
	if _, err := s.EventAppend(t.Context(), store.Event{Kind: store.EventDeviceConnected}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		evs, err := s.EventList(t.Context(), store.EventFilter{After: store.EventCursor{ID: 99}})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a bare id: %+v, want the one event", evs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
