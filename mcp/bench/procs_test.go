package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgen/toolgen/internal/mcppeers"
	"github.com/toolgen/toolgen/internal/names"
)

// BenchmarkServeOverheadProcesses is BenchmarkServeOverhead with the three parties in
// separate OS processes, as deployed (doc.go): the upstream (./internal/upstream) and
// `toolrun serve --http` (./cmd/toolrun), both built into a temporary directory, and
// this process running only the two clients. There is no pipeline side. Run it with
// -benchtime 1x and -v.
func BenchmarkServeOverheadProcesses(b *testing.B) {
	cell := durationEnv(b, "TOOLGEN_BENCH_CELL", defaultCell)
	slice := durationEnv(b, "TOOLGEN_BENCH_SLICE", defaultSlice)
	r := procsRig(b)
	runBenchmark(b, r, cell, slice, processesMode("separate processes", r))
}

// processesMode names a rig of separate processes in a benchmark's heading: what it is,
// toolrun's pid, and the GOGC toolrun and the GOMAXPROCS the Go gateways were given
// (TOOLGEN_BENCH_TOOLRUN_GOGC, TOOLGEN_BENCH_GATEWAY_GOMAXPROCS).
func processesMode(what string, r *rig) string {
	mode := what + " (toolrun pid " + strconv.Itoa(r.procs[0].pid) + ")"
	if g := os.Getenv("TOOLGEN_BENCH_TOOLRUN_GOGC"); g != "" {
		mode += ", toolrun GOGC=" + g
	}
	if g := os.Getenv("TOOLGEN_BENCH_GATEWAY_GOMAXPROCS"); g != "" {
		mode += ", the Go gateways' GOMAXPROCS=" + g
	}
	return mode
}

// TestServeSmokeProcesses proves the process assembly: 20 calls each way and a tiny
// measurement. It builds two binaries (a few seconds with a warm build cache), so -short
// skips it.
func TestServeSmokeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds toolrun and the upstream: not in -short")
	}
	r := procsRig(t)
	ctx := context.Background()
	for _, s := range []*side{r.direct, r.toolgen} {
		for range 20 {
			if err := s.call(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	m, err := measure(ctx, r, 1, 100*time.Millisecond, 50*time.Millisecond, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{direct, toolgen} {
		if s := &m.s[i]; s.calls() == 0 || s.pct(0.5) <= 0 || len(s.ext) != 2 {
			t.Fatalf("%s: %d calls, p50 %s, %d processes' CPU", m.names[i], s.calls(), s.pct(0.5), len(s.ext))
		}
	}
	for _, l := range append(m.table(), m.notes()...) {
		t.Log(l)
	}
}

// procsRig builds toolrun and the upstream, starts the upstream, writes a spec root
// whose servers/bench.yaml classifies it as newRig does, starts `toolrun serve --http`
// on it (SQLite in SPECROOT/.toolrun), and connects one client to each. The processes
// are stopped (SIGINT, then SIGKILL) after the clients close.
func procsRig(tb testing.TB) *rig {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	bin := buildBinaries(tb)

	up := startProc(tb, "upstream", filepath.Join(bin, "upstream"), nil, os.Environ(), serveReady)
	upstreamURL := "http://" + up.addr + "/mcp"

	root := writeSpecRoot(tb, "  http:\n    url: "+upstreamURL+"\n")
	tr := startProc(tb, "toolrun", filepath.Join(bin, "toolrun"),
		toolrunServeArgs(root), toolrunEnv(), toolrunReady)

	hc := benchHTTPClient()
	tb.Cleanup(hc.CloseIdleConnections)
	return &rig{
		direct:  mcpSide("direct", "lookup", connect(tb, ctx, upstreamURL, hc)),
		toolgen: mcpSide("toolgen", names.Wire("mcp."+serverID+".lookup"), connectToolgen(tb, ctx, "http://"+tr.addr+"/mcp", hc)),
		steps:   &stepTimer{}, upConns: new(atomic.Int64), tgConns: new(atomic.Int64),
		procs: []*proc{tr, up},
	}
}

// serveReady starts the line the upstream and the relay print once they serve
// (package internal/serve).
const serveReady = "listening "

// toolrunReady starts the line `toolrun serve --http` prints once it serves.
const toolrunReady = "toolrun: serving MCP on http://"

// toolrunServeArgs are the arguments of `toolrun serve` on the spec root root, with
// --cpuprofile FILE when TOOLGEN_BENCH_TOOLRUN_CPUPROFILE names a FILE: toolrun writes
// its CPU profile there when the benchmark stops it (SIGINT). The profile covers the
// whole run, every side's slices included (toolrun idles in the others').
func toolrunServeArgs(root string) []string {
	args := []string{"serve", "--http", "127.0.0.1:0", "--dir", root}
	if f := os.Getenv("TOOLGEN_BENCH_TOOLRUN_CPUPROFILE"); f != "" {
		args = append(args, "--cpuprofile", f)
	}
	return args
}

// toolrunDB is TOOLGEN_BENCH_TOOLRUN_DB: the store toolrun is given as TOOLRUN_DB, ""
// for SQLite in its spec root.
func toolrunDB() string { return os.Getenv("TOOLGEN_BENCH_TOOLRUN_DB") }

// toolrunEnv is toolrun's environment: this one without TOOLRUN_DB (the store is SQLite
// in the spec root) unless TOOLGEN_BENCH_TOOLRUN_DB names another store (TOOLRUN_DB's
// forms: a postgres:// URL), GOGC from TOOLGEN_BENCH_TOOLRUN_GOGC and GOMAXPROCS from
// TOOLGEN_BENCH_GATEWAY_GOMAXPROCS if set. A benchmark's own environment never chooses
// toolrun's store by accident.
func toolrunEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TOOLRUN_DB=") {
			env = append(env, kv)
		}
	}
	if db := toolrunDB(); db != "" {
		env = append(env, "TOOLRUN_DB="+db)
	}
	if g := os.Getenv("TOOLGEN_BENCH_TOOLRUN_GOGC"); g != "" {
		env = append(env, "GOGC="+g)
	}
	return gatewayEnv(env)
}

