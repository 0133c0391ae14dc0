package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/mcp/server"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// headerLog records the revision and session headers of every request a client sends.
type headerLog struct {
	mu       sync.Mutex
	versions []string
	sessions []string
}

func (l *headerLog) RoundTrip(req *http.Request) (*http.Response, error) {
	l.mu.Lock()
	l.versions = append(l.versions, req.Header.Get("Mcp-Protocol-Version"))
	l.sessions = append(l.sessions, req.Header.Get("Mcp-Session-Id"))
	l.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

// The go-sdk client at its default revision, 2026-07-28, over Streamable HTTP: no
// initialize and no Mcp-Session-Id, every request at 2026-07-28. tools/list mints a
// session and hands it back in _meta; echoed, it keeps the session (mode, pins, call
// identity); the list is the mode's only, private, and stale at once (the mode can
// change); a call held for approval is approved and answered; the same URL serves a
// 2025-11-25 client with its session.
func TestStateless_HTTP20260728(t *testing.T) {
	e := newEnv(t, envConfig{hold: time.Minute})
	url := e.httpURL()
	hl := &headerLog{}
	cs, err := newClient(nil).Connect(e.ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: hl}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	list, err := cs.ListTools(e.ctx, &mcp.ListToolsParams{})
	if err != nil {
		t.Fatal(err)
	}
	session := metaString(list.Meta, server.MetaSessionID)
	if !strings.HasPrefix(session, server.MintedSessionPrefix) {
		t.Fatalf("tools/list without a session: _meta %v, want a minted %s", list.Meta, server.MetaSessionID)
	}
	if list.TTLMs != 0 || list.CacheScope != "private" {
		t.Errorf("cache hints ttlMs %d cacheScope %q, want 0 and private (the mode can change)", list.TTLMs, list.CacheScope)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if slices.Contains(names, "demo__other") || !slices.Contains(names, "demo__read") {
		t.Errorf("tools/list: %v, want the mode's tools only", names)
	}
	meta := mcp.Meta{server.MetaSessionID: session}
	again, err := cs.ListTools(e.ctx, &mcp.ListToolsParams{Meta: meta})
	if err != nil || metaString(again.Meta, server.MetaSessionID) != session {
		t.Fatalf("tools/list with the echoed session: %v %v", again, err)
	}
	res := call(t, cs, "demo__read", map[string]any{"n": 3}, meta)
	if res.IsError || metaString(res.Meta, server.MetaSessionID) != session {
		t.Fatalf("call in the echoed session: %s", dump(res))
	}
	wantReason(t, call(t, cs, "demo__other", map[string]any{}, meta), "denied", "not_in_mode")

	answer := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "demo__deploy", Arguments: map[string]any{"n": 1}, Meta: meta})
		if err != nil {
			t.Error(err)
		}
		answer <- res
	}()
	approveWhenHeld(t, e, "demo.deploy")
	if res = <-answer; res == nil || res.IsError {
		t.Fatalf("the approved call: %s", dump(res))
	}
	if n := e.tools["demo.deploy"].execs.Load(); n != 1 {
		t.Fatalf("demo.deploy ran %d times, want 1", n)
	}
	hl.mu.Lock()
	for i, v := range hl.versions {
		if v != "2026-07-28" || hl.sessions[i] != "" {
			t.Errorf("request %d: MCP-Protocol-Version %q, Mcp-Session-Id %q: want 2026-07-28 and none", i, v, hl.sessions[i])
		}
	}
	hl.mu.Unlock()

	old := e.connectURL(url, nil)
	if res := call(t, old, "demo__read", map[string]any{"n": 1}, nil); res.IsError || metaString(res.Meta, server.MetaSessionID) != old.ID() {
		t.Fatalf("a 2025-11-25 client on the same URL: %s (session %q)", dump(res), old.ID())
	}
}

// ttlMs is positive only where no session's list can change: no protocol, or a server
// pinned to one mode.
func TestStateless_ListTTL(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   envConfig
		ttlMs int
	}{
		{"modes", envConfig{}, 0},
		{"no-protocol", envConfig{noModes: true}, int(server.DefaultListTTL.Milliseconds())},
		{"pinned", envConfig{modes: &pinnedModes{fakeModes{mode: "build", tools: inMode}}}, int(server.DefaultListTTL.Milliseconds())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.cfg)
			cs := e.connectVersion(e.httpURL(), "", nil)
			list, err := cs.ListTools(e.ctx, &mcp.ListToolsParams{})
			if err != nil {
				t.Fatal(err)
			}
			if list.TTLMs != tc.ttlMs || list.CacheScope != "private" {
				t.Fatalf("ttlMs %d cacheScope %q, want %d and private", list.TTLMs, list.CacheScope, tc.ttlMs)
			}
		})
	}
}

