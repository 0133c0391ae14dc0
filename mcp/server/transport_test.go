package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/internal/mcppeers"
	"github.com/toolgen/toolgen/mcp/server"
)

// HTTP: the session id defaults to the Mcp-Session-Id, and the localhost DNS-rebinding
// protection is on.
func TestHTTP_SessionAndRebindingProtection(t *testing.T) {
	e := newEnv(t, envConfig{})
	url := e.httpURL()
	cs := e.connectURL(url, nil)
	res := call(t, cs, "demo__read", map[string]any{"n": 1}, nil)
	if got := metaString(res.Meta, server.MetaSessionID); got == "" || got != cs.ID() {
		t.Errorf("session id %q, want the Mcp-Session-Id %q", got, cs.ID())
	}

	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "evil.example:80"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Host header: status %d, want 403", resp.StatusCode)
	}
	other := strings.TrimSuffix(url, server.Endpoint) + "/other"
	resp, err = http.Post(other, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST /other: status %d, want 404", resp.StatusCode)
	}
}

// ServeStdio serves newline-delimited JSON-RPC over a reader and a writer, and returns
// nil when the client closes the connection.
func TestStdio_RoundTripAndClose(t *testing.T) {
	e := newEnv(t, envConfig{opts: func(o *server.Options) { o.SessionID = "operator-session" }})
	clientR, serverW := io.Pipe()
	serverR, clientW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- e.srv.ServeStdio(context.Background(), serverR, serverW)
		serverW.Close()
	}()
	cs, err := newClient(nil).Connect(e.ctx, &mcp.IOTransport{Reader: clientR, Writer: clientW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := call(t, cs, "demo__read", map[string]any{"n": 1}, nil)
	if res.IsError || metaString(res.Meta, server.MetaSessionID) != "operator-session" {
		t.Fatalf("stdio call: %s", dump(res))
	}
	cs.Close()
	if err := <-done; err != nil {
		t.Fatalf("ServeStdio after the client closed: %v", err)
	}
}

// rawConn speaks newline-delimited JSON-RPC to the server by hand, to send what no
// well-behaved client library would. A goroutine reads the server's lines, as a real
// client does (the pipes are unbuffered).
type rawConn struct {
	t   *testing.T
	w   io.WriteCloser
	in  chan map[string]any
	got []map[string]any
}

func newRawConn(t *testing.T, w io.WriteCloser, r io.Reader) *rawConn {
	c := &rawConn{t: t, w: w, in: make(chan map[string]any, 100)}
	go func() {
		defer close(c.in)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			var batch []any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"non-json": sc.Text()}
				if json.Unmarshal(sc.Bytes(), &batch) == nil {
					m = map[string]any{"batch": batch} // a batch response, one array
				}
			}
			c.in <- m
		}
	}()
	return c
}

func (c *rawConn) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.w, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// next returns the next message matching f.
func (c *rawConn) next(what string, f func(map[string]any) bool) map[string]any {
	c.t.Helper()
	for i, m := range c.got {
		if f(m) {
			c.got = append(c.got[:i], c.got[i+1:]...)
			return m
		}
	}
	for m := range c.in {
		if m["non-json"] != nil {
			c.t.Fatalf("server wrote non-JSON %q", m["non-json"])
		}
		if f(m) {
			return m
		}
		c.got = append(c.got, m)
	}
	c.t.Fatalf("no %s from the server", what)
	return nil
}

// reply reads until the response with the given id.
func (c *rawConn) reply(id int) map[string]any {
	c.t.Helper()
	return c.next(fmt.Sprintf("reply %d", id), func(m map[string]any) bool {
		got, ok := m["id"].(float64)
		return ok && int(got) == id
	})
}

