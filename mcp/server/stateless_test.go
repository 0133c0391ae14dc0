package server_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/mcp/server"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/storetest"
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

	// A version this server does not speak, below 2026-07-28 too: -32022 with the
	// versions it does (the SDK alone answers that one in plain text).
	raw := &httpRaw{t: t, url: url}
	r := readAnswer(t, raw.request(http.MethodPost, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}`,
		map[string]string{"Mcp-Protocol-Version": "1900-01-01"}))
	if msg := r.message(); r.status != http.StatusBadRequest || errCode(msg) != -32022 || msg["id"] != float64(3) ||
		!slices.Contains(dig(msg, "error", "data", "supported").([]any), any("2026-07-28")) {
		t.Fatalf("an unknown version: HTTP %d %v", r.status, msg)
	}

	old := e.connectURL(url, nil)
	if res := call(t, old, "demo__read", map[string]any{"n": 1}, nil); res.IsError || metaString(res.Meta, server.MetaSessionID) != old.ID() {
		t.Fatalf("a 2025-11-25 client on the same URL: %s (session %q)", dump(res), old.ID())
	}
}

// ttlMs is 0 whatever the protocol: a list is a session's, and a client's cache keyed
// without the session (the go-sdk client's: by cursor) must never show one session's
// list for another's. Two sessions of one go-sdk client, one pinned before a tool
// changed, each see their own definition.
func TestStateless_ListNeverCachedAcrossSessions(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  envConfig
	}{
		{"modes", envConfig{}},
		{"no-protocol", envConfig{noModes: true}},
		{"pinned", envConfig{modes: &pinnedModes{fakeModes{mode: "build", tools: inMode}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.cfg)
			cs := e.connectVersion(e.httpURL(), "", nil)
			desc := func(session string) string {
				t.Helper()
				list, err := cs.ListTools(e.ctx, &mcp.ListToolsParams{Meta: mcp.Meta{server.MetaSessionID: session}})
				if err != nil {
					t.Fatal(err)
				}
				if list.TTLMs != 0 || list.CacheScope != "private" {
					t.Fatalf("ttlMs %d cacheScope %q, want 0 and private", list.TTLMs, list.CacheScope)
				}
				for _, tool := range list.Tools {
					if tool.Name == "demo__read" {
						return tool.Description
					}
				}
				t.Fatalf("session %s: no demo__read", session)
				return ""
			}
			if d := desc("old"); d != "test tool demo.read" {
				t.Fatalf("old session: %q", d)
			}
			changed := newTestTool("demo.read", runtime.SideEffectRead, runtime.Idempotent, runtime.RiskLow)
			changed.spec.Version, changed.spec.Description, changed.spec.SchemaSHA256 = 2, "changed", "sha-changed"
			if err := e.reg.Replace(changed); err != nil {
				t.Fatal(err)
			}
			if d := desc("new"); d != "changed" {
				t.Fatalf("a new session is shown %q, want the changed definition", d)
			}
			if d := desc("old"); d != "test tool demo.read" {
				t.Fatalf("the old session is shown %q, want its pinned definition", d)
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

// roundRobin sends each request to the next of its URLs: replicas behind a load
// balancer with no stickiness.
type roundRobin struct {
	mu    sync.Mutex
	urls  []string
	next  int
	count []int
}

func (rr *roundRobin) RoundTrip(req *http.Request) (*http.Response, error) {
	rr.mu.Lock()
	i := rr.next % len(rr.urls)
	rr.next++
	rr.count[i]++
	rr.mu.Unlock()
	out := req.Clone(req.Context())
	u, err := url.Parse(rr.urls[i])
	if err != nil {
		return nil, err
	}
	out.URL.Scheme, out.URL.Host, out.Host = u.Scheme, u.Host, u.Host
	if req.GetBody != nil {
		out.Body, _ = req.GetBody()
	}
	return http.DefaultTransport.RoundTrip(out)
}

// Sessions of the session-based revisions are in the store (issue 16 point 3): a
// 2025-11-25 client whose requests alternate between two handlers (two replicas' worth
// of in-memory sessions) on one store lists, calls, and has a held call approved; its
// mode and identity hold across them; a handler that never saw the session refuses it
// to another tenant (403) and an unknown or deleted one (404), with JSON-RPC errors.
func TestSessions_ServedByAnyHandler(t *testing.T) {
	e := newEnv(t, envConfig{hold: time.Minute})
	other, err := server.New(server.Options{Pipeline: e.p, Registry: e.reg, Modes: &fakeModes{mode: "build", tools: inMode},
		Principal: alice, CallIDSecret: testCallIDSecret, WorkspaceFor: func(string, string) string { return e.ws }, ProgressInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	a, b := httptestServer(t, e.srv.HTTPHandler()), httptestServer(t, other.HTTPHandler())
	rr := &roundRobin{urls: []string{a, b}, count: make([]int, 2)}
	progress := &progressLog{}
	cs, err := newClient(progress).Connect(e.ctx, &mcp.StreamableClientTransport{Endpoint: a + server.Endpoint, MaxRetries: -1,
		DisableStandaloneSSE: true, HTTPClient: &http.Client{Transport: rr}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for range 2 {
		if names := listNames(t, cs, nil); slices.Contains(names, "demo__other") || !slices.Contains(names, "demo__read") {
			t.Fatalf("tools/list: %v", names)
		}
		if res := call(t, cs, "demo__read", map[string]any{"n": 1}, nil); res.IsError || metaString(res.Meta, server.MetaSessionID) != cs.ID() {
			t.Fatalf("call: %s", dump(res))
		}
	}
	answer := make(chan *mcp.CallToolResult, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "demo__deploy", Arguments: map[string]any{"n": 1}}
		p.SetProgressToken("held")
		res, err := cs.CallTool(e.ctx, p)
		if err != nil {
			t.Error(err)
		}
		answer <- res
	}()
	approveWhenHeld(t, e, "demo.deploy")
	if res := <-answer; res == nil || res.IsError {
		t.Fatalf("the approved call: %s", dump(res))
	}
	progress.received(t) // while the call was held
	if rr.count[0] < 3 || rr.count[1] < 3 {
		t.Fatalf("requests per handler %v: both must have served the session", rr.count)
	}

	// Another tenant on a handler that never saw the session: 403.
	evil, err := server.New(server.Options{Pipeline: e.p, Registry: e.reg, Principal: runtime.Principal{ID: "mallory", Tenant: "evil"},
		CallIDSecret: testCallIDSecret})
	if err != nil {
		t.Fatal(err)
	}
	eh := &httpRaw{t: t, url: httptestServer(t, evil.HTTPHandler()) + server.Endpoint, session: cs.ID()}
	r := eh.post(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
	if msg := r.message(); r.status != http.StatusForbidden || errCode(msg) != -32600 || msg["id"] != float64(7) {
		t.Fatalf("another tenant's session: HTTP %d %v", r.status, msg)
	}
	// Unknown: 404.
	fresh := &httpRaw{t: t, url: b + server.Endpoint, session: "no-such-session"}
	if r := fresh.post(`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`); r.status != http.StatusNotFound || errCode(r.message()) != -32600 {
		t.Fatalf("an unknown session: HTTP %d %v", r.status, r.message())
	}
	// Deleted through one handler: unknown to a handler that restores it afterwards.
	del := &httpRaw{t: t, url: b + server.Endpoint, session: cs.ID()}
	if resp := del.request(http.MethodDelete, "", nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	third, err := server.New(server.Options{Pipeline: e.p, Registry: e.reg, Principal: alice, CallIDSecret: testCallIDSecret})
	if err != nil {
		t.Fatal(err)
	}
	gone := &httpRaw{t: t, url: httptestServer(t, third.HTTPHandler()) + server.Endpoint, session: cs.ID()}
	if r := gone.post(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`); r.status != http.StatusNotFound {
		t.Fatalf("a deleted session: HTTP %d %v", r.status, r.message())
	}
}

