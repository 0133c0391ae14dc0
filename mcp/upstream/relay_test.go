//lint:file-ignore SA1019 logging, roots and sampling are deprecated at 2026-07-28 (SEP-2577) but live in the 2025 revisions toolrun still serves and relays

package upstream_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/internal/mcppeers"
	mcpserver "github.com/toolgen/toolgen/mcp/server"
	"github.com/toolgen/toolgen/mcp/upstream"
	"github.com/toolgen/toolgen/model"
	"github.com/toolgen/toolgen/runtime"
)

// Relaying upstream notifications through the gateway (issue 15, point 3): a go-sdk
// client talks to the MCP server (mcp/server) that serves the registry, whose upstream
// tools are this adapter's.

// listener collects what one downstream client hears.
type listener struct {
	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	logs     []*mcp.LoggingMessageParams
}

func (l *listener) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			l.mu.Lock()
			l.progress = append(l.progress, r.Params)
			l.mu.Unlock()
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			l.mu.Lock()
			l.logs = append(l.logs, r.Params)
			l.mu.Unlock()
		},
	}
}

func (l *listener) got() ([]*mcp.ProgressNotificationParams, []*mcp.LoggingMessageParams) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.progress), slices.Clone(l.logs)
}

// await waits until the client handled at least p progress and n log notifications
// (the result may reach the caller before the client's handlers of the notifications
// that preceded it have run).
func (l *listener) await(t *testing.T, p, n int) ([]*mcp.ProgressNotificationParams, []*mcp.LoggingMessageParams) {
	t.Helper()
	var progress []*mcp.ProgressNotificationParams
	var logs []*mcp.LoggingMessageParams
	waitFor(t, "the relayed notifications", func() bool {
		progress, logs = l.got()
		return len(progress) >= p && len(logs) >= n
	})
	return progress, logs
}

// gateway serves e's registry over MCP.
func gateway(t *testing.T, e *env) *mcpserver.Server {
	t.Helper()
	srv, err := mcpserver.New(mcpserver.Options{Pipeline: e.p, Registry: e.reg, Principal: principal, Logger: testLogger(t),
		CallIDSecret: []byte("relay-test-secret-0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// client connects a go-sdk client to srv over an in-memory connection (one MCP
// session), speaking version ("" lets the peers negotiate).
func client(t *testing.T, srv *mcpserver.Server, l *listener, version string) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, st); close(done) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "downstream", Version: "v0"}, l.options()).
		Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); cancel(); <-done })
	return cs
}

