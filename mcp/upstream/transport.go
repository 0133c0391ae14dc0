package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioTerminateWait is how long Close waits for a stdio server to exit after its stdin is
// closed, and again after SIGTERM, before it kills it (the MCP shutdown sequence).
const stdioTerminateWait = 2 * time.Second

// inheritedEnv are the only variables of the worker's environment a stdio server
// inherits: a server must not see the worker's secrets (server-everything's get-env
// tool, for one, returns its whole environment). The file's transport.stdio.env adds to
// them.
var inheritedEnv = []string{"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "USER", "SYSTEMROOT", "TEMP", "TMP"}

// stdioTransport runs an operator's stdio server. It exists instead of
// mcp.CommandTransport because that transport caps one inbound message at
// mcp.DefaultMaxLineLength (16 MiB) with no way to change it: a larger result would kill
// the connection. Shutdown follows CommandTransport: close stdin, wait, SIGTERM, wait,
// SIGKILL.
type stdioTransport struct {
	command string
	args    []string
	env     map[string]string
	stderr  io.Writer
	maxLine int
	tap     io.Writer     // tests: a copy of every byte written to the server
	started func(pid int) // tests: told the pid of the server started
}

func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	cmd := exec.Command(t.command, t.args...) // not CommandContext: the server outlives Connect's ctx
	cmd.Env = stdioEnv(t.env)
	cmd.Stderr = t.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("stdio: %w", err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("stdio: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("stdio: start %s: %w", t.command, err)
	}
	if t.started != nil {
		t.started(cmd.Process.Pid)
	}
	w := &procWriter{cmd: cmd, stdin: stdin, tap: t.tap}
	return (&mcp.IOTransport{Reader: io.NopCloser(stdout), Writer: w, MaxLineLength: t.maxLine}).Connect(ctx)
}

func stdioEnv(extra map[string]string) []string {
	var env []string
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// procWriter is the server's stdin; closing it shuts the server down.
type procWriter struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	tap   io.Writer
	once  sync.Once
	err   error
}

func (w *procWriter) Write(p []byte) (int, error) {
	n, err := w.stdin.Write(p)
	if w.tap != nil && n > 0 {
		_, _ = w.tap.Write(p[:n])
	}
	return n, err
}

func (w *procWriter) Close() error {
	w.once.Do(func() { w.err = w.shutdown() })
	return w.err
}

func (w *procWriter) shutdown() error {
	_ = w.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- w.cmd.Wait() }()
	wait := func() (error, bool) {
		t := time.NewTimer(stdioTerminateWait)
		defer t.Stop()
		select {
		case err := <-done:
			return err, true
		case <-t.C:
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return exitErr(err)
	}
	if runtime.GOOS != "windows" {
		if err := w.cmd.Process.Signal(syscall.SIGTERM); err == nil {
			if err, ok := wait(); ok {
				return exitErr(err)
			}
		}
	}
	_ = w.cmd.Process.Kill()
	if err, ok := wait(); ok {
		return exitErr(err)
	}
	return errors.New("stdio: server process does not exit")
}

// exitErr drops the exit status of a server we asked to stop: only a failure to stop it
// is an error of Close.
func exitErr(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return nil
	}
	return err
}

// refusedMethods are the server-to-client requests this client refuses (MCP-6); any other
// request but ping is refused too, only these are named in the message.
var refusedMethods = map[string]string{
	"roots/list":             "roots",
	"sampling/createMessage": "sampling",
	"elicitation/create":     "elicitation",
}

// refuseServerRequests is the receiving middleware of MCP-6: a server may ping the
// client and send notifications; every request for client capabilities (roots,
// sampling, elicitation, and anything a later revision adds) is refused with
// -32021 (missing required client capabilities), which names what was not granted,
// rather than -32601, which a Go server's compatibility bridge rewrites into a
// confusing "method not found: tools/call".
func (u *Upstream) refuseServerRequests(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "ping" || strings.HasPrefix(method, "notifications/") {
			return next(ctx, method, req)
		}
		u.refused(ctx, method, "request")
		what := refusedMethods[method]
		if what == "" {
			what = "this capability"
		}
		return nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities,
			Message: fmt.Sprintf("%s refused: this client does not grant %s to servers", method, what)}
	}
}

// limitJSON caps the body of every application/json HTTP response at max bytes. The
// go-sdk reads a JSON response whole (io.ReadAll) without a bound; SSE responses are
// bounded per event by StreamableClientTransport.MaxEventSize instead.
type limitJSON struct {
	next http.RoundTripper
	max  int64
}

func (l *limitJSON) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "application/json") {
		resp.Body = &cappedBody{rc: resp.Body, left: l.max}
	}
	return resp, nil
}

type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("response body exceeds the %w", errMessageTooLarge)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left+1] // one more byte tells "exactly max" from "more"
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, fmt.Errorf("response body exceeds the %w", errMessageTooLarge)
	}
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

var errMessageTooLarge = errors.New("maximum message size (Options.MaxMessageBytes)")

// boundedClient returns a copy of c (nil: http.DefaultClient) whose JSON responses are
// capped at max bytes and which never follows a redirect from https to http (before
// c's own redirect policy, which an operator's client may have set).
func boundedClient(c *http.Client, max int) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	cp := *c
	next := cp.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	cp.Transport = &limitJSON{next: next, max: int64(max)}
	policy := cp.CheckRedirect
	cp.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := checkDowngrade(req, via); err != nil {
			return err
		}
		if policy != nil {
			return policy(req, via)
		}
		if len(via) >= 10 { // net/http's own default policy
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &cp
}
