package sqlite

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"sync"
	"testing"

	"github.com/toolgen/toolgen/runtime/store"
)

// recordOnce is the record-once insert of a read call under key.
func recordOnce(key string) store.InsertParams {
	return store.InsertRecordOnce(store.Call{Key: key, Tenant: "t", RunID: "r", CallID: key, Tool: "read", Args: []byte(`{}`)},
		store.SettleSucceeded([]byte(`{"ok":true}`)))
}

type recorded struct {
	inv      *store.Invocation
	inserted bool
	err      error
}

// queueBehindWriter starts a record-once insert of each key while the writer's
// connection is held, waits until the first leads and the rest are queued behind it,
// and returns the results once the writer is released: the first is written alone,
// the others together, by the first of them.
func queueBehindWriter(t *testing.T, s *Store, keys ...string) map[string]recorded {
	t.Helper()
	ctx := t.Context()
	hold, err := s.write.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	out := map[string]recorded{}
	var wg sync.WaitGroup
	insert := func(key string) {
		defer wg.Done()
		inv, inserted, err := s.InvocationInsert(context.WithoutCancel(ctx), recordOnce(key))
		mu.Lock()
		out[key] = recorded{inv, inserted, err}
		mu.Unlock()
	}
	wg.Add(1)
	go insert(keys[0])
	waitQueued(s, 0) // the first leads, waiting for the writer
	for _, k := range keys[1:] {
		wg.Add(1)
		go insert(k)
	}
	waitQueued(s, len(keys)-1)
	hold.Close()
	wg.Wait()
	return out
}

// waitQueued returns once a batch is being written and want records wait behind it: a
// condition, not a sleep, on the queue's own state.
func waitQueued(s *Store, want int) {
	for {
		s.records.mu.Lock()
		n, writing := len(s.records.pending), s.records.writing
		s.records.mu.Unlock()
		if writing && n == want {
			return
		}
		runtime.Gosched()
	}
}

// TestRecords_SharedCommit: records that arrive while one is written are written in
// one transaction, each with its own result, equal to what a read returns; a key that
// exists is that record's own outcome (the existing row).
func TestRecords_SharedCommit(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	old, _, err := s.InvocationInsert(ctx, recordOnce("exists"))
	if err != nil {
		t.Fatal(err)
	}
	got := queueBehindWriter(t, s, "first", "a", "b", "exists", "c")
	if n := s.records.shared.Load(); n != 4 {
		t.Fatalf("%d records written in a shared commit, want the 4 queued behind the first", n)
	}
	for key, r := range got {
		if r.err != nil {
			t.Fatalf("%s: %v", key, r.err)
		}
		if r.inserted != (key != "exists") {
			t.Fatalf("%s: inserted %v", key, r.inserted)
		}
		read, err := s.InvocationGetByKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(read, r.inv) {
			t.Fatalf("%s: returned %+v, read %+v", key, r.inv, read)
		}
	}
	if got["exists"].inv.ID != old.ID {
		t.Fatalf("the existing key returned row %d, want %d", got["exists"].inv.ID, old.ID)
	}
}

// TestRecords_SharedCommitFailure: a record that fails in a shared transaction rolls
// it back, and the batch is written one record at a time: that record gets its own
// error, the others are written.
func TestRecords_SharedCommitFailure(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	if _, err := s.relaxed.ExecContext(ctx, `CREATE TEMP TRIGGER refuse_bad BEFORE INSERT ON tool_invocations
		WHEN NEW.key = 'bad' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`); err != nil {
		t.Fatal(err)
	}
	got := queueBehindWriter(t, s, "first", "a", "bad", "b")
	if n := s.records.shared.Load(); n != 0 {
		t.Fatalf("%d records counted as shared after a failed batch", n)
	}
	for key, r := range got {
		if key == "bad" {
			if r.err == nil || errors.Is(r.err, store.ErrNotFound) {
				t.Fatalf("bad: %v, want the trigger's refusal", r.err)
			}
			if _, err := s.InvocationGetByKey(ctx, "bad"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("bad was written: %v", err)
			}
			continue
		}
		if r.err != nil || !r.inserted {
			t.Fatalf("%s: inserted %v, %v", key, r.inserted, r.err)
		}
		if _, err := s.InvocationGetByKey(ctx, key); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
	}
}

// TestRecords_QueuedCallerCancelled: a caller whose context ends while its record is
// queued leaves with its context's error and its record is not written; the batch it
// left is written without it.
func TestRecords_QueuedCallerCancelled(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	hold, err := s.write.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan recorded, 3)
	insert := func(ctx context.Context, key string) {
		inv, inserted, err := s.InvocationInsert(ctx, recordOnce(key))
		results <- recorded{inv, inserted, err}
	}
	go insert(ctx, "first")
	waitQueued(s, 0)
	gone, cancel := context.WithCancel(ctx)
	go insert(gone, "gone")
	waitQueued(s, 1)
	go insert(ctx, "kept")
	waitQueued(s, 2)
	cancel()
	if r := <-results; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the cancelled caller got %+v, want context.Canceled", r)
	}
	waitQueued(s, 1)
	hold.Close()
	for range 2 {
		if r := <-results; r.err != nil || !r.inserted {
			t.Fatalf("inserted %v, %v", r.inserted, r.err)
		}
	}
	for key, want := range map[string]error{"first": nil, "kept": nil, "gone": store.ErrNotFound} {
		if _, err := s.InvocationGetByKey(ctx, key); !errors.Is(err, want) {
			t.Fatalf("%s: %v, want %v", key, err, want)
		}
	}
}

// TestRecords_LeaveHandsOnTheLead: a caller that was to write the next batch and
// leaves hands that on to the next in the queue, or ends the writing when it was the
// last.
func TestRecords_LeaveHandsOnTheLead(t *testing.T) {
	lead := func() *queuedRecord {
		r := &queuedRecord{lead: true, wake: make(chan struct{}, 1)}
		r.wake <- struct{}{}
		return r
	}
	me, next := lead(), &queuedRecord{wake: make(chan struct{}, 1)}
	q := &recordQueue{writing: true, pending: []*queuedRecord{me, next}}
	if !q.leaveLocked(me) {
		t.Fatal("a queued record did not leave")
	}
	if len(q.pending) != 1 || q.pending[0] != next || !next.lead || len(next.wake) != 1 || !q.writing {
		t.Fatalf("after the lead left: pending %d, next lead %v woken %d, writing %v", len(q.pending), next.lead, len(next.wake), q.writing)
	}
	last := lead()
	q = &recordQueue{writing: true, pending: []*queuedRecord{last}}
	if !q.leaveLocked(last) || len(q.pending) != 0 || q.writing {
		t.Fatalf("after the last left: pending %d, writing %v", len(q.pending), q.writing)
	}
	if q.leaveLocked(last) {
		t.Fatal("a record no longer queued left again")
	}
}
