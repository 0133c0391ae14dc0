package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolgen/toolgen/runtime/store/postgres"
	"github.com/toolgen/toolgen/runtime/store/postgres/pgtest"
)

// Callers are the concurrent callers of the throughput benchmarks.
var Callers = []int{1, 4, 16}

// preloadRows are written before the first cell, so plans and index depth are those
// of a table in use (an empty, freshly analyzed table gets sequential-scan plans).
const preloadRows = 100_000

// BenchmarkPostgresCalls is (b) of issue 3: calls/s through the pipeline on
// PostgreSQL at 1, 4 and 16 callers for each class, against pgbench running, in the
// same run, on the same table, the statements the store issues for that class: the
// SQL is read from runtime/store/postgres/sql/*.sql, the parameter values are those
// of a recorded pipeline call (key, args_hash, call_id, args and token vary per
// transaction), each statement is its own transaction as in the store, -M prepared
// (pgx caches prepared statements), as many clients as callers, and the pipeline's
// pool has as many connections as callers. Each side runs TOOLGEN_BENCH_CELL (5s) in
// all, in one-second slices interleaved with the other sides' (see interleave),
// after one VACUUM ANALYZE and CHECKPOINT.
//
// Metrics: calls/s (the pipeline), pgbench-calls/s, pct-of-pgbench, and the client
// process's CPU per call on each side (client-CPU-us/call for the pipeline's process,
// pgbench-CPU-us/call for pgbench's); ns/op, allocs/op and B/op are the pipeline
// process's per call (pipeline + store + pgx).
//
// A third side, for attribution only, runs the same statements from Go through pgx
// without the pipeline or the store (pgx-calls/s, pct-of-pgx, pgx-CPU-us/call): the
// floor of a Go client, so that pipeline/pgx is what toolgen adds and pgx/pgbench what
// Go and pgx cost against libpq.
func BenchmarkPostgresCalls(b *testing.B) {
	dsn := pgtest.DSN(b)
	pgbench, err := findPgbench()
	if err != nil {
		b.Skipf("pgbench is not available (%v): skipping the PostgreSQL baseline", err)
	}
	ctx := context.Background()
	d := cellDuration(b)
	queries := driverQueries(b, "postgres", pgStatements...)
	_, schema := pgtest.Open(b) // the schema, migrated; dropped when the benchmark ends
	acfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	acfg.RuntimeParams["search_path"] = schema
	admin, err := pgx.ConnectConfig(ctx, acfg)
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close(ctx)
	reads := capture(b, Classes[0])
	if _, err := admin.Exec(ctx, pgPreloadSQL, preloadRows, recordOf(b, reads).Settlement().Outcome); err != nil {
		b.Fatalf("preload: %v", err)
	}
	dir := b.TempDir()
	for _, c := range Classes {
		calls := capture(b, c)
		script, defines := pgbenchScript(b, c, calls, queries)
		raw := newRawPG(calls, queries)
		path := filepath.Join(dir, c.Name+".sql")
		if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
			b.Fatal(err)
		}
		if keep := os.Getenv("TOOLGEN_BENCH_KEEP"); keep != "" {
			os.WriteFile(filepath.Join(keep, "pgbench-"+c.Name+".sql"), []byte(script), 0o644)
			os.WriteFile(filepath.Join(keep, "pgbench-"+c.Name+".defines"), []byte(strings.Join(defines, "\n")+"\n"), 0o644)
		}
		b.Run(c.Name, func(b *testing.B) {
			for _, callers := range Callers {
				b.Run("callers="+strconv.Itoa(callers), func(b *testing.B) {
					st, err := postgres.Open(ctx, dsn, postgres.WithSchema(schema), postgres.WithMaxConns(callers))
					if err != nil {
						b.Fatal(err)
					}
					defer st.Close()
					p, err := NewPipeline(st)
					if err != nil {
						b.Fatal(err)
					}
					pool, err := raw.open(ctx, dsn, schema, callers)
					if err != nil {
						b.Fatal(err)
					}
					defer pool.Close()
					if _, err := drive(ctx, p, c, callers, warmup, uniqueTag("warm")); err != nil {
						b.Fatal(err)
					}
					if _, err := raw.run(ctx, pool, callers, warmup, uniqueTag("warm")); err != nil {
						b.Fatal(err)
					}
					pgPrep(b, admin)
					res, err := interleave(d, []func(time.Duration) (runStats, error){
						func(d time.Duration) (runStats, error) { return drive(ctx, p, c, callers, d, uniqueTag(c.Name)) },
						func(d time.Duration) (runStats, error) {
							return runPgbench(pgbench, dsn, schema, path, defines, callers, d)
						},
						func(d time.Duration) (runStats, error) { return raw.run(ctx, pool, callers, d, uniqueTag("pgx")) },
					})
					if err != nil {
						b.Fatal(err)
					}
					// Every side settles every call it records: a RUNNING row left
					// behind is a side whose fenced writes matched nothing, a baseline
					// doing less than the store, not a result.
					var running int64
					if err := admin.QueryRow(ctx, "SELECT count(*) FROM tool_invocations WHERE status = 'RUNNING'").Scan(&running); err != nil {
						b.Fatal(err)
					}
					if running != 0 {
						b.Fatalf("%d calls left RUNNING after the cell: a side's fenced writes matched nothing", running)
					}
					pipe, base, gopgx := res[0], res[1], res[2]
					reportCell(b, "pgbench", pipe, base)
					b.ReportMetric(gopgx.rate(), "pgx-calls/s")
					b.ReportMetric(100*pipe.rate()/gopgx.rate(), "pct-of-pgx")
					b.ReportMetric(float64(gopgx.cpu.Microseconds())/float64(gopgx.calls), "pgx-CPU-us/call")
				})
			}
		})
	}
}

