package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/internal/names"
	"github.com/toolgen/toolgen/mcp/bench/internal/lookup"
	"github.com/toolgen/toolgen/mcp/server"
	"github.com/toolgen/toolgen/mcp/upstream"
	"github.com/toolgen/toolgen/model"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
	"github.com/toolgen/toolgen/tools"
)

// serverID is the upstream's id in toolgen: its tool is mcp.bench.lookup.
const serverID = "bench"

// protocolVersion is what both bench clients ask for (and what the adapter speaks).
const protocolVersion = "2025-11-25"

// rig is the upstream, toolgen in front of it, and the sides that call them.
type rig struct {
	direct  *side // the bench client calling the upstream
	toolgen *side // the same client code calling toolgen's server
	// memorySessions is toolgen with its 2025-11-25 MCP sessions in this process
	// only (a store without the MCPSessions role): the baseline of store-backed
	// sessions (BenchmarkSessionsInStore). Same registry, store and upstream.
	memorySessions *side
	// pipeline (attribution only) calls runtime.Pipeline.Execute in-process, as
	// mcp/server's callTool builds the call: toolgen without its own MCP hop.
	pipeline *side
	execs    *atomic.Int64 // lookup executions on the upstream
	steps    *stepTimer    // the pipeline's AfterStep
	// toolgenCS and toolgenTool are the toolgen side's session and tool name.
	toolgenCS   *mcp.ClientSession
	toolgenTool string
	// upConns and tgConns count the TCP connections the upstream and toolgen accept
	// (in one process; with separate processes they stay at zero).
	upConns, tgConns *atomic.Int64
	// procs are toolrun and the upstream when they run as processes of their own
	// (procsRig), or the gateways and their upstreams (gatewayRig): every slice reads
	// their CPU. Nil in one process.
	procs []*proc
	// sides, when not nil, are the sides measure runs, direct and toolgen first
	// (gatewayRig's: direct, toolgen, the go-sdk relay and the proxies it found).
	sides []*side
	// gateway marks gatewayRig's rig: its measurements print their own table and notes.
	gateway bool
	// cmds are the command lines of the processes the rig started (gatewayRig), for the
	// benchmark's heading.
	cmds []string
}

// measured are the sides measure runs, in the order of measurement.s: rig.sides, or
// direct, toolgen and pipeline (nil where the rig lacks one).
func (r *rig) measured() []*side {
	if r.sides != nil {
		return r.sides
	}
	return []*side{r.direct, r.toolgen, r.pipeline}
}

