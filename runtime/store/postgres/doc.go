// Package postgres is the [store.Store] for several workers on several machines
// (ST-1), on PostgreSQL through github.com/jackc/pgx/v5.
//
//   - Every writing method is one statement in its own transaction (one commit); a
//     statement that matched nothing may be followed by a read that explains why
//     (ErrLeaseLost, ErrConflict, or the lost-ack success).
//   - The sweep (ST-3) is one UPDATE over a SELECT ... FOR UPDATE SKIP LOCKED LIMIT n
//     that re-checks status in the UPDATE and returns the rows: concurrent sweepers
//     never reclaim a row twice and never wait for each other.
//   - Lease times come from now() in the statement (the database clock).
//   - synchronous_commit stays on: [Open] refuses a DSN that turns it off, because a
//     watermark must be durable before the effect it guards.
//   - [WithSchema] keeps the tables in one schema (search_path), so tests run each in a
//     fresh schema. Migrations are embedded (migrations/NNN_name.{up,down}.sql) and
//     applied by [Open] under an advisory lock.
//   - JSON columns are json, not jsonb, so args and outcomes come back byte for byte.
//
// Connections come from a small bounded pool of pgx connections (pool.go) until
// go.mod carries pgxpool's dependency (github.com/jackc/puddle/v2).
//
// This package must never import runtime, spec, codegen or mcp — only runtime/store.
package postgres
