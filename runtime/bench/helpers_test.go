package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// storeCall is one store method call the pipeline made, with what it passed.
type storeCall struct {
	Method string
	Insert store.InsertParams
	Settle store.Settlement
	Fence  store.Fence
	Token  string
	Key    string
	Prior  store.PriorCallsParams
}

// recorder wraps a store and records the calls of the call path. Methods it does not
// override pass through unrecorded (the call path of the three classes uses none).
type recorder struct {
	store.Store
	mu    sync.Mutex
	calls []storeCall
}

func (r *recorder) add(c storeCall) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

func (r *recorder) InvocationInsert(ctx context.Context, p store.InsertParams) (*store.Invocation, bool, error) {
	r.add(storeCall{Method: "InvocationInsert", Insert: p})
	return r.Store.InvocationInsert(ctx, p)
}

func (r *recorder) InvocationGetByKey(ctx context.Context, key string) (*store.Invocation, error) {
	r.add(storeCall{Method: "InvocationGetByKey", Key: key})
	return r.Store.InvocationGetByKey(ctx, key)
}

func (r *recorder) InvocationPriorCalls(ctx context.Context, p store.PriorCallsParams) (store.PriorCalls, error) {
	r.add(storeCall{Method: "InvocationPriorCalls", Prior: p})
	return r.Store.InvocationPriorCalls(ctx, p)
}

func (r *recorder) InvocationMarkEffectSentIfLeased(ctx context.Context, f store.Fence, token string) error {
	r.add(storeCall{Method: "InvocationMarkEffectSentIfLeased", Fence: f, Token: token})
	return r.Store.InvocationMarkEffectSentIfLeased(ctx, f, token)
}

func (r *recorder) InvocationSettleIfLeased(ctx context.Context, f store.Fence, s store.Settlement) error {
	r.add(storeCall{Method: "InvocationSettleIfLeased", Fence: f, Settle: s})
	return r.Store.InvocationSettleIfLeased(ctx, f, s)
}

func (r *recorder) InvocationClaimIfPending(ctx context.Context, id int64, owner string, lease time.Duration) (*store.Invocation, error) {
	r.add(storeCall{Method: "InvocationClaimIfPending"})
	return r.Store.InvocationClaimIfPending(ctx, id, owner, lease)
}

func (r *recorder) InvocationGet(ctx context.Context, id int64) (*store.Invocation, error) {
	r.add(storeCall{Method: "InvocationGet"})
	return r.Store.InvocationGet(ctx, id)
}

// storePlan is what one successful call of each class asks of the store, in order:
// the statements the baselines run.
var storePlan = map[string][]string{
	"read":                {"InvocationPriorCalls", "InvocationInsert"},
	"write-idempotent":    {"InvocationPriorCalls", "InvocationInsert", "InvocationSettleIfLeased"},
	"write-nonidempotent": {"InvocationPriorCalls", "InvocationInsert", "InvocationMarkEffectSentIfLeased", "InvocationSettleIfLeased"},
}

// capture runs one call of class c through a pipeline over a MemStore and returns
// the store calls it made, failing tb if they are not storePlan[c.Name].
func capture(tb testing.TB, c Class) []storeCall {
	tb.Helper()
	rec := &recorder{Store: NewMemStore()}
	p, err := NewPipeline(rec)
	if err != nil {
		tb.Fatal(err)
	}
	o, err := p.Execute(context.Background(), Call(c, "run-capture", "call-capture-000000", Args(1234567)))
	if err != nil {
		tb.Fatal(err)
	}
	if o.Status != runtime.OutcomeSucceeded {
		tb.Fatalf("%s: outcome %s/%s", c.Name, o.Status, o.ReasonCode)
	}
	var methods []string
	for _, sc := range rec.calls {
		methods = append(methods, sc.Method)
	}
	if !slices.Equal(methods, storePlan[c.Name]) {
		tb.Fatalf("%s: the pipeline called %v, the benchmark's baseline runs %v: update storePlan and the baselines",
			c.Name, methods, storePlan[c.Name])
	}
	return rec.calls
}

// recordOf is the insert among calls: the row a class's call records.
func recordOf(tb testing.TB, calls []storeCall) store.InsertParams {
	tb.Helper()
	for _, sc := range calls {
		if sc.Method == "InvocationInsert" {
			return sc.Insert
		}
	}
	tb.Fatal("bench: the call recorded no row")
	return store.InsertParams{}
}

