package bench

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, as runtime/store/sqlite uses it

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/internal/sqlfile"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
)

// BenchmarkSQLiteCalls is (c) of issue 3: calls/s through the pipeline on SQLite at
// 1, 4 and 16 callers for each class, against a raw database/sql loop in the same
// run, on the same file: the statements the store issues for that class (SQL read
// from runtime/store/sqlite/sql/*.sql, values of a recorded pipeline call, key,
// args_hash, call_id, args and token varying per call), on connections opened with
// the store's own settings (connParams of sqlite.go: WAL, synchronous=FULL,
// busy_timeout, _txlock=immediate; one writer connection, `readers` query_only
// readers, reads on the readers as in the store, and a record-once row on a second
// writer connection at synchronous=NORMAL, as the store writes it). The loop is the floor of those
// statements: prepared once, each write an autocommit statement, all under
// context.Background() (as the store now runs them; see its doc). Each side runs
// TOOLGEN_BENCH_CELL (5s) in all, in one-second slices interleaved with the other
// sides' (see interleave), after one WAL checkpoint. Metrics as in BenchmarkPostgresCalls, baseline "raw".
//
// A third side, for attribution only, runs the loop the way the store drove the
// driver before issue 20 (store-shaped-calls/s, pct-of-store-shaped): each statement
// prepared on every call, each write in its own BEGIN IMMEDIATE ... COMMIT;
// store-shaped/raw is what preparing per call and the explicit transactions cost.
func BenchmarkSQLiteCalls(b *testing.B) {
	ctx := context.Background()
	d := cellDuration(b)
	r := newSQLiteRig(b, preloadRows)
	p, write := r.p, r.write
	checkpoint := func() {
		if _, err := write.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range Classes {
		raw, err := newRawSQLite(ctx, c, capture(b, c), r)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.Name, func(b *testing.B) {
			for _, callers := range Callers {
				b.Run("callers="+strconv.Itoa(callers), func(b *testing.B) {
					if _, err := drive(ctx, p, c, callers, warmup, uniqueTag("warm")); err != nil {
						b.Fatal(err)
					}
					checkpoint()
					res, err := interleave(d, []func(time.Duration) (runStats, error){
						func(d time.Duration) (runStats, error) { return drive(ctx, p, c, callers, d, uniqueTag(c.Name)) },
						func(d time.Duration) (runStats, error) { return raw.run(ctx, callers, d, uniqueTag("raw"), false) },
						func(d time.Duration) (runStats, error) { return raw.run(ctx, callers, d, uniqueTag("shaped"), true) },
					})
					if err != nil {
						b.Fatal(err)
					}
					pipe, base, shaped := res[0], res[1], res[2]
					reportCell(b, "raw", pipe, base)
					b.ReportMetric(shaped.rate(), "store-shaped-calls/s")
					b.ReportMetric(100*pipe.rate()/shaped.rate(), "pct-of-store-shaped")
					b.ReportMetric(float64(shaped.cpu.Microseconds())/float64(shaped.calls), "store-shaped-CPU-us/call")
				})
			}
		})
		raw.close()
	}
}

// sqliteRig is what the SQLite benchmark and its smoke test run on: a store (file,
// migrated, preload settled rows written), a pipeline on it, and the raw loops' own
// pools opened as the store opens its own (the driver's connParams and readers).
type sqliteRig struct {
	p                    *runtime.Pipeline
	write, relaxed, read *sql.DB // relaxed: synchronous=NORMAL, for record-once rows
	queries              map[string]string
}

func newSQLiteRig(tb testing.TB, preload int) *sqliteRig {
	tb.Helper()
	ctx := context.Background()
	queries := driverQueries(tb, "sqlite",
		"invocationBreakerCountsSQL", "invocationBreakerCountsAndKeySQL", "invocationInsertSQL",
		"invocationMarkEffectSentIfLeasedSQL", "invocationSettleIfLeasedSQL", "nowMicros")
	settings := driverConsts(tb, "sqlite", "sqlite.go", "connParams", "readers")
	readers, err := strconv.Atoi(settings["readers"])
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "toolgen.db")
	st, err := sqlite.Open(ctx, path) // creates and migrates the file
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	dsn := "file:" + path + "?" + settings["connParams"]
	oneConnection := func(dsn string) *sql.DB {
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { db.Close() })
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
		db.SetConnMaxLifetime(0)
		db.SetConnMaxIdleTime(0)
		return db
	}
	write := oneConnection(dsn)
	relaxed := oneConnection(strings.Replace(dsn, "synchronous(FULL)", "synchronous(NORMAL)", 1))
	read, err := sql.Open("sqlite", dsn+"&_pragma=query_only(1)")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { read.Close() })
	read.SetMaxOpenConns(readers)
	read.SetMaxIdleConns(readers)

	reads := capture(tb, Classes[0])
	if _, err := write.ExecContext(ctx, fmt.Sprintf(sqlitePreloadSQL, queries["nowMicros"]),
		preload, string(recordOf(tb, reads).Settlement().Outcome)); err != nil {
		tb.Fatalf("preload: %v", err)
	}
	p, err := NewPipeline(st)
	if err != nil {
		tb.Fatal(err)
	}
	return &sqliteRig{p: p, write: write, relaxed: relaxed, read: read, queries: queries}
}