// stdio at 2026-07-28 (raw lines, as the revision says): no initialize; server/discover
// names 2026-07-28 and the Tasks extension; tools/list and tools/call carry the
// revision in _meta; the connection's session is the default one; a held call reports
// progress and is answered once approved; with the extension declared, a held call is
// a task that tasks/get reports.
func TestStateless_Stdio20260728(t *testing.T) {
	e := newEnv(t, envConfig{hold: time.Minute, opts: func(o *server.Options) { o.SessionID = "stdio-s" }})
	c, _ := stdioRaw(t, e)
	meta := func(tasks bool) string {
		caps := `{}`
		if tasks {
			caps = `{"extensions":{"` + server.ExtensionTasks + `":{}}}`
		}
		return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `,"progressToken":"p"}`
	}
	c.send(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta(false) + `}}`)
	m := c.next("discover", hasID(1))
	if v, _ := dig(m, "result", "supportedVersions").([]any); !slices.Contains(v, any("2026-07-28")) || dig(m, "result", "capabilities", "extensions", server.ExtensionTasks) == nil {
		t.Fatalf("server/discover: %v", m)
	}
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + meta(false) + `}}`)
	m = c.next("tools/list", hasID(2))
	if dig(m, "result", "_meta", server.MetaSessionID) != "stdio-s" || dig(m, "result", "cacheScope") != "private" {
		t.Fatalf("tools/list: %v", m)
	}
	c.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"demo__deploy","arguments":{"n":1},` + meta(false) + `}}`)
	c.next("hold progress", func(m map[string]any) bool { return m["method"] == "notifications/progress" })
	approveHeld(t, e, "demo.deploy")
	m = c.next("approved call", hasID(3))
	if dig(m, "result", "isError") == true || dig(m, "result", "resultType") != "complete" {
		t.Fatalf("the approved call: %v", m)
	}
	c.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"demo__deploy","arguments":{"n":2},` + meta(true) + `}}`)
	m = c.next("task", hasID(4))
	taskID, _ := dig(m, "result", "taskId").(string)
	if dig(m, "result", "resultType") != "task" || taskID == "" {
		t.Fatalf("a held call with the extension: %v", m)
	}
	c.send(`{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{"taskId":"` + taskID + `",` + meta(true) + `}}`)
	if m = c.next("tasks/get", hasID(5)); dig(m, "result", "status") != "working" {
		t.Fatalf("tasks/get: %v", m)
	}
}