// namedArgs are the named parameters a driver binds for sc, and the name of the SQL
// constant it runs, as runtime/store/{postgres,sqlite} build them (the same names on
// both; idempotent_when and the JSON columns bind as the drivers bind them).
func namedArgs(sc storeCall) (sqlConst string, args map[string]any) {
	nullJSON := func(raw json.RawMessage) any {
		if len(raw) == 0 {
			return nil
		}
		return string(raw)
	}
	fence := func(f store.Fence, more map[string]any) map[string]any {
		more["id"], more["owner"], more["attempt"] = f.ID, f.Owner, f.Attempt
		return more
	}
	switch sc.Method {
	case "InvocationPriorCalls":
		// The classes' calls name their call ids: the drivers read the counts, and a
		// read's key with them.
		p := sc.Prior
		if p.CallIDBase != "" {
			panic("bench: the baselines run no derived call id")
		}
		if p.Key != "" {
			return "invocationBreakerCountsAndKeySQL", map[string]any{"tenant": p.Tenant, "run_id": p.RunID,
				"args_hash": p.ArgsHash, "key": p.Key}
		}
		return "invocationBreakerCountsSQL", map[string]any{"tenant": p.Tenant, "run_id": p.RunID, "args_hash": p.ArgsHash}
	case "InvocationGetByKey":
		return "invocationGetByKeySQL", map[string]any{"key": sc.Key}
	case "InvocationInsert":
		p := sc.Insert
		var owner, leaseUS any
		if o, lease := p.Lease(); p.Status() == store.StatusRunning {
			owner, leaseUS = o, lease.Microseconds()
		}
		attempt, settled := p.Attempt(), p.Settlement()
		var idemWhen any
		if p.IdempotentWhen != nil {
			idemWhen = *p.IdempotentWhen
		}
		return "invocationInsertSQL", map[string]any{
			"key": p.Key, "tenant": p.Tenant, "principal": p.Principal, "session_id": p.SessionID, "run_id": p.RunID,
			"step_number": p.Step, "call_id": p.CallID, "tool": p.Tool, "tool_version": p.ToolVersion,
			"tool_sha256": p.ToolSHA256,
			"idempotency": p.Idempotency, "idempotent_when": idemWhen, "args": nullJSON(p.Args),
			"args_hash": p.ArgsHash, "origin_trust": p.OriginTrust, "argument_trust": p.ArgumentTrust, "mode": p.Mode,
			"decision": p.Decision, "status": string(p.Status()), "reason_code": settled.ReasonCode, "outcome": nullJSON(settled.Outcome),
			"lease_owner": owner, "lease_us": leaseUS, "attempt": attempt, "workspace": p.Workspace,
		}
	case "InvocationMarkEffectSentIfLeased":
		return "invocationMarkEffectSentIfLeasedSQL", fence(sc.Fence, map[string]any{"token": sc.Token})
	case "InvocationSettleIfLeased":
		s := sc.Settle
		return "invocationSettleIfLeasedSQL", fence(sc.Fence, map[string]any{"status": string(s.Status),
			"reason_code": s.ReasonCode, "outcome": nullJSON(s.Outcome), "watermark_missing": s.WatermarkMissing})
	}
	panic("bench: no SQL for " + sc.Method)
}

// cellDuration is how long each side of a throughput cell runs: TOOLGEN_BENCH_CELL
// (a Go duration, whole seconds for pgbench), default 5s.
func cellDuration(tb testing.TB) time.Duration {
	tb.Helper()
	d := 5 * time.Second
	if v := os.Getenv("TOOLGEN_BENCH_CELL"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d < time.Second {
			tb.Fatalf("TOOLGEN_BENCH_CELL=%q: want a duration of at least 1s", v)
		}
	}
	return d.Round(time.Second)
}

// warmup is how long a pipeline runs, unmeasured, before its measured run: its pool
// connects and prepares (pgbench's figure excludes its connection time too).
const warmup = 500 * time.Millisecond

// runStats is one measured run.
type runStats struct {
	calls   int64
	elapsed time.Duration
	mallocs uint64 // heap allocations of the process during the run
	bytes   uint64
	cpu     time.Duration // user+system CPU of the client process during the run
}

func (r runStats) rate() float64 { return float64(r.calls) / r.elapsed.Seconds() }

// plus adds two runs of the same side (their rates combine by calls and time).
func (r runStats) plus(o runStats) runStats {
	return runStats{calls: r.calls + o.calls, elapsed: r.elapsed + o.elapsed, mallocs: r.mallocs + o.mallocs,
		bytes: r.bytes + o.bytes, cpu: r.cpu + o.cpu}
}

// processCPU is the user+system CPU this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var tagSeq atomic.Int64

// uniqueTag returns a prefix no other run of this process or earlier runs on the
// same database used, for run and call ids.
func uniqueTag(name string) string {
	return fmt.Sprintf("%s-%d-%d", name, time.Now().UnixNano(), tagSeq.Add(1))
}

