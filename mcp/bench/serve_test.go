package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/mcp/server"
)

// The knobs' defaults (doc.go).
const (
	defaultCell  = 3 * time.Second
	defaultSlice = 500 * time.Millisecond
	warmup       = 500 * time.Millisecond // per side and caller count, unmeasured
	targetP50    = time.Millisecond       // issue 4: p50 overhead under 1 ms
)

// BenchmarkServeOverhead is issue 4 (see doc.go): for each caller count, the sides
// interleaved in slices until each has run TOOLGEN_BENCH_CELL. It ignores b.N: run it
// with -benchtime 1x. ns/op, allocs/op and B/op are toolgen's per call (ns/op is the
// inverse of its throughput); the other metrics name their side.
func BenchmarkServeOverhead(b *testing.B) {
	cell := durationEnv(b, "TOOLGEN_BENCH_CELL", defaultCell)
	slice := durationEnv(b, "TOOLGEN_BENCH_SLICE", defaultSlice)
	runBenchmark(b, newRig(b), cell, slice, "one process")
}

// runBenchmark measures r for every caller count of TOOLGEN_BENCH_CALLERS and logs the
// table; mode names the rig's assembly in the table's heading.
func runBenchmark(b *testing.B, r *rig, cell, slice time.Duration, mode string) {
	callers := callersEnv(b)
	verbose := os.Getenv("TOOLGEN_BENCH_SLICES") != ""
	ctx := context.Background()
	head := fmt.Sprintf("%s; toolgen's client at %s, the others at %s; GOMAXPROCS %d, %d CPUs, %s per side and caller count in slices of %s; load average at the start %s",
		mode, toolgenProtocol(), protocolVersion, goruntime.GOMAXPROCS(0), goruntime.NumCPU(), cell, slice, loadAverage())
	var cmds string // the rig's command lines, before the table
	if len(r.cmds) > 0 {
		cmds = strings.Join(r.cmds, "\n") + "\n\n"
	}
	var rows []string
	for k, c := range callers {
		b.Run("callers="+strconv.Itoa(c), func(b *testing.B) {
			m, err := measure(ctx, r, c, cell, slice, warmup, verbose)
			if err != nil {
				b.Fatal(err)
			}
			m.report(b)
			// The last caller count prints the table of all of them (a parent
			// benchmark's own log is not printed when it has sub-benchmarks).
			rows = append(rows, m.table()...)
			tab := m.table()
			if k == len(callers)-1 {
				tab = rows
			}
			b.Logf("%s, at the end %s\n\n%s%s\n%s\n\n%s", head, loadAverage(), cmds, m.header(), strings.Join(tab, "\n"), strings.Join(m.notes(), "\n"))
		})
	}
}

