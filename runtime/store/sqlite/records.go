package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/toolgen/toolgen/runtime/store"
)

// A record-once row (store.InsertRecordOnce) is written on the relaxed connection,
// whose synchronous=NORMAL commits in WAL mode reach the OS but are not fsynced: the
// next FULL commit (every other write, on the writer) fsyncs the WAL and so makes them
// durable too. The writer's only connection is held meanwhile, so no other write of
// this process runs at the same time and the two connections never wait on each
// other's lock (a writer of another process is waited for by busy_timeout, as always).
//
// Records that arrive while one is being written are written together, in one
// transaction, by the first of them (a group commit): concurrent read calls share a
// commit, its WAL frames (the table's and the indexes' leaf pages, written once for
// all of them) and its locks, instead of queueing for the writer one commit each. A
// record that arrives alone is one prepared autocommit statement, as before: no
// transaction is opened for it and it waits for nobody. Each record gets its own
// result: a key that exists is ErrNotFound for that record only. Anything else that
// goes wrong in a shared transaction rolls it back and writes the batch's records one
// by one, so every caller learns exactly what happened to its own.
//
// A queued caller whose context ends while its record still waits for a batch leaves
// the queue with its context's error, and its record is not written (a lost read
// record only means the read runs again); if it was to write the next batch, the next
// caller in the queue does. Once a batch has taken its record, it waits for the result
// whatever its context says: the record may be in a transaction being written (the
// wait is bounded as the writer's is, by busy_timeout).

// recordQueue is the group commit of record-once inserts.
type recordQueue struct {
	mu      sync.Mutex
	pending []*queuedRecord
	writing bool // a leader is writing a batch: newcomers queue behind it
	shared  atomic.Int64
}

// queuedRecord is one caller's insert and, once written, its result.
type queuedRecord struct {
	p    store.InsertParams
	args []any
	inv  *store.Invocation
	err  error
	lead bool          // woken to write the next batch rather than with a result
	wake chan struct{} // receives once: the result is set, or lead is
}

// insertRelaxed writes a record-once row (see above). ErrNotFound, as from the
// autocommit insert, means the key exists.
func (s *Store) insertRelaxed(ctx context.Context, p store.InsertParams, args []any) (*store.Invocation, error) {
	q := &s.records
	me := &queuedRecord{p: p, args: args, wake: make(chan struct{}, 1)}
	q.mu.Lock()
	q.pending = append(q.pending, me)
	if q.writing {
		q.mu.Unlock()
		select {
		case <-me.wake:
		case <-ctx.Done():
			q.mu.Lock()
			left := q.leaveLocked(me)
			q.mu.Unlock()
			if left {
				return nil, ctx.Err()
			}
			<-me.wake // a batch has taken it: its result comes
		}
		if !me.lead {
			return me.inv, me.err
		}
		q.mu.Lock()
	}
	q.writing = true
	batch := q.pending
	q.pending = nil
	q.mu.Unlock()

	s.writeRecords(ctx, batch)

	q.mu.Lock()
	q.handOffLocked()
	q.mu.Unlock()
	for _, r := range batch {
		if r != me {
			r.wake <- struct{}{}
		}
	}
	return me.inv, me.err
}

// handOffLocked makes the first queued caller write the next batch, or ends the
// writing when nobody is queued. q.mu is held.
func (q *recordQueue) handOffLocked() {
	if len(q.pending) == 0 {
		q.writing = false
		return
	}
	next := q.pending[0]
	next.lead = true
	next.wake <- struct{}{}
}

// leaveLocked takes me, whose caller's context has ended, out of the queue if no batch
// has taken its record yet, and reports whether it did; were it to write the next
// batch, the next in the queue does. q.mu is held.
func (q *recordQueue) leaveLocked(me *queuedRecord) bool {
	i := slices.Index(q.pending, me)
	if i < 0 {
		return false
	}
	q.pending = slices.Delete(q.pending, i, i+1)
	if me.lead {
		q.handOffLocked()
	}
	return true
}

// writeRecords writes batch and sets each record's result. A shared batch runs
// detached from the leader's cancellation: the other callers' records must not end
// with the leader's context. A record of its own waits for the writer under its
// context; once the writer is held, the statements run under pointContext.
func (s *Store) writeRecords(ctx context.Context, batch []*queuedRecord) {
	if len(batch) > 1 {
		ctx = context.WithoutCancel(ctx)
	}
	release, err := s.holdRelaxed(ctx)
	if err != nil {
		for _, r := range batch {
			r.err = err
		}
		return
	}
	defer release()
	if ctx, err = pointContext(ctx); err != nil { // a record of its own, whose caller has gone
		batch[0].err = err
		return
	}
	if len(batch) == 1 || !s.writeShared(ctx, batch) {
		for _, r := range batch {
			r.inv, r.err = scanInserted(r.p, toEnd(s.relaxedInsert.QueryContext(ctx, r.args...)))
		}
	}
}

// writeShared writes batch in one transaction on the relaxed connection and reports
// whether it committed; if not, nothing of it was written.
func (s *Store) writeShared(ctx context.Context, batch []*queuedRecord) bool {
	err := s.relaxedTx(ctx, func(tx *sql.Tx) error {
		insert := tx.StmtContext(ctx, s.relaxedInsert)
		for _, r := range batch {
			r.inv, r.err = scanInserted(r.p, toEnd(insert.QueryContext(ctx, r.args...)))
			if r.err != nil && !errors.Is(r.err, store.ErrNotFound) {
				return r.err
			}
		}
		return nil
	})
	if err != nil {
		return false
	}
	s.records.shared.Add(int64(len(batch)))
	return true
}

// holdRelaxed makes the relaxed connection this goroutine's to write with: it holds
// the writer's connection, so that no other write of this process runs meanwhile, and
// relaxedMu, so that no point read does (pointRead). release gives both back.
func (s *Store) holdRelaxed(ctx context.Context) (release func(), err error) {
	hold, err := s.write.Conn(ctx)
	if err != nil {
		return nil, err
	}
	s.relaxedMu.Lock()
	return func() {
		s.relaxedMu.Unlock()
		hold.Close()
	}, nil
}

// relaxedTx runs fn in one transaction on the relaxed connection, held
// (holdRelaxed). If it fails, nothing of it was written, and no transaction is left
// open on the connection, whatever SQLite did.
func (s *Store) relaxedTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	err := inTx(ctx, s.relaxed, fn)
	if err != nil {
		s.relaxed.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	}
	return err
}
