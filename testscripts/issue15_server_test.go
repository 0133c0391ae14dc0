package testscripts

// Issue 15, the server side (points 1, 4, 5, 6, 7), against real `toolrun serve`
// processes — the `toolrun` command TestMain (testscript.Main) puts on $PATH — with
// real peers: the go-sdk client (mcp.CommandTransport, mcp.StreamableClientTransport),
// the TypeScript SDK client (node, .tooldeps), and raw lines and HTTP requests for
// what no well-behaved client library sends. Every wait is bounded by i15Wait, a
// failure guard, never an assertion about time: a prompt shutdown is asserted by the
// process exiting 0 after SIGTERM while a call is held for an hour.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/host/hostcli"
)

const i15Wait = 60 * time.Second

// i15Root is a spec root with no spec files: the builtins only. Its toolrun commands
// work in a workspace of their own (TOOLRUN_WORKSPACE, outside the spec root, SEC-1),
// where a write under .git/ is held for approval (workspace.write_text's approval_when).
func i15Root(t *testing.T) string {
	t.Helper()
	dir, ws := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TOOLRUN_WORKSPACE", ws)
	return dir
}

// heldWrite is the arguments of a call held for approval.
var heldWrite = map[string]any{"path": ".git/NOTE", "text": "approved", "mode": "overwrite"}

const heldWriteJSON = `{"path":".git/NOTE","text":"approved","mode":"overwrite"}`

