package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/toolgen/toolgen/runtime/internal/sqlfile"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/sqlite/internal/walvfs"
)

// Store is the SQLite implementation of [store.Store].
type Store struct {
	path  string
	write *sql.DB // exactly one connection: the only writer of this process
	// relaxed is one more writer connection, with synchronous=NORMAL, written only by
	// insertRelaxed and SessionMint while they hold write's connection (so the two
	// never write at once), and read by pointRead when it is free.
	relaxed       *sql.DB
	relaxedInsert *sql.Stmt                                            // invocationInsertSQL, prepared on relaxed
	relaxedMint   struct{ claim, catalogInsert, pinsInsert *sql.Stmt } // SessionMint's, prepared on relaxed
	// relaxedReads are the point reads of every call (InvocationPriorCalls), prepared on
	// relaxed too, for pointRead.
	relaxedReads struct{ breakerCounts, breakerCountsAndKey, priorCalls *sql.Stmt }
	// relaxedMu is held while relaxed is in use: by its writes, inside the writer's
	// hold, and by a point read that finds it free (pointRead).
	relaxedMu sync.Mutex

	read  *sql.DB // read-only connections (WAL readers)
	w     writeStmts
	r     readStmts
	stmts []*sql.Stmt // all of w and r, for Close
	hub   *store.Hub  // in-process wake-ups (wake.go)
	clock clocked     // WithClock (clock.go)

	// The statements every call runs (the record, call identity, the breaker) take
	// their arguments by position (sqlfile.Positional, prepare).
	insertArgs, breakerCountsArgs, breakerCountsAndKeyArgs, priorCallsArgs sqlfile.Positional

	records recordQueue // record-once inserts waiting for the relaxed connection (records.go)

	// pointWriter is held by a point write (pointWrite) from before it waits for the
	// writer's connection until its statement has ended: point writes of this process
	// queue here, where their contexts are honoured.
	pointWriter chan struct{}

	checkpoints *checkpointer // the background checkpoints (checkpoint.go)
}

var _ store.Store = (*Store)(nil)

// writeStmts are the statements run on the writer, prepared once by Open.
//
// Never run one of them directly (w.x.QueryContext, ...) while a transaction of the
// writer is open: the transaction holds the writer's only connection, so the call
// would wait for it forever. Inside a transaction go through tx.StmtContext, which
// runs the statement already prepared on the transaction's connection.
type writeStmts struct {
	insert, claim, markEffectSent, settle, release, suspend, resume, renew, sweep, resolve *sql.Stmt
	unsuspend                                                                              *sql.Stmt
	exists, resumeTokenTaken                                                               *sql.Stmt
	approvalDecide, approvalExists, auditAppend, catalogAppend                             *sql.Stmt
	sessionModeSet, eventAppend                                                            *sql.Stmt
	session                                                                                sessionWriteStmts
}

// readStmts are the statements run on the read pool, prepared once by Open (and by
// database/sql again on each further reader connection, once).
type readStmts struct {
	get, getByKey, getByResumeToken, listRetryable, countUnclaimable, listUncertain, breakerCounts, breakerCountsAndKey, priorCalls *sql.Stmt
	// the lost-ack and error checks after a fenced autocommit write matched nothing
	fenceHolds, settledByFence, releasedAt, suspendedByFence *sql.Stmt
	approvalGet, auditList, catalogList                      *sql.Stmt
	list, sessionModeGet, eventList                          *sql.Stmt
	session                                                  sessionReadStmts
}

// connParams configure every connection. synchronous=FULL makes WAL sync on every
// commit, autocommit statements included, so a committed watermark survives power
// loss and OS crashes, not only a killed process (NORMAL would lose the last commits
// on power loss). _txlock=immediate takes the write lock at BEGIN, so a transaction
// never fails half-way on SQLITE_BUSY (an autocommit write takes it at its start);
// busy_timeout waits for writers of other processes. vfs=toolgen-wal (internal/walvfs,
// registered by Open) writes a commit's WAL frames in one write instead of two per
// frame, which needs cache_spill=0: no frame is written before its commit.
// wal_autocheckpoint is autocheckpointPages: the store checkpoints in the background
// (checkpoint.go), and a commit only when the WAL has grown that far regardless.
//
// page_size is pageSize, for a new file; journal_mode is the driver's _journal_mode key
// rather than a _pragma because the driver runs the _pragmas in alphabetical order, and
// switching a new file to WAL writes its first page, which fixes the page size: the key
// runs after them.
const connParams = "_pragma=page_size(2048)&_pragma=busy_timeout(10000)&_journal_mode=WAL&_pragma=synchronous(FULL)" +
	"&_pragma=foreign_keys(1)&_pragma=cache_spill(0)&_pragma=wal_autocheckpoint(8000)&_txlock=immediate&vfs=toolgen-wal"

// pageSize is the page size of a file the store creates (connParams), half SQLite's
// default. A commit writes every page it changed, whole, to the WAL, and the
// checkpoint writes it again to the database file; a call's record changes a leaf of
// the table, of each of its three indexes and of the events table, whatever its size,
// so smaller pages are fewer bytes written: a read call's record writes about 12 KB
// to the WAL on 2 KiB pages against 22 KB on 4 KiB (TestWAL_BytesPerRecord), and as
// much again to the database file when it is checkpointed. Its CPU is the same within
// the spread (BenchmarkRecordPageSize, BENCHMARKS.md, issue 20), and so are reads by
// key; 1 KiB pages would give a result of several KiB chains of overflow pages. A file
// created before keeps its page size (SQLite changes it only by a VACUUM outside WAL
// mode); the store works on either.
const pageSize = 2048

// readers is the size of the read pool.
const readers = 4

