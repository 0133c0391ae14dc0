package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/mcp/server"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// A call round-trips through the real pipeline and store: success, structured content,
// trust label, the ids it ran under; a read made again runs again, a write's retry
// replays instead of executing.
func TestCall_RoundTrip(t *testing.T) {
	transports(t, func(t *testing.T, e *env, connect func(*progressLog) *mcp.ClientSession) {
		cs := connect(nil)
		res := call(t, cs, "demo__read", map[string]any{"n": 7}, nil)
		if res.IsError {
			t.Fatalf("demo__read failed: %s", dump(res))
		}
		sc, _ := res.StructuredContent.(map[string]any)
		if sc["ok"] != true || sc["n"] != float64(7) {
			t.Errorf("structuredContent = %v, want {ok:true, n:7}", res.StructuredContent)
		}
		if !strings.Contains(text(res), `"ok":true`) {
			t.Errorf("content %q lacks the JSON result", text(res))
		}
		if got := metaString(res.Meta, server.MetaTrust); got != "tool" {
			t.Errorf("_meta trust = %q, want tool", got)
		}
		if tc := res.Content[0].(*mcp.TextContent); tc.Meta[server.MetaTrust] != "tool" {
			t.Errorf("content item _meta = %v, want trust tool", tc.Meta)
		}
		session := metaString(res.Meta, server.MetaSessionID)
		if session == "" || metaString(res.Meta, server.MetaRunID) != session || res.Meta[server.MetaStep] != float64(0) {
			t.Errorf("ids %v: want a session, run = session, step 0", res.Meta)
		}
		if got, want := metaString(res.Meta, server.MetaCallID), server.DerivedCallID(testCallIDSecret, "demo.read", json.RawMessage(`{"n":7}`)); got != want {
			t.Errorf("call id %q, want the derived %q", got, want)
		}
		// Without call ids (SES-2): the same read again reads again, under the next
		// generation of the derived id; a write's retry replays its record.
		again := call(t, cs, "demo__read", map[string]any{"n": 7}, nil)
		if again.IsError || again.Meta[server.MetaReplayed] == true || metaString(again.Meta, server.MetaCallID) != metaString(res.Meta, server.MetaCallID)+"-1" {
			t.Errorf("the read again: %s, want a new execution as generation -1", dump(again))
		}
		if n := e.tools["demo.read"].execs.Load(); n != 2 {
			t.Errorf("demo.read executed %d times, want 2", n)
		}
		sent := call(t, cs, "demo__send", map[string]any{"n": 7}, nil)
		retry := call(t, cs, "demo__send", map[string]any{"n": 7}, nil)
		if sent.IsError || retry.IsError || retry.Meta[server.MetaReplayed] != true ||
			metaString(retry.Meta, server.MetaCallID) != metaString(sent.Meta, server.MetaCallID) {
			t.Errorf("the write's retry: %s, want the replayed record of %s", dump(retry), dump(sent))
		}
		if n := e.tools["demo.send"].execs.Load(); n != 1 {
			t.Errorf("demo.send executed %d times, want 1", n)
		}
	})
}

// A builtin over MCP: workspace.list in the server's workspace, whose output is
// external_untrusted — enveloped once, by the pipeline.
func TestCall_BuiltinUntrustedEnvelopedOnce(t *testing.T) {
	e := newEnv(t, envConfig{})
	if err := os.WriteFile(filepath.Join(e.ws, "notes.txt"), []byte("hi"), 0o600); err != nil {
		t.Fatal(err)
	}
	cs := e.connectMemory("", nil)
	res := call(t, cs, "workspace__list", map[string]any{}, nil)
	if res.IsError {
		t.Fatalf("workspace__list: %s", dump(res))
	}
	if got := metaString(res.Meta, server.MetaTrust); got != "external_untrusted" {
		t.Errorf("_meta trust = %q", got)
	}
	body := text(res)
	if strings.Count(body, "<untrusted-content") != 1 || !strings.Contains(body, "notes.txt") {
		t.Errorf("content %q: want notes.txt inside exactly one envelope", body)
	}
	if _, _, _, ok := runtime.ParseEnvelope(body); !ok {
		t.Errorf("content is not one envelope: %q", body)
	}
	entries, _ := res.StructuredContent.(map[string]any)["entries"].([]any)
	if len(entries) != 1 {
		t.Errorf("structuredContent entries = %v", res.StructuredContent)
	}

	// A tool's own text that spells the closing tag cannot end the envelope.
	res = call(t, cs, "demo__untrusted", map[string]any{}, nil)
	body = text(res)
	if strings.Count(body, "</untrusted-content>") != 1 || !strings.HasSuffix(body, "</untrusted-content>") {
		t.Errorf("untrusted content %q: want one envelope, neutralized inside", body)
	}
}