// TestServeSmoke proves the assembly and the measurement in `go test ./...`: 20 calls
// each way (and 20 straight through the pipeline), each reaching the upstream once; a
// toolgen call repeated with its call id is a replay that does not (which is why every
// benchmark call sends a key of its own); and a tiny measurement.
func TestServeSmoke(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	for _, s := range []*side{r.direct, r.toolgen, r.pipeline} {
		for range 20 {
			if err := s.call(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := r.execs.Load(); got != 60 {
		t.Fatalf("the upstream ran lookup %d times for 60 new calls", got)
	}

	// The same call id twice in one session: the second is a retry, answered from the
	// record (a read made again without an id would read again, SES-2). The session is
	// echoed, as a 2026-07-28 client must (TOOLGEN_BENCH_TOOLGEN_PROTOCOL) to keep one.
	same := &mcp.CallToolParams{Name: r.toolgenTool, Arguments: map[string]any{"key": "same"},
		Meta: mcp.Meta{server.MetaCallID: "same-call"}}
	for i := range 2 {
		res, err := r.toolgenCS.CallTool(ctx, same)
		if err != nil {
			t.Fatal(err)
		}
		same.Meta[server.MetaSessionID] = res.Meta[server.MetaSessionID]
		if replayed := res.Meta[server.MetaReplayed] == true; replayed != (i == 1) || res.IsError {
			t.Fatalf("call %d with the same key: replayed %v, isError %v (%s)", i+1, replayed, res.IsError, resultText(res))
		}
	}
	if got := r.execs.Load(); got != 61 {
		t.Fatalf("the upstream ran lookup %d times, want 61 (the replay must not reach it)", got)
	}

	for _, callers := range []int{1, 2} {
		m, err := measure(ctx, r, callers, 100*time.Millisecond, 50*time.Millisecond, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		for i := range m.s {
			s := &m.s[i]
			if s.calls() == 0 || s.elapsed <= 0 || s.pct(0.5) <= 0 || s.pct(0.99) < s.pct(0.5) {
				t.Fatalf("%s: %d calls in %s, p50 %s, p99 %s", m.names[i], s.calls(), s.elapsed, s.pct(0.5), s.pct(0.99))
			}
		}
		if callers == 1 && len(m.steps["toolgen"]["settle"]) == 0 {
			t.Fatalf("no step timed with one caller: %v", m.steps)
		}
		for _, l := range append(m.table(), m.notes()...) {
			t.Log(l)
		}
	}
}

// sample is what one side did in one or more slices: every call's latency, the wall
// time, and the process's CPU and heap allocations over it.
type sample struct {
	lat     []time.Duration
	elapsed time.Duration
	cpu     time.Duration
	ext     []time.Duration // the CPU of each of the rig's other processes (rig.procs)
	mallocs uint64
	bytes   uint64
	sorted  bool
}

func (s *sample) add(o sample) {
	s.lat = append(s.lat, o.lat...)
	s.elapsed += o.elapsed
	s.cpu += o.cpu
	if s.ext == nil {
		s.ext = make([]time.Duration, len(o.ext))
	}
	for i, d := range o.ext {
		s.ext[i] += d
	}
	s.mallocs += o.mallocs
	s.bytes += o.bytes
	s.sorted = false
}

func (s *sample) calls() int { return len(s.lat) }

func (s *sample) rate() float64 { return float64(s.calls()) / s.elapsed.Seconds() }

// pct is the q-quantile of the latencies (nearest rank).
func (s *sample) pct(q float64) time.Duration {
	if len(s.lat) == 0 {
		return 0
	}
	if !s.sorted {
		slices.Sort(s.lat)
		s.sorted = true
	}
	i := int(math.Ceil(q*float64(len(s.lat)))) - 1
	return s.lat[max(0, min(i, len(s.lat)-1))]
}

func (s *sample) perCall(n uint64) float64 { return float64(n) / float64(s.calls()) }

func (s *sample) cpuPerCall() float64 { return float64(s.cpu.Microseconds()) / float64(s.calls()) }

// extPerCall is the CPU per call, in µs, of the rig's other process i.
func (s *sample) extPerCall(i int) float64 {
	return float64(s.ext[i].Microseconds()) / float64(s.calls())
}

func (s *sample) mean() time.Duration {
	if len(s.lat) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range s.lat {
		sum += d
	}
	return sum / time.Duration(len(s.lat))
}

// runSlice runs callers goroutines making new calls on s for d, charging it the CPU
// of this process and of procs.
func runSlice(ctx context.Context, s *side, callers int, d time.Duration, procs []*proc) (sample, error) {
	var ms0, ms1 goruntime.MemStats
	goruntime.ReadMemStats(&ms0)
	ext0 := make([]time.Duration, len(procs))
	for i, p := range procs {
		ext0[i] = p.cpu()
	}
	cpu0 := processCPU()
	start := time.Now()
	deadline := start.Add(d)
	lats := make([][]time.Duration, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			l := make([]time.Duration, 0, 1024)
			for {
				t0 := time.Now()
				if !t0.Before(deadline) {
					break
				}
				if err := s.call(ctx); err != nil {
					errs[i] = err
					return
				}
				l = append(l, time.Since(t0))
			}
			lats[i] = l
		})
	}
	wg.Wait()
	out := sample{elapsed: time.Since(start), cpu: processCPU() - cpu0, ext: make([]time.Duration, len(procs))}
	for i, p := range procs {
		out.ext[i] = p.cpu() - ext0[i]
	}
	goruntime.ReadMemStats(&ms1)
	out.mallocs, out.bytes = ms1.Mallocs-ms0.Mallocs, ms1.TotalAlloc-ms0.TotalAlloc
	if err := errors.Join(errs...); err != nil {
		return out, err
	}
	for _, l := range lats {
		out.lat = append(out.lat, l...)
	}
	return out, nil
}

// The first two sides of every measurement, in the order of measurement.s (rig.measured):
// the baseline and toolgen. The other sides are the rig's own (pipeline in newRig's,
// the proxies in gatewayRig's).
const (
	direct  = 0
	toolgen = 1
)

// measurement is one caller count: every side, each round's p50 overhead and, with one
// caller, the pipeline's step times.
type measurement struct {
	callers       int
	gateway       bool     // the rig is gatewayRig's: its own table and notes
	names         []string // the sides' names ("" for a side the rig lacks)
	own           [][]int  // per side, the rig's processes serving it (side.own)
	procs         []string // the names of the rig's other processes (rig.procs)
	s             []sample
	roundOverhead []time.Duration                       // p50(toolgen) - p50(direct) of each round's slices
	steps         map[string]map[string][]time.Duration // side -> step -> durations
	// conns are the TCP connections the upstream [0] and toolgen [1] accepted during
	// each side's measured slices.
	conns [][2]int64
}

// measure warms every side up, then runs rounds of one slice per side, in order on
// even rounds and in reverse on odd ones, until each side has run cell.
func measure(ctx context.Context, r *rig, callers int, cell, slice, warm time.Duration, verbose bool) (*measurement, error) {
	sides := r.measured()
	nSides := len(sides)
	m := &measurement{callers: callers, gateway: r.gateway, names: make([]string, nSides), own: make([][]int, nSides),
		s: make([]sample, nSides), conns: make([][2]int64, nSides)}
	for _, p := range r.procs {
		m.procs = append(m.procs, p.name)
	}
	for i, s := range sides {
		if s != nil {
			m.names[i], m.own[i] = s.name, s.own
		}
	}
	if warm > 0 {
		for _, s := range sides {
			if s == nil {
				continue
			}
			if _, err := runSlice(ctx, s, callers, warm, r.procs); err != nil {
				return nil, err
			}
		}
	}
	r.steps.take()
	goruntime.GC()
	rounds := max(1, int(cell/slice))
	for round := range rounds {
		got := make([]sample, nSides)
		for k := range nSides {
			i := k
			if round%2 == 1 {
				i = nSides - 1 - k
			}
			if sides[i] == nil {
				continue
			}
			if callers == 1 && i != direct {
				r.steps.set(m.names[i])
			}
			up0, tg0 := r.upConns.Load(), r.tgConns.Load()
			sm, err := runSlice(ctx, sides[i], callers, slice, r.procs)
			r.steps.set("")
			m.conns[i][0] += r.upConns.Load() - up0
			m.conns[i][1] += r.tgConns.Load() - tg0
			if err != nil {
				return nil, err
			}
			got[i] = sm
			if verbose {
				fmt.Fprintf(os.Stderr, "  callers %d round %d %-8s: %6d calls, %7.0f calls/s, p50 %s µs, p99 %s µs\n",
					callers, round, m.names[i], sm.calls(), sm.rate(), us(sm.pct(0.5)), us(sm.pct(0.99)))
			}
		}
		m.roundOverhead = append(m.roundOverhead, got[toolgen].pct(0.5)-got[direct].pct(0.5))
		for i := range got {
			if sides[i] != nil {
				m.s[i].add(got[i])
			}
		}
	}
	m.steps = r.steps.take()
	return m, nil
}

func (m *measurement) overheadP50() time.Duration {
	return m.s[toolgen].pct(0.5) - m.s[direct].pct(0.5)
}

// report sets the benchmark's metrics (units benchstat can compare).
func (m *measurement) report(b *testing.B) {
	for i := range m.s {
		s, name := &m.s[i], m.names[i]
		if s.calls() == 0 {
			continue // the side is not in the rig
		}
		for j, k := range m.serving(i) {
			if k < 0 {
				continue
			}
			proc := m.procs[k]
			if m.gateway { // the side's own processes, by role (their names have spaces)
				proc = [...]string{"gateway", "upstream"}[j]
			}
			b.ReportMetric(s.extPerCall(k), name+"-"+proc+"-CPU-us/call")
		}
		b.ReportMetric(microseconds(s.pct(0.5)), name+"-p50-us")
		b.ReportMetric(microseconds(s.pct(0.9)), name+"-p90-us")
		b.ReportMetric(microseconds(s.pct(0.99)), name+"-p99-us")
		b.ReportMetric(s.rate(), name+"-calls/s")
		b.ReportMetric(s.cpuPerCall(), name+"-CPU-us/call")
		b.ReportMetric(s.perCall(s.mallocs), name+"-allocs/call")
	}
	d, t := &m.s[direct], &m.s[toolgen]
	b.ReportMetric(microseconds(m.overheadP50()), "overhead-p50-us")
	b.ReportMetric(microseconds(t.pct(0.99)-d.pct(0.99)), "overhead-p99-us")
	b.ReportMetric(100*t.rate()/d.rate(), "pct-of-direct-calls/s")
	b.ReportMetric(float64(t.elapsed.Nanoseconds())/float64(t.calls()), "ns/op")
	b.ReportMetric(t.perCall(t.mallocs), "allocs/op")
	b.ReportMetric(t.perCall(t.bytes), "B/op")
	if m.gateway {
		m.reportGateway(b)
	}
}

// serving are the indices of the rig's processes that serve side i: its own (side.own,
// -1 for one not found) or, when it names none, all of them.
func (m *measurement) serving(i int) []int {
	if m.own[i] != nil {
		return m.own[i]
	}
	all := make([]int, len(m.procs))
	for k := range all {
		all[k] = k
	}
	return all
}

// header is the heading of the markdown table of table(): with other processes, the
// process columns are this one's (the clients') and then one per other process.
func (m *measurement) header() string {
	if m.gateway {
		return m.gatewayHeader()
	}
	cpu, align := "process CPU µs/call", ""
	if len(m.procs) > 0 {
		cpu = "clients' CPU µs/call"
		for _, p := range m.procs {
			cpu += " | " + p + " CPU µs/call"
			align += "---:|"
		}
	}
	return "| callers | side | calls | calls/s | p50 µs | p90 µs | p99 µs | max µs | " + cpu + " | allocs/call | KiB/call |\n" +
		"|---:|---|---:|---:|---:|---:|---:|---:|---:|" + align + "---:|---:|"
}

// table is the measurement's rows of the markdown table (header): every side and the
// difference toolgen - direct.
func (m *measurement) table() []string {
	if m.gateway {
		return m.gatewayTable()
	}
	var rows []string
	for i := range m.s {
		s := &m.s[i]
		if s.calls() == 0 {
			continue // the side is not in the rig
		}
		name := m.names[i]
		if name == "pipeline" {
			name = "(pipeline.Execute in-process)"
		}
		rows = append(rows, fmt.Sprintf("| %d | %s | %d | %.0f | %s | %s | %s | %s | %.0f%s | %.0f | %.0f |", m.callers, name,
			s.calls(), s.rate(), us(s.pct(0.5)), us(s.pct(0.9)), us(s.pct(0.99)), us(s.pct(1)),
			s.cpuPerCall(), m.extCells(func(k int) float64 { return s.extPerCall(k) }), s.perCall(s.mallocs), s.perCall(s.bytes)/1024))
	}
	d, t := &m.s[direct], &m.s[toolgen]
	rows = append(rows, fmt.Sprintf("| %d | **toolgen − direct** | | %.0f %% | **%s** | %s | %s | | %.0f%s | %.0f | %.0f |", m.callers,
		100*t.rate()/d.rate(), us(t.pct(0.5)-d.pct(0.5)), us(t.pct(0.9)-d.pct(0.9)), us(t.pct(0.99)-d.pct(0.99)),
		t.cpuPerCall()-d.cpuPerCall(), m.extCells(func(k int) float64 { return t.extPerCall(k) - d.extPerCall(k) }),
		t.perCall(t.mallocs)-d.perCall(d.mallocs), (t.perCall(t.bytes)-d.perCall(d.bytes))/1024))
	return rows
}

// extCells are the table cells of the other processes' CPU per call, f(k) for process k.
func (m *measurement) extCells(f func(k int) float64) string {
	var b strings.Builder
	for k := range m.procs {
		fmt.Fprintf(&b, " | %.0f", f(k))
	}
	return b.String()
}

// notes are the verdict against the target, the attribution of the overhead and, with
// one caller, the pipeline's step times.
func (m *measurement) notes() []string {
	if m.gateway {
		return m.gatewayNotes()
	}
	r := slices.Clone(m.roundOverhead)
	slices.Sort(r)
	met := "met"
	if m.overheadP50() >= targetP50 {
		met = "NOT met"
	}
	d, t, p := &m.s[direct], &m.s[toolgen], &sample{}
	pi := slices.Index(m.names, "pipeline")
	if pi >= 0 {
		p = &m.s[pi]
	}
	out := []string{
		fmt.Sprintf("- %d caller(s): p50 overhead **%s µs** (per round: min %s, median %s, max %s, %d rounds); target < %s µs: **%s**.",
			m.callers, us(m.overheadP50()), us(r[0]), us(r[len(r)/2]), us(r[len(r)-1]), len(r), us(targetP50), met),
	}
	if p.calls() > 0 {
		out = append(out,
			fmt.Sprintf("  Attribution (p50 differences): toolgen's own MCP hop (toolgen − pipeline) %s µs; the pipeline around its upstream call (pipeline − direct) %s µs.",
				us(t.pct(0.5)-p.pct(0.5)), us(p.pct(0.5)-d.pct(0.5))),
			fmt.Sprintf("  TCP connections opened while measuring (to the upstream / to toolgen): direct %d / %d, toolgen %d / %d, pipeline %d / %d.",
				m.conns[direct][0], m.conns[direct][1], m.conns[toolgen][0], m.conns[toolgen][1], m.conns[pi][0], m.conns[pi][1]))
	} else {
		out = append(out, "  Separate processes: CPU per call is each process's user+system time (/proc/PID/stat, 10 ms ticks) over a side's slices divided by its calls; allocs and KiB are the clients' (this process's).")
		if len(m.procs) == 2 { // toolrun and the upstream (procsRig)
			out = append(out, "  "+ratioNote(m.callers, d, t, t.extPerCall(0), t.extPerCall(1)))
		}
	}
	if len(m.steps) > 0 {
		out = append(out, "", fmt.Sprintf("Pipeline steps, %d caller (time from the end of the previous step; execute is the upstream call through the adapter):", m.callers), "",
			"| step | toolgen p50 µs | toolgen mean µs | pipeline p50 µs | pipeline mean µs |", "|---|---:|---:|---:|---:|")
		for _, step := range []string{"validate", "label", "key", "breaker", "policy", "persist", "hold", "execute", "shape", "settle"} {
			a, b := sample{lat: m.steps["toolgen"][step]}, sample{lat: m.steps["pipeline"][step]}
			if a.calls() == 0 && b.calls() == 0 {
				continue
			}
			out = append(out, fmt.Sprintf("| %s | %s | %s | %s | %s |", step, us(a.pct(0.5)), us(a.mean()), us(b.pct(0.5)), us(b.mean())))
		}
	}
	return out
}

func microseconds(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func us(d time.Duration) string { return strconv.FormatFloat(microseconds(d), 'f', 0, 64) }

// processCPU is the user+system CPU this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAverage is /proc/loadavg's first three fields ("?" where there is none).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func durationEnv(tb testing.TB, name string, def time.Duration) time.Duration {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		tb.Fatalf("%s=%q: want a positive duration", name, v)
	}
	return d
}

func callersEnv(tb testing.TB) []int {
	tb.Helper()
	v := os.Getenv("TOOLGEN_BENCH_CALLERS")
	if v == "" {
		return []int{1, 4}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			tb.Fatalf("TOOLGEN_BENCH_CALLERS=%q: want positive integers, comma-separated", v)
		}
		out = append(out, n)
	}
	return out
}