// Open opens (creating if needed) the database file at path, applies the embedded
// migrations and prepares the statements. WAL needs a real file: an in-memory
// database is refused; tests use a file in t.TempDir().
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if path == "" || path == ":memory:" || strings.Contains(path, "mode=memory") {
		return nil, fmt.Errorf("sqlite: %q: the store needs a database file (WAL does not work in memory)", path)
	}
	if err := walvfs.Register(); err != nil {
		return nil, err
	}
	dsn := "file:" + uriEscaper.Replace(path) + "?" + connParams
	write, err := oneConnection(dsn)
	if err != nil {
		return nil, err
	}
	if err := pingWhileBusy(ctx, write); err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if err := migrateUp(ctx, write); err != nil {
		write.Close()
		return nil, err
	}
	read, err := sql.Open("sqlite", dsn+"&_pragma=query_only(1)")
	if err != nil {
		write.Close()
		return nil, err
	}
	read.SetMaxOpenConns(readers)
	read.SetMaxIdleConns(readers)
	relaxed, err := oneConnection(strings.Replace(dsn, "synchronous(FULL)", "synchronous(NORMAL)", 1))
	if err != nil {
		write.Close()
		read.Close()
		return nil, err
	}
	s := &Store{path: path, write: write, relaxed: relaxed, read: read, hub: newHub(), clock: newClocked(o.clock),
		pointWriter: make(chan struct{}, 1)}
	if err := s.prepare(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if s.checkpoints, err = startCheckpointer(dsn); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// openBusyWait bounds how long pingWhileBusy retries: busy_timeout's 10 s.
const openBusyWait = 10 * time.Second

// pingWhileBusy opens db's connection, retrying while SQLite answers SQLITE_BUSY. Two
// processes opening a new file at once race to switch it to WAL, and SQLite refuses
// the loser's journal_mode at once, without its busy handler (waiting there could
// deadlock), so busy_timeout does not cover it; by the next try the file is in WAL
// and the pragma changes nothing.
func pingWhileBusy(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(openBusyWait)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		err := db.PingContext(ctx)
		var se *msqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// oneConnection opens a pool of exactly one connection, kept open for the store's
// life: the writer, the relaxed writer and the checkpointer each have one.
func oneConnection(dsn string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db, nil
}

// prepare prepares every statement once, after the migrations (the tables must
// exist) and before any transaction (preparing on the writer waits for its only
// connection). Otherwise modernc.org/sqlite parses the SQL on every call: with a
// transaction around each write, that took twice the CPU per call of the same
// statements prepared once and autocommitted (BenchmarkSQLiteCalls, runtime/bench).
func (s *Store) prepare(ctx context.Context) error {
	w, r := &s.w, &s.r
	for _, p := range []struct {
		db    *sql.DB
		stmt  **sql.Stmt
		query string
		args  *sqlfile.Positional // non-nil: prepared with ? for :name, bound by position
	}{
		{s.write, &w.insert, invocationInsertSQL, &s.insertArgs},
		{s.relaxed, &s.relaxedInsert, invocationInsertSQL, &s.insertArgs},
		{s.read, &r.breakerCounts, invocationBreakerCountsSQL, &s.breakerCountsArgs},
		{s.read, &r.breakerCountsAndKey, invocationBreakerCountsAndKeySQL, &s.breakerCountsAndKeyArgs},
		{s.read, &r.priorCalls, invocationPriorCallsSQL, &s.priorCallsArgs},
		{s.relaxed, &s.relaxedReads.breakerCounts, invocationBreakerCountsSQL, &s.breakerCountsArgs},
		{s.relaxed, &s.relaxedReads.breakerCountsAndKey, invocationBreakerCountsAndKeySQL, &s.breakerCountsAndKeyArgs},
		{s.relaxed, &s.relaxedReads.priorCalls, invocationPriorCallsSQL, &s.priorCallsArgs},
		{s.write, &w.claim, invocationClaimIfPendingSQL, nil},
		{s.write, &w.markEffectSent, invocationMarkEffectSentIfLeasedSQL, nil},
		{s.write, &w.settle, invocationSettleIfLeasedSQL, nil},
		{s.write, &w.release, invocationReleaseIfLeasedSQL, nil},
		{s.write, &w.suspend, invocationSuspendIfLeasedSQL, nil},
		{s.write, &w.resume, invocationResumeSQL, nil},
		{s.write, &w.renew, invocationRenewLeasesSQL, nil},
		{s.write, &w.sweep, invocationSweepSQL, nil},
		{s.write, &w.unsuspend, invocationUnsuspendDecidedSQL, nil},
		{s.write, &w.resolve, invocationResolveUncertainSQL, nil},
		{s.write, &w.exists, invocationExistsSQL, nil},
		{s.write, &w.resumeTokenTaken, invocationResumeTokenTakenSQL, nil},
		{s.write, &w.approvalDecide, approvalDecideSQL, nil},
		{s.write, &w.approvalExists, approvalExistsSQL, nil},
		{s.write, &w.auditAppend, auditAppendSQL, nil},
		{s.write, &w.catalogAppend, catalogHistoryAppendSQL, nil},
		{s.write, &w.sessionModeSet, sessionModeSetSQL, nil},
		{s.write, &w.eventAppend, eventAppendSQL, nil},
		{s.write, &w.session.claim, sessionClaimSQL, nil},
		{s.write, &w.session.catalogInsert, sessionCatalogInsertSQL, nil},
		{s.write, &w.session.pinsInsert, sessionPinsInsertSQL, nil},
		{s.write, &w.session.pinsDelete, sessionPinsDeleteSQL, nil},
		{s.write, &w.session.pinsEpoch, sessionPinsEpochSQL, nil},
		{s.relaxed, &s.relaxedMint.claim, sessionClaimSQL, nil},
		{s.relaxed, &s.relaxedMint.catalogInsert, sessionCatalogInsertSQL, nil},
		{s.relaxed, &s.relaxedMint.pinsInsert, sessionPinsInsertSQL, nil},

		{s.read, &r.get, invocationGetSQL, nil},
		{s.read, &r.getByKey, invocationGetByKeySQL, nil},
		{s.read, &r.getByResumeToken, invocationGetByResumeTokenSQL, nil},
		{s.read, &r.listRetryable, invocationListRetryableSQL, nil},
		{s.read, &r.countUnclaimable, invocationCountUnclaimableSQL, nil},
		{s.read, &r.listUncertain, invocationListUncertainSQL, nil},
		{s.read, &r.fenceHolds, invocationFenceHoldsSQL, nil},
		{s.read, &r.settledByFence, invocationSettledByFenceSQL, nil},
		{s.read, &r.releasedAt, invocationReleasedAtSQL, nil},
		{s.read, &r.suspendedByFence, invocationSuspendedByFenceSQL, nil},
		{s.read, &r.approvalGet, approvalGetSQL, nil},
		{s.read, &r.auditList, auditListSQL, nil},
		{s.read, &r.catalogList, catalogHistoryListSQL, nil},
		{s.read, &r.list, invocationListSQL, nil},
		{s.read, &r.sessionModeGet, sessionModeGetSQL, nil},
		{s.read, &r.eventList, eventListSQL, nil},
		{s.read, &r.session.owner, sessionOwnerSQL, nil},
		{s.read, &r.session.pins, sessionPinsSQL, nil},
	} {
		query := s.clock.sql(p.query)
		if p.args != nil {
			pos, err := sqlfile.NewPositional(query)
			if err != nil {
				return fmt.Errorf("sqlite: %q: %w", firstLine(p.query), err)
			}
			*p.args, query = pos, pos.Query
		}
		stmt, err := p.db.PrepareContext(ctx, query)
		if err != nil {
			return fmt.Errorf("sqlite: prepare %q: %w", firstLine(p.query), err)
		}
		*p.stmt = stmt
		s.stmts = append(s.stmts, stmt)
	}
	return nil
}

// firstLine names a statement in an error.
func firstLine(query string) string {
	query = strings.TrimSpace(query)
	if i := strings.IndexByte(query, '\n'); i >= 0 {
		return query[:i]
	}
	return query
}

// uriEscaper escapes the characters that end or escape the path of a SQLite URI.
var uriEscaper = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// Close stops the background checkpoints and closes the statements and the pools.
func (s *Store) Close() error {
	var errs []error
	if s.checkpoints != nil {
		errs = append(errs, s.checkpoints.close())
	}
	for _, stmt := range s.stmts {
		errs = append(errs, stmt.Close())
	}
	s.clock.close()
	return errors.Join(append(errs, s.read.Close(), s.relaxed.Close(), s.write.Close())...)
}

// inTx runs fn in one transaction on db (BEGIN IMMEDIATE) and commits it.
func inTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback()))
	}
	return tx.Commit()
}

