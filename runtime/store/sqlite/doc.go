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
//   - Every writing method is one IMMEDIATE transaction (one commit); the sweep is one
//     UPDATE ... FROM (SELECT ... LIMIT n) ... RETURNING inside it.
//   - Times are INTEGER microseconds since the Unix epoch from SQLite's clock in the
//     statement (millisecond precision), never the caller's clock.
//   - foreign_keys is on; tables are STRICT; the audit log is append-only (triggers).
//
// WAL needs a file: [Open] refuses ":memory:"; tests use a file in t.TempDir().
// Migrations are embedded (migrations/NNN_name.{up,down}.sql) and applied by [Open].
//
// This package must never import runtime, spec, codegen or mcp — only runtime/store.
package sqlite