// newRig assembles everything; tb.Cleanup tears it down.
func newRig(tb testing.TB) *rig {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	dir := tb.TempDir()

	// The upstream: a go-sdk server with one read tool, over Streamable HTTP.
	execs := new(atomic.Int64)
	up := lookup.NewServer(execs)
	upConns, tgConns := new(atomic.Int64), new(atomic.Int64)
	ups := startServer(tb, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil), upConns)
	upstreamURL := ups.URL + "/mcp"

	// toolgen, as host and `toolrun serve --http` assemble it (the builtins,
	// the default policy, a filesystem artifact writer, lease renewal, the upstream
	// adapter with its default HTTP client), with no protocol.
	st, err := sqlite.Open(ctx, filepath.Join(dir, "toolrun.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	reg := runtime.NewRegistry()
	if err := reg.Register(tools.Builtins()...); err != nil {
		tb.Fatal(err)
	}
	policy, err := runtime.NewPolicy(nil)
	if err != nil {
		tb.Fatal(err)
	}
	steps := &stepTimer{}
	p, err := runtime.NewPipeline(runtime.Config{
		Registry: reg, Store: st, Policy: policy, WorkerID: "bench-worker",
		Artifacts:    runtime.NewFSArtifactWriter(filepath.Join(dir, "artifacts")),
		WorkspaceFor: func(string, string) string { return dir },
		AfterStep:    steps.after,
	})
	if err != nil {
		tb.Fatal(err)
	}
	u, err := upstream.Connect(ctx, upstream.Options{
		Server: &model.Server{
			File: "servers/" + serverID + ".yaml", ServerID: serverID, ConfiguredBy: "operator",
			HTTP: &model.HTTPTransport{URL: upstreamURL},
			Classification: model.Classification{SideEffect: "read", Idempotency: "idempotent", Risk: "low",
				RequiredScopes: []string{"mcp." + serverID}},
			Resources: "hide", Prompts: "hide",
		},
		Registry: reg, Store: st, HTTPClient: adapterHTTPClient(tb),
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { u.Close() })
	principal := runtime.Principal{ID: "bench", Tenant: "t", Scopes: []string{"mcp." + serverID}}
	srv, err := server.New(server.Options{Pipeline: p, Registry: reg, WorkspaceFor: func(string, string) string { return dir }, Principal: principal})
	if err != nil {
		tb.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(server.Endpoint, srv.HTTPHandler()) // as host.Handler mounts it
	tgs := startServer(tb, mux, tgConns)

	// The same toolgen, its MCP sessions in memory: a pipeline over the store seen
	// without its MCPSessions role.
	pm, err := runtime.NewPipeline(runtime.Config{
		Registry: reg, Store: storeWithoutMCPSessions{st}, Policy: policy, WorkerID: "bench-worker-mem",
		Artifacts:    runtime.NewFSArtifactWriter(filepath.Join(dir, "artifacts")),
		WorkspaceFor: func(string, string) string { return dir },
	})
	if err != nil {
		tb.Fatal(err)
	}
	msrv, err := server.New(server.Options{Pipeline: pm, Registry: reg, WorkspaceFor: func(string, string) string { return dir }, Principal: principal})
	if err != nil {
		tb.Fatal(err)
	}
	mmux := http.NewServeMux()
	mmux.Handle(server.Endpoint, msrv.HTTPHandler())
	mems := startServer(tb, mmux, new(atomic.Int64))

	// One client per side: the same code, the same HTTP transport.
	hc := benchHTTPClient()
	tb.Cleanup(hc.CloseIdleConnections)
	tcs, tool := connectToolgen(tb, ctx, tgs.URL+server.Endpoint, hc), names.Wire("mcp."+serverID+".lookup")
	return &rig{
		direct:         mcpSide("direct", "lookup", connect(tb, ctx, upstreamURL, hc)),
		toolgen:        mcpSide("toolgen", tool, tcs),
		memorySessions: mcpSide("toolgen, sessions in memory", tool, connect(tb, ctx, mems.URL+server.Endpoint, hc)),
		pipeline:       pipelineSide(p, principal, "mcp."+serverID+".lookup", dir),
		execs:          execs, steps: steps, toolgenCS: tcs, toolgenTool: tool,
		upConns: upConns, tgConns: tgConns,
	}
}

// storeWithoutMCPSessions is a store seen through the Store interface alone: it has no
// MCPSessions role, so mcp/server keeps its MCP sessions in its process.
type storeWithoutMCPSessions struct{ store.Store }

// startServer serves h on 127.0.0.1 (httptest: no DNS-rebinding refusal), counting the
// TCP connections it accepts in conns.
func startServer(tb testing.TB, h http.Handler, conns *atomic.Int64) *httptest.Server {
	s := httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	s.Start()
	tb.Cleanup(s.Close)
	return s
}

// adapterHTTPClient is the upstream adapter's HTTP client: nil (mcp/upstream's own
// default, which keeps 64 idle connections per host) as `toolrun serve` has it, or, with
// TOOLGEN_BENCH_ADAPTER_IDLE=N, the default transport keeping N (a what-if).
func adapterHTTPClient(tb testing.TB) *http.Client {
	tb.Helper()
	v := os.Getenv("TOOLGEN_BENCH_ADAPTER_IDLE")
	if v == "" {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("TOOLGEN_BENCH_ADAPTER_IDLE=%q: want a positive integer", v)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = max(t.MaxIdleConns, n)
	t.MaxIdleConnsPerHost = n
	tb.Cleanup(t.CloseIdleConnections)
	return &http.Client{Transport: t}
}

// benchHTTPClient is the clients' HTTP client: the default transport with enough idle
// connections per host for every concurrent caller (the default keeps 2).
func benchHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: t}
}

func connect(tb testing.TB, ctx context.Context, url string, hc *http.Client) *mcp.ClientSession {
	tb.Helper()
	return connectVersion(tb, ctx, url, hc, protocolVersion)
}

// toolgenProtocol is the revision toolgen's bench client asks for: protocolVersion, or
// TOOLGEN_BENCH_TOOLGEN_PROTOCOL (doc.go). The other sides' servers are the go-sdk's
// stateful defaults, which refuse 2026-07-28.
func toolgenProtocol() string {
	return cmp.Or(os.Getenv("TOOLGEN_BENCH_TOOLGEN_PROTOCOL"), protocolVersion)
}

// connectToolgen connects toolgen's bench client at toolgenProtocol.
func connectToolgen(tb testing.TB, ctx context.Context, url string, hc *http.Client) *mcp.ClientSession {
	tb.Helper()
	return connectVersion(tb, ctx, url, hc, toolgenProtocol())
}

func connectVersion(tb testing.TB, ctx context.Context, url string, hc *http.Client, version string) *mcp.ClientSession {
	tb.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "bench-client", Version: "v0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cs, err := c.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		tb.Fatalf("connect %s: %v", url, err)
	}
	tb.Cleanup(func() { cs.Close() })
	return cs
}

// side is one way of making a new lookup call.
type side struct {
	name string
	call func(ctx context.Context) error
	// own, when not nil, are the indices in rig.procs of the processes serving this
	// side (gatewayRig: its gateway and its upstream, -1 for one not found); the
	// tables charge it only theirs. Nil charges it every process's CPU.
	own []int
}

// keys numbers the calls of a process: every call sends a key of its own.
var keys atomic.Int64

func newKey() string { return "k-" + strconv.FormatInt(keys.Add(1), 10) }

// mcpSide makes each call a tools/call of tool on cs, with a key of its own.
func mcpSide(name, tool string, cs *mcp.ClientSession) *side {
	return &side{name: name, call: func(ctx context.Context) error {
		key := newKey()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"key": key}})
		if err != nil {
			return fmt.Errorf("%s: tools/call: %w", name, err)
		}
		return checkResult(name, key, res)
	}}
}

