package upstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgen/toolgen/internal/hostile"
	"github.com/toolgen/toolgen/mcp/upstream"
	"github.com/toolgen/toolgen/model"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
	"github.com/toolgen/toolgen/vocab"
)

// env is a registry, a real SQLite store, a filesystem artifact writer and a pipeline
// over them: what every test runs its calls through.
type env struct {
	t     *testing.T
	ctx   context.Context
	reg   *runtime.Registry
	store store.Store
	art   *runtime.FSArtifactWriter
	p     *runtime.Pipeline
	n     int
}

func newEnv(t *testing.T, tweak ...func(*runtime.Config)) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "toolgen.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, ctx: ctx, reg: runtime.NewRegistry(), store: st, art: runtime.NewFSArtifactWriter(t.TempDir())}
	cfg := runtime.Config{Registry: e.reg, Store: st, Artifacts: e.art, WorkerID: "w1", Logger: testLogger(t)}
	for _, f := range tweak {
		f(&cfg)
	}
	e.p, err = runtime.NewPipeline(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// testLogger logs to the test's output (visible with -v or on failure).
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var principal = runtime.Principal{ID: "alice", Tenant: "acme", Scopes: []string{"mcp.hostile", "mcp.everything"}}

// call runs one call through the pipeline in session, as a fresh call (own call id).
func (e *env) call(session, tool, args string) runtime.Outcome {
	e.t.Helper()
	e.n++
	o, err := e.p.Execute(e.ctx, runtime.Call{
		Tenant: "acme", Principal: principal, SessionID: session, RunID: fmt.Sprintf("run-%s-%d", session, e.n), Step: 1,
		CallID: fmt.Sprintf("call-%d", e.n), Tool: tool, Args: json.RawMessage(args),
		ContextTrust: []runtime.Trust{runtime.TrustUser}, ArgumentTrust: runtime.TrustUser,
	})
	if err != nil {
		e.t.Fatalf("Execute(%s): %v", tool, err)
	}
	return o
}

func (e *env) history(serverID string) []store.CatalogChange {
	e.t.Helper()
	h, err := e.store.CatalogHistoryList(e.ctx, serverID)
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

// changes returns the history entries of tool, as "change" strings in order.
func changes(h []store.CatalogChange, tool string) []string {
	var out []string
	for _, c := range h {
		if c.Tool == tool {
			out = append(out, c.Change)
		}
	}
	return out
}

func wantOutcome(t *testing.T, o runtime.Outcome, status runtime.OutcomeStatus, reason runtime.ReasonCode) {
	t.Helper()
	if o.Status != status || o.ReasonCode != reason {
		detail := ""
		if o.ExternalDetail != nil {
			detail = o.ExternalDetail.Text
		}
		t.Fatalf("outcome = %s/%s (detail %q), want %s/%s", o.Status, o.ReasonCode, short(detail), status, reason)
	}
}

func short(s string) string {
	if len(s) > 600 {
		return s[:600] + "..."
	}
	return s
}

// resultText joins a succeeded outcome's content texts.
func resultText(t *testing.T, o runtime.Outcome) string {
	t.Helper()
	if o.Result == nil {
		t.Fatalf("outcome %s/%s has no result", o.Status, o.ReasonCode)
	}
	var b strings.Builder
	for _, it := range o.Result.Content {
		b.WriteString(it.Text)
	}
	return b.String()
}

// server is a classification file for tests.
func server(id string, se, idem, risk string, scopes ...string) *model.Server {
	return &model.Server{
		File: "servers/" + id + ".yaml", ServerID: id, ConfiguredBy: "operator",
		Classification: model.Classification{SideEffect: vocab.SideEffect(se), Idempotency: vocab.Idempotency(idem), Risk: vocab.Risk(risk), RequiredScopes: scopes},
		Resources:      "hide", Prompts: "hide",
	}
}

// connectHostile connects an in-process hostile server as serverID with the given
// classification, speaking version ("" is the adapter's default, 2025-11-25).
func connectHostile(t *testing.T, e *env, h *hostile.Server, srv *model.Server, version string, tweak ...func(*upstream.Options)) *upstream.Upstream {
	t.Helper()
	ct, st := hostile.Pipes()
	ss, err := h.MCP().Connect(e.ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	opts := upstream.Options{
		Server: srv, Registry: e.reg, Store: e.store, Logger: testLogger(t),
		Transport: ct, ProtocolVersion: version, RefreshDebounce: 20 * time.Millisecond,
	}
	for _, f := range tweak {
		f(&opts)
	}
	u, err := upstream.Connect(e.ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return u
}

// hostileStdio is the classification of the hostile server run as a subprocess of the
// test binary (see TestMain).
func hostileStdio(t *testing.T, id string, se, idem, risk string) *model.Server {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := server(id, se, idem, risk, "mcp.hostile")
	s.Stdio = &model.StdioTransport{Command: exe, Args: []string{"-test.run=^$"}, Env: map[string]string{hostileEnv: "1"}}
	return s
}

// waitFor polls cond until it holds; it fails the test after a generous bound (the
// bound only stops a broken test from hanging, nothing is asserted about time).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitRefresh waits for the next refresh after gen.
func waitRefresh(t *testing.T, u *upstream.Upstream, gen uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := upstream.WaitRefresh(ctx, u, gen); err != nil {
		t.Fatalf("no refresh after list_changed: %v", err)
	}
}

// wire records bytes written to a peer (thread-safe).
type wire struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (w *wire) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *wire) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// initializeCapabilities finds the initialize request in newline-delimited JSON-RPC
// messages (or HTTP bodies) and returns its params.capabilities, raw.
func initializeCapabilities(t *testing.T, msgs string) json.RawMessage {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(msgs))
	for {
		var m struct {
			Method string `json:"method"`
			Params struct {
				Capabilities json.RawMessage `json:"capabilities"`
			} `json:"params"`
		}
		if err := dec.Decode(&m); err != nil {
			if err == io.EOF {
				t.Fatalf("no initialize request on the wire:\n%s", short(msgs))
			}
			t.Fatalf("wire is not JSON: %v\n%s", err, short(msgs))
		}
		if m.Method == "initialize" {
			return m.Params.Capabilities
		}
	}
}

// noClientCapabilities asserts capabilities advertise neither roots, sampling nor
// elicitation (MCP-6).
func noClientCapabilities(t *testing.T, caps json.RawMessage) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(caps, &m); err != nil {
		t.Fatalf("capabilities %s: %v", caps, err)
	}
	for _, k := range []string{"roots", "sampling", "elicitation"} {
		if _, ok := m[k]; ok {
			t.Errorf("the client advertised %q: capabilities = %s", k, caps)
		}
	}
}