// sqlitePreloadSQL writes ?1 settled rows of distinct keys, runs and argument hashes
// (%s is the driver's nowMicros).
const sqlitePreloadSQL = `
WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?1)
INSERT INTO tool_invocations (key, tenant, principal, session_id, run_id, step_number, call_id, tool, tool_version,
	idempotency, args, args_hash, origin_trust, argument_trust, mode, decision, status, reason_code, outcome,
	attempt, created_at, updated_at)
SELECT lower(hex(randomblob(32))), 'acme', 'alice', 's1', 'preload-' || (n / 10), 1, 'preload-' || n,
	'bench.read', 1, 'idempotent', '{"n":' || n || '}', lower(hex(randomblob(32))), 'user', 'user', '',
	'allow', 'SUCCEEDED', '', ?2, 0, %[1]s, %[1]s
FROM g`

// rawSQLite is the baseline loop of one class: the store's statements, prepared.
type rawSQLite struct {
	calls []storeCall
	stmts []*sql.Stmt // one per call, on the pool the store uses for it
	sqls  []string
	args  []map[string]any
	// positional are the statements the store binds by position (the record and the
	// breaker's read, sqlite.Store.prepare), rewritten as it rewrites them; nil for the
	// others, bound by name as the store binds them
	positional []*sqlfile.Positional
	write      *sql.DB
	read       *sql.DB
	readCalls  []bool
	// columns is the number of columns of an invocation row, read from the database
	// (a migration may add columns).
	columns int
	// insertAttempt is the attempt the insert writes: the store takes it from what it
	// inserted, not from the statement's result, and so does the loop.
	insertAttempt int64
}

// insertReturns is the number of columns the store's insert returns (id,
// lease_expires_at, created_at, updated_at).
const insertReturns = 4

func newRawSQLite(ctx context.Context, c Class, calls []storeCall, rig *sqliteRig) (*rawSQLite, error) {
	write, read, queries := rig.write, rig.read, rig.queries
	r := &rawSQLite{calls: calls, write: write, read: read}
	rows, err := read.QueryContext(ctx, queries["invocationGetByKeySQL"], sql.Named("key", ""))
	if err != nil {
		return nil, err
	}
	cols, err := rows.Columns()
	rows.Close()
	if err != nil {
		return nil, err
	}
	r.columns = len(cols)
	for _, sc := range calls {
		name, args := namedArgs(sc)
		db, isRead := write, sc.Method == "InvocationPriorCalls" || sc.Method == "InvocationGetByKey"
		switch {
		case isRead:
			db = read
		case sc.Method == "InvocationInsert" && sc.Insert.Relaxed():
			db = rig.relaxed // the store-shaped side writes it on write, as the store did then
		}
		query := queries[name]
		var pos *sqlfile.Positional
		if sc.Method == "InvocationInsert" || sc.Method == "InvocationPriorCalls" {
			p, err := sqlfile.NewPositional(query)
			if err != nil {
				return nil, err
			}
			pos, query = &p, p.Query
		}
		r.sqls, r.readCalls, r.positional = append(r.sqls, query), append(r.readCalls, isRead), append(r.positional, pos)
		stmt, err := db.PrepareContext(ctx, query)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("%s: prepare %s: %w", c.Name, name, err)
		}
		r.stmts, r.args = append(r.stmts, stmt), append(r.args, args)
		if sc.Method == "InvocationInsert" {
			r.insertAttempt = int64(sc.Insert.Attempt())
		}
	}
	return r, nil
}

func (r *rawSQLite) close() {
	for _, s := range r.stmts {
		s.Close()
	}
}

// queryer is what a statement runs on: a prepared statement, a pool, a transaction.
type queryer interface {
	QueryRowContext(ctx context.Context, args ...any) *sql.Row
	QueryContext(ctx context.Context, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, args ...any) (sql.Result, error)
}

// unprepared runs query on db or tx, preparing it on every call.
type unprepared struct {
	query string
	db    interface {
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	}
}

func (u unprepared) QueryRowContext(ctx context.Context, args ...any) *sql.Row {
	return u.db.QueryRowContext(ctx, u.query, args...)
}

