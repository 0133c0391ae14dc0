package upstream_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolgen/toolgen/internal/mcppeers"
	"github.com/toolgen/toolgen/mcp/upstream"
	"github.com/toolgen/toolgen/model"
	"github.com/toolgen/toolgen/runtime"
)

// pids records the stdio servers the adapter started.
type pids struct {
	mu   sync.Mutex
	list []int
}

func (p *pids) add(pid int) {
	p.mu.Lock()
	p.list = append(p.list, pid)
	p.mu.Unlock()
}

func (p *pids) all() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.list...)
}

// wantDown checks an outcome of a call made while the server is away: unavailable and
// retryable, with one of the two reasons a lost connection gives.
func wantDown(t *testing.T, o runtime.Outcome) {
	t.Helper()
	if o.Status != runtime.OutcomeUnavailable || !o.Retryable ||
		(o.ReasonCode != runtime.ReasonUpstreamOffline && o.ReasonCode != runtime.ReasonUpstreamDisconnected) {
		detail := ""
		if o.ExternalDetail != nil {
			detail = o.ExternalDetail.Text
		}
		t.Fatalf("outcome while down = %s/%s retryable %t (%s), want unavailable upstream_offline or upstream_disconnected, retryable",
			o.Status, o.ReasonCode, o.Retryable, short(detail))
	}
}

