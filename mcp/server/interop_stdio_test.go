package server_test

// Issue 15, the stdio side: bad input never ends the connection (point 1), a
// cancelled request gets no response (point 4), JSON-RPC codes for what the SDK
// answers with code 0 and an answer to a request reusing an in-flight id (point 5),
// and a prompt end of a connection with a call held for approval (point 6).

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/mcp/server"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// stdioRaw serves one stdio connection of e's server and returns a raw client of it;
// the connection ends with the test (or earlier with stop).
func stdioRaw(t *testing.T, e *env) (c *rawConn, stop func() error) {
	t.Helper()
	serverR, clientW := io.Pipe()
	clientR, serverW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- e.srv.ServeStdio(ctx, serverR, serverW)
		serverW.Close()
	}()
	var err error
	var stopped bool
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			err = <-done
		}
		return err
	}
	t.Cleanup(func() {
		clientW.Close()
		stop()
		clientR.Close()
	})
	return newRawConn(t, clientW, clientR), stop
}

func (c *rawConn) initialize(version string) {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	m := c.next("initialize response", func(m map[string]any) bool { return m["id"] == "init" })
	if got := dig(m, "result", "protocolVersion"); got != version {
		c.t.Fatalf("initialize: %v, want protocol %s", m, version)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// dig reads a nested field of a decoded message.
func dig(m any, keys ...string) any {
	for _, k := range keys {
		o, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = o[k]
	}
	return m
}

func errCode(m map[string]any) float64 {
	code, _ := dig(m, "error", "code").(float64)
	return code
}

func hasID(id float64) func(map[string]any) bool {
	return func(m map[string]any) bool { got, ok := m["id"].(float64); return ok && got == id }
}

// Point 1: a JSON-RPC batch on a 2025-06-18 or 2025-11-25 connection is refused, each
// request in it answered -32600 with its id, nothing in it runs, and the connection
// goes on; a batch before initialize is refused the same way; a batch of
// notifications only gets one -32600 with a null id.
func TestStdio_BatchRefusedFrom20250618(t *testing.T) {
	for _, version := range []string{"2025-06-18", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			e := newEnv(t, envConfig{})
			c, _ := stdioRaw(t, e)
			c.send(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`)
			if m := c.reply(1); errCode(m) != -32600 || !strings.Contains(dump(m), "initialize first") {
				t.Errorf("batch before initialize: %v, want -32600", m)
			}
			c.initialize(version)
			c.send(`[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"demo__send","arguments":{"n":1}}},` +
				`{"jsonrpc":"2.0","id":3,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/progress","params":{}}]`)
			for _, id := range []int{2, 3} {
				if m := c.reply(id); errCode(m) != -32600 || !strings.Contains(dump(m), "batches are not part of MCP from 2025-06-18") {
					t.Errorf("batch element %d: %v, want -32600 naming the revision", id, m)
				}
			}
			c.send(`[{"jsonrpc":"2.0","method":"notifications/initialized"}]`)
			nullID := func(m map[string]any) bool { v, ok := m["id"]; return ok && v == nil }
			if m := c.next("null-id error", nullID); errCode(m) != -32600 {
				t.Errorf("batch of notifications: %v, want -32600", m)
			}
			// Still serving, and nothing of the batch ran.
			c.send(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`)
			if m := c.reply(4); !strings.Contains(dump(m), "demo__send") {
				t.Errorf("tools/list after the batch: %v", m)
			}
			if n := e.tools["demo.send"].execs.Load(); n != 0 {
				t.Errorf("a call of a refused batch ran %d times", n)
			}
		})
	}
}

// Point 1, the revision that has batches: on 2025-03-26 a batch is served and answered
// with one array, an invalid element answered inside it.
func TestStdio_BatchServedOn20250326(t *testing.T) {
	e := newEnv(t, envConfig{})
	c, _ := stdioRaw(t, e)
	c.initialize("2025-03-26")
	// The array arrives as one line; rawConn hands a non-object line over whole.
	c.send(`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"demo__read","arguments":{"n":7}}},` +
		`{"jsonrpc":"2.0","id":2,"method":"ping"},{"hello":1,"id":3},{"jsonrpc":"2.0","method":"notifications/progress","params":{}}]`)
	m := c.next("batch response", func(m map[string]any) bool { return m["batch"] != nil })
	replies := m["batch"].([]any)
	if len(replies) != 3 {
		t.Fatalf("batch response %s: want 3 replies (two requests, one invalid element)", dump(replies))
	}
	byID := map[float64]map[string]any{}
	for _, r := range replies {
		r := r.(map[string]any)
		byID[r["id"].(float64)] = r
	}
	if r := byID[1]; !strings.Contains(dump(r), `"n":7`) {
		t.Errorf("tools/call in the batch: %v", r)
	}
	if r := byID[2]; r["result"] == nil {
		t.Errorf("ping in the batch: %v", r)
	}
	if r := byID[3]; errCode(r) != -32600 {
		t.Errorf("invalid element: %v, want -32600", r)
	}
}

// Point 5: a request reusing the id of a request in flight is answered -32600 with its
// id (the SDK alone never answers it), and the first request is unaffected.
// Point 4: after notifications/cancelled for the held call, no response to it is sent;
// the call stays held in the store, and its approval applies to the retry.
func TestStdio_DuplicateInFlightIDThenCancel(t *testing.T) {
	e := newEnv(t, envConfig{hold: time.Hour})
	c, _ := stdioRaw(t, e)
	c.initialize("2025-11-25")
	c.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"demo__deploy","arguments":{"n":1},"_meta":{"progressToken":"p5"}}}`)
	c.next("hold progress", func(m map[string]any) bool { return m["method"] == "notifications/progress" })

	c.send(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`)
	if m := c.reply(5); errCode(m) != -32600 || !strings.Contains(dump(m), "already in flight") {
		t.Fatalf("reused in-flight id: %v, want -32600", m)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"user stopped"}}`)
	// The id is free again once the cancelled call has ended, its response withheld:
	// until then a request reusing it is refused. Nothing else may answer id 5.
	for i := 0; ; i++ {
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":5,"method":"ping","params":{"_meta":{"try":%d}}}`, i))
		m := c.reply(5)
		if m["result"] != nil {
			if dump(m["result"]) != "{}" {
				t.Fatalf("id 5 answered with %v: the cancelled call's response was sent", m)
			}
			break
		}
		if errCode(m) != -32600 {
			t.Fatalf("ping 5 while the cancelled call ends: %v", m)
		}
		if i > 10000 {
			t.Fatal("the cancelled call never ended")
		}
	}
	// The call is still held: its approval applies to the retry, which runs once.
	approveHeld(t, e, "demo.deploy")
	c.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"demo__deploy","arguments":{"n":1}}}`)
	if m := c.reply(7); dig(m, "result", "isError") == true || m["result"] == nil {
		t.Fatalf("retry after approval: %v", m)
	}
	if n := e.tools["demo.deploy"].execs.Load(); n != 1 {
		t.Fatalf("demo.deploy executed %d times, want 1", n)
	}
}

// storeFilterHeld selects the calls held for approval.
var storeFilterHeld = store.InvocationFilter{Tenant: "acme", AwaitingApproval: true}

// approveHeld approves, as bob, the one call of tool held for approval.
func approveHeld(t *testing.T, e *env, tool string) {
	t.Helper()
	held, err := e.store.InvocationList(e.ctx, storeFilterHeld)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, inv := range held {
		if inv.Tool == tool {
			keys = append(keys, inv.Key)
		}
	}
	if len(keys) != 1 {
		t.Fatalf("%d calls of %s held, want 1: %+v", len(keys), tool, held)
	}
	if err := runtime.DecideApproval(e.ctx, e.store, keys[0], bob, true, "", nil); err != nil {
		t.Fatalf("approve: %v", err)
	}
}

// Point 5: what the SDK answers with error code 0 gets a JSON-RPC code: a request
// before initialize (-32600), a second initialize (-32600); the SDK's own codes stay.
func TestStdio_ErrorCodes(t *testing.T) {
	e := newEnv(t, envConfig{})
	c, _ := stdioRaw(t, e)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if m := c.reply(1); errCode(m) != -32600 || !strings.Contains(dump(m), "before initialize") {
		t.Errorf("tools/list before initialize: %v, want -32600", m)
	}
	c.initialize("2025-11-25")
	c.send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := c.reply(2); errCode(m) != -32600 || !strings.Contains(dump(m), "already received") {
		t.Errorf("second initialize: %v, want -32600", m)
	}
	c.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":5}}`)
	if m := c.reply(3); errCode(m) != -32602 {
		t.Errorf("numeric tool name: %v, want -32602", m)
	}
	c.send(`{"jsonrpc":"2.0","id":4,"method":"no/such/method"}`)
	if m := c.reply(4); errCode(m) != -32601 {
		t.Errorf("unknown method: %v, want -32601", m)
	}
}

