package server_test

// Issue 20: a call answered at once is one write on the connection (headers, priming
// event, response and the end of the chunked body together), and a call that takes
// longer still gets its priming event, with its resumption id, before its response.

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgen/toolgen/mcp/server"
	"github.com/toolgen/toolgen/runtime"
)

// writeCounter counts the writes on the connections a listener accepted.
type writeCounter struct {
	net.Listener
	mu     sync.Mutex
	writes int
}

func (l *writeCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, l: l}, nil
}

func (l *writeCounter) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writes
}

type countedConn struct {
	net.Conn
	l *writeCounter
}

func (c *countedConn) Write(b []byte) (int, error) {
	c.l.mu.Lock()
	c.l.writes++
	c.l.mu.Unlock()
	return c.Conn.Write(b)
}

// countedURL serves e over HTTP on a listener that counts writes.
func countedURL(e *env) (string, *writeCounter) {
	hs := httptest.NewUnstartedServer(e.srv.HTTPHandler())
	wc := &writeCounter{Listener: hs.Listener}
	hs.Listener = wc
	hs.Start()
	e.t.Cleanup(hs.Close)
	return hs.URL + server.Endpoint, wc
}

func TestHTTP_AnsweredCallIsOneWrite(t *testing.T) {
	server.SetPrimeDelay(t, time.Hour) // however slow the machine, the call answers first
	e := newEnv(t, envConfig{})
	url, wc := countedURL(e)
	h := &httpRaw{t: t, url: url}
	h.initialize()
	for id := 1; id <= 3; id++ {
		before := wc.count()
		r := h.post(`{"jsonrpc":"2.0","id":` + jsonNum(id) + `,"method":"tools/call","params":{"name":"demo__read","arguments":{"n":1},"_meta":{"io.toolgen/session_id":"s-one"}}}`)
		if n := wc.count() - before; n != 1 {
			t.Errorf("call %d: %d writes on the connection, want 1 (headers, priming event, response, end of body)", id, n)
		}
		if len(r.events) != 2 || r.events[0].name != "prime" || r.events[0].id == "" || r.events[0].retry != "1000" {
			t.Fatalf("call %d: events %+v, want the priming event (id, retry 1000), then the response", id, r.events)
		}
		if r.events[1].id == "" || dig(r.message(), "result", "structuredContent", "ok") != true || r.message()["id"] != float64(id) {
			t.Fatalf("call %d: response %+v", id, r.events[1])
		}
	}
	// Other POSTs are unchanged: a notification is one 202.
	before := wc.count()
	if r := h.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.status != http.StatusAccepted {
		t.Fatalf("notification: %d", r.status)
	}
	if n := wc.count() - before; n != 1 {
		t.Errorf("a notification: %d writes, want 1", n)
	}
}

func TestHTTP_SlowCallGetsItsPrimingEventFirst(t *testing.T) {
	e := newEnv(t, envConfig{})
	release := make(chan struct{})
	tool := e.tools["demo.read"]
	tool.run = func(args json.RawMessage) (runtime.ToolResult, error) {
		<-release
		return runtime.StructuredResult(&tool.spec, map[string]any{"ok": true})
	}
	url, _ := countedURL(e)
	h := &httpRaw{t: t, url: url}
	h.initialize()
	resp := h.request(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"demo__read","arguments":{"n":1},"_meta":{"io.toolgen/session_id":"s-slow"}}}`, nil)
	defer resp.Body.Close()
	next, stop := iterPull(sseEvents(resp.Body))
	defer stop()
	// The tool is blocked until the priming event has arrived: it cannot have come with
	// the response.
	prime, ok := next()
	if !ok || prime.name != "prime" || prime.id == "" || prime.retry != "1000" {
		t.Fatalf("first event %+v (%v), want the priming event", prime, ok)
	}
	close(release)
	ev, ok := next()
	if !ok || !strings.Contains(ev.data, `"id":1`) || !strings.Contains(ev.data, `"ok":true`) {
		t.Fatalf("second event %+v (%v), want the response", ev, ok)
	}
	if ev, ok := next(); ok {
		t.Fatalf("an event after the response: %+v", ev)
	}
}