// pipelineSide makes each call straight through p, built as mcp/server builds a
// tools/call (external_untrusted provenance, the session as the run, step 0).
func pipelineSide(p *runtime.Pipeline, principal runtime.Principal, tool, workspace string) *side {
	return &side{name: "pipeline", call: func(ctx context.Context) error {
		key := newKey()
		o, err := p.Execute(ctx, runtime.Call{
			Tenant: principal.Tenant, Principal: principal, SessionID: "bench-pipeline", RunID: "bench-pipeline",
			CallID: "call-" + key, Tool: tool, Args: json.RawMessage(`{"key":"` + key + `"}`),
			ContextTrust:  []runtime.Trust{runtime.TrustExternalUntrusted},
			ArgumentTrust: runtime.TrustExternalUntrusted, Workspace: workspace,
		})
		if err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
		var text strings.Builder
		if o.Result != nil {
			for _, it := range o.Result.Content {
				text.WriteString(it.Text)
			}
		}
		if o.Status != runtime.OutcomeSucceeded || o.Replayed || !strings.Contains(text.String(), lookup.ValueOf(key)) {
			return fmt.Errorf("pipeline: %s: %s/%s replayed %v: %q", key, o.Status, o.ReasonCode, o.Replayed, text.String())
		}
		return nil
	}}
}

// checkResult: the call succeeded, was not replayed, and carries the upstream's answer.
func checkResult(name, key string, res *mcp.CallToolResult) error {
	text := resultText(res)
	if res.IsError {
		return fmt.Errorf("%s: tools/call %s: isError: %s", name, key, text)
	}
	if res.Meta[server.MetaReplayed] == true {
		return fmt.Errorf("%s: tools/call %s was replayed: the benchmark must make new calls", name, key)
	}
	if !strings.Contains(text, lookup.ValueOf(key)) {
		return fmt.Errorf("%s: tools/call %s answered %q, want the upstream's value", name, key, text)
	}
	return nil
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// stepTimer times the pipeline's steps (runtime.Config.AfterStep) while it is on: the
// time from each step's end to the next one's, per label. It is only meaningful with
// one caller (the steps of concurrent calls would interleave).
type stepTimer struct {
	mu    sync.Mutex
	label string // "" is off
	last  time.Time
	d     map[string]map[string][]time.Duration // label -> step -> durations
}

func (t *stepTimer) after(step string) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.label == "" {
		return
	}
	if step != "resolve" && !t.last.IsZero() { // resolve starts a call: the anchor
		if t.d == nil {
			t.d = map[string]map[string][]time.Duration{}
		}
		if t.d[t.label] == nil {
			t.d[t.label] = map[string][]time.Duration{}
		}
		t.d[t.label][step] = append(t.d[t.label][step], now.Sub(t.last))
	}
	t.last = now
}

// set turns the timer on for label, or off ("").
func (t *stepTimer) set(label string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.label, t.last = label, time.Time{}
}

// take returns and forgets what was timed.
func (t *stepTimer) take() map[string]map[string][]time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.d
	t.d = nil
	return d
}