// gatewayEnv is env with GOMAXPROCS from TOOLGEN_BENCH_GATEWAY_GOMAXPROCS, if set: the
// environment of the Go gateways, toolrun and the go-sdk relay, so that the floor runs
// as toolrun does.
func gatewayEnv(env []string) []string {
	if g := os.Getenv("TOOLGEN_BENCH_GATEWAY_GOMAXPROCS"); g != "" {
		env = append(env, "GOMAXPROCS="+g)
	}
	return env
}

// writeSpecRoot writes a spec root holding servers/bench.yaml: the upstream reached over
// transport (the YAML of the transport key's value, indented by two spaces), classified
// as newRig classifies it.
func writeSpecRoot(tb testing.TB, transport string) string {
	tb.Helper()
	root := tb.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "servers"), 0o755); err != nil {
		tb.Fatal(err)
	}
	yaml := "server_id: " + serverID + "\n" +
		"description: The benchmark's upstream (mcp/bench/internal/upstream).\n" +
		"configured_by: operator\n" +
		"transport:\n" + transport +
		"classification:\n  side_effect: read\n  risk: low\n  idempotency: idempotent\n  required_scopes: [mcp." + serverID + "]\n" +
		"resources: hide\nprompts: hide\n"
	if err := os.WriteFile(filepath.Join(root, "servers", serverID+".yaml"), []byte(yaml), 0o644); err != nil {
		tb.Fatal(err)
	}
	return root
}

// buildBinaries builds toolrun, the upstream and the relay into a temporary directory, from the
// module root, once per test binary (TestMain removes the directory): the process
// smoke tests share the build.
func buildBinaries(tb testing.TB) string {
	tb.Helper()
	root := moduleRoot(tb)
	built.once.Do(func() {
		gobin, err := exec.LookPath("go")
		if err != nil {
			built.err = fmt.Errorf("go not on PATH: %w", err)
			return
		}
		if built.dir, err = os.MkdirTemp("", "toolgen-bench-bin-"); err != nil {
			built.err = err
			return
		}
		cmd := exec.Command(gobin, "build", "-o", built.dir+string(filepath.Separator), "./cmd/toolrun", "./mcp/bench/internal/upstream", "./mcp/bench/internal/sdkrelay")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if built.err != nil {
		tb.Fatal(built.err)
	}
	return built.dir
}

// built is buildBinaries's directory (or the error that stopped its build).
var built struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// moduleRoot is the module's root: the first directory up from here holding go.mod.
func moduleRoot(tb testing.TB) string {
	tb.Helper()
	root, err := filepath.Abs(".")
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			return root
		}
		parent := filepath.Dir(root)
		if parent == root {
			tb.Fatal("no go.mod above the test's directory")
		}
		root = parent
	}
}

