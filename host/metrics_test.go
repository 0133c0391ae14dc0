package host

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/runtime"
)

// TestServeMetrics: the host's HTTP handler serves the pipeline's OpenTelemetry metrics
// at GET /metrics in the Prometheus exposition, a call through the pipeline counted by
// tool and outcome, and MCP still at /mcp.
func TestServeMetrics(t *testing.T) {
	ctx := t.Context()
	h, err := New(ctx, Config{Dir: t.TempDir(), Workspace: t.TempDir(), Builtins: []string{"workspace.list"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	mux, err := h.Handler()
	if err != nil {
		t.Fatal(err)
	}
	o, err := h.Call(ctx, CallRequest{SessionID: "s1", RunID: "r1", Step: 1, CallID: "c1", Tool: "workspace.list",
		Args: json.RawMessage(`{"path": "."}`)})
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != runtime.OutcomeSucceeded {
		t.Fatalf("workspace.list: %s %s", o.Status, o.ReasonCode)
	}

	code, body := get(t, mux, http.MethodGet, MetricsPath)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", MetricsPath, code, body)
	}
	// toolgen.tool.calls (a counter) and toolgen.tool.call.duration (a histogram in
	// seconds), under their Prometheus names, each with the one call.
	for _, metric := range []string{"toolgen_tool_calls_total", "toolgen_tool_call_duration_seconds_count"} {
		if !hasSample(body, metric, "1", `gen_ai_tool_name="workspace.list"`, `toolgen_status="succeeded"`) {
			t.Errorf("no %s sample of 1 for workspace.list succeeded in:\n%s", metric, body)
		}
	}
	for _, want := range []string{"# TYPE toolgen_tool_calls_total counter", "# TYPE toolgen_tool_call_duration_seconds histogram"} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in:\n%s", want, body)
		}
	}
	if code, _ := get(t, mux, http.MethodPost, MetricsPath); code != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %d, want 405", MetricsPath, code)
	}
	// MCP is still served beside the metrics (a GET without a session is refused by
	// the MCP handler itself, not by the mux).
	if code, _ := get(t, mux, http.MethodGet, MCPPath); code == http.StatusNotFound || code == http.StatusMethodNotAllowed {
		t.Errorf("GET %s: %d, want the MCP handler's answer", MCPPath, code)
	}
}

func get(t *testing.T, h http.Handler, method, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(t.Context(), method, path, nil)
	req.RemoteAddr = "127.0.0.1:40000" // without principals.yaml only loopback is served
	req.Host = "localhost"             // not httptest's example.com: the Host check refuses names it was not given
	h.ServeHTTP(rec, req)
	body, err := io.ReadAll(rec.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Code, string(body)
}

// hasSample reports whether the exposition has a sample of metric with value and
// every one of labels.
func hasSample(body, metric, value string, labels ...string) bool {
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, metric+"{")
		if !ok {
			continue
		}
		set, v, ok := strings.Cut(rest, "} ")
		if !ok || v != value {
			continue
		}
		all := true
		for _, l := range labels {
			all = all && strings.Contains(","+set+",", ","+l+",")
		}
		if all {
			return true
		}
	}
	return false
}