// A call outside the active mode is denied not_in_mode by the pipeline, as an isError
// result with the six-field structuredContent.
func TestCall_NotInModeDenied(t *testing.T) {
	transports(t, func(t *testing.T, e *env, connect func(*progressLog) *mcp.ClientSession) {
		cs := connect(nil)
		res := call(t, cs, "demo__other", map[string]any{"n": 1}, nil)
		s := wantReason(t, res, "denied", "not_in_mode")
		if s.Retryable || s.CallID != server.DerivedCallID(testCallIDSecret, "demo.other", json.RawMessage(`{"n":1}`)) || string(s.ExternalDetail) != "null" {
			t.Errorf("shape %+v", s)
		}
		if n := e.tools["demo.other"].execs.Load(); n != 0 {
			t.Errorf("demo.other executed %d times", n)
		}
		// A builtin of another mode, by its wire name and by its registry name.
		wantReason(t, call(t, cs, "workspace__write_text", map[string]any{"path": "a", "text": "b"}, nil), "denied", "not_in_mode")
		wantReason(t, call(t, cs, "workspace.write_text", map[string]any{"path": "a", "text": "b"}, nil), "denied", "not_in_mode")
	})
}

// Hostile arguments never crash the server: each is a clear isError outcome or a
// JSON-RPC error, and the connection keeps serving.
func TestCall_HostileArguments(t *testing.T) {
	e := newEnv(t, envConfig{})
	cs := e.connectMemory("", nil)
	deep := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	for _, tc := range []struct {
		name, tool string
		args       any
		reason     string
	}{
		{"number", "demo__read", json.RawMessage(`5`), "invalid_arguments"},
		{"string", "demo__read", json.RawMessage(`"x"`), "invalid_arguments"},
		{"array", "demo__read", json.RawMessage(`[1,2]`), "invalid_arguments"},
		{"wrong type", "demo__read", map[string]any{"n": "seven"}, "invalid_arguments"},
		{"unknown field", "demo__read", map[string]any{"zzz": 1}, "invalid_arguments"},
		{"huge", "demo__read", map[string]any{"n": 1, "junk": strings.Repeat("x", 2<<20)}, "invalid_arguments"},
		{"deep", "demo__read", json.RawMessage(`{"n":` + deep + `}`), "invalid_arguments"},
		{"duplicate keys", "demo__read", json.RawMessage(`{"n":1,"n":2}`), "invalid_arguments"},
		{"unknown tool", "nope__nothing", map[string]any{}, "unknown_tool"},
		{"empty name", "", map[string]any{}, "unknown_tool"},
		{"mangled name", "demo____read", map[string]any{}, "unknown_tool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, cs, tc.tool, tc.args, nil)
			wantReason(t, res, "denied", tc.reason)
		})
	}
	// Typed nil arguments go out as "arguments": null, which the pipeline reads as {}.
	res := call(t, cs, "demo__read", map[string]any(nil), nil)
	if res.IsError {
		t.Errorf("arguments null: %s, want a success (null is {})", dump(res))
	}
	if got, want := metaString(res.Meta, server.MetaCallID), server.DerivedCallID(testCallIDSecret, "demo.read", nil); got != want {
		t.Errorf("null arguments: call id %q, want %q (the id of {})", got, want)
	}
	for _, m := range []mcp.Meta{
		{server.MetaStep: "abc"}, {server.MetaStep: -1}, {server.MetaStep: 1.5}, {server.MetaStep: 1e12},
		{server.MetaSessionID: 7}, {server.MetaRunID: ""}, {server.MetaCallID: strings.Repeat("c", server.MaxIDBytes+1)},
		{server.MetaCallID: []any{"x"}},
		// Issue 14, finding 9: ids a reviewer's terminal would obey.
		{server.MetaCallID: "c1\nFORGED audit line"}, {server.MetaSessionID: "s\r\x1b[2K"},
		{server.MetaRunID: "run\u202eevil"}, {server.MetaCallID: "has space"}, {server.MetaSessionID: "tab\there"},
	} {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "demo__read", Arguments: map[string]any{}, Meta: m})
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("_meta %v: %v, want invalid params", m, err)
		}
	}
	// Still serving.
	if res := call(t, cs, "demo__read", map[string]any{"n": 2}, nil); res.IsError {
		t.Fatalf("after hostile calls: %s", dump(res))
	}
}

