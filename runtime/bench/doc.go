// Package bench holds the pipeline benchmarks of issue 3 and their helpers: an
// in-memory [store.Store] ([MemStore]) and no-op tools shaped like generated wrappers
// ([NewNopTool]).
//
// The benchmarks are not part of `make test` (go test without -bench runs none of
// them); `make bench` runs them. See BENCHMARKS.md, section "Pipeline (issue 3)":
//
//   - BenchmarkPipelineOverhead: one call through runtime.Pipeline over MemStore,
//     against calling the tool directly.
//   - BenchmarkPostgresCalls: calls/s through the pipeline on PostgreSQL at 1, 4 and
//     16 callers, against pgbench running the store's own statements in the same run
//     (skips without TOOLGEN_PG_DSN or pgbench).
//   - BenchmarkSQLiteCalls: the same on SQLite, against a raw database/sql loop.
//
// The PostgreSQL and SQLite benchmarks run each cell for a fixed time
// (TOOLGEN_BENCH_CELL, default 5s) whatever b.N is; run them with -benchtime 1x.
package bench