func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

// writeTx is the one transaction of a writing method that needs more than one
// statement to be atomic. fn runs the writer's statements through tx.StmtContext
// only (see writeStmts).
func (s *Store) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return inTx(ctx, s.write, fn)
}

// Writing methods whose whole effect is one statement run it as one autocommit
// statement on the writer: the same single commit (and fsync, synchronous=FULL) as
// BEGIN IMMEDIATE ... COMMIT, without the two extra statements. A check that runs
// after such a write matched nothing only classifies the failure, and runs on a
// reader: rows are never deleted, and a fence that does not hold never holds again
// (attempt only grows, an expired lease is never renewed, a watermark token is kept
// until the fence is cleared), so the check sees what a transaction around both
// statements would have seen at the time of the check.
//
// The methods whose failure check is not monotonic keep their transaction: claim (a
// row may become PENDING again) and resolve (for both, an id absent at the write may
// exist at the check), resume (a suspension may give the token to a row) and the
// approval (its invocation may be inserted in between); and so does the sweep, whose
// many RETURNING rows must not be committed by an autocommit statement that then
// fails to return them.

func (s *Store) InvocationInsert(ctx context.Context, p store.InsertParams) (*store.Invocation, bool, error) {
	if err := p.Validate(); err != nil {
		return nil, false, err
	}
	var owner, leaseUS any // NULL unless RUNNING
	if o, lease := p.Lease(); p.Status() == store.StatusRunning {
		owner, leaseUS = o, lease.Microseconds()
	}
	settled := p.Settlement()
	args, err := s.insertArgs.Args(
		sql.Named("key", p.Key), sql.Named("tenant", p.Tenant), sql.Named("principal", p.Principal),
		sql.Named("session_id", p.SessionID), sql.Named("run_id", p.RunID), sql.Named("step_number", p.Step),
		sql.Named("call_id", p.CallID), sql.Named("tool", p.Tool), sql.Named("tool_version", p.ToolVersion),
		sql.Named("tool_sha256", p.ToolSHA256),
		sql.Named("idempotency", p.Idempotency), sql.Named("idempotent_when", nullBool(p.IdempotentWhen)),
		sql.Named("args", nullJSON(p.Args)), sql.Named("args_hash", p.ArgsHash),
		sql.Named("origin_trust", p.OriginTrust), sql.Named("argument_trust", p.ArgumentTrust),
		sql.Named("mode", p.Mode), sql.Named("decision", p.Decision), sql.Named("status", string(p.Status())),
		sql.Named("reason_code", settled.ReasonCode), sql.Named("outcome", nullJSON(settled.Outcome)),
		sql.Named("lease_owner", owner), sql.Named("lease_us", leaseUS), sql.Named("attempt", p.Attempt()),
		sql.Named("workspace", p.Workspace),
	)
	if err != nil {
		return nil, false, err
	}
	var inv *store.Invocation
	if p.Relaxed() {
		inv, err = s.insertRelaxed(ctx, p, args)
	} else {
		err = s.pointWrite(ctx, func(ctx context.Context) error {
			inv, err = scanInserted(p, toEnd(s.w.insert.QueryContext(ctx, args...)))
			return err
		})
	}
	if !errors.Is(err, store.ErrNotFound) {
		if err != nil {
			return nil, false, err
		}
		s.woke(inv)
		return inv, true, nil
	}
	// The key exists: nothing was written; return that row. It was committed before
	// the insert took the write lock and rows are never deleted, so a reader (a new
	// WAL snapshot) sees it, and the writer stays free for the other callers.
	if ctx, err = pointContext(ctx); err != nil {
		return nil, false, err
	}
	inv, err = scanInvocation(s.r.getByKey.QueryRowContext(ctx, sql.Named("key", p.Key)))
	if err != nil {
		return nil, false, err
	}
	return inv, false, nil
}