func (u unprepared) QueryContext(ctx context.Context, args ...any) (*sql.Rows, error) {
	return u.db.QueryContext(ctx, u.query, args...)
}

func (u unprepared) ExecContext(ctx context.Context, args ...any) (sql.Result, error) {
	return u.db.ExecContext(ctx, u.query, args...)
}

// run runs the loop from callers goroutines for d: raw, or shaped as the store drives
// the driver (see BenchmarkSQLiteCalls).
func (r *rawSQLite) run(ctx context.Context, callers int, d time.Duration, tag string, shaped bool) (runStats, error) {
	type worker struct {
		dest  []any
		vals  []any
		runID string
	}
	workers := make([]*worker, callers)
	for g := range workers {
		w := &worker{dest: make([]any, r.columns), vals: make([]any, r.columns),
			runID: tag + "-g" + strconv.Itoa(g)}
		for i := range w.dest {
			w.dest[i] = &w.vals[i]
		}
		workers[g] = w
	}
	return loop(callers, d, func(g int, i int64) error {
		w := workers[g]
		seed := strconv.AppendInt([]byte(w.runID+"-"), i, 10)
		callID := string(seed)
		key, argsHash := hexHash("k", seed), hexHash("a", seed)
		var id, attempt int64
		for j, sc := range r.calls {
			vary := map[string]any{"key": key, "args_hash": argsHash, "run_id": w.runID, "call_id": callID,
				"args": string(Args(i)), "token": hexHash("t", seed)[:32]}
			if sc.Method == "InvocationMarkEffectSentIfLeased" || sc.Method == "InvocationSettleIfLeased" {
				vary["id"], vary["attempt"] = id, attempt
			}
			named := make([]sql.NamedArg, 0, len(r.args[j]))
			for name, v := range r.args[j] {
				if nv, ok := vary[name]; ok {
					v = nv
				}
				named = append(named, sql.Named(name, v))
			}
			var args []any
			if pos := r.positional[j]; pos != nil {
				var err error
				if args, err = pos.Args(named...); err != nil {
					return err
				}
			} else {
				args = make([]any, len(named))
				for k := range named {
					args[k] = named[k]
				}
			}
			var q queryer = r.stmts[j]
			var tx *sql.Tx
			if shaped && r.readCalls[j] {
				q = unprepared{query: r.sqls[j], db: r.read}
			} else if shaped {
				var err error
				if tx, err = r.write.BeginTx(ctx, nil); err != nil {
					return err
				}
				q = unprepared{query: r.sqls[j], db: tx}
			}
			if err := r.exec(ctx, sc, q, args, w.dest, w.vals, &id, &attempt); err != nil {
				if tx != nil {
					tx.Rollback()
				}
				return err
			}
			if tx != nil {
				if err := tx.Commit(); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// exec runs one statement of the loop and checks its result as the store does.
func (r *rawSQLite) exec(ctx context.Context, sc storeCall, q queryer, args, dest, vals []any, id, attempt *int64) error {
	switch sc.Method {
	case "InvocationPriorCalls":
		var total, denied int
		var uncertain, keyTaken bool
		if sc.Prior.Key != "" {
			return q.QueryRowContext(ctx, args...).Scan(&total, &denied, &uncertain, &keyTaken)
		}
		return q.QueryRowContext(ctx, args...).Scan(&total, &denied, &uncertain)
	case "InvocationGetByKey":
		if err := q.QueryRowContext(ctx, args...).Scan(dest...); !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("get by key: %v", err)
		}
		return nil
	case "InvocationInsert":
		// what the insert returns (the id and the times the database chose); the
		// attempt is the one inserted, as the store takes it. The statement is stepped
		// to its end, as the store steps it: only that step runs SQLite's automatic
		// checkpoint.
		rows, err := q.QueryContext(ctx, args...)
		if err != nil {
			return err
		}
		if !rows.Next() {
			rows.Close()
			return fmt.Errorf("insert returned no row: %v", rows.Err())
		}
		if err := rows.Scan(dest[:insertReturns]...); err != nil {
			rows.Close()
			return err
		}
		rows.Next()
		if err := rows.Err(); err != nil {
			rows.Close()
			return err
		}
		if err := rows.Close(); err != nil {
			return err
		}
		*id, *attempt = vals[0].(int64), r.insertAttempt
		return nil
	default: // the fenced writes
		res, err := q.ExecContext(ctx, args...)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("%s matched %d rows", sc.Method, n)
		}
		return nil
	}
}

func hexHash(prefix string, seed []byte) string {
	h := sha256.New()
	h.Write([]byte(prefix))
	h.Write(seed)
	return hex.EncodeToString(h.Sum(nil))
}