// proc is a process of the rig: its id, its command and output when the rig started it
// (the output kept for the failure messages), and the address it serves on.
type proc struct {
	name string
	pid  int
	cmd  *exec.Cmd // nil for a process found as another's child (childProc)
	addr string
	mu   sync.Mutex
	out  strings.Builder
	// addrc receives the address from the ready line (launch); exited is closed when
	// the process has exited.
	addrc  chan string
	exited chan struct{}
}

// startProc starts path with args and env and waits (up to 30 s) for the line of its
// output (stdout or stderr) that starts with ready, followed by its address: host:port,
// up to the next "/", "," or space. tb.Cleanup stops it: SIGINT, then SIGKILL after 3 s.
func startProc(tb testing.TB, name, path string, args, env []string, ready string) *proc {
	tb.Helper()
	p := launch(tb, name, path, args, env, ready)
	p.waitReady(tb)
	return p
}

// launch starts path with args and env, collecting its output (stdout and stderr) and
// sending the address of its first line that starts with ready (if ready is not "") to
// p.addrc. tb.Cleanup stops it: SIGINT, then SIGKILL after 3 s.
func launch(tb testing.TB, name, path string, args, env []string, ready string) *proc {
	tb.Helper()
	p := &proc{name: name, cmd: exec.Command(path, args...), addrc: make(chan string, 1), exited: make(chan struct{})}
	p.cmd.Env = env
	dieWithParent(p.cmd)
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	p.pid = p.cmd.Process.Pid
	go func() { p.cmd.Wait(); pw.Close(); close(p.exited) }()
	tb.Cleanup(func() {
		p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.exited:
		case <-time.After(3 * time.Second):
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.out.WriteString(line + "\n")
			p.mu.Unlock()
			if rest, ok := strings.CutPrefix(line, ready); ok && ready != "" {
				if i := strings.IndexAny(rest, "/, "); i >= 0 {
					rest = rest[:i]
				}
				select {
				case p.addrc <- rest:
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	}()
	return p
}

// waitReady waits (up to 30 s) for launch's ready line and sets p.addr.
func (p *proc) waitReady(tb testing.TB) {
	tb.Helper()
	select {
	case p.addr = <-p.addrc:
	case <-p.exited:
		tb.Fatalf("%s exited before serving: %v\n%s", p.name, p.cmd.ProcessState, p.output())
	case <-time.After(30 * time.Second):
		tb.Fatalf("%s did not serve within 30 s:\n%s", p.name, p.output())
	}
}

// waitListening waits (up to 60 s: node starts slowly on a loaded machine) until p
// listens on addr (mcppeers.WaitListening), for a process that prints no ready line;
// it sets p.addr.
func (p *proc) waitListening(tb testing.TB, addr string) {
	tb.Helper()
	_, port, _ := net.SplitHostPort(addr)
	n, err := strconv.Atoi(port)
	if err != nil {
		tb.Fatalf("%s: %q has no port: %v", p.name, addr, err)
	}
	switch err := mcppeers.WaitListening(p.pid, n, p.exited, 60*time.Second); {
	case errors.Is(err, mcppeers.ErrExited):
		tb.Fatalf("%s exited before listening on %s: %v\n%s", p.name, addr, p.cmd.ProcessState, p.output())
	case err != nil:
		tb.Fatalf("%s did not listen on %s: %v\n%s", p.name, addr, err, p.output())
	}
	p.addr = addr
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// clockTick is the unit of /proc/PID/stat's utime and stime: USER_HZ, 100 on Linux.
const clockTick = 10 * time.Millisecond

// cpu is the user+system CPU the process has used (0 where /proc is missing).
func (p *proc) cpu() time.Duration {
	if p.pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command's ")": state is the 3rd field, utime the 14th.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0
	}
	return time.Duration(ut+st) * clockTick
}