// scanInserted is the row InvocationInsert wrote: what the statement returns (the
// id and the times the database chose) and the rest as p inserted it (p.Row).
func scanInserted(p store.InsertParams, row rowScanner) (*store.Invocation, error) {
	var leaseExp sql.NullInt64
	var created, updated int64
	inv := p.Row()
	if err := row.Scan(&inv.ID, &leaseExp, &created, &updated); err != nil {
		return nil, notFound(err)
	}
	var t time.Time
	inv.LeaseExpiresAt = optMicros(leaseExp, &t)
	inv.CreatedAt, inv.UpdatedAt = fromMicros(created), fromMicros(updated)
	return inv, nil
}

func (s *Store) InvocationGet(ctx context.Context, id int64) (*store.Invocation, error) {
	return scanInvocation(s.r.get.QueryRowContext(ctx, sql.Named("id", id)))
}

func (s *Store) InvocationGetByKey(ctx context.Context, key string) (*store.Invocation, error) {
	ctx, err := pointContext(ctx)
	if err != nil {
		return nil, err
	}
	return scanInvocation(s.r.getByKey.QueryRowContext(ctx, sql.Named("key", key)))
}

// pointContext is the context a point statement runs under: a read through a unique
// or narrow index (a key, a call's generations, a run's breaker counter) or a
// record-once insert once it holds the relaxed connection (writeRecords), statements
// every call makes (a point write, pointWrite, detaches the same way). The
// caller's context is looked at now, not while the statement runs: under a context
// that can end, modernc.org/sqlite starts a goroutine and installs a progress handler
// for each statement and database/sql starts one more goroutine per query, which costs
// more than such a statement (issue 20, BENCHMARKS.md). A point read takes
// microseconds and a WAL reader never waits for a lock, so there is nothing to
// interrupt. Reads that can run long (lists, the sweep's scans) keep their context.
func pointContext(ctx context.Context) (context.Context, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return context.WithoutCancel(ctx), nil
}

// pointWrite runs write, one autocommit statement on the writer that every call of
// its kind makes (the record of a call, a watermark, a settlement, a release, a
// suspension). The caller's context is honoured until the write holds the point
// writer (pointWriter: while it waits for the other point writes of this process);
// from then on the statement runs to its end whatever the context does (under
// context.WithoutCancel, as in pointContext), so taking the point writer is the one
// instant that decides whether the write happens. It runs for microseconds; its one
// wait that can be long, for a writer of another process, is bounded by busy_timeout
// (10 s, the bound the pipeline puts on one write attempt). Inside, the statement may
// still wait for the writer's connection behind one writer of this process that is
// not a point write (a transaction, an append), which holds it for one commit.
func (s *Store) pointWrite(ctx context.Context, write func(context.Context) error) error {
	if err := ctx.Err(); err != nil { // select would take a free point writer half the time
		return err
	}
	select {
	case s.pointWriter <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.pointWriter }()
	return write(context.WithoutCancel(ctx))
}

func (s *Store) InvocationGetByResumeToken(ctx context.Context, token string) (*store.Invocation, error) {
	if token == "" {
		return nil, store.ErrNotFound
	}
	return scanInvocation(s.r.getByResumeToken.QueryRowContext(ctx, sql.Named("token", token)))
}

