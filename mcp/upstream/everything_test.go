package upstream_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolgen/toolgen/internal/freeport"
	"github.com/toolgen/toolgen/internal/mcppeers"
	"github.com/toolgen/toolgen/mcp/upstream"
	"github.com/toolgen/toolgen/model"
	"github.com/toolgen/toolgen/runtime"
)

// everythingServer is an operator classification of server-everything (like
// servers/everything.yaml) that exposes resources and prompts.
func everythingServer() *model.Server {
	s := server("everything", "read", "idempotent", "low", "mcp.everything")
	s.Resources, s.Prompts = "expose", "expose"
	return s
}

// TestEverything_Stdio runs the reference server as a child process.
func TestEverything_Stdio(t *testing.T) {
	node, entry := mcppeers.Everything(t)
	e := newEnv(t)
	s := everythingServer()
	s.Stdio = &model.StdioTransport{Command: node, Args: []string{entry, "stdio"}}
	w := &wire{}
	opts := upstream.Options{Server: s, Registry: e.reg, Store: e.store, Logger: testLogger(t), RefreshDebounce: 20 * time.Millisecond}
	upstream.SetStdioTap(&opts, w)
	checkEverything(t, e, opts, w.String)
}

// TestEverything_HTTP runs the reference server over Streamable HTTP on a free port. The
// requests are recorded by an http.RoundTripper (not mcp.LoggingTransport, which would
// disable the SSE stream that carries list_changed).
func TestEverything_HTTP(t *testing.T) {
	node, entry := mcppeers.Everything(t)
	port := freePort(t)
	cmd := exec.Command(node, entry, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitFor(t, "server-everything to listen on "+addr, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	e := newEnv(t)
	s := everythingServer()
	s.HTTP = &model.HTTPTransport{URL: "http://" + addr + "/mcp"}
	rec := &recorder{next: http.DefaultTransport}
	opts := upstream.Options{Server: s, Registry: e.reg, Store: e.store, Logger: testLogger(t),
		HTTPClient: &http.Client{Transport: rec}, RefreshDebounce: 20 * time.Millisecond}
	checkEverything(t, e, opts, rec.bodies)
}

// freePort is a port for server-everything, which must be told its port and is
// restarted on it (freeport: below the kernel's ephemeral range).
func freePort(t *testing.T) int {
	t.Helper()
	port, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// recorder records the body of every request it forwards.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	buf  bytes.Buffer
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		r.buf.Write(b)
		r.buf.WriteByte('\n')
		r.mu.Unlock()
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	return r.next.RoundTrip(req)
}

func (r *recorder) bodies() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

func checkEverything(t *testing.T, e *env, opts upstream.Options, sent func() string) {
	t.Helper()
	u, err := upstream.Connect(e.ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	if u.ProtocolVersion() != upstream.ProtocolLegacy {
		t.Errorf("negotiated %q", u.ProtocolVersion())
	}

	// MCP-6 on the wire: the initialize request advertises nothing.
	caps := initializeCapabilities(t, sent())
	noClientCapabilities(t, caps)
	if string(caps) != "{}" {
		t.Errorf("capabilities on the wire = %s, want {}", caps)
	}

	// Tools appear as mcp.everything.* with the operator's classification.
	tools := specs(e, "pinned")
	for _, name := range []string{"mcp.everything.echo", "mcp.everything.get_sum", "mcp.everything.get_tiny_image", "mcp.everything.read_resource"} {
		s := tools[name]
		if s == nil {
			t.Fatalf("%s is not registered; tools: %v", name, u.ToolNames())
		}
		if s.SideEffect != runtime.SideEffectRead || s.Idempotency != runtime.Idempotent || s.Risk != runtime.RiskLow ||
			!slices.Equal(s.RequiredScopes, []string{"mcp.everything"}) || s.OutputTrust != runtime.TrustExternalUntrusted {
			t.Errorf("%s classified %s/%s/%s/%v/%s", name, s.SideEffect, s.Idempotency, s.Risk, s.RequiredScopes, s.OutputTrust)
		}
	}
	for name := range tools {
		if strings.Contains(name, "roots") || strings.Contains(name, "sampling") || strings.Contains(name, "elicitation") {
			t.Errorf("%s is offered: the server saw a capability we never advertise", name)
		}
	}

	// echo round-trips through the pipeline, external_untrusted.
	o := e.call("pinned", "mcp.everything.echo", `{"message":"hello from toolgen"}`)
	wantOutcome(t, o, runtime.OutcomeSucceeded, "")
	if o.Result.Trust != runtime.TrustExternalUntrusted || len(o.Result.Content) == 0 {
		t.Fatalf("echo result %+v", o.Result)
	}
	for _, it := range o.Result.Content {
		if it.Trust != runtime.TrustExternalUntrusted {
			t.Fatalf("item trust %q", it.Trust)
		}
		trust, source, text, ok := runtime.ParseEnvelope(it.Text)
		if !ok || trust != runtime.TrustExternalUntrusted || source != "mcp.everything.echo" || !strings.Contains(text, "hello from toolgen") {
			t.Fatalf("echo item %q", it.Text)
		}
	}

	// An image is kept as an artifact.
	o = e.call("pinned", "mcp.everything.get_tiny_image", `{}`)
	wantOutcome(t, o, runtime.OutcomeSucceeded, "")
	if len(o.Result.Artifacts) == 0 || !strings.Contains(resultText(t, o), "image image/png") {
		t.Fatalf("image result %q (%d artifacts)", resultText(t, o), len(o.Result.Artifacts))
	}

	// Resources through the synthetic read tool, which runs the full pipeline.
	o = e.call("pinned", "mcp.everything.read_resource", `{"uri":"demo://resource/static/document/architecture.md"}`)
	wantOutcome(t, o, runtime.OutcomeSucceeded, "")
	if txt := resultText(t, o); len(txt) < 100 || !strings.Contains(txt, `trust="external_untrusted"`) {
		t.Fatalf("resource read = %q", short(txt))
	}
	wantOutcome(t, e.call("pinned", "mcp.everything.read_resource", `{}`), runtime.OutcomeDenied, runtime.ReasonInvalidArguments)

	// Prompts are external_untrusted skills; fetching one goes through prompts/get.
	var args *upstream.Skill
	for _, sk := range u.Skills() {
		if sk.Trust != runtime.TrustExternalUntrusted {
			t.Errorf("skill %s trust %q", sk.Name, sk.Trust)
		}
		if sk.Name == "mcp.everything.args_prompt" {
			args = &sk
		}
	}
	if args == nil || args.RemoteName != "args-prompt" || len(args.Arguments) == 0 || args.Arguments[0].Name != "city" || !args.Arguments[0].Required {
		t.Fatalf("skills %+v", u.Skills())
	}
	items, err := args.Get(e.ctx, map[string]string{"city": "Paris"})
	if err != nil || len(items) == 0 {
		t.Fatalf("Get: %v, %v", items, err)
	}
	for _, it := range items {
		if it.Trust != runtime.TrustExternalUntrusted {
			t.Fatalf("prompt item trust %q", it.Trust)
		}
		if _, _, text, ok := runtime.ParseEnvelope(it.Text); !ok || !strings.Contains(text, "Paris") {
			t.Fatalf("prompt item %q", it.Text)
		}
	}

	// The server's tools/list_changed (sent right after initialization) is applied and
	// recorded; it does not change the session that pinned its catalog before.
	waitFor(t, "the list_changed row", func() bool {
		return slices.Contains(changes(e.history("everything"), ""), upstream.ChangeListChanged)
	})
	after := specs(e, "pinned")
	if len(after) != len(tools) {
		t.Fatalf("the pinned catalog changed: %d tools, then %d", len(tools), len(after))
	}
	for name, s := range tools {
		if after[name] == nil || after[name].SchemaSHA256 != s.SchemaSHA256 {
			t.Fatalf("the pinned definition of %s changed", name)
		}
	}
	wantOutcome(t, e.call("pinned", "mcp.everything.get_sum", `{"a":2,"b":3}`), runtime.OutcomeSucceeded, "")

	// Close withdraws the tools: the pinned session now gets tool_withdrawn.
	if err := u.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	wantOutcome(t, e.call("pinned", "mcp.everything.echo", `{"message":"x"}`), runtime.OutcomeUnavailable, runtime.ReasonToolWithdrawn)
}
