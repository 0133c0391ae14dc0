package bench

import (
	"context"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime/store/postgres"
	"github.com/toolgen/toolgen/runtime/store/postgres/pgtest"
)

// The store benchmarks only run with -bench, so a migration that adds a column or a
// statement that gains a parameter could break them unseen (it did: the breaker's
// tenant, tool_sha256, workspace). These smoke tests run every side of every class a
// few times in `go test`: the pipeline, the raw loops built from the drivers' own SQL,
// and, on PostgreSQL, the pgbench script (its generation checks that the store binds
// every parameter; running pgbench itself is left to the benchmark).

// atLeastOnce runs side for a short while, longer each time it made no call (a loaded
// machine may not schedule it within the first slice), and fails tb on an error.
func atLeastOnce(tb testing.TB, what string, side func(d time.Duration) (runStats, error)) {
	tb.Helper()
	for d := 20 * time.Millisecond; ; d *= 2 {
		st, err := side(d)
		if err != nil {
			tb.Fatalf("%s: %v", what, err)
		}
		if st.calls > 0 {
			return
		}
		if d > 10*time.Second {
			tb.Fatalf("%s made no call in %s", what, d)
		}
	}
}

func TestSQLiteCallsSmoke(t *testing.T) {
	ctx := context.Background()
	r := newSQLiteRig(t, 100)
	for _, c := range Classes {
		raw, err := newRawSQLite(ctx, c, capture(t, c), r)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(raw.close)
		atLeastOnce(t, c.Name+" pipeline", func(d time.Duration) (runStats, error) {
			return drive(ctx, r.p, c, 2, d, uniqueTag(c.Name))
		})
		atLeastOnce(t, c.Name+" raw loop", func(d time.Duration) (runStats, error) {
			return raw.run(ctx, 2, d, uniqueTag("raw"), false)
		})
		atLeastOnce(t, c.Name+" store-shaped loop", func(d time.Duration) (runStats, error) {
			return raw.run(ctx, 2, d, uniqueTag("shaped"), true)
		})
	}
}

func TestPostgresCallsSmoke(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	queries := driverQueries(t, "postgres", pgStatements...)
	_, schema := pgtest.Open(t)
	st, err := postgres.Open(ctx, dsn, postgres.WithSchema(schema), postgres.WithMaxConns(2))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := NewPipeline(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Classes {
		calls := capture(t, c)
		pgbenchScript(t, c, calls, queries)
		raw := newRawPG(calls, queries)
		pool, err := raw.open(ctx, dsn, schema, 2)
		if err != nil {
			t.Fatal(err)
		}
		atLeastOnce(t, c.Name+" pipeline", func(d time.Duration) (runStats, error) {
			return drive(ctx, p, c, 2, d, uniqueTag(c.Name))
		})
		atLeastOnce(t, c.Name+" pgx loop", func(d time.Duration) (runStats, error) {
			return raw.run(ctx, pool, 2, d, uniqueTag("pgx"))
		})
		pool.Close()
	}
}