// TestEverything_RelayProgressAndLogs: server-everything's long-running operation
// reports progress to the client that called it through the gateway, under the
// client's own progressToken; its log line reaches the client at the client's level;
// a client that sent no token gets no progress.
func TestEverything_RelayProgressAndLogs(t *testing.T) {
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			node, entry := mcppeers.Everything(t)
			e := newEnv(t)
			s := everythingServer()
			opts := upstream.Options{Server: s, Registry: e.reg, Store: e.store, Logger: testLogger(t),
				RefreshDebounce: 20 * time.Millisecond, LogLevel: "debug"}
			if transport == "stdio" {
				s.Stdio = &model.StdioTransport{Command: node, Args: []string{entry, "stdio"}}
			} else {
				port, _ := everythingHTTPOnAFreePort(t, node, entry)
				s.HTTP = &model.HTTPTransport{URL: "http://127.0.0.1:" + itoa(port) + "/mcp"}
			}
			u, err := upstream.Connect(e.ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { u.Close() })
			l := &listener{}
			cs := client(t, gateway(t, e), l, "2025-11-25")

			// Progress: five steps of a short operation, under the client's token.
			params := &mcp.CallToolParams{Name: "mcp__everything__trigger_long_running_operation",
				Arguments: map[string]any{"duration": 1, "steps": 5}}
			params.SetProgressToken("my-own-token")
			res, err := cs.CallTool(e.ctx, params)
			if err != nil || res.IsError {
				t.Fatalf("long-running operation: %v %+v", err, res)
			}
			// The go-sdk client hands notifications to their handlers from a queue that
			// may run behind the result: the last ones of a call can arrive after it
			// returned, and nothing may follow a result, so they are not relayed. The
			// steps are far enough apart for the first ones to arrive in the call.
			progress, _ := l.await(t, 1, 0)
			for i, p := range progress {
				if p.ProgressToken != "my-own-token" {
					t.Fatalf("progress %d under token %v, want the client's own", i, p.ProgressToken)
				}
				if p.Progress != float64(i+1) || p.Total != 5 {
					t.Fatalf("progress %d = %v of %v, want %d of 5", i, p.Progress, p.Total, i+1)
				}
				if p.Meta[mcpserver.MetaTrust] != string(runtime.TrustExternalUntrusted) {
					t.Fatalf("progress %d _meta %v: not labelled external_untrusted", i, p.Meta)
				}
			}

			// No token: no progress.
			before := len(progress)
			res, err = cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "mcp__everything__trigger_long_running_operation",
				Arguments: map[string]any{"duration": 0.2, "steps": 2}})
			if err != nil || res.IsError {
				t.Fatalf("long-running operation: %v %+v", err, res)
			}
			if p, _ := l.got(); len(p) != before {
				t.Fatalf("progress without a token: %d notifications", len(p)-before)
			}

			// Logging: the client asks for debug and above and turns simulated logging on
			// (one line at once, then one every 5 s, at random levels); a line that
			// arrives while one of its calls is in flight reaches it: the one of the
			// toggle, or the next one, during a 6 s operation.
			if err := cs.SetLoggingLevel(e.ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
				t.Fatal(err)
			}
			for _, p := range []*mcp.CallToolParams{
				{Name: "mcp__everything__toggle_simulated_logging", Arguments: map[string]any{}},
				{Name: "mcp__everything__trigger_long_running_operation", Arguments: map[string]any{"duration": 6, "steps": 3}},
			} {
				if res, err := cs.CallTool(e.ctx, p); err != nil || res.IsError {
					t.Fatalf("%s: %v %+v", p.Name, err, res)
				}
			}
			_, logs := l.await(t, 0, 1)
			lg := logs[0]
			if !strings.HasPrefix(lg.Logger, "mcp.everything") || lg.Meta[mcpserver.MetaTrust] != string(runtime.TrustExternalUntrusted) {
				t.Fatalf("log line %+v: want the logger mcp.everything and the external_untrusted label", lg)
			}
			if b, _ := json.Marshal(lg.Data); !strings.Contains(string(b), "message") {
				t.Fatalf("log data %s", b)
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// workServer is an upstream whose tool "work" reports progress under the token it
// received, waits until the test lets it log one line, reports progress again (so the
// test knows the line went through the adapter: the adapter handles an upstream's
// notifications in order), and waits until the test lets it finish.
type workServer struct {
	srv     *mcp.Server
	started chan struct{}
	log     chan struct{}
	finish  chan struct{}
	quit    chan struct{} // closed when the test ends: a failed test does not hang
}

// newWorkServer returns a work server connected to a new in-memory transport, whose
// client side is returned.
func newWorkServer(t *testing.T) (*workServer, mcp.Transport) {
	w := &workServer{started: make(chan struct{}, 8), log: make(chan struct{}), finish: make(chan struct{}), quit: make(chan struct{})}
	wait := func(ctx context.Context, ch chan struct{}) bool {
		select {
		case <-ch:
			return true
		case <-w.quit:
		case <-ctx.Done():
		}
		return false
	}
	w.srv = mcp.NewServer(&mcp.Implementation{Name: "work", Version: "v1"}, nil) // default capabilities: logging
	w.srv.AddTool(&mcp.Tool{Name: "work", Description: "Works.", InputSchema: json.RawMessage(`{"type":"object","properties":{"who":{"type":"string"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Who string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			tok := req.Params.GetProgressToken()
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2, Message: "half of " + a.Who})
			w.started <- struct{}{}
			if !wait(ctx, w.log) {
				return nil, context.Canceled
			}
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Logger: "worker", Data: "log of " + a.Who})
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 2, Total: 2, Message: "logged " + a.Who})
			if !wait(ctx, w.finish) {
				return nil, context.Canceled
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "worked for " + a.Who}}}, nil
		})
	ct, st := mcp.NewInMemoryTransports()
	ss, err := w.srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	t.Cleanup(func() { close(w.quit) }) // runs first
	return w, ct
}

// TestRelay_LogsOnlyToTheOneClient: a log line says nothing about the call it belongs
// to, so it is relayed only when every call in flight on the upstream connection comes
// from one client — never to another client. Progress, which names its call by token,
// always reaches its own client, under that client's token.
func TestRelay_LogsOnlyToTheOneClient(t *testing.T) {
	e := newEnv(t)
	w, ct := newWorkServer(t)
	u, err := upstream.Connect(e.ctx, upstream.Options{
		Server: server("work", "read", "idempotent", "low", "mcp.everything"), Registry: e.reg, Store: e.store,
		Logger: testLogger(t), Transport: ct,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	gw := gateway(t, e)
	la, lb := &listener{}, &listener{}
	a, b := client(t, gw, la, "2025-11-25"), client(t, gw, lb, "2025-11-25")
	for _, cs := range []*mcp.ClientSession{a, b} {
		if err := cs.SetLoggingLevel(e.ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan *mcp.CallToolResult, 2)
	work := func(cs *mcp.ClientSession, who, token string) {
		p := &mcp.CallToolParams{Name: "mcp__work__work", Arguments: map[string]any{"who": who}}
		p.SetProgressToken(token)
		res, err := cs.CallTool(context.Background(), p)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}
	finished := func(n int) {
		for range n {
			w.finish <- struct{}{}
		}
		for range n {
			if res := <-done; res == nil || res.IsError {
				t.Fatalf("call: %+v", res)
			}
		}
	}
	logsOf := func(l *listener) []any {
		_, logs := l.got()
		var out []any
		for _, lg := range logs {
			out = append(out, lg.Data)
		}
		return out
	}

	// One client's call in flight: its log line reaches it.
	go work(a, "a1", "tok-a1")
	<-w.started
	w.log <- struct{}{}
	la.await(t, 2, 1)
	finished(1)
	progress, logs := la.got()
	if progress[0].ProgressToken != "tok-a1" || progress[0].Message != "half of a1" || logs[0].Data != "log of a1" || logs[0].Logger != "mcp.work/worker" {
		t.Fatalf("client a heard %s and %s", dumpJSON(progress), dumpJSON(logs))
	}

	// Two clients' calls in flight: neither log line is relayed; each progress reaches
	// its own client only.
	go work(a, "a2", "tok-a2")
	go work(b, "b1", "tok-b1")
	<-w.started
	<-w.started
	w.log <- struct{}{}
	w.log <- struct{}{}
	pa, _ := la.await(t, 4, 0) // both lines went through the adapter
	pb, _ := lb.await(t, 2, 0)
	finished(2)
	for _, p := range pa[2:] {
		if p.ProgressToken != "tok-a2" {
			t.Fatalf("client a heard progress %s", dumpJSON(pa))
		}
	}
	for _, p := range pb {
		if p.ProgressToken != "tok-b1" || !strings.HasSuffix(p.Message, "b1") {
			t.Fatalf("client b heard progress %s", dumpJSON(pb))
		}
	}

	// One client again: b's next line reaches b; everything before it was handled.
	go work(b, "b2", "tok-b2")
	<-w.started
	w.log <- struct{}{}
	lb.await(t, 4, 1)
	finished(1)
	if got := logsOf(la); !slices.Equal(got, []any{"log of a1"}) {
		t.Fatalf("client a heard %v", got)
	}
	if got := logsOf(lb); !slices.Equal(got, []any{"log of b2"}) {
		t.Fatalf("client b heard %v", got)
	}
}

func dumpJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestRelay_Stateless: on 2026-07-28 the adapter asks for log lines in the request's
// _meta (there is no session level); progress and the line reach the one client.
func TestRelay_Stateless(t *testing.T) {
	e := newEnv(t)
	w, ct := newWorkServer(t)
	u, err := upstream.Connect(e.ctx, upstream.Options{
		Server: server("work", "read", "idempotent", "low", "mcp.everything"), Registry: e.reg, Store: e.store,
		Logger: testLogger(t), Transport: ct, ProtocolVersion: upstream.ProtocolStateless,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	if u.ProtocolVersion() != upstream.ProtocolStateless {
		t.Fatalf("negotiated %s", u.ProtocolVersion())
	}
	l := &listener{}
	cs := client(t, gateway(t, e), l, "2025-11-25")
	if err := cs.SetLoggingLevel(e.ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "mcp__work__work", Arguments: map[string]any{"who": "s"}}
		p.SetProgressToken(42)
		res, err := cs.CallTool(context.Background(), p)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-w.started
	w.log <- struct{}{}
	progress, logs := l.await(t, 2, 1)
	w.finish <- struct{}{}
	if res := <-done; res == nil || res.IsError {
		t.Fatalf("call: %+v", res)
	}
	if progress[0].ProgressToken != float64(42) || logs[0].Data != "log of s" {
		t.Fatalf("heard %s and %s", dumpJSON(progress), dumpJSON(logs))
	}
}