func TestStdio_MalformedMessages(t *testing.T) {
	e := newEnv(t, envConfig{opts: func(o *server.Options) { o.MaxMessageBytes = 4096 }})
	serverR, clientW := io.Pipe()
	clientR, serverW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.srv.ServeStdio(ctx, serverR, serverW) }()
	t.Cleanup(func() {
		cancel()
		clientW.Close()
		clientR.Close()
		<-done
	})
	c := newRawConn(t, clientW, clientR)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	c.reply(1)
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	errorCode := func(m map[string]any) float64 {
		e, _ := m["error"].(map[string]any)
		code, _ := e["code"].(float64)
		return code
	}
	// tools/call without params, with params null, with a non-string name: JSON-RPC errors.
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call"}`)
	if m := c.reply(2); m["error"] == nil {
		t.Errorf("tools/call without params: %v, want an error", m)
	}
	c.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":null}`)
	if m := c.reply(3); m["error"] == nil {
		t.Errorf("params null: %v, want an error", m)
	}
	c.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":5}}`)
	if m := c.reply(4); m["error"] == nil {
		t.Errorf("numeric name: %v, want an error", m)
	}
	// Arguments that are not an object, or absent: outcomes of the pipeline.
	c.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"demo__read","arguments":true}}`)
	if m := c.reply(5); !strings.Contains(dump(m), "invalid_arguments") {
		t.Errorf("arguments true: %v, want invalid_arguments", m)
	}
	c.send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"demo__read"}}`)
	if m := c.reply(6); dump(m["result"]) == "null" || m["result"].(map[string]any)["isError"] == true {
		t.Errorf("no arguments: %v, want a success", m)
	}
	// Invalid JSON: a parse error with a null id (no id can be read), and the
	// connection goes on.
	c.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"demo__read","arguments":{bad}}}`)
	nullID := func(m map[string]any) bool { v, ok := m["id"]; return ok && v == nil }
	if m := c.next("parse error", nullID); errorCode(m) != -32700 {
		t.Errorf("invalid JSON: %v, want -32700", m)
	}
	// JSON that is not a JSON-RPC message: invalid request, with its id when it has one.
	c.send(`{"id":70,"hello":"world"}`)
	if m := c.reply(70); errorCode(m) != -32600 {
		t.Errorf("not JSON-RPC: %v, want -32600", m)
	}
	c.send(`[]`)
	if m := c.next("empty batch error", nullID); errorCode(m) != -32600 {
		t.Errorf("empty batch: %v, want -32600", m)
	}
	c.send(`   `)
	// A line over the size limit is refused whole; the next line is read normally.
	c.send(`{"jsonrpc":"2.0","id":71,"method":"tools/call","params":{"name":"demo__read","arguments":{"text":"` + strings.Repeat("x", 5000) + `"}}}`)
	if m := c.next("size error", nullID); errorCode(m) != -32600 || !strings.Contains(dump(m), "exceeds") {
		t.Errorf("over the limit: %v, want -32600 naming the limit", m)
	}
	// _meta ids of the wrong type: invalid params.
	c.send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"demo__read","arguments":{},"_meta":{"io.toolgen/step":{"x":1}}}}`)
	if m := c.reply(8); errorCode(m) != -32602 {
		t.Errorf("object step: %v, want -32602", m)
	}
	// Still serving.
	c.send(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
	if m := c.reply(9); !strings.Contains(dump(m), "demo__read") {
		t.Errorf("tools/list after malformed messages: %v", m)
	}
}

// The real npm client (inspector CLI, TypeScript SDK) lists and calls with no _meta:
// it accepts our schemas, results and structuredContent.
func TestInspectorCLI_ListAndCall(t *testing.T) {
	node, cli := mcppeers.Inspector(t)
	e := newEnv(t, envConfig{})
	url := e.httpURL()
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, append([]string{cli, "--cli", url, "--transport", "http"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("inspector %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	list := run("--method", "tools/list")
	for _, name := range []string{"workspace__list", "demo__read"} {
		if !strings.Contains(list, `"`+name+`"`) {
			t.Errorf("inspector tools/list lacks %s:\n%s", name, list)
		}
	}
	if strings.Contains(list, "demo__other") {
		t.Errorf("inspector tools/list shows a tool outside the mode:\n%s", list)
	}
	out := run("--method", "tools/call", "--tool-name", "demo__read", "--tool-arg", "n=4")
	var res struct {
		IsError           bool
		StructuredContent map[string]any
		Meta              map[string]any `json:"_meta"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &res); err != nil {
		t.Fatalf("inspector output %q: %v", out, err)
	}
	if res.IsError || res.StructuredContent["n"] != float64(4) || res.Meta[server.MetaCallID] != server.DerivedCallID(testCallIDSecret, "demo.read", json.RawMessage(`{"n":4}`)) {
		t.Errorf("inspector tools/call: %s", out)
	}
	denied := run("--method", "tools/call", "--tool-name", "demo__other", "--tool-arg", "n=4")
	if !strings.Contains(denied, "not_in_mode") || !strings.Contains(denied, `"isError": true`) {
		t.Errorf("inspector call outside the mode: %s", denied)
	}
	// The ids may come as --metadata strings; the step is a string of digits there.
	meta := run("--method", "tools/call", "--tool-name", "demo__send", "--tool-arg", "n=1",
		"--metadata", "io.toolgen/session_id=insp", "io.toolgen/step=2", "io.toolgen/call_id=c9")
	if !strings.Contains(meta, `"io.toolgen/step": 2`) || !strings.Contains(meta, `"io.toolgen/session_id": "insp"`) {
		t.Errorf("inspector call with --metadata: %s", meta)
	}
}