// TestEverything_StdioKilled: server-everything over stdio is killed with SIGKILL while
// a call is in flight. The call in flight ends upstream_disconnected (the server file
// says read, idempotent: safe to repeat); calls while it is down answer
// upstream_offline; the adapter starts the command again by itself, and the same
// session calls the same pinned tools again.
func TestEverything_StdioKilled(t *testing.T) {
	node, entry := mcppeers.Everything(t)
	e := newEnv(t)
	s := everythingServer()
	s.Stdio = &model.StdioTransport{Command: node, Args: []string{entry, "stdio"}}
	w := &wire{}
	started := &pids{}
	clk := newStepClock()
	opts := upstream.Options{Server: s, Registry: e.reg, Store: e.store, Logger: testLogger(t), RefreshDebounce: 20 * time.Millisecond}
	upstream.SetStdioTap(&opts, w)
	upstream.SetStdioStarted(&opts, started.add)
	upstream.SetClock(&opts, clk)
	u, err := upstream.Connect(e.ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	wantOutcome(t, e.call("pinned", "mcp.everything.echo", `{"message":"first life"}`), runtime.OutcomeSucceeded, "")

	// A long call in flight, then SIGKILL.
	done := make(chan runtime.Outcome, 1)
	go func() {
		done <- e.call("pinned", "mcp.everything.trigger_long_running_operation", `{"duration":600,"steps":600}`)
	}()
	waitFor(t, "the long call on the wire", func() bool { return strings.Contains(w.String(), "trigger-long-running-operation") })
	first := started.all()
	if len(first) != 1 {
		t.Fatalf("started %v", first)
	}
	if err := syscall.Kill(first[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	o := <-done
	wantOutcome(t, o, runtime.OutcomeUnavailable, runtime.ReasonUpstreamDisconnected)

	// Down: the loop waits before its first attempt; calls fail retryably.
	clk.next(t)
	wantOutcome(t, e.call("pinned", "mcp.everything.echo", `{"message":"while down"}`), runtime.OutcomeUnavailable, runtime.ReasonUpstreamOffline)
	gen := upstream.RefreshGen(u)
	clk.release <- struct{}{}
	waitRefresh(t, u, gen)
	if err := u.Err(); err != nil {
		t.Fatalf("Err() after the reconnection = %v", err)
	}
	if got := started.all(); len(got) != 2 || got[1] == got[0] {
		t.Fatalf("servers started %v, want a second one", got)
	}
	o = e.call("pinned", "mcp.everything.echo", `{"message":"second life"}`)
	wantOutcome(t, o, runtime.OutcomeSucceeded, "")
	if !strings.Contains(resultText(t, o), "second life") {
		t.Fatalf("echo = %q", resultText(t, o))
	}
}

// startEverythingHTTP starts server-everything over Streamable HTTP on port and waits
// until its process listens there (mcppeers.WaitListening). ok is false if it exited
// first: freePort's port is only free when freePort returns, and server-everything
// exits on EADDRINUSE when another process has taken it since (once in CI a dial
// check passed, reaching that other process, and the adapter's connect was refused).
func startEverythingHTTP(t *testing.T, node, entry string, port int) (stop func(), ok bool) {
	t.Helper()
	cmd := exec.Command(node, entry, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-exited
		})
	}
	t.Cleanup(stop)
	switch err := mcppeers.WaitListening(cmd.Process.Pid, port, exited, 20*time.Second); {
	case errors.Is(err, mcppeers.ErrExited):
		return stop, false
	case err != nil:
		t.Fatalf("server-everything: %v", err)
	}
	return stop, true
}

// everythingHTTP starts server-everything on port (startEverythingHTTP), which must be
// free: a restart on the port of one just stopped.
func everythingHTTP(t *testing.T, node, entry string, port int) (stop func()) {
	t.Helper()
	stop, ok := startEverythingHTTP(t, node, entry, port)
	if !ok {
		t.Fatalf("server-everything exited before listening on port %d (taken since?)", port)
	}
	return stop
}

// everythingHTTPOnAFreePort starts server-everything on a port of freePort's, and on
// another if that one was taken before it could listen there.
func everythingHTTPOnAFreePort(t *testing.T, node, entry string) (port int, stop func()) {
	t.Helper()
	for range 3 {
		port = freePort(t)
		if stop, ok := startEverythingHTTP(t, node, entry, port); ok {
			return port, stop
		}
	}
	t.Fatal("server-everything could not listen on any of three free ports")
	return 0, nil
}

// TestEverything_HTTPRestarted: server-everything over Streamable HTTP is killed and
// started again on the same port (it forgets every session). Calls fail retryably
// while it is away; the adapter notices the lost session, opens a new one by itself
// and the pinned session calls again, without a restart of anything else.
func TestEverything_HTTPRestarted(t *testing.T) {
	node, entry := mcppeers.Everything(t)
	port, stop := everythingHTTPOnAFreePort(t, node, entry)
	e := newEnv(t)
	s := everythingServer()
	s.HTTP = &model.HTTPTransport{URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port)}
	clk := newStepClock()
	opts := upstream.Options{Server: s, Registry: e.reg, Store: e.store, Logger: testLogger(t),
		HTTPClient: &http.Client{}, RefreshDebounce: 20 * time.Millisecond}
	upstream.SetClock(&opts, clk)
	u, err := upstream.Connect(e.ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	wantOutcome(t, e.call("pinned", "mcp.everything.echo", `{"message":"first life"}`), runtime.OutcomeSucceeded, "")

	stop()
	// Away: the request cannot reach it (the SDK has not given the session up yet, or
	// has: either way a retryable refusal).
	wantDown(t, e.call("pinned", "mcp.everything.echo", `{"message":"while away"}`))

	everythingHTTP(t, node, entry, port)
	// The restarted server does not know the session: the SDK gives it up, the adapter
	// notices and its loop waits before the first attempt.
	clk.next(t)
	if !errors.Is(u.Err(), upstream.ErrConnectionLost) {
		t.Fatalf("Err() = %v, want ErrConnectionLost", u.Err())
	}
	wantOutcome(t, e.call("pinned", "mcp.everything.echo", `{"message":"lost"}`), runtime.OutcomeUnavailable, runtime.ReasonUpstreamOffline)
	gen := upstream.RefreshGen(u)
	clk.release <- struct{}{}
	waitRefresh(t, u, gen)
	o := e.call("pinned", "mcp.everything.echo", `{"message":"second life"}`)
	wantOutcome(t, o, runtime.OutcomeSucceeded, "")
	if !strings.Contains(resultText(t, o), "second life") {
		t.Fatalf("echo = %q", resultText(t, o))
	}
}
