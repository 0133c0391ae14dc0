// Package postgres is the [store.Store] for several workers on several machines
// (ST-1), on PostgreSQL through github.com/jackc/pgx/v5.
//
//   - Every writing method is one statement in its own transaction (one commit); a
//     statement that matched nothing may be followed by a read that explains why
//     (ErrLeaseLost, ErrConflict, or the lost-ack success).
//   - The sweep (ST-3) is one UPDATE over a SELECT ... FOR UPDATE SKIP LOCKED LIMIT n
//     that re-checks status in the UPDATE and returns the rows: concurrent sweepers
//     never reclaim a row twice and never wait for each other. The worker's tools
//     (store.Claimable, one jsonb parameter read with jsonb_to_recordset) are tested in
//     that SELECT, so a row of another tool is never locked.
//   - A decision or a review and its audit entry are one statement (data-modifying
//     WITH): they commit together or not at all (HOST-2).
//   - Lease times come from now() in the statement (the database clock). A test store
//     opened [WithClock] runs its statements with now() shifted by the clock's offset
//     (store.Clock), so the database stays the one source of time.
//   - synchronous_commit stays on: [Open] refuses a DSN that turns it off, because a
//     watermark must be durable before the effect it guards. The one exception is a
//     record-once row (store.InsertRecordOnce), whose statement turns it off for its
//     own transaction only (InvocationInsertRelaxed): a crash of the server may lose
//     the last such rows, and the reads they recorded then run again.
//   - [WithSchema] keeps the tables in one schema (search_path), so tests run each in a
//     fresh schema. Migrations are embedded (migrations/NNN_name.{up,down}.sql) and
//     applied by [Open] under an advisory lock.
//   - JSON columns are json, not jsonb, so args and outcomes come back byte for byte.
//   - Wake-ups (store.Waker) are LISTEN/NOTIFY: migration 010's triggers notify in the
//     transaction of each write (decisions, catalog changes; a tenant's events and a
//     call's status only while a listener has registered them, since a notifying
//     commit serializes with every other), and one listener connection per Store,
//     opened by the first Subscribe, fans them out in-process and reconnects on its own
//     (wake.go). While it listens, waiters read the store every DefaultWakeFallback
//     (5 s) at most without a wake-up; while it does not, at their own interval.
//
// Statements run on a bounded pgxpool (pool.go), prepared and cached per connection
// (pgx's default exec mode). The hot path is kept close to a bare pgx loop: the SQL
// is written with @name parameters (sql/*.sql, named sections read through embed by
// runtime/internal/sqlfile) but compiled once, at init, to $n with a fixed argument
// order, so no call rewrites SQL (but a test store's, WithClock) or builds a map; and
// invocation rows are decoded from their wire bytes (scan.go) rather than through
// pgx's per-statement scan plans.
//
// This package must never import runtime, spec, codegen or mcp — only runtime/store
// (and runtime/internal/sqlfile, which reads its SQL).
package postgres