// i15Toolrun runs one toolrun command to completion and returns its stdout.
func i15Toolrun(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), i15Wait)
	defer cancel()
	out, err := exec.CommandContext(ctx, "toolrun", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("toolrun %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// i15Approve approves, as the operator, the one call waiting for approval in dir.
func i15Approve(t *testing.T, dir string) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^(\d+) +workspace.write_text +PENDING`).FindAllStringSubmatch(i15Toolrun(t, "approvals", "--dir", dir), -1)
	if len(m) != 1 {
		t.Fatalf("want one held call, approvals lists %v", m)
	}
	i15Toolrun(t, "approve", m[0][1], "--dir", dir)
}

// i15Client is a go-sdk client that reports when a hold's progress arrives.
func i15Client(held chan<- struct{}) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "i15", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			select {
			case held <- struct{}{}:
			default:
			}
		},
	})
}

// heldCall calls workspace.write_text on .git/NOTE with a progress token.
func heldCall(cs *mcp.ClientSession, meta mcp.Meta) (*mcp.CallToolResult, error) {
	p := &mcp.CallToolParams{Name: "workspace__write_text", Arguments: heldWrite, Meta: meta}
	p.SetProgressToken("hold")
	return cs.CallTool(context.Background(), p)
}

func i15Text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// waitExit waits for a process to exit and returns its exit code.
func waitExit(t *testing.T, done <-chan error, what string) int {
	t.Helper()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return 0
	case <-time.After(i15Wait):
		t.Fatalf("%s did not exit", what)
		return -1
	}
}

// Point 6, stdio: SIGTERM while a call is held for approval (a one-hour hold) ends
// `toolrun serve --stdio` with status 0; the held call is answered
// approval_pending first, stays PENDING, and its approval applies to the client's
// retry through a new process on the same session.
func TestIssue15_StdioSIGTERMWithHeldCall(t *testing.T) {
	dir := i15Root(t)
	serve := func() (*exec.Cmd, context.CancelFunc) {
		ctx, cancel := context.WithTimeout(context.Background(), i15Wait)
		return exec.CommandContext(ctx, "toolrun", "serve", "--stdio", "--no-servers", "--dir", dir, "--session", "s15", "--hold", "1h"), cancel
	}
	cmd, cancel := serve()
	defer cancel()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	held := make(chan struct{}, 1)
	cs, err := i15Client(held).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	answer := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := heldCall(cs, nil)
		if err != nil {
			t.Errorf("the held call: %v", err)
		}
		answer <- res
	}()
	<-held
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	res := <-answer
	if res == nil || !res.IsError || !strings.Contains(i15Text(res), "approval_pending") {
		t.Fatalf("the held call at SIGTERM: %+v, want approval_pending", res)
	}
	cs.Close() // waits for the process
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("toolrun serve --stdio after SIGTERM: status %d, want 0\n%s", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(os.Getenv("TOOLRUN_WORKSPACE"), ".git", "NOTE")); err == nil {
		t.Fatal("the held call ran")
	}

	i15Approve(t, dir)
	cmd, cancel = serve()
	defer cancel()
	cs, err = i15Client(make(chan struct{}, 1)).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err = retryApproved(t, func() (*mcp.CallToolResult, error) { return heldCall(cs, nil) })
	if err != nil || res.IsError {
		t.Fatalf("the retry after approval: %v %+v", err, res)
	}
	if data, err := os.ReadFile(filepath.Join(os.Getenv("TOOLRUN_WORKSPACE"), ".git", "NOTE")); err != nil || string(data) != "approved" {
		t.Fatalf(".git/NOTE: %q %v", data, err)
	}
}

// retryApproved retries an approved call until it is not in progress: the serving
// host's maintenance may be running the approved call when the client's retry
// arrives (unavailable/call_in_progress, retryable); the retry after that finds the
// recorded outcome.
func retryApproved(t *testing.T, call func() (*mcp.CallToolResult, error)) (*mcp.CallToolResult, error) {
	t.Helper()
	for deadline := time.Now().Add(i15Wait); ; time.Sleep(50 * time.Millisecond) {
		res, err := call()
		if err != nil || !strings.Contains(i15Text(res), "call_in_progress") || time.Now().After(deadline) {
			return res, err
		}
	}
}

// i15ServeHTTP starts `toolrun serve --http` on a port of its own choosing and returns
// its MCP URL, the process and its exit.
func i15ServeHTTP(t testing.TB, dir string, args ...string) (url string, cmd *exec.Cmd, done <-chan error, stderr *syncBuf) {
	t.Helper()
	cmd = exec.Command("toolrun", append([]string{"serve", "--http", "127.0.0.1:0", "--no-servers", "--dir", dir}, args...)...)
	stderr = &syncBuf{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch, exited := make(chan error, 1), make(chan struct{})
	go func() { ch <- cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("toolrun serve --http stderr:\n%s", stderr.String())
		}
	})
	return servingURL(t, stderr, exited, i15Wait), cmd, ch, stderr
}

// servingURL waits until the toolrun serve whose stderr is stderr says it serves
// (hostcli.ServingAddr), and returns its MCP URL. The tests let toolrun pick its port
// (127.0.0.1:0): a port picked free beforehand may be taken by another process before
// toolrun binds it, and a dial to it then reaches that process.
func servingURL(t testing.TB, stderr *syncBuf, exited <-chan struct{}, wait time.Duration) string {
	t.Helper()
	for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
		if addr, ok := hostcli.ServingAddr(stderr.String()); ok {
			return mcpURL(addr)
		}
		select {
		case <-exited:
			t.Fatalf("toolrun serve exited before serving:\n%s", stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("toolrun serve never said it serves:\n%s", stderr.String())
		}
	}
}

// i15StandaloneStream initializes a session by hand and opens its standalone SSE
// stream (GET), returning once the stream's first bytes arrived.
func i15StandaloneStream(t *testing.T, url string) io.ReadCloser {
	t.Helper()
	c := &http.Client{Timeout: i15Wait}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	session := resp.Header.Get("Mcp-Session-Id")
	req, _ = http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err = (&http.Client{}).Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("standalone stream: %v %v", resp, err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatalf("standalone stream: %v", err)
	}
	return resp.Body
}

// syncBuf is a buffer several goroutines write and read.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Point 6, HTTP: SIGTERM while a call is held and a standalone SSE stream is open ends
// `toolrun serve --http` with status 0; the held call is answered approval_pending
// first, the standalone stream ends, and the call's approval applies to the retry
// (same toolgen session, through a new process).
func TestIssue15_HTTPSIGTERMWithHeldCall(t *testing.T) {
	dir := i15Root(t)
	url, cmd, done, _ := i15ServeHTTP(t, dir, "--hold", "1h")
	// A standalone stream, open before SIGTERM (its first bytes are there). The go-sdk
	// client below opens none: it opens its own in the background, and one whose
	// connection fails when the listener closes would fail the client's session
	// before the call's answer arrives (MaxRetries -1).
	get := i15StandaloneStream(t, url)
	defer get.Close()
	held := make(chan struct{}, 1)
	cs, err := i15Client(held).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	meta := mcp.Meta{"io.toolgen/session_id": "s15h"}
	answer := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := heldCall(cs, meta)
		if err != nil {
			t.Errorf("the held call: %v", err)
		}
		answer <- res
	}()
	<-held
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, done, "toolrun serve --http after SIGTERM"); code != 0 {
		t.Fatalf("toolrun serve --http after SIGTERM: status %d, want 0", code)
	}
	if res := <-answer; res == nil || !strings.Contains(i15Text(res), "approval_pending") {
		t.Fatalf("the held call at SIGTERM: %+v, want approval_pending", res)
	}
	if _, err := io.Copy(io.Discard, get); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("the standalone stream at SIGTERM: %v", err)
	}

	i15Approve(t, dir)
	url, _, _, _ = i15ServeHTTP(t, dir)
	cs2, err := i15Client(make(chan struct{}, 1)).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close()
	res, err := retryApproved(t, func() (*mcp.CallToolResult, error) { return heldCall(cs2, meta) })
	if err != nil || res.IsError {
		t.Fatalf("the retry after approval: %v %+v", err, res)
	}
	if data, err := os.ReadFile(filepath.Join(os.Getenv("TOOLRUN_WORKSPACE"), ".git", "NOTE")); err != nil || string(data) != "approved" {
		t.Fatalf(".git/NOTE: %q %v", data, err)
	}
}

// i15Lines is a raw newline-delimited JSON-RPC client of a process.
type i15Lines struct {
	t   *testing.T
	w   io.WriteCloser
	in  chan json.RawMessage
	got []json.RawMessage
}

func newI15Lines(t *testing.T, w io.WriteCloser, r io.Reader) *i15Lines {
	c := &i15Lines{t: t, w: w, in: make(chan json.RawMessage, 100)}
	go func() {
		defer close(c.in)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			c.in <- json.RawMessage(bytes.Clone(sc.Bytes()))
		}
	}()
	return c
}

func (c *i15Lines) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.w, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// next returns the next line matching re.
func (c *i15Lines) next(re string) string {
	c.t.Helper()
	rx := regexp.MustCompile(re)
	for i, m := range c.got {
		if rx.Match(m) {
			c.got = append(c.got[:i], c.got[i+1:]...)
			return string(m)
		}
	}
	timeout := time.After(i15Wait)
	for {
		select {
		case m, ok := <-c.in:
			if !ok {
				c.t.Fatalf("the server's output ended without a line matching %s", re)
			}
			if !json.Valid(m) {
				c.t.Fatalf("the server wrote a line that is not JSON: %q", m)
			}
			if rx.Match(m) {
				return string(m)
			}
			c.got = append(c.got, m)
		case <-timeout:
			c.t.Fatalf("no line matching %s", re)
		}
	}
}

// Points 1 and 5 with raw lines against `toolrun serve --stdio`: a request before
// initialize, a JSON-RPC batch (on 2025-06-18 and on 2025-11-25), invalid JSON, a
// bare number, a line over the size limit (16 MiB), a second initialize, a request
// reusing the id of a held call: each is answered with a JSON-RPC error and the
// process serves on; closing stdin then ends it with status 0, a call still held.
func TestIssue15_StdioBadLinesDoNotEndServe(t *testing.T) {
	for _, version := range []string{"2025-06-18", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			dir := i15Root(t)
			ctx, cancel := context.WithTimeout(context.Background(), i15Wait)
			defer cancel()
			cmd := exec.CommandContext(ctx, "toolrun", "serve", "--stdio", "--no-servers", "--dir", dir, "--hold", "1h")
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr syncBuf
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			c := newI15Lines(t, stdin, stdout)

			c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			c.next(`"id":1,"error":\{"code":-32600,"message":"toolgen: \\"tools/list\\" before initialize`)
			c.send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
			c.next(`"id":2,"result":\{.*"protocolVersion":"` + version + `"`)
			c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

			c.send(`[{"jsonrpc":"2.0","id":3,"method":"tools/list"},{"jsonrpc":"2.0","id":4,"method":"ping"}]`)
			c.next(`"id":3,"error":\{"code":-32600,"message":"toolgen: invalid request: JSON-RPC batches are not part of MCP`)
			c.next(`"id":4,"error":\{"code":-32600`)
			c.send(`{"jsonrpc":"2.0","id":5,"method":`)
			c.next(`"id":null,"error":\{"code":-32700`)
			c.send(`42`)
			c.next(`"id":null,"error":\{"code":-32600`)
			c.send(`{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"pad":"` + strings.Repeat("x", 16<<20) + `"}}`)
			c.next(`"id":null,"error":\{"code":-32600,"message":"toolgen: message exceeds`)
			c.send(`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
			c.next(`"id":7,"error":\{"code":-32600,"message":"toolgen: initialize was already received`)

			c.send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"workspace__write_text","arguments":` + heldWriteJSON + `,"_meta":{"progressToken":"p8"}}}`)
			c.next(`"method":"notifications/progress"`)
			c.send(`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`)
			c.next(`"id":8,"error":\{"code":-32600,"message":"toolgen: invalid request: request id 8 is already in flight`)
			c.send(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
			c.next(`"id":9,"result":\{.*"tools":\[`)

			stdin.Close()
			if code := waitExit(t, done, "toolrun serve --stdio after its input closed"); code != 0 {
				t.Fatalf("toolrun serve --stdio: status %d, want 0\n%s", code, stderr.String())
			}
		})
	}
}

// Point 5 with raw requests against `toolrun serve --http`, and point 7's priming
// event: a call without a session is answered 400 with JSON-RPC -32600, an unknown
// method JSON-RPC -32601 (HTTP 200), a second initialize -32600; a response stream
// opens with a priming event that has an id and a retry field.
func TestIssue15_HTTPRawRequests(t *testing.T) {
	url, _, _, _ := i15ServeHTTP(t, i15Root(t))
	post := func(session, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := (&http.Client{Timeout: i15Wait}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp, string(data)
	}
	resp, body := post("", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"workspace__list","arguments":{}}}`)
	if resp.StatusCode != http.StatusBadRequest || !regexp.MustCompile(`^\{"jsonrpc":"2.0","id":1,"error":\{"code":-32600,"message":"toolgen: \\"tools/call\\" needs a session`).MatchString(body) {
		t.Errorf("a call without a session: %d %s", resp.StatusCode, body)
	}
	resp, body = post("", `{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	if session == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	// The initialize answer is a 2025-11-25 response stream: priming event first.
	if !regexp.MustCompile(`^event: prime\nid: \S+\nretry: 1000\ndata: \n\n`).MatchString(body) {
		t.Errorf("initialize's stream does not open with a priming event with an id and retry:\n%s", body)
	}
	post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp, body = post(session, `{"jsonrpc":"2.0","id":3,"method":"resources/subscribe/all","params":{}}`)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" ||
		!strings.HasPrefix(body, `{"jsonrpc":"2.0","id":3,"error":{"code":-32601`) {
		t.Errorf("an unknown method: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	_, body = post(session, `{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if !strings.Contains(body, `"id":4,"error":{"code":-32600,"message":"toolgen: initialize was already received`) {
		t.Errorf("a second initialize: %s", body)
	}
	_, body = post(session, `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`)
	if !strings.Contains(body, `"workspace__list"`) {
		t.Errorf("tools/list after the refusals: %s", body)
	}
}

// breakFirstCall cuts the first tools/call response stream right after its first
// event (the priming event), as a dropped connection would, and records the
// Last-Event-ID of every resumption.
type breakFirstCall struct {
	mu      sync.Mutex
	broken  bool
	resumed []string
}

func (b *breakFirstCall) RoundTrip(req *http.Request) (*http.Response, error) {
	isCall := false
	if req.Method == http.MethodPost && req.GetBody != nil {
		body, _ := req.GetBody()
		data, _ := io.ReadAll(body)
		isCall = bytes.Contains(data, []byte(`"tools/call"`))
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
		resp.Body = &oneEvent{r: bufio.NewReader(resp.Body), c: resp.Body}
	}
	return resp, nil
}

// oneEvent reads one SSE event, then fails as a broken connection.
type oneEvent struct {
	r    *bufio.Reader
	c    io.Closer
	done bool
}

func (o *oneEvent) Read(p []byte) (int, error) {
	if o.done {
		return 0, io.ErrUnexpectedEOF
	}
	line, err := o.r.ReadString('\n')
	o.done = line == "\n"
	return copy(p, line), err
}

func (o *oneEvent) Close() error { return o.c.Close() }

// Point 7 with a real peer: the go-sdk client whose response stream to a held call
// breaks resumes it with Last-Event-ID; the operator approves the call meanwhile
// (toolrun approve, another process), and the client receives the result.
func TestIssue15_HTTPClientResumesBrokenStream(t *testing.T) {
	dir := i15Root(t)
	url, _, _, _ := i15ServeHTTP(t, dir, "--hold", "1h")
	bt := &breakFirstCall{}
	cs, err := i15Client(make(chan struct{}, 1)).Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: bt}, MaxRetries: 5,
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	answer := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "workspace__write_text", Arguments: heldWrite})
		if err != nil {
			t.Errorf("the call whose stream broke: %v", err)
		}
		answer <- res
	}()
	for deadline := time.Now().Add(i15Wait); !strings.Contains(i15Toolrun(t, "approvals", "--dir", dir), "PENDING"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the call was never held")
		}
	}
	i15Approve(t, dir)
	res := <-answer
	if res == nil || res.IsError {
		t.Fatalf("the call whose stream broke: %+v", res)
	}
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if !bt.broken || len(bt.resumed) == 0 {
		t.Fatalf("broken %v, resumed %v: the client did not resume the stream", bt.broken, bt.resumed)
	}
}

// i15Node is node with the TypeScript SDK of .tooldeps, or a skip.
func i15Node(t *testing.T) (node, sdk string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("skipping: node is not installed, so the TypeScript SDK client cannot run")
	}
	sdk, err = filepath.Abs(filepath.Join("..", ".tooldeps", "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(sdk, "client", "index.js")); err != nil {
		t.Fatalf("the TypeScript SDK is missing (%v): run `make node-deps`", err)
	}
	return node, sdk
}

// tsCancelScript is a TypeScript SDK client (ESM, run by node) that calls the held
// write, aborts the call when the hold's first progress arrives (the SDK then sends
// notifications/cancelled), and prints "aborted". It fails at once if it receives a
// response to the aborted call (the SDK reports "a response for an unknown message
// ID"); it succeeds when it reads "dropped" on stdin (the test saw the server
// withhold the response). argv: "stdio" COMMAND ARGS... | "http" URL.
const tsCancelScript = `
import { Client } from 'SDK/client/index.js';
import { StdioClientTransport } from 'SDK/client/stdio.js';
import { StreamableHTTPClientTransport } from 'SDK/client/streamableHttp.js';
import { createInterface } from 'node:readline';

const [mode, ...rest] = process.argv.slice(2);
const transport = mode === 'stdio'
  ? new StdioClientTransport({ command: rest[0], args: rest.slice(1), stderr: 'inherit' })
  : new StreamableHTTPClientTransport(new URL(rest[0]));
const client = new Client({ name: 'ts-cancel', version: '1' }, { capabilities: {} });
client.onerror = (e) => {
  const msg = String(e && e.message || e);
  console.log('client error: ' + msg);
  if (msg.includes('unknown message ID')) process.exit(3);
};
await client.connect(transport);
const ac = new AbortController();
try {
  await client.callTool({ name: 'workspace__write_text', arguments: HELD },
    undefined, { signal: ac.signal, timeout: 3600000, onprogress: () => ac.abort('the user stopped it') });
  console.log('the aborted call returned');
  process.exit(4);
} catch (e) {
  console.log('aborted: ' + String(e && e.message || e));
}
for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'dropped') break;
}
await client.close();
console.log('done');
process.exit(0);
`

// Point 4 with the TypeScript SDK client (the client that logged "Received a response
// for an unknown message ID"): it cancels a held call over stdio (it starts `toolrun
// serve --stdio` itself) and over HTTP; the server withholds the response (its debug
// log says so), the client never receives one, and the call stays held.
func TestIssue15_TSClientCancel(t *testing.T) {
	node, sdk := i15Node(t)
	script := filepath.Join(t.TempDir(), "cancel.mjs")
	src := strings.ReplaceAll(tsCancelScript, "'SDK/", "'"+sdk+"/")
	src = strings.ReplaceAll(src, "HELD", heldWriteJSON)
	if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	const dropped = "the client cancelled the request: its response is not sent"
	run := func(t *testing.T, dir string, serverLog func() string, args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), i15Wait)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var out, errb syncBuf
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		if serverLog == nil { // the client started the server: its log is the client's stderr
			serverLog = errb.String
		}
		for !strings.Contains(serverLog(), dropped) {
			select {
			case err := <-done:
				t.Fatalf("the TypeScript client ended first (%v):\n%s\nserver:\n%s", err, out.String(), serverLog())
			case <-time.After(20 * time.Millisecond):
			}
		}
		io.WriteString(stdin, "dropped\n")
		if code := waitExit(t, done, "the TypeScript client"); code != 0 || !strings.Contains(out.String(), "aborted: ") {
			t.Fatalf("the TypeScript client: status %d\n%s\n%s", code, out.String(), errb.String())
		}
		if strings.Contains(out.String(), "client error") {
			t.Errorf("the TypeScript client reported errors:\n%s", out.String())
		}
		if !strings.Contains(i15Toolrun(t, "approvals", "--dir", dir), "PENDING") {
			t.Error("the cancelled call is no longer held")
		}
	}
	t.Run("stdio", func(t *testing.T) {
		dir := i15Root(t)
		toolrun, err := exec.LookPath("toolrun")
		if err != nil {
			t.Fatal(err)
		}
		run(t, dir, nil, "stdio", toolrun, "serve", "--stdio", "--no-servers", "--dir", dir, "--hold", "1h", "--log", "debug")
	})
	t.Run("http", func(t *testing.T) {
		dir := i15Root(t)
		url, _, _, stderr := i15ServeHTTP(t, dir, "--hold", "1h", "--log", "debug")
		run(t, dir, stderr.String, "http", url)
	})
}