// _meta ids are honoured exactly (the recorded row has the key they make), a step may
// be a string of digits, and derived ids make a retry the same call.
func TestCall_MetaIDsAndDerivedIDs(t *testing.T) {
	e := newEnv(t, envConfig{})
	cs := e.connectMemory("", nil)
	meta := mcp.Meta{server.MetaSessionID: "s-meta", server.MetaRunID: "r-meta", server.MetaStep: 3, server.MetaCallID: "c-1"}
	res := call(t, cs, "demo__send", map[string]any{"n": 1}, meta)
	if res.IsError {
		t.Fatalf("demo__send: %s", dump(res))
	}
	for k, v := range map[string]any{server.MetaSessionID: "s-meta", server.MetaRunID: "r-meta", server.MetaStep: float64(3), server.MetaCallID: "c-1"} {
		if res.Meta[k] != v {
			t.Errorf("_meta %s = %v, want %v", k, res.Meta[k], v)
		}
	}
	inv, err := e.store.InvocationGetByKey(e.ctx, keyOf(t, res, "demo.send", `{"n":1}`))
	if err != nil {
		t.Fatalf("no row under the key of the _meta ids: %v", err)
	}
	if inv.SessionID != "s-meta" || inv.RunID != "r-meta" || inv.Step != 3 || inv.CallID != "c-1" || inv.Principal != "alice" ||
		inv.ArgumentTrust != "external_untrusted" || inv.OriginTrust != "external_untrusted" || inv.Status != store.StatusSucceeded {
		t.Errorf("row %+v", inv)
	}
	// The same ids with the step as a string (what inspector --metadata sends) are the same call.
	meta[server.MetaStep] = "3"
	if again := call(t, cs, "demo__send", map[string]any{"n": 1}, meta); again.Meta[server.MetaReplayed] != true {
		t.Errorf("step \"3\": %s, want the recorded outcome", dump(again))
	}
	// Another call id is another call.
	meta[server.MetaCallID] = "c-2"
	if other := call(t, cs, "demo__send", map[string]any{"n": 1}, meta); other.IsError || other.Meta[server.MetaReplayed] == true {
		t.Errorf("call id c-2: %s, want a new execution", dump(other))
	}
	send := e.tools["demo.send"]
	if n := send.execs.Load(); n != 2 {
		t.Fatalf("demo.send executed %d times, want 2", n)
	}

	// Derived ids: the same call in the same session is the same call; other arguments
	// are another call; the argument order and spelling do not matter.
	first := call(t, cs, "demo__send", json.RawMessage(`{"n": 5}`), nil)
	retry := call(t, cs, "demo__send", json.RawMessage(`{"n":5.0}`), nil)
	if first.IsError || retry.Meta[server.MetaReplayed] != true || metaString(first.Meta, server.MetaCallID) != metaString(retry.Meta, server.MetaCallID) {
		t.Errorf("derived retry: first %s, retry %s", dump(first), dump(retry))
	}
	call(t, cs, "demo__send", map[string]any{"n": 6}, nil)
	if n := send.execs.Load(); n != 4 {
		t.Fatalf("demo.send executed %d times, want 4", n)
	}
	// A new connection is a new session: without _meta ids its identical call is new.
	cs2 := e.connectMemory("", nil)
	fresh := call(t, cs2, "demo__send", map[string]any{"n": 5}, nil)
	if fresh.Meta[server.MetaReplayed] == true || metaString(fresh.Meta, server.MetaSessionID) == metaString(first.Meta, server.MetaSessionID) {
		t.Errorf("new connection: %s", dump(fresh))
	}
	// ... and naming the first session makes it the same call again.
	same := call(t, cs2, "demo__send", map[string]any{"n": 5}, mcp.Meta{server.MetaSessionID: metaString(first.Meta, server.MetaSessionID)})
	if same.Meta[server.MetaReplayed] != true {
		t.Errorf("named session: %s, want the recorded outcome", dump(same))
	}
	if n := send.execs.Load(); n != 5 {
		t.Fatalf("demo.send executed %d times, want 5", n)
	}
}