// A notifications/cancelled that reaches another handler than the one running the
// held call (replicas with no stickiness) cancels it there: the running handler reads
// the cancellation from the store, the call's context ends (the hold ends, the call
// stays PENDING) and its response is withheld.
func TestSessions_CancelThroughAnotherHandler(t *testing.T) {
	logs := newLogWatch()
	e := newEnv(t, envConfig{hold: time.Hour, opts: func(o *server.Options) {
		o.Logger = slog.New(logs)
		o.CancelPoll = 10 * time.Millisecond
	}})
	other, err := server.New(server.Options{Pipeline: e.p, Registry: e.reg, Modes: &fakeModes{mode: "build", tools: inMode},
		Principal: alice, CallIDSecret: testCallIDSecret})
	if err != nil {
		t.Fatal(err)
	}
	a := &httpRaw{t: t, url: e.httpURL()}
	a.initialize()
	_, _, closeStream := a.heldPOST(7, `{"n":1}`)
	defer closeStream()
	b := &httpRaw{t: t, url: httptestServer(t, other.HTTPHandler()) + server.Endpoint, session: a.session}
	if r := b.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`); r.status != http.StatusAccepted {
		t.Fatalf("notifications/cancelled through the other handler: %d %v", r.status, r.message())
	}
	logs.await("a call cancelled through another replica")
	logs.await("its response is not sent")
	rows, err := e.store.InvocationList(e.ctx, storeFilterHeld)
	if err != nil || len(rows) != 1 {
		t.Fatalf("the cancelled call is no longer held: %v %v", rows, err)
	}
}

// A call that runs longer than TaskAfter is answered with a task (its row is RUNNING:
// working, "running"); once the tool returns, tasks/get reports it completed with the
// result.
func TestTasks_LongCallBecomesTask(t *testing.T) {
	e := newEnv(t, envConfig{noModes: true, opts: func(o *server.Options) { o.TaskAfter = 10 * time.Millisecond }})
	release := make(chan struct{})
	slow := newTestTool("demo.slow", runtime.SideEffectWrite, runtime.NonIdempotent, runtime.RiskLow)
	slow.run = func(json.RawMessage) (runtime.ToolResult, error) {
		<-release
		return runtime.StructuredResult(&slow.spec, map[string]any{"ok": true, "n": 9})
	}
	if err := e.reg.Register(slow); err != nil {
		t.Fatal(err)
	}
	m := &modernRaw{t: t, url: e.httpURL(), tasks: true}
	created := m.result("tools/call", map[string]any{"name": "demo__slow", "arguments": map[string]any{}, "_meta": map[string]any{server.MetaSessionID: "long"}})
	taskID, _ := created["taskId"].(string)
	if created["resultType"] != "task" || created["status"] != "working" || taskID == "" {
		t.Fatalf("a long call: %v, want a task", created)
	}
	if got := m.result("tasks/get", map[string]any{"taskId": taskID}); got["status"] != "working" || got["statusMessage"] != "running" {
		t.Fatalf("tasks/get while it runs: %v", got)
	}
	close(release)
	got := m.result("tasks/get", map[string]any{"taskId": taskID})
	for got["status"] == "working" {
		got = m.result("tasks/get", map[string]any{"taskId": taskID})
	}
	if got["status"] != "completed" || dig(got, "result", "structuredContent", "n") != float64(9) {
		t.Fatalf("tasks/get once it ended: %v", got)
	}
}

// A 2026-07-28 request that names no session gets one minted, and minting writes
// nothing: a client that never echoes its session costs the store nothing per call
// (issue 20). The first echo writes it, owner and pins in one write (SessionMint), as
// a claim and a pin would have left it; after that nothing more. Another tenant naming
// the id, and an id of the minted form that this deployment did not mint, are refused,
// before and after the write, and write nothing.
func TestStateless_MintedSessionWrittenWhenEchoed(t *testing.T) {
	var counting *storetest.CountingStore
	e := newEnv(t, envConfig{wrap: func(s store.Store) store.Store { counting = storetest.NewCountingStore(s); return counting }})
	cs, err := newClient(nil).Connect(e.ctx, &mcp.StreamableClientTransport{Endpoint: e.httpURL(), MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	evil, err := server.New(server.Options{Pipeline: e.p, Registry: e.reg, Principal: runtime.Principal{ID: "mallory", Tenant: "evil"},
		CallIDSecret: testCallIDSecret})
	if err != nil {
		t.Fatal(err)
	}
	ecs, err := newClient(nil).Connect(e.ctx, &mcp.StreamableClientTransport{Endpoint: httptestServer(t, evil.HTTPHandler()) + server.Endpoint, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ecs.Close()
	sessionWrites := func() map[string]int {
		out := map[string]int{}
		for m, n := range counting.Commits() {
			if strings.HasPrefix(m, "Session") {
				out[m] = n
			}
		}
		return out
	}
	refused := func(cs *mcp.ClientSession, session, who string) {
		t.Helper()
		_, err := cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "demo__read", Arguments: map[string]any{"n": 9}, Meta: mcp.Meta{server.MetaSessionID: session}})
		if err == nil || !strings.Contains(err.Error(), "cannot be used with these credentials") {
			t.Fatalf("%s named session %s: %v, want it refused", who, session, err)
		}
	}
	counting.Reset()

	res := call(t, cs, "demo__read", map[string]any{"n": 1}, nil)
	session := metaString(res.Meta, server.MetaSessionID)
	if res.IsError || !strings.HasPrefix(session, server.MintedSessionPrefix) || len(session) != 44 {
		t.Fatalf("a call without a session: %s", dump(res))
	}
	if w := sessionWrites(); len(w) != 0 || counting.Reads("SessionPinsGet") != 0 {
		t.Fatalf("minting the call's session: writes %v, %d pin reads; want none", w, counting.Reads("SessionPinsGet"))
	}
	if _, pinned, err := e.store.SessionPinsGet(e.ctx, alice.Tenant, session); err != nil || pinned {
		t.Fatalf("a minted session is in the store before it was echoed: %v, %v", pinned, err)
	}
	forged := server.MintedSessionPrefix + strings.Repeat("A", 42)
	for _, c := range []struct {
		cs           *mcp.ClientSession
		session, who string
	}{{ecs, session, "another tenant"}, {cs, forged, "a forged id"}} {
		refused(c.cs, c.session, c.who)
	}
	if w := sessionWrites(); len(w) != 0 {
		t.Fatalf("refused sessions wrote %v", w)
	}

	meta := mcp.Meta{server.MetaSessionID: session}
	for i := range 2 {
		res = call(t, cs, "demo__read", map[string]any{"n": 2 + i}, meta)
		if res.IsError || metaString(res.Meta, server.MetaSessionID) != session {
			t.Fatalf("the echoed session: %s", dump(res))
		}
		if w := sessionWrites(); w["SessionMint"] != 1 || len(w) != 1 {
			t.Fatalf("echo %d: session writes %v, want one SessionMint in all", i+1, w)
		}
	}
	if owned, err := e.store.SessionClaim(e.ctx, "another-tenant", session); err != nil || owned {
		t.Fatalf("another tenant claims the echoed session: %v, %v", owned, err)
	}
	if owned, err := e.store.SessionClaim(e.ctx, alice.Tenant, session); err != nil || !owned {
		t.Fatalf("the minting tenant does not own its session: %v, %v", owned, err)
	}
	pins, pinned, err := e.store.SessionPinsGet(e.ctx, alice.Tenant, session)
	if err != nil || !pinned || !slices.ContainsFunc(pins, func(p store.ToolPin) bool { return p.Tool == "demo.read" }) {
		t.Fatalf("the echoed session's catalog: %v (pinned %v, %v)", pins, pinned, err)
	}
	refused(ecs, session, "another tenant, after the write,")
}

// A minted session keeps the catalog it was minted with. Echoed after a tool changed,
// it is written with its own catalog, which this process still holds, and sees the
// change as any pinned session does (tool_changed). One whose catalog no process can
// know any more (a forced epoch re-pinned what this one held) is refused, never pinned
// to another catalog (MCP-7).
func TestStateless_MintedSessionKeepsItsCatalog(t *testing.T) {
	e := newEnv(t, envConfig{})
	cs, err := newClient(nil).Connect(e.ctx, &mcp.StreamableClientTransport{Endpoint: e.httpURL(), MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var minted []string
	for i := range 2 {
		res := call(t, cs, "demo__read", map[string]any{"n": i}, nil)
		minted = append(minted, metaString(res.Meta, server.MetaSessionID))
	}
	changed := newTestTool("demo.read", runtime.SideEffectRead, runtime.Idempotent, runtime.RiskLow)
	changed.spec.Version, changed.spec.Description, changed.spec.SchemaSHA256 = 2, "changed", "sha-changed"
	if err := e.reg.Replace(changed); err != nil {
		t.Fatal(err)
	}
	wantReason(t, call(t, cs, "demo__read", map[string]any{"n": 5}, mcp.Meta{server.MetaSessionID: minted[0]}), "unavailable", "tool_changed")
	if pins, _, err := e.store.SessionPinsGet(e.ctx, alice.Tenant, minted[0]); err != nil ||
		!slices.Contains(pins, store.ToolPin{Tool: "demo.read", SHA256: e.tools["demo.read"].spec.SchemaSHA256}) {
		t.Fatalf("the session was written with %v (%v), want its own catalog", pins, err)
	}

	if _, err := e.reg.ForceEpochServer(e.ctx, "demo."); err != nil {
		t.Fatal(err)
	}
	_, err = cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "demo__read", Arguments: map[string]any{"n": 6}, Meta: mcp.Meta{server.MetaSessionID: minted[1]}})
	if err == nil || !strings.Contains(err.Error(), "cannot be used with these credentials") {
		t.Fatalf("a minted session whose catalog is gone: %v, want it refused", err)
	}
	if _, pinned, err := e.store.SessionPinsGet(e.ctx, alice.Tenant, minted[1]); err != nil || pinned {
		t.Fatalf("a refused minted session was written: %v, %v", pinned, err)
	}
}

// A call whose session was minted for its own request, and whose run is that
// session, is the first call of a run nobody can have used: it makes no read of the
// run's earlier calls (call identity and the breaker, issue 20), and is recorded as
// any call is. The session echoed, or a run the client names, is read as any run is:
// the write's retry in the echoed session finds its outcome and does not run again.
func TestStateless_NewRunReadsNoEarlierCalls(t *testing.T) {
	var counting *storetest.CountingStore
	e := newEnv(t, envConfig{wrap: func(s store.Store) store.Store { counting = storetest.NewCountingStore(s); return counting }})
	cs := e.connectVersion(e.httpURL(), "", nil) // the go-sdk client's default revision, 2026-07-28
	counting.Reset()

	sent := call(t, cs, "demo__send", map[string]any{"n": 1}, nil)
	read := call(t, cs, "demo__read", map[string]any{"n": 1}, nil)
	if sent.IsError || read.IsError {
		t.Fatalf("calls in new runs: %s, %s", dump(sent), dump(read))
	}
	if n := counting.Reads("InvocationPriorCalls"); n != 0 {
		t.Fatalf("two calls in runs minted for them read the runs' earlier calls %d times, want 0", n)
	}
	session := metaString(sent.Meta, server.MetaSessionID)
	if inv, err := e.store.InvocationGetByKey(e.ctx, keyOf(t, sent, "demo.send", `{"n":1}`)); err != nil || inv.RunID != session || inv.SessionID != session {
		t.Fatalf("the write in a new run: %+v, %v; want it recorded in run and session %s", inv, err, session)
	}

	retry := call(t, cs, "demo__send", map[string]any{"n": 1}, mcp.Meta{server.MetaSessionID: session})
	if n := e.tools["demo.send"].execs.Load(); retry.IsError || retry.Meta[server.MetaReplayed] != true || n != 1 {
		t.Fatalf("the write's retry in its echoed session: %s, the tool ran %d times; want its record replayed, one run", dump(retry), n)
	}
	named := call(t, cs, "demo__read", map[string]any{"n": 2}, mcp.Meta{server.MetaRunID: "run-7"})
	if named.IsError {
		t.Fatalf("a call in a named run: %s", dump(named))
	}
	if n := counting.Reads("InvocationPriorCalls"); n != 2 {
		t.Fatalf("the echoed session's call and the named run's read the runs' earlier calls %d times, want 2", n)
	}
}