// loop runs callers goroutines, each calling fn(g, i) for i = 0, 1, ... until d has
// passed, and counts the calls that returned nil. It stops at the first error.
func loop(callers int, d time.Duration, fn func(g int, i int64) error) (runStats, error) {
	var (
		wg       sync.WaitGroup
		calls    atomic.Int64
		firstErr error
		errOnce  sync.Once
		failed   atomic.Bool
		before   goruntime.MemStats
		after    goruntime.MemStats
	)
	goruntime.ReadMemStats(&before)
	cpu0 := processCPU()
	start := time.Now()
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var n int64
			for i := int64(0); time.Since(start) < d && !failed.Load(); i++ {
				if err := fn(g, i); err != nil {
					errOnce.Do(func() { firstErr = err })
					failed.Store(true)
					break
				}
				n++
			}
			calls.Add(n)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	goruntime.ReadMemStats(&after)
	return runStats{calls: calls.Load(), elapsed: elapsed, mallocs: after.Mallocs - before.Mallocs,
		bytes: after.TotalAlloc - before.TotalAlloc, cpu: cpu}, firstErr
}

// drive runs calls of class c through p from callers goroutines for d. Every call
// has its own key and its own breaker identity (each goroutine its own run, each
// call its own arguments).
func drive(ctx context.Context, p *runtime.Pipeline, c Class, callers int, d time.Duration, tag string) (runStats, error) {
	runIDs := make([]string, callers)
	for g := range runIDs {
		runIDs[g] = tag + "-g" + strconv.Itoa(g)
	}
	return loop(callers, d, func(g int, i int64) error {
		callID := runIDs[g] + "-" + strconv.FormatInt(i, 10)
		o, err := p.Execute(ctx, Call(c, runIDs[g], callID, Args(i)))
		if err != nil {
			return err
		}
		if o.Status != runtime.OutcomeSucceeded || o.Replayed {
			return fmt.Errorf("call %s: outcome %s/%s (replayed %v)", callID, o.Status, o.ReasonCode, o.Replayed)
		}
		return nil
	})
}

// reportCell reports a throughput cell: the pipeline's calls/s (also as ns/op, and
// its allocations and client CPU per call), the baseline's, and the pipeline's share
// of it.
func reportCell(b *testing.B, baselineName string, pipe, base runStats) {
	b.ReportAllocs() // print allocs/op and B/op: the values reported below
	b.ReportMetric(pipe.rate(), "calls/s")
	b.ReportMetric(base.rate(), baselineName+"-calls/s")
	b.ReportMetric(100*pipe.rate()/base.rate(), "pct-of-"+baselineName)
	b.ReportMetric(float64(pipe.cpu.Microseconds())/float64(pipe.calls), "client-CPU-us/call")
	b.ReportMetric(float64(base.cpu.Microseconds())/float64(base.calls), baselineName+"-CPU-us/call")
	b.ReportMetric(float64(pipe.elapsed.Nanoseconds())/float64(pipe.calls), "ns/op")
	b.ReportMetric(float64(pipe.mallocs)/float64(pipe.calls), "allocs/op")
	b.ReportMetric(float64(pipe.bytes)/float64(pipe.calls), "B/op")
}

// slice is the length of one turn of a side in interleave.
const slice = time.Second

// interleave runs each side for d in all, in turns of one slice: side 0, 1, 2, then
// 2, 1, 0, and so on, so that every side sees the same drift of the machine (other
// load, table growth, checkpoints) and none always goes first. It returns each
// side's runs added up. TOOLGEN_BENCH_SLICES=1 prints every slice on stderr.
func interleave(d time.Duration, sides []func(time.Duration) (runStats, error)) ([]runStats, error) {
	out := make([]runStats, len(sides))
	for round := 0; round < int(d/slice); round++ {
		for k := range sides {
			i := k
			if round%2 == 1 {
				i = len(sides) - 1 - k
			}
			var r runStats
			var err error
			// The label names the side in a CPU profile (-cpuprofile; go tool pprof
			// -tagfocus=side:1): goroutines a side starts inherit it.
			pprof.Do(context.Background(), pprof.Labels("side", strconv.Itoa(i)), func(context.Context) {
				r, err = sides[i](slice)
			})
			if err != nil {
				return nil, err
			}
			if os.Getenv("TOOLGEN_BENCH_SLICES") != "" {
				fmt.Fprintf(os.Stderr, "  round %d side %d: %.0f calls/s, %.0f us CPU/call\n", round, i, r.rate(),
					float64(r.cpu.Microseconds())/float64(r.calls))
			}
			out[i] = out[i].plus(r)
		}
	}
	return out, nil
}