type pinnedModes struct{ fakeModes }

func (p *pinnedModes) PinnedMode() string { return p.mode }

// modernRaw speaks revision 2026-07-28 by hand: for what the go-sdk client does not
// do (the Tasks extension: it reads a task as an empty result).
type modernRaw struct {
	t      *testing.T
	url    string
	tasks  bool // declare the Tasks extension
	nextID int
}

func (m *modernRaw) post(method string, params map[string]any, header map[string]string) rawResponse {
	m.t.Helper()
	m.nextID++
	if params == nil {
		params = map[string]any{}
	}
	caps := map[string]any{}
	if m.tasks {
		caps["extensions"] = map[string]any{server.ExtensionTasks: map[string]any{}}
	}
	meta, _ := params["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["io.modelcontextprotocol/protocolVersion"] = "2026-07-28"
	meta["io.modelcontextprotocol/clientCapabilities"] = caps
	params["_meta"] = meta
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.nextID, "method": method, "params": params})
	h := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	if name, ok := params["name"].(string); ok {
		h["Mcp-Name"] = name
	}
	if id, ok := params["taskId"].(string); ok {
		h["Mcp-Name"] = id
	}
	for k, v := range header {
		h[k] = v
	}
	hr := &httpRaw{t: m.t, url: m.url}
	resp := hr.request(http.MethodPost, string(body), h)
	defer resp.Body.Close()
	return readAnswer(m.t, resp)
}

func (m *modernRaw) result(method string, params map[string]any) map[string]any {
	m.t.Helper()
	r := m.post(method, params, nil)
	msg := r.message()
	res, ok := msg["result"].(map[string]any)
	if !ok {
		m.t.Fatalf("%s: HTTP %d %v", method, r.status, msg)
	}
	return res
}

func (m *modernRaw) error(method string, params map[string]any, header map[string]string) (int, float64) {
	m.t.Helper()
	r := m.post(method, params, header)
	msg := r.message()
	e, ok := msg["error"].(map[string]any)
	if !ok {
		m.t.Fatalf("%s: HTTP %d %v, want an error", method, r.status, msg)
	}
	code, _ := e["code"].(float64)
	return r.status, code
}