// pgPreloadSQL writes $1 settled rows of distinct keys, runs and argument hashes.
const pgPreloadSQL = `
INSERT INTO tool_invocations (key, tenant, principal, session_id, run_id, step_number, call_id, tool, tool_version,
	idempotency, args, args_hash, origin_trust, argument_trust, mode, decision, status, reason_code, outcome,
	attempt, created_at, updated_at)
SELECT md5('pk' || g) || md5('pK' || g), 'acme', 'alice', 's1', 'preload-' || (g / 10), 1, 'preload-' || g,
	'bench.read', 1, 'idempotent', ('{"n":' || g || '}')::json, md5('pa' || g) || md5('pA' || g), 'user', 'user', '',
	'allow', 'SUCCEEDED', '', $2::json, 0, now(), now()
FROM generate_series(1, $1::int) AS g`

// pgPrep gives each side the same starting point: dead tuples vacuumed, statistics
// fresh, dirty buffers written (so both pay the full-page writes after a checkpoint).
func pgPrep(tb testing.TB, admin *pgx.Conn) {
	tb.Helper()
	ctx := context.Background()
	if _, err := admin.Exec(ctx, `VACUUM ANALYZE tool_invocations`); err != nil {
		tb.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `CHECKPOINT`); err != nil {
		tb.Logf("CHECKPOINT: %v (continuing without)", err)
	}
}

func findPgbench() (string, error) {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	if len(m) > 0 {
		return m[len(m)-1], nil
	}
	return "", exec.ErrNotFound
}

var namedParam = regexp.MustCompile(`@([a-z_][a-z0-9_]*)`)

// pgbenchVary are the parameters that differ per call, as SQL over the transaction's
// random :k: 64 hex digits for the key and the args hash (as the SHA-256 hex the
// pipeline writes), a 32-digit token, and the row's id and attempt from the insert.
var pgbenchVary = map[string]string{
	"key":       `md5('k' || :k) || md5('K' || :k)`,
	"args_hash": `md5('a' || :k) || md5('A' || :k)`,
	"call_id":   `'call-' || :k`,
	"args":      `('{"n":' || :k || '}')::json`,
	"token":     `md5('t' || :k)`,
}

