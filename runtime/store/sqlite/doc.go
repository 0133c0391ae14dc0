// Package sqlite is the embedded [store.Store] (ST-1): pure-Go SQLite through
// modernc.org/sqlite, one database file per deployment.
//
// Durability and concurrency, as measured in the reference notes (durable-execution.md
// section 7):
//
//   - WAL, with synchronous=FULL: WAL is synced on every commit, so a committed
//     watermark survives power loss and OS crashes, not only a killed worker
//     (synchronous=NORMAL would roll back the last commits on power loss). The price
//     is an fsync per commit (~1.3k non-idempotent calls/s on the reference disk).
//   - One writer: the write pool has exactly one connection, and transactions begin
//     IMMEDIATE (_txlock=immediate), so writers of this process queue in Go instead of
//     failing with SQLITE_BUSY; busy_timeout waits for writers of other processes on
//     the same file. Reads use a separate pool of query_only connections.
//   - Every writing method is one commit. A method whose whole effect is one
//     statement (insert, watermark, settle, release, suspend, lease renewal, audit and
//     catalog appends) runs it as an autocommit statement: the same commit and fsync
//     as BEGIN IMMEDIATE ... COMMIT, two statements fewer. When such a fenced write
//     matches nothing, the check that tells a lost ack or a conflict from a lost lease
//     runs afterwards on a reader: rows are never deleted and a broken fence never
//     holds again, so it sees what a transaction around both would see. The methods
//     whose check is not monotonic (claim, resume, resolve, approval; the last two with
//     their audit entry) and the sweep (one UPDATE ... FROM (SELECT ... LIMIT n) ...
//     RETURNING of many rows) are one IMMEDIATE transaction.
//   - The worker's tools (store.Claimable) are one JSON parameter, read with json_each
//     inside the sweep's selecting subquery and the retryable list.
//   - The writes every call makes (its record, watermark, settlement, release,
//     suspension) are point writes: they queue for this process's writer under their
//     context, and their statement runs under one that does not end, as the point
//     reads do (issue 20: a context that can end costs modernc.org/sqlite and
//     database/sql a goroutine each per statement). Their one long wait, for a writer
//     of another process, is bounded by busy_timeout, not by the context.
//   - A commit's WAL frames reach the file in one pwrite, not two per frame (header, then
//     page): the connections open through the VFS of internal/walvfs, which gathers
//     them until the commit frame, before SQLite publishes the commit, with spilling
//     off (cache_spill=0) so that no frame is written before its commit. The file is
//     SQLite's own format; other processes, with or without the VFS, share it.
//   - Checkpoints are the store's own maintenance, off the calls' path: a goroutine
//     started by [Open] and stopped by Close runs a PASSIVE checkpoint every 100 ms
//     while the WAL grows (backing off while nothing is written); the commit that
//     takes the WAL past 8,000 pages runs a last, short one, which lets the WAL start
//     over when commits never pause (checkpoint.go).
//   - Every statement is prepared once, by [Open] (modernc.org/sqlite would parse the
//     SQL on every call otherwise); transactions run them through tx.StmtContext,
//     never on the writer pool directly, whose only connection the transaction holds.
//   - Times are INTEGER microseconds since the Unix epoch from SQLite's clock in the
//     statement (millisecond precision), never the caller's clock. A test store opened
//     [WithClock] adds the clock's offset to it in every statement (store.Clock).
//   - The SQL is in sql/*.sql, one named section per statement and fragments included
//     as {{name}} (runtime/internal/sqlfile), embedded and read once.
//   - foreign_keys is on; tables are STRICT; the audit log is append-only (triggers).
//   - Wake-ups (store.Waker) are in-process: a commit through this handle wakes this
//     handle's waiters of its topics once it returns (the fenced writes return the
//     row's tenant and key for it); other processes' writes are found by the waiters'
//     own polling, so WakeFallback is 0 (wake.go).
//
// WAL needs a file: [Open] refuses ":memory:"; tests use a file in t.TempDir().
// Migrations are embedded (migrations/NNN_name.{up,down}.sql) and applied by [Open].
//
// This package must never import runtime, spec, codegen or mcp — only runtime/store
// (and runtime/internal/sqlfile, which reads its SQL).
package sqlite
