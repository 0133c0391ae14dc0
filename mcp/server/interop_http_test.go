package server_test

// Issue 15, the Streamable HTTP side: JSON-RPC answers where the SDK answers plain
// text or code 0 (point 5), no response to a cancelled request (point 4), resumable
// response streams with event ids and a retry field (point 7), and a prompt shutdown
// (point 6).

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/mcp/server"
)

// httpRaw speaks Streamable HTTP to a server by hand.
type httpRaw struct {
	t       *testing.T
	url     string
	session string
}

// sseEvent is one server-sent event.
type sseEvent struct{ name, id, retry, data string }

// rawResponse is a POST's answer: the status, the content type, and the body's one
// JSON message or its SSE events.
type rawResponse struct {
	status int
	ctype  string
	json   map[string]any
	events []sseEvent
	header http.Header
}

// message is the JSON-RPC message of the answer: the JSON body, or the data of the
// last SSE event that has some.
func (r rawResponse) message() map[string]any {
	if r.json != nil {
		return r.json
	}
	for i := len(r.events) - 1; i >= 0; i-- {
		if r.events[i].data != "" {
			var m map[string]any
			json.Unmarshal([]byte(r.events[i].data), &m)
			return m
		}
	}
	return nil
}

func (h *httpRaw) request(method, body string, header map[string]string) *http.Response {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if h.session != "" {
		req.Header.Set("Mcp-Session-Id", h.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

// post sends body and reads the whole answer.
func (h *httpRaw) post(body string) rawResponse {
	h.t.Helper()
	resp := h.request(http.MethodPost, body, nil)
	defer resp.Body.Close()
	return readAnswer(h.t, resp)
}

func readAnswer(t *testing.T, resp *http.Response) rawResponse {
	t.Helper()
	r := rawResponse{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), header: resp.Header}
	if strings.HasPrefix(r.ctype, "text/event-stream") {
		for e := range sseEvents(resp.Body) {
			r.events = append(r.events, e)
		}
		return r
	}
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &r.json); err != nil {
		r.json = map[string]any{"non-json": string(data)}
	}
	return r
}

// sseEvents yields the events of an SSE body until it ends.
func sseEvents(body io.Reader) func(func(sseEvent) bool) {
	return func(yield func(sseEvent) bool) {
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var e sseEvent
		var any bool
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				if any && !yield(e) {
					return
				}
				e, any = sseEvent{}, false
				continue
			}
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			switch k {
			case "event":
				e.name, any = v, true
			case "id":
				e.id, any = v, true
			case "retry":
				e.retry, any = v, true
			case "data":
				e.data, any = v, true
			}
		}
	}
}