func (s *Store) InvocationClaimIfPending(ctx context.Context, id int64, owner string, lease time.Duration) (*store.Invocation, error) {
	if err := store.ValidateLease(owner, lease); err != nil {
		return nil, err
	}
	var inv *store.Invocation
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		inv, err = scanInvocation(tx.StmtContext(ctx, s.w.claim).QueryRowContext(ctx,
			sql.Named("id", id), sql.Named("owner", owner), sql.Named("lease_us", lease.Microseconds())))
		if errors.Is(err, store.ErrNotFound) {
			return s.conflictIfExists(ctx, tx, id)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	s.woke(inv)
	return inv, nil
}

func (s *Store) InvocationMarkEffectSentIfLeased(ctx context.Context, f store.Fence, token string) error {
	if token == "" {
		return fmt.Errorf("%w: watermark without a token", store.ErrInvalid)
	}
	n, err := s.execFenced(ctx, s.w.markEffectSent, fenceArgs(f, sql.Named("token", token))...)
	if err != nil || n == 1 {
		return err
	}
	holds, err := exists(ctx, s.r.fenceHolds, fenceArgs(f)...)
	if err != nil {
		return err
	}
	if holds {
		return fmt.Errorf("%w: invocation %d already carries another watermark token", store.ErrConflict, f.ID)
	}
	return leaseLost(f)
}

func (s *Store) InvocationSettleIfLeased(ctx context.Context, f store.Fence, st store.Settlement) error {
	if err := st.Validate(); err != nil {
		return err
	}
	n, err := s.execFenced(ctx, s.w.settle, fenceArgs(f, settlementArgs(st)...)...)
	if err != nil || n == 1 {
		return err
	}
	done, err := exists(ctx, s.r.settledByFence, fenceArgs(f, sql.Named("status", string(st.Status)))...)
	if err != nil || done {
		return err // lost ack: already settled by this fence
	}
	return leaseLost(f)
}

func (s *Store) InvocationReleaseIfLeased(ctx context.Context, f store.Fence) error {
	n, err := s.execFenced(ctx, s.w.release, fenceArgs(f)...)
	if err != nil || n == 1 {
		return err
	}
	done, err := exists(ctx, s.r.releasedAt, fenceArgs(f)...)
	if err != nil || done {
		return err // lost ack: already released at this attempt
	}
	return leaseLost(f)
}

func (s *Store) InvocationSuspendIfLeased(ctx context.Context, f store.Fence, resumeToken string, outcome json.RawMessage) error {
	if err := store.ValidateSuspension(resumeToken, outcome); err != nil {
		return err
	}
	token := sql.Named("resume_token", resumeToken)
	// a token held by another row is a unique violation: ErrConflict
	n, err := s.execFenced(ctx, s.w.suspend, fenceArgs(f, token, sql.Named("outcome", nullJSON(outcome)))...)
	if err != nil || n == 1 {
		return err
	}
	done, err := exists(ctx, s.r.suspendedByFence, fenceArgs(f, token)...)
	if err != nil || done {
		return err // lost ack: already suspended by this fence with this token
	}
	return leaseLost(f)
}

func (s *Store) InvocationResume(ctx context.Context, resumeToken string, st store.Settlement) (*store.Invocation, error) {
	if err := st.Validate(); err != nil {
		return nil, err
	}
	var inv *store.Invocation
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		token := sql.Named("resume_token", resumeToken)
		inv, err = scanInvocation(tx.StmtContext(ctx, s.w.resume).QueryRowContext(ctx, append(settlementArgs(st), token)...))
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		taken, err := exists(ctx, tx.StmtContext(ctx, s.w.resumeTokenTaken), token)
		if err != nil {
			return err
		}
		if taken {
			return fmt.Errorf("%w: invocation with this resume token is not suspended", store.ErrConflict)
		}
		return fmt.Errorf("%w: resume token", store.ErrNotFound)
	})
	if err != nil {
		return nil, err
	}
	s.woke(inv)
	return inv, nil
}

func (s *Store) InvocationRenewLeases(ctx context.Context, owner string, ids []int64, lease time.Duration) (int, error) {
	if err := store.ValidateLease(owner, lease); err != nil || len(ids) == 0 {
		return 0, err
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return 0, err
	}
	n, err := execRows(ctx, s.w.renew, sql.Named("owner", owner), sql.Named("lease_us", lease.Microseconds()), sql.Named("ids", string(list)))
	return int(n), err
}

func (s *Store) InvocationSweep(ctx context.Context, p store.SweepParams) ([]store.Swept, error) {
	if err := p.Claimable.Validate(); err != nil {
		return nil, err
	}
	p = p.WithDefaults()
	var swept []store.Swept
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		invs, err := queryInvocations(ctx, tx.StmtContext(ctx, s.w.sweep),
			sql.Named("limit", p.Limit), sql.Named("max_attempts", p.MaxAttempts), sql.Named("tools", p.ToolsParam()),
			sql.Named("claim_tenant", p.Tenant))
		if err != nil {
			return err
		}
		swept = store.SweptFromRows(invs)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, sw := range swept {
		s.woke(sw.Invocation)
	}
	return swept, nil
}

func (s *Store) InvocationListRetryable(ctx context.Context, p store.RetryableParams) ([]*store.Invocation, error) {
	if err := p.Claimable.Validate(); err != nil {
		return nil, err
	}
	return queryInvocations(ctx, s.r.listRetryable, sql.Named("limit", sqlLimit(p.Limit)), sql.Named("tools", p.ToolsParam()),
		sql.Named("claim_tenant", p.Tenant))
}

func (s *Store) InvocationUnsuspendDecided(ctx context.Context, p store.RetryableParams) ([]*store.Invocation, error) {
	if err := p.Claimable.Validate(); err != nil {
		return nil, err
	}
	var invs []*store.Invocation
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		invs, err = queryInvocations(ctx, tx.StmtContext(ctx, s.w.unsuspend), sql.Named("limit", sqlLimit(p.Limit)),
			sql.Named("tools", p.ToolsParam()), sql.Named("claim_tenant", p.Tenant))
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(invs, func(a, b *store.Invocation) int { return cmp.Compare(a.ID, b.ID) })
	s.woke(invs...)
	return invs, nil
}

func (s *Store) InvocationCountUnclaimable(ctx context.Context, tools []store.ToolRef, tenant string) (store.Unclaimable, error) {
	var u store.Unclaimable
	if err := store.ValidateToolRefs(tools); err != nil {
		return u, err
	}
	err := s.r.countUnclaimable.QueryRowContext(ctx, sql.Named("tools", store.ToolRefsJSON(tools)), sql.Named("claim_tenant", tenant)).
		Scan(&u.NotRegistered, &u.DefinitionChanged)
	return u, err
}

func (s *Store) InvocationListUncertain(ctx context.Context, tenant string) ([]*store.Invocation, error) {
	return queryInvocations(ctx, s.r.listUncertain, sql.Named("tenant", tenant))
}