// pgbenchScript turns the store calls of one pipeline call into a pgbench script:
// each call's SQL from sql/*.sql with its @parameters bound to pgbench variables
// (-D, returned as defines), to NULL or an empty string literal (pgbench cannot
// define an empty value), or to a per-transaction expression (pgbenchVary). An
// insert followed by fenced writes keeps its returned row (\gset p_) for their id,
// as the store does; their attempt is the insert's, bound as the call recorded it
// (a column the insert does not return would leave pgbench's variable undefined and
// the fenced write matching nothing).
func pgbenchScript(tb testing.TB, c Class, calls []storeCall, queries map[string]string) (string, []string) {
	tb.Helper()
	var (
		sb      strings.Builder
		defines []string
	)
	fmt.Fprintf(&sb, "-- %s: the statements of one pipeline call, each its own transaction; commits: %d\n", c.Name, c.Commits)
	sb.WriteString("\\set k random(1, 9223372036854775806)\n")
	for i, sc := range calls {
		name, args := pgNamedArgs(sc)
		prefix := fmt.Sprintf("s%d", i)
		fenced := sc.Method == "InvocationMarkEffectSentIfLeased" || sc.Method == "InvocationSettleIfLeased"
		sql := namedParam.ReplaceAllStringFunc(queries[name], func(m string) string {
			param := m[1:]
			if expr, ok := pgbenchVary[param]; ok {
				return expr
			}
			if fenced && param == "id" {
				return ":p_" + param
			}
			v, ok := args[param]
			if !ok {
				tb.Fatalf("%s: %s has parameter @%s the store does not bind", c.Name, name, param)
			}
			switch v {
			case nil:
				return "NULL"
			case "":
				return "''"
			}
			variable := prefix + "_" + param
			defines = append(defines, variable+"="+fmt.Sprint(v))
			return ":" + variable
		})
		fmt.Fprintf(&sb, "-- %s\n%s", sc.Method, strings.TrimSpace(sql))
		if sc.Method == "InvocationInsert" && i+1 < len(calls) {
			sb.WriteString("\n\\gset p_\n")
		} else {
			sb.WriteString(";\n")
		}
	}
	return sb.String(), defines
}

var (
	pgbenchTPS    = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
	pgbenchTx     = regexp.MustCompile(`number of transactions actually processed: ([0-9]+)`)
	pgbenchFailed = regexp.MustCompile(`number of failed transactions: ([0-9]+)`)
)

// runPgbench runs script with clients clients for d (whole seconds) in schema and
// returns its transactions and rate (a transaction is one call).
func runPgbench(pgbench, dsn, schema, script string, defines []string, clients int, d time.Duration) (runStats, error) {
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(min(clients, goruntime.NumCPU())),
		"-T", strconv.Itoa(int(d.Seconds())), "-f", script}
	for _, def := range defines {
		args = append(args, "-D", def)
	}
	args = append(args, dsn)
	cmd := exec.Command(pgbench, args...)
	cmd.Env = append(os.Environ(), "PGOPTIONS=-c search_path="+schema)
	out, err := cmd.CombinedOutput()
	var cpu time.Duration
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		return runStats{}, fmt.Errorf("pgbench: %v\n%s", err, out)
	}
	tps, tx, failed := pgbenchTPS.FindSubmatch(out), pgbenchTx.FindSubmatch(out), pgbenchFailed.FindSubmatch(out)
	if tps == nil || tx == nil || strings.Contains(string(out), "aborted") || (failed != nil && string(failed[1]) != "0") {
		return runStats{}, fmt.Errorf("pgbench: unexpected output:\n%s", out)
	}
	rate, _ := strconv.ParseFloat(string(tps[1]), 64)
	n, _ := strconv.ParseInt(string(tx[1]), 10, 64)
	return runStats{calls: n, elapsed: time.Duration(float64(n) / rate * float64(time.Second)), cpu: cpu}, nil
}

// rawPG is the Go floor of one class: the store's statements through a pgx pool,
// with the @names rewritten to $n once (pgx.NamedArgs rewrites them on every call),
// the insert's row read raw (id and attempt only), nothing else.
type rawPG struct {
	calls []storeCall
	sqls  []string
	names [][]string // parameter names in $n order
	args  []map[string]any
}

func newRawPG(calls []storeCall, queries map[string]string) *rawPG {
	r := &rawPG{calls: calls}
	for _, sc := range calls {
		name, args := pgNamedArgs(sc)
		var names []string
		sql := namedParam.ReplaceAllStringFunc(queries[name], func(m string) string {
			i := slices.Index(names, m[1:])
			if i < 0 {
				names, i = append(names, m[1:]), len(names)
			}
			return "$" + strconv.Itoa(i+1)
		})
		r.sqls, r.names, r.args = append(r.sqls, sql), append(r.names, names), append(r.args, args)
	}
	return r
}