// Point 6: when ServeStdio's ctx ends while a call is held for approval, the held call
// is cancelled and answered (approval_pending, retryable), ServeStdio returns without
// waiting out the hold, and the call stays held: its approval applies to the retry on
// a new connection of the same session.
func TestStdio_ShutdownWithHeldCall(t *testing.T) {
	e := newEnv(t, envConfig{hold: time.Hour, opts: func(o *server.Options) { o.SessionID = "s-shut" }})
	c, stop := stdioRaw(t, e)
	c.initialize("2025-11-25")
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"demo__deploy","arguments":{"n":2},"_meta":{"progressToken":"p1"}}}`)
	c.next("hold progress", func(m map[string]any) bool { return m["method"] == "notifications/progress" })
	if err := stop(); err != nil {
		t.Fatalf("ServeStdio at shutdown: %v", err)
	}
	m := c.reply(1)
	if !strings.Contains(dump(m), "approval_pending") || dig(m, "result", "structuredContent", "retryable") != true {
		t.Errorf("the held call at shutdown: %v, want approval_pending, retryable", m)
	}
	approveHeld(t, e, "demo.deploy")
	cs := e.connectMemory("2025-11-25", nil)
	if res := call(t, cs, "demo__deploy", map[string]any{"n": 2}, nil); res.IsError {
		t.Fatalf("retry after approval: %s", dump(res))
	}
	if n := e.tools["demo.deploy"].execs.Load(); n != 1 {
		t.Fatalf("demo.deploy executed %d times, want 1", n)
	}
}

// Point 6: after Shutdown, a tools/call is not run: it is answered -32004 at once.
func TestShutdown_LaterCallsNotRun(t *testing.T) {
	e := newEnv(t, envConfig{})
	cs := e.connectMemory("2025-11-25", nil)
	e.srv.Shutdown()
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "demo__send", Arguments: map[string]any{"n": 1}})
	if err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("call after Shutdown: %v, want the shutting-down error", err)
	}
	if n := e.tools["demo.send"].execs.Load(); n != 0 {
		t.Fatalf("demo.send ran %d times after Shutdown", n)
	}
}