func (s *Store) InvocationList(ctx context.Context, f store.InvocationFilter) ([]*store.Invocation, error) {
	awaiting := 0
	if f.AwaitingApproval {
		awaiting = 1
	}
	return queryInvocations(ctx, s.r.list, sql.Named("after_id", f.AfterID), sql.Named("tenant", f.Tenant),
		sql.Named("session_id", f.SessionID), sql.Named("awaiting", awaiting), sql.Named("limit", sqlLimit(f.Limit)))
}

func (s *Store) InvocationResolveUncertain(ctx context.Context, id int64, resolution, by string, outcome json.RawMessage, audit *store.AuditEntry) (*store.Invocation, error) {
	if err := store.ValidateResolution(resolution, by, outcome); err != nil {
		return nil, err
	}
	// With an audit entry the review is also confined to the entry's tenant: a row of
	// another tenant is not found, so nothing is written for it.
	var tenant any
	if audit != nil {
		tenant = audit.Tenant
	}
	var inv *store.Invocation
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		inv, err = scanInvocation(tx.StmtContext(ctx, s.w.resolve).QueryRowContext(ctx,
			sql.Named("id", id), sql.Named("resolution", resolution), sql.Named("resolved_by", by), sql.Named("tenant", tenant),
			sql.Named("outcome", nullJSON(outcome))))
		if errors.Is(err, store.ErrNotFound) {
			return s.conflictIfExistsIn(ctx, tx, id, tenant)
		}
		if err != nil || audit == nil {
			return err
		}
		_, err = s.auditAppendTx(ctx, tx, *audit)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.woke(inv)
	return inv, nil
}

// pointRead reads one row with stmt, a statement every call runs, prepared on a
// reader, or with onRelaxed, the same prepared on the relaxed connection, when that
// connection is free. In WAL mode a connection empties its page cache whenever another
// connection has committed since its last read, and reads its pages again (a pread
// each); the record-once rows of read calls are committed by the relaxed connection,
// so under read calls it is the one whose cache is still warm. The reads of every
// call's identity and breaker took 20 % less CPU per read call on it
// (BenchmarkSQLiteCalls, one caller, BENCHMARKS.md); when it is busy, a reader serves
// the read rather than have it wait.
func (s *Store) pointRead(ctx context.Context, stmt, onRelaxed *sql.Stmt, args []any, dest ...any) error {
	if s.relaxedMu.TryLock() {
		defer s.relaxedMu.Unlock()
		stmt = onRelaxed
	}
	return stmt.QueryRowContext(ctx, args...).Scan(dest...)
}

func (s *Store) InvocationPriorCalls(ctx context.Context, p store.PriorCallsParams) (store.PriorCalls, error) {
	var pc store.PriorCalls
	if err := p.Validate(); err != nil {
		return pc, err
	}
	ctx, err := pointContext(ctx)
	if err != nil {
		return pc, err
	}
	tenant, runID, argsHash := sql.Named("tenant", p.Tenant), sql.Named("run_id", p.RunID), sql.Named("args_hash", p.ArgsHash)
	switch {
	case p.Key != "": // a named read: the counts and its key
		args, err := s.breakerCountsAndKeyArgs.Args(tenant, runID, argsHash, sql.Named("key", p.Key))
		if err != nil {
			return pc, err
		}
		err = s.pointRead(ctx, s.r.breakerCountsAndKey, s.relaxedReads.breakerCountsAndKey, args,
			&pc.Breaker.Total, &pc.Breaker.Denied, &pc.Breaker.Uncertain, &pc.KeyTaken)
		return pc, err
	case p.CallIDBase == "": // another named call: the counts alone, six columns and eight bindings fewer
		args, err := s.breakerCountsArgs.Args(tenant, runID, argsHash)
		if err != nil {
			return pc, err
		}
		err = s.pointRead(ctx, s.r.breakerCounts, s.relaxedReads.breakerCounts, args,
			&pc.Breaker.Total, &pc.Breaker.Denied, &pc.Breaker.Uncertain)
		return pc, err
	}
	args, err := s.priorCallsArgs.Args(tenant, runID, argsHash, sql.Named("step", p.Step), sql.Named("base", p.CallIDBase))
	if err != nil {
		return pc, err
	}
	var id, effect, earlier, updated sql.NullInt64
	var callID, status sql.NullString
	err = s.pointRead(ctx, s.r.priorCalls, s.relaxedReads.priorCalls, args, &pc.Breaker.Total, &pc.Breaker.Denied, &pc.Breaker.Uncertain,
		&id, &callID, &status, &effect, &earlier, &updated)
	if err != nil {
		return store.PriorCalls{}, err
	}
	if !id.Valid { // no generation yet
		return pc, nil
	}
	var times [2]time.Time
	pc.Latest = store.Generation{ID: id.Int64, CallID: callID.String, Status: store.Status(status.String),
		UpdatedAt: fromMicros(updated.Int64)}
	pc.Latest.EffectSentAt, pc.Latest.EarlierEffectSentAt = optMicros(effect, &times[0]), optMicros(earlier, &times[1])
	pc.HasLatest = true
	return pc, nil
}

func (s *Store) ApprovalDecide(ctx context.Context, a store.Approval, audit *store.AuditEntry) error {
	if a.Key == "" || a.DecidedBy == "" {
		return fmt.Errorf("%w: an approval needs a key and a decider", store.ErrInvalid)
	}
	if err := store.ValidateDecisionAudit(a, audit); err != nil {
		return err
	}
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		n, err := execRows(ctx, tx.StmtContext(ctx, s.w.approvalDecide), sql.Named("key", a.Key), sql.Named("tenant", a.Tenant),
			sql.Named("approved", a.Approved), sql.Named("decided_by", a.DecidedBy), sql.Named("reason", a.Reason))
		if err != nil {
			return err
		}
		if n == 1 {
			if audit != nil {
				_, err = s.auditAppendTx(ctx, tx, *audit)
			}
			return err
		}
		decided, err := exists(ctx, tx.StmtContext(ctx, s.w.approvalExists), sql.Named("key", a.Key))
		if err != nil {
			return err
		}
		if decided {
			return fmt.Errorf("%w: invocation %s is already decided", store.ErrConflict, a.Key)
		}
		return fmt.Errorf("%w: no invocation %s in tenant %q", store.ErrNotFound, a.Key, a.Tenant)
	})
	if err == nil {
		s.hub.NotifyTopics(store.ApprovalTopic(a.Tenant, a.Key))
	}
	return err
}