func (r *rawPG) open(ctx context.Context, dsn, schema string, callers int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = int32(callers)
	return pgxpool.NewWithConfig(ctx, cfg)
}

// run runs the loop from callers goroutines for d on pool.
func (r *rawPG) run(ctx context.Context, pool *pgxpool.Pool, callers int, d time.Duration, tag string) (runStats, error) {
	call := func(runID string, i int64) error {
		seed := strconv.AppendInt([]byte(runID+"-"), i, 10)
		vary := map[string]any{"key": hexHash("k", seed), "args_hash": hexHash("a", seed), "run_id": runID,
			"call_id": string(seed), "args": string(Args(i)), "token": hexHash("t", seed)[:32]}
		for j, sc := range r.calls {
			args := make([]any, len(r.names[j]))
			for k, name := range r.names[j] {
				v, ok := vary[name]
				if !ok {
					v = r.args[j][name]
				}
				args[k] = v
			}
			switch sc.Method {
			case "InvocationPriorCalls":
				var total, denied int64
				var uncertain, keyTaken bool
				dest := []any{&total, &denied, &uncertain, &keyTaken}
				if sc.Prior.Key == "" {
					dest = dest[:3]
				}
				if err := pool.QueryRow(ctx, r.sqls[j], args...).Scan(dest...); err != nil {
					return err
				}
			case "InvocationGetByKey", "InvocationInsert":
				rows, err := pool.Query(ctx, r.sqls[j], args...)
				if err != nil {
					return err
				}
				n := 0
				for rows.Next() {
					n++
					if sc.Method != "InvocationInsert" {
						continue
					}
					raw := rows.RawValues()
					for k, f := range rows.FieldDescriptions() {
						if f.Name == "id" || f.Name == "attempt" {
							vary[f.Name] = rawInt(raw[k])
						}
					}
				}
				rows.Close()
				if err := rows.Err(); err != nil {
					return err
				}
				if want := map[bool]int{true: 1, false: 0}[sc.Method == "InvocationInsert"]; n != want {
					return fmt.Errorf("%s returned %d rows", sc.Method, n)
				}
			default: // the fenced writes
				tag, err := pool.Exec(ctx, r.sqls[j], args...)
				if err != nil {
					return err
				}
				if tag.RowsAffected() != 1 {
					return fmt.Errorf("%s matched %d rows", sc.Method, tag.RowsAffected())
				}
			}
		}
		return nil
	}
	runIDs := make([]string, callers)
	for g := range runIDs {
		runIDs[g] = tag + "-g" + strconv.Itoa(g)
	}
	return loop(callers, d, func(g int, i int64) error { return call(runIDs[g], i) })
}

// rawInt decodes an integer column as pgx received it: binary (int4, int8) or text.
func rawInt(b []byte) int64 {
	switch len(b) {
	case 8:
		return int64(binary.BigEndian.Uint64(b))
	case 4:
		return int64(int32(binary.BigEndian.Uint32(b)))
	}
	n, _ := strconv.ParseInt(string(b), 10, 64)
	return n
}

// pgStatements are the PostgreSQL driver's statements the classes run.
var pgStatements = []string{"invocationBreakerCountsSQL", "invocationBreakerCountsAndKeySQL", "invocationInsertSQL",
	"invocationInsertRelaxedSQL", "invocationMarkEffectSentIfLeasedSQL", "invocationSettleIfLeasedSQL"}

// pgNamedArgs is namedArgs for the PostgreSQL driver, which inserts a record-once row
// with a statement of its own (InvocationInsertRelaxed: synchronous_commit off for
// that transaction), so pgbench and the pgx loop run it too.
func pgNamedArgs(sc storeCall) (sqlConst string, args map[string]any) {
	name, args := namedArgs(sc)
	if sc.Method == "InvocationInsert" && sc.Insert.Relaxed() {
		name = "invocationInsertRelaxedSQL"
	}
	return name, args
}