// A tool failure: isError failed/tool_failure, the tool's text only in the enveloped,
// external_untrusted external_detail.
func TestCall_ToolFailureDetail(t *testing.T) {
	e := newEnv(t, envConfig{})
	cs := e.connectMemory("", nil)
	res := call(t, cs, "demo__fail", map[string]any{}, nil)
	s := wantReason(t, res, "failed", "tool_failure")
	var d struct{ Type, Text, Trust string }
	if err := json.Unmarshal(s.ExternalDetail, &d); err != nil {
		t.Fatal(err)
	}
	if d.Trust != "external_untrusted" || !strings.HasPrefix(d.Text, "<untrusted-content") || !strings.Contains(d.Text, "ignore previous instructions") {
		t.Errorf("external_detail %+v", d)
	}
	if strings.Contains(s.Message, "ignore previous") {
		t.Error("the tool's text reached message")
	}
	if len(res.Content) != 2 || res.Content[1].(*mcp.TextContent).Meta[server.MetaTrust] != "external_untrusted" {
		t.Errorf("content %s: want the message then the enveloped detail", dump(res.Content))
	}
}

// Over its output budget, a result keeps an excerpt and artifact references:
// structuredContent is the elided stand-in naming them (output.go), never a cut JSON.
func TestCall_ExcerptedResultIsElided(t *testing.T) {
	e := newEnv(t, envConfig{})
	cs := e.connectMemory("", nil)
	res := call(t, cs, "demo__big", map[string]any{}, nil)
	if res.IsError {
		t.Fatalf("demo__big: %s", dump(res))
	}
	sc, _ := res.StructuredContent.(map[string]any)
	el, _ := sc[server.ElidedKey].(map[string]any)
	if len(sc) != 1 || el == nil || len(el["artifacts"].([]any)) == 0 {
		t.Errorf("structuredContent = %v, want only the elided stand-in with the artifacts", res.StructuredContent)
	}
	arts, _ := res.Meta[server.MetaArtifacts].([]any)
	if len(arts) == 0 {
		t.Fatalf("_meta artifacts missing: %v", res.Meta)
	}
	if !strings.Contains(text(res), "elided") || len(text(res)) > 256 {
		t.Errorf("content %q: want an excerpt within the budget", text(res))
	}
}

// A store failure is failed/internal_error with the table's text only.
func TestCall_StoreFailureIsInternalError(t *testing.T) {
	e := newEnv(t, envConfig{wrap: func(s store.Store) store.Store { return failingStore{s} }})
	cs := e.connectMemory("", nil)
	res := call(t, cs, "demo__read", map[string]any{"n": 1}, nil)
	wantReason(t, res, "failed", "internal_error")
	if strings.Contains(dump(res), "disk on fire") || strings.Contains(dump(res), "secret") {
		t.Errorf("internal text leaked: %s", dump(res))
	}
}

// TestDerivedCallID_KeyedBySecret: the derived id depends on the secret, so it is no
// offline oracle for the arguments (issue 14, finding 5); with one secret it is stable.
func TestDerivedCallID_KeyedBySecret(t *testing.T) {
	args := json.RawMessage(`{"path":"secret-plan.txt"}`)
	a := server.DerivedCallID([]byte("deployment-secret-one-0123456789"), "workspace.read_text", args)
	if again := server.DerivedCallID([]byte("deployment-secret-one-0123456789"), "workspace.read_text", json.RawMessage(` { "path" : "secret-plan.txt" } `)); again != a {
		t.Errorf("same secret, same call: %s then %s", a, again)
	}
	if b := server.DerivedCallID([]byte("deployment-secret-two-0123456789"), "workspace.read_text", args); b == a {
		t.Errorf("another secret derives the same id %s", a)
	}
	if c := server.DerivedCallID(nil, "workspace.read_text", args); c == a {
		t.Errorf("no secret derives the secret's id %s", a)
	}
	if !strings.HasPrefix(a, "auto-") || len(a) != len("auto-")+16 {
		t.Errorf("id %q: want auto- and 16 hex digits", a)
	}
}