func (s *Store) ApprovalGet(ctx context.Context, key string) (*store.Approval, error) {
	var a store.Approval
	var at int64
	err := s.r.approvalGet.QueryRowContext(ctx, sql.Named("key", key)).
		Scan(&a.Key, &a.Tenant, &a.Approved, &a.DecidedBy, &a.Reason, &at)
	if err != nil {
		return nil, notFound(err)
	}
	a.DecidedAt = fromMicros(at)
	return &a, nil
}

func (s *Store) AuditAppend(ctx context.Context, e store.AuditEntry) (int64, error) {
	return auditAppend(ctx, s.w.auditAppend, e)
}

// auditAppendTx appends e in tx: the audit entry of a decision, committed with it (HOST-2).
func (s *Store) auditAppendTx(ctx context.Context, tx *sql.Tx, e store.AuditEntry) (int64, error) {
	return auditAppend(ctx, tx.StmtContext(ctx, s.w.auditAppend), e)
}

func auditAppend(ctx context.Context, stmt *sql.Stmt, e store.AuditEntry) (int64, error) {
	var id int64
	err := toEnd(stmt.QueryContext(ctx, sql.Named("tenant", e.Tenant), sql.Named("kind", e.Kind),
		sql.Named("principal", e.Principal), sql.Named("session_id", e.SessionID), sql.Named("mode", e.Mode),
		sql.Named("tool", e.Tool), sql.Named("key", e.Key), sql.Named("detail", nullJSON(e.Detail)))).Scan(&id)
	return id, err
}