// Tasks (SEP-2663) over HTTP: a call held for approval is answered with a task at once;
// tasks/get reports it working, then, once approved, completed with the call's result;
// a cancelled held call ends cancelled (the row denied/task_cancelled) and never runs;
// unknown, forged and other tenants' task ids are -32602; without the extension the
// tasks methods are -32021 and a held call is served as before (progress, then
// approval_pending at the bound); Mcp-Name must be the task id.
func TestTasks_HeldCallBecomesTask(t *testing.T) {
	e := newEnv(t, envConfig{hold: time.Hour, opts: func(o *server.Options) { o.TaskPoll = 10 * time.Millisecond }})
	url := e.httpURL()
	m := &modernRaw{t: t, url: url, tasks: true}
	session := map[string]any{server.MetaSessionID: "tasks-s1"}

	created := m.result("tools/call", map[string]any{"name": "demo__deploy", "arguments": map[string]any{"n": 1}, "_meta": session})
	taskID, _ := created["taskId"].(string)
	if created["resultType"] != "task" || created["status"] != "working" || !strings.HasPrefix(taskID, server.TaskIDPrefix) ||
		created["result"] != nil || created["createdAt"] == nil {
		t.Fatalf("held call: %v, want a working CreateTaskResult", created)
	}
	if ttl, present := created["ttlMs"]; !present || ttl != nil {
		t.Errorf("ttlMs %v, want null (the row is kept)", ttl)
	}
	got := m.result("tasks/get", map[string]any{"taskId": taskID})
	if got["resultType"] != "complete" || got["status"] != "working" || got["statusMessage"] != server.HoldProgressMessage {
		t.Fatalf("tasks/get while held: %v", got)
	}
	approveHeld(t, e, "demo.deploy")
	for got["status"] == "working" {
		got = m.result("tasks/get", map[string]any{"taskId": taskID})
	}
	result, _ := got["result"].(map[string]any)
	if got["status"] != "completed" || result == nil || result["isError"] == true {
		t.Fatalf("tasks/get after approval: %v", got)
	}
	if n := e.tools["demo.deploy"].execs.Load(); n != 1 {
		t.Fatalf("demo.deploy ran %d times, want 1", n)
	}

	// Cancelled while held: never runs, even once approved.
	created = m.result("tools/call", map[string]any{"name": "demo__deploy", "arguments": map[string]any{"n": 2}, "_meta": session})
	taskID, _ = created["taskId"].(string)
	ack := m.result("tasks/cancel", map[string]any{"taskId": taskID})
	if ack["resultType"] != "complete" || ack["taskId"] != nil || ack["status"] != nil {
		t.Fatalf("tasks/cancel: %v, want the empty ack", ack)
	}
	got = m.result("tasks/get", map[string]any{"taskId": taskID})
	if got["status"] != "cancelled" || got["result"] != nil {
		t.Fatalf("tasks/get after cancel: %v", got)
	}
	if ack := m.result("tasks/cancel", map[string]any{"taskId": taskID}); ack["resultType"] != "complete" {
		t.Fatalf("tasks/cancel of a cancelled task: %v", ack)
	}
	rows, err := e.store.InvocationList(e.ctx, store.InvocationFilter{Tenant: alice.Tenant})
	if err != nil {
		t.Fatal(err)
	}
	last := rows[len(rows)-1]
	if last.Status != store.StatusDenied || last.ReasonCode != string(runtime.ReasonTaskCancelled) {
		t.Fatalf("the cancelled row: %s %s", last.Status, last.ReasonCode)
	}
	if err := runtime.DecideApproval(e.ctx, e.store, last.Key, bob, true, "late", nil); err == nil {
		t.Fatal("a cancelled call could still be approved")
	}
	if n := e.tools["demo.deploy"].execs.Load(); n != 1 {
		t.Fatalf("demo.deploy ran %d times after the cancel, want 1", n)
	}

	// Unknown, forged, another tenant's.
	for _, id := range []string{"tgt-999999-00", "nope", taskID[:len(taskID)-1] + "0", server.TaskID([]byte("other secret"), alice.Tenant, last.ID, last.Key)} {
		if _, code := m.error("tasks/get", map[string]any{"taskId": id}, nil); code != -32602 {
			t.Errorf("tasks/get %q: code %v, want -32602", id, code)
		}
	}
	// Mcp-Name must be the task id.
	if status, code := m.error("tasks/get", map[string]any{"taskId": taskID}, map[string]string{"Mcp-Name": "other"}); status != 400 || code != -32020 {
		t.Errorf("tasks/get with a wrong Mcp-Name: HTTP %d code %v, want 400 -32020", status, code)
	}
	// Without the extension.
	plain := &modernRaw{t: t, url: url}
	for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		if _, code := plain.error(method, map[string]any{"taskId": taskID}, nil); code != -32021 {
			t.Errorf("%s without the extension: code %v, want -32021", method, code)
		}
	}
	// tasks/result and tasks/list are not methods.
	for _, method := range []string{"tasks/result", "tasks/list"} {
		if _, code := m.error(method, map[string]any{"taskId": taskID}, nil); code != -32601 {
			t.Errorf("%s: code %v, want -32601", method, code)
		}
	}
	// A call that is not held and ends at once is answered with its result.
	res := m.result("tools/call", map[string]any{"name": "demo__read", "arguments": map[string]any{"n": 5}, "_meta": session})
	if res["resultType"] == "task" || res["taskId"] != nil || res["isError"] == true {
		t.Fatalf("a quick call with the extension: %v", res)
	}
}

// A task is the tenant's: a server of another tenant on the same store does not find
// it, nor cancel it.
func TestTasks_OtherTenantNotFound(t *testing.T) {
	e := newEnv(t, envConfig{hold: time.Hour})
	m := &modernRaw{t: t, url: e.httpURL(), tasks: true}
	created := m.result("tools/call", map[string]any{"name": "demo__deploy", "arguments": map[string]any{"n": 1},
		"_meta": map[string]any{server.MetaSessionID: "tasks-s2"}})
	taskID, _ := created["taskId"].(string)
	evil, err := server.New(server.Options{Pipeline: e.p, Registry: e.reg, Principal: runtime.Principal{ID: "mallory", Tenant: "evil"},
		CallIDSecret: testCallIDSecret})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptestServer(t, evil.HTTPHandler())
	em := &modernRaw{t: t, url: hs + server.Endpoint, tasks: true}
	for _, method := range []string{"tasks/get", "tasks/cancel"} {
		if _, code := em.error(method, map[string]any{"taskId": taskID}, nil); code != -32602 {
			t.Errorf("%s of another tenant's task: code %v, want -32602", method, code)
		}
	}
	if got := m.result("tasks/get", map[string]any{"taskId": taskID}); got["status"] != "working" {
		t.Fatalf("the task after another tenant's cancel: %v", got)
	}
}

func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL
}