func (h *httpRaw) initialize() {
	h.t.Helper()
	resp := h.request(http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
	defer resp.Body.Close()
	r := readAnswer(h.t, resp)
	h.session = resp.Header.Get("Mcp-Session-Id")
	if r.status != http.StatusOK || h.session == "" {
		h.t.Fatalf("initialize: %d %v", r.status, r.message())
	}
	if r := h.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.status != http.StatusAccepted {
		h.t.Fatalf("notifications/initialized: %d", r.status)
	}
}

// Point 5 over HTTP: an unknown method is answered JSON-RPC -32601 (HTTP 200), as on
// stdio; a request other than initialize without a session is answered 400 with
// JSON-RPC -32600 (not 200 with code 0); a second initialize is answered -32600; what
// else the SDK refuses in plain text is answered in JSON-RPC (point 1: a batch, invalid
// JSON), and the session goes on.
func TestHTTP_JSONRPCErrors(t *testing.T) {
	e := newEnv(t, envConfig{})
	h := &httpRaw{t: t, url: e.httpURL()}

	r := h.post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if r.status != http.StatusBadRequest || errCode(r.message()) != -32600 || r.message()["id"] != float64(1) ||
		!strings.Contains(dump(r.message()), "needs a session") {
		t.Errorf("tools/list without a session: %d %v, want 400 and -32600 with id 1", r.status, r.message())
	}

	h.initialize()
	r = h.post(`{"jsonrpc":"2.0","id":2,"method":"no/such/method","params":{}}`)
	if r.status != http.StatusOK || !strings.HasPrefix(r.ctype, "application/json") || errCode(r.message()) != -32601 || r.message()["id"] != float64(2) {
		t.Errorf("unknown method: %d %s %v, want 200 and JSON-RPC -32601 with id 2", r.status, r.ctype, r.message())
	}
	r = h.post(`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if errCode(r.message()) != -32600 || !strings.Contains(dump(r.message()), "already received") {
		t.Errorf("second initialize: %d %v, want -32600", r.status, r.message())
	}
	// A notification method sent as a request: the SDK's refusal, as JSON-RPC.
	r = h.post(`{"jsonrpc":"2.0","id":4,"method":"notifications/initialized"}`)
	if r.status != http.StatusBadRequest || errCode(r.message()) != -32600 || r.message()["id"] != float64(4) {
		t.Errorf("notification with an id: %d %v, want 400 and -32600", r.status, r.message())
	}
	// Invalid JSON, a batch (not in 2025-11-25): JSON-RPC errors without an id.
	r = h.post(`{"jsonrpc":"2.0","id":5,`)
	if r.status != http.StatusBadRequest || errCode(r.message()) != -32700 {
		t.Errorf("invalid JSON: %d %v, want 400 and -32700", r.status, r.message())
	}
	r = h.post(`[{"jsonrpc":"2.0","id":6,"method":"tools/list"},{"jsonrpc":"2.0","id":7,"method":"ping"}]`)
	if r.status != http.StatusBadRequest || errCode(r.message()) != -32600 || !strings.Contains(dump(r.message()), "batching is not supported") {
		t.Errorf("a batch: %d %v, want 400 and -32600", r.status, r.message())
	}
	// Still serving.
	if r := h.post(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`); !strings.Contains(dump(r.message()), "demo__read") {
		t.Errorf("tools/list: %d %v", r.status, r.message())
	}
}

// heldPOST posts a call that is held for approval, in the toolgen session s-http, and
// returns its open SSE stream, once the hold's first progress notification arrived.
func (h *httpRaw) heldPOST(id int, args string) (events func(func(sseEvent) bool), first []sseEvent, close func()) {
	h.t.Helper()
	body := `{"jsonrpc":"2.0","id":` + jsonNum(id) + `,"method":"tools/call","params":{"name":"demo__deploy","arguments":` + args + `,"_meta":{"progressToken":"p","io.toolgen/session_id":"s-http"}}}`
	resp := h.request(http.MethodPost, body, nil)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		h.t.Fatalf("held call: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	next, stop := iterPull(sseEvents(resp.Body))
	for {
		e, ok := next()
		if !ok {
			h.t.Fatalf("the held call's stream ended before its progress: %v", first)
		}
		first = append(first, e)
		if strings.Contains(e.data, "notifications/progress") {
			break
		}
	}
	return func(yield func(sseEvent) bool) {
			for {
				e, ok := next()
				if !ok || !yield(e) {
					return
				}
			}
		}, first, func() {
			stop()
			resp.Body.Close()
		}
}

func jsonNum(n int) string { b, _ := json.Marshal(n); return string(b) }

// iterPull is iter.Pull for the event sequence.
func iterPull(seq func(func(sseEvent) bool)) (func() (sseEvent, bool), func()) {
	ch := make(chan sseEvent)
	done := make(chan struct{})
	go func() {
		defer close(ch)
		seq(func(e sseEvent) bool {
			select {
			case ch <- e:
				return true
			case <-done:
				return false
			}
		})
	}()
	var once sync.Once
	return func() (sseEvent, bool) { e, ok := <-ch; return e, ok }, func() { once.Do(func() { close(done) }) }
}

// logWatch is a slog handler that hands every message over.
type logWatch struct{ ch chan string }

func newLogWatch() *logWatch { return &logWatch{ch: make(chan string, 1000)} }

func (w *logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (w *logWatch) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *logWatch) WithGroup(string) slog.Handler            { return w }
func (w *logWatch) Handle(_ context.Context, r slog.Record) error {
	select {
	case w.ch <- r.Message:
	default:
	}
	return nil
}

// await waits for a message containing what.
func (w *logWatch) await(what string) {
	for m := range w.ch {
		if strings.Contains(m, what) {
			return
		}
	}
}

// Point 7: a response stream starts with a priming event that has an id, empty data
// and a retry field; every event has an id.
// Point 4: after notifications/cancelled (another POST of the same session) the
// response to the cancelled call is not sent, and a resumption from the stream's first
// event does not replay it; the stream stays open until the session ends (a client
// would resume a stream that ended without its response). The call stays held, its
// approval applies to the retry.
func TestHTTP_PrimingAndCancelledRequest(t *testing.T) {
	logs := newLogWatch()
	e := newEnv(t, envConfig{hold: time.Hour, opts: func(o *server.Options) { o.Logger = slog.New(logs) }})
	h := &httpRaw{t: t, url: e.httpURL()}
	h.initialize()
	events, first, closeStream := h.heldPOST(7, `{"n":1}`)
	defer closeStream()
	prime := first[0]
	if prime.name != "prime" || prime.id == "" || prime.data != "" || prime.retry != "1000" {
		t.Errorf("first event %+v, want a priming event with an id, empty data and retry 1000", prime)
	}
	for _, ev := range first {
		if ev.id == "" {
			t.Errorf("event without an id: %+v", ev)
		}
	}
	if r := h.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`); r.status != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %d %v", r.status, r.message())
	}
	logs.await("its response is not sent")
	resp := h.request(http.MethodGet, "", map[string]string{"Last-Event-ID": prime.id, "Accept": "text/event-stream"})
	defer resp.Body.Close()
	for ev := range sseEvents(resp.Body) {
		if strings.Contains(ev.data, `"id":7`) {
			t.Errorf("a resumption replayed the cancelled call's response: %+v", ev)
		}
	}
	if r := h.request(http.MethodDelete, "", nil); r.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", r.StatusCode)
	}
	for ev := range events { // the session ended: so does the stream
		if strings.Contains(ev.data, `"id":7`) {
			t.Errorf("the cancelled call was answered: %+v", ev)
		}
	}
	approveHeld(t, e, "demo.deploy")
	h.session = ""
	h.initialize()
	r := h.post(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"demo__deploy","arguments":{"n":1},"_meta":{"io.toolgen/session_id":"s-http"}}}`)
	if dig(r.message(), "result", "isError") == true || dig(r.message(), "result") == nil {
		t.Fatalf("retry after approval: %v", r.message())
	}
	if n := e.tools["demo.deploy"].execs.Load(); n != 1 {
		t.Fatalf("demo.deploy executed %d times, want 1", n)
	}
}

// breakingTransport cuts the first response stream of a tools/call right after its
// first event, as a dropped connection would, and records the resumptions.
type breakingTransport struct {
	mu      sync.Mutex
	broken  bool
	resumed []string // Last-Event-ID of each GET
}

func (b *breakingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	isCall := false
	if req.Method == http.MethodPost && req.GetBody != nil {
		body, _ := req.GetBody()
		data, _ := io.ReadAll(body)
		isCall = strings.Contains(string(data), `"tools/call"`)
	}
	if id := req.Header.Get("Last-Event-ID"); id != "" {
		b.mu.Lock()
		b.resumed = append(b.resumed, id)
		b.mu.Unlock()
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || !isCall {
		return resp, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.broken {
		b.broken = true
		resp.Body = &cutBody{r: bufio.NewReader(resp.Body), c: resp.Body}
	}
	return resp, err
}

// cutBody reads one SSE event, then fails as a broken connection.
type cutBody struct {
	r    *bufio.Reader
	c    io.Closer
	done bool
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.ErrUnexpectedEOF
	}
	line, err := b.r.ReadString('\n')
	if line == "\n" {
		b.done = true
	}
	return copy(p, line), err
}

func (b *cutBody) Close() error { return b.c.Close() }

// Point 7 with a real peer: the go-sdk client whose response stream breaks while its
// call is held resumes it with Last-Event-ID and receives the result the server sent
// while it was away.
func TestHTTP_ClientResumesBrokenStream(t *testing.T) {
	e := newEnv(t, envConfig{hold: time.Hour})
	bt := &breakingTransport{}
	cs, err := newClient(nil).Connect(e.ctx, &mcp.StreamableClientTransport{
		Endpoint: e.httpURL(), HTTPClient: &http.Client{Transport: bt}, MaxRetries: 5,
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "demo__deploy", Arguments: map[string]any{"n": 4}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	approveWhenHeld(t, e, "demo.deploy")
	res := <-done
	if res == nil || res.IsError {
		t.Fatalf("the call whose stream broke: %s", dump(res))
	}
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if !bt.broken || len(bt.resumed) == 0 {
		t.Fatalf("broken %v, resumptions %v: the stream was not resumed", bt.broken, bt.resumed)
	}
}

// approveWhenHeld waits for the call of tool to be held, then approves it.
func approveWhenHeld(t *testing.T, e *env, tool string) {
	t.Helper()
	for {
		held, err := e.store.InvocationList(e.ctx, storeFilterHeld)
		if err != nil {
			t.Fatal(err)
		}
		if len(held) > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	approveHeld(t, e, tool)
}

// Point 6 over HTTP: Shutdown cancels the held call, which is answered
// approval_pending on its stream, and ends the standalone SSE stream.
func TestHTTP_ShutdownEndsHoldAndStreams(t *testing.T) {
	e := newEnv(t, envConfig{hold: time.Hour})
	h := &httpRaw{t: t, url: e.httpURL()}
	h.initialize()
	get := h.request(http.MethodGet, "", map[string]string{"Accept": "text/event-stream"})
	defer get.Body.Close()
	if get.StatusCode != http.StatusOK {
		t.Fatalf("GET: %d", get.StatusCode)
	}
	events, _, closeStream := h.heldPOST(9, `{"n":3}`)
	defer closeStream()
	e.srv.Shutdown()
	var answer map[string]any
	for ev := range events {
		if strings.Contains(ev.data, `"id":9`) {
			json.Unmarshal([]byte(ev.data), &answer)
		}
	}
	if !strings.Contains(dump(answer), "approval_pending") {
		t.Errorf("the held call at shutdown: %v, want approval_pending", answer)
	}
	if _, err := io.Copy(io.Discard, get.Body); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("the standalone stream at shutdown: %v", err)
	}
	approveHeld(t, e, "demo.deploy") // still held, and decidable
}