func (s *Store) AuditList(ctx context.Context, tenant string, afterID int64, limit int) ([]store.AuditEntry, error) {
	rows, err := s.r.auditList.QueryContext(ctx,
		sql.Named("tenant", tenant), sql.Named("after_id", afterID), sql.Named("limit", sqlLimit(limit)))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.AuditEntry
	for rows.Next() {
		var e store.AuditEntry
		var detail sql.NullString
		var at int64
		if err := rows.Scan(&e.ID, &e.Tenant, &e.Kind, &e.Principal, &e.SessionID, &e.Mode, &e.Tool, &e.Key, &detail, &at); err != nil {
			return nil, err
		}
		e.Detail, e.At = rawJSON(detail), fromMicros(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

func (s *Store) CatalogHistoryAppend(ctx context.Context, c store.CatalogChange) (int64, error) {
	var id int64
	err := toEnd(s.w.catalogAppend.QueryContext(ctx, sql.Named("server_id", c.ServerID), sql.Named("tool", c.Tool),
		sql.Named("change", c.Change), sql.Named("sha256", c.SHA256), sql.Named("detail", nullJSON(c.Detail)))).Scan(&id)
	if err == nil {
		// and its catalog_drift event, which no tenant owns
		s.hub.NotifyTopics(store.CatalogTopic(), store.EventsTopic(""))
	}
	return id, err
}

func (s *Store) CatalogHistoryList(ctx context.Context, serverID string) ([]store.CatalogChange, error) {
	rows, err := s.r.catalogList.QueryContext(ctx, sql.Named("server_id", serverID))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.CatalogChange
	for rows.Next() {
		var c store.CatalogChange
		var detail sql.NullString
		var at int64
		if err := rows.Scan(&c.ID, &c.ServerID, &c.Tool, &c.Change, &c.SHA256, &detail, &at); err != nil {
			return nil, err
		}
		c.Detail, c.At = rawJSON(detail), fromMicros(at)
		out = append(out, c)
	}
	return out, rows.Err()
}

// helpers

type rowScanner interface {
	Scan(dest ...any) error
}

// toEnd is the row of a statement that returns at most one row, read to the
// statement's end: use it, not QueryRow, for every autocommit write with RETURNING.
// SQLite runs its WAL hook, and with it the automatic checkpoint (every 1,000 WAL
// pages), only from a step that returns SQLITE_DONE, never from a reset; QueryRow
// steps once and resets, so those writes committed without ever checkpointing and
// the WAL kept every page ever written (470 MB after 20,000 records, every read
// searching it; issue 20). TestWAL_CheckpointedByTheWrites.
func toEnd(rows *sql.Rows, err error) rowScanner { return endRow{rows, err} }

type endRow struct {
	rows *sql.Rows
	err  error
}

// Scan is sql.Row's: sql.ErrNoRows without a row; a second row is an error.
func (r endRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	if r.rows.Next() {
		return errors.New("sqlite: a statement of one row returned more")
	}
	return r.rows.Err()
}

// invocationRow is what scanInvocation scans into: one allocation for the row, its
// nullable columns and its optional times, instead of one for each.
type invocationRow struct {
	inv                                              store.Invocation
	idemWhen                                         sql.NullBool
	args, outcome, owner, resumeToken                sql.NullString
	effectSent, earlierEffect, leaseExp, susp, resAt sql.NullInt64
	created, updated                                 int64
	status                                           string
	times                                            [5]time.Time // backing of the optional times
}

func scanInvocation(row rowScanner) (*store.Invocation, error) {
	r := new(invocationRow)
	inv := &r.inv
	err := row.Scan(&inv.ID, &inv.Key, &inv.Tenant, &inv.Principal, &inv.SessionID, &inv.RunID, &inv.Step, &inv.CallID,
		&inv.Tool, &inv.ToolVersion, &inv.ToolSHA256, &inv.Idempotency, &r.idemWhen, &r.args, &inv.ArgsHash, &inv.OriginTrust,
		&inv.ArgumentTrust, &inv.Mode, &inv.Decision, &r.status, &inv.ReasonCode, &r.outcome, &r.effectSent,
		&r.earlierEffect, &inv.WatermarkMissing, &r.owner, &r.leaseExp, &inv.Attempt, &r.susp, &r.resumeToken,
		&inv.Resolution, &inv.ResolvedBy, &r.resAt, &r.created, &r.updated, &inv.Workspace)
	if err != nil {
		return nil, notFound(err)
	}
	if r.idemWhen.Valid {
		inv.IdempotentWhen = &r.idemWhen.Bool
	}
	inv.Status = store.Status(r.status)
	inv.Args, inv.Outcome = rawJSON(r.args), rawJSON(r.outcome)
	inv.LeaseOwner, inv.ResumeToken = r.owner.String, r.resumeToken.String
	inv.EffectSentAt = optMicros(r.effectSent, &r.times[0])
	inv.EarlierEffectSentAt = optMicros(r.earlierEffect, &r.times[1])
	inv.LeaseExpiresAt = optMicros(r.leaseExp, &r.times[2])
	inv.SuspendedAt = optMicros(r.susp, &r.times[3])
	inv.ResolvedAt = optMicros(r.resAt, &r.times[4])
	inv.CreatedAt, inv.UpdatedAt = fromMicros(r.created), fromMicros(r.updated)
	return inv, nil
}

func queryInvocations(ctx context.Context, stmt *sql.Stmt, args ...any) ([]*store.Invocation, error) {
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Invocation
	for rows.Next() {
		inv, err := scanInvocation(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, inv)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func execRows(ctx context.Context, stmt *sql.Stmt, args ...any) (int64, error) {
	res, err := stmt.ExecContext(ctx, args...)
	if err != nil {
		return 0, mapErr(err)
	}
	return res.RowsAffected()
}

func exists(ctx context.Context, stmt *sql.Stmt, args ...any) (bool, error) {
	var ok bool
	err := stmt.QueryRowContext(ctx, args...).Scan(&ok)
	return ok, err
}

// conflictIfExists is the error of a guarded write in tx that matched nothing:
// ErrConflict if the row exists (it is in the wrong state), ErrNotFound if not.
func (s *Store) conflictIfExists(ctx context.Context, tx *sql.Tx, id int64) error {
	return s.conflictIfExistsIn(ctx, tx, id, nil)
}

// conflictIfExistsIn is conflictIfExists for a write confined to tenant (nil: any):
// a row of another tenant is not found.
func (s *Store) conflictIfExistsIn(ctx context.Context, tx *sql.Tx, id int64, tenant any) error {
	ok, err := exists(ctx, tx.StmtContext(ctx, s.w.exists), sql.Named("id", id), sql.Named("tenant", tenant))
	switch {
	case err != nil:
		return err
	case ok:
		return fmt.Errorf("%w: invocation %d is not in the required state", store.ErrConflict, id)
	default:
		return fmt.Errorf("%w: invocation %d", store.ErrNotFound, id)
	}
}

func leaseLost(f store.Fence) error {
	return fmt.Errorf("%w: invocation %d attempt %d of %s", store.ErrLeaseLost, f.ID, f.Attempt, f.Owner)
}

func fenceArgs(f store.Fence, more ...any) []any {
	return append([]any{sql.Named("id", f.ID), sql.Named("owner", f.Owner), sql.Named("attempt", f.Attempt)}, more...)
}

func settlementArgs(st store.Settlement) []any {
	return []any{sql.Named("status", string(st.Status)), sql.Named("reason_code", st.ReasonCode),
		sql.Named("outcome", nullJSON(st.Outcome)), sql.Named("watermark_missing", st.WatermarkMissing)}
}

func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return mapErr(err)
}

// mapErr maps a unique violation (a concurrent writer won) to ErrConflict.
func mapErr(err error) error {
	var se *msqlite.Error
	if errors.As(err, &se) && (se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY) {
		return fmt.Errorf("%w: %v", store.ErrConflict, err)
	}
	return err
}

// nullJSON binds raw JSON as TEXT (a []byte would bind as a BLOB), or NULL if empty.
func nullJSON(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return string(raw)
}

func rawJSON(s sql.NullString) json.RawMessage {
	if !s.Valid {
		return nil
	}
	return json.RawMessage(s.String)
}

func nullBool(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}

// sqlLimit maps "no limit" (<= 0) to SQLite's LIMIT -1.
func sqlLimit(limit int) int {
	if limit <= 0 {
		return -1
	}
	return limit
}

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// optMicros stores v in *t and returns t, or nil if v is NULL.
func optMicros(v sql.NullInt64, t *time.Time) *time.Time {
	if !v.Valid {
		return nil
	}
	*t = fromMicros(v.Int64)
	return t
}

// DeploymentSecretGetOrCreate is store.Store's: one autocommit statement on the writer.
func (s *Store) DeploymentSecretGetOrCreate(ctx context.Context, name string, candidate []byte) ([]byte, error) {
	if err := store.ValidateDeploymentSecret(name, candidate); err != nil {
		return nil, err
	}
	var secret []byte
	err := toEnd(s.write.QueryContext(ctx, s.clock.sql(deploymentSecretGetOrCreateSQL), sql.Named("name", name), sql.Named("secret", candidate))).Scan(&secret)
	return secret, mapErr(err)
}
