package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/internal/hostile"
	"github.com/toolgen/toolgen/mcp/upstream"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// stepClock is the reconnection loop's clock in tests: each Sleep reports the wait it
// was asked for on asked and returns when the test releases it (or the loop's context
// ends). Now is a fake time the test moves. Nothing in a test waits on real time.
type stepClock struct {
	asked   chan time.Duration
	release chan struct{}
	mu      sync.Mutex
	now     time.Time
}

func newStepClock() *stepClock {
	return &stepClock{asked: make(chan time.Duration, 16), release: make(chan struct{}), now: time.Unix(1_700_000_000, 0)}
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *stepClock) Sleep(ctx context.Context, d time.Duration) error {
	c.asked <- d
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.release:
		return nil
	}
}

// next waits for the loop's next Sleep and returns the wait it asked for.
func (c *stepClock) next(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-c.asked:
		return d
	case <-time.After(30 * time.Second): // a bound against a hang, not an assertion
		t.Fatal("the reconnection loop never asked to wait")
		return 0
	}
}

// wantWait checks one backoff wait: the level's doubling of min, capped at max, less at
// most half of it.
func wantWait(t *testing.T, got time.Duration, level int, min, max time.Duration) {
	t.Helper()
	full := max
	if m := min << level; level < 32 && m < max {
		full = m
	}
	if got > full || got < full-full/2 {
		t.Fatalf("wait at level %d = %v, want within [%v, %v]", level, got, full-full/2, full)
	}
}

// hostileLink serves one hostile server to every connection the adapter makes, over
// in-memory pipes; kill cuts the current one as a crash would (the pipes close under
// both ends, whatever is in flight).
type hostileLink struct {
	t     *testing.T
	h     *hostile.Server
	mu    sync.Mutex
	cuts  []func()
	fail  int // the next dials that fail
	dials int
}

func (l *hostileLink) connect() mcp.Transport {
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	ss, err := l.h.MCP().Connect(context.Background(), &mcp.IOTransport{Reader: c2sR, Writer: s2cW, MaxLineLength: -1}, nil)
	if err != nil {
		l.t.Fatal(err)
	}
	cut := func() {
		s2cW.CloseWithError(io.EOF)
		c2sR.CloseWithError(io.ErrClosedPipe)
	}
	l.mu.Lock()
	l.cuts = append(l.cuts, cut)
	l.mu.Unlock()
	l.t.Cleanup(func() { cut(); ss.Close() })
	return &mcp.IOTransport{Reader: s2cR, Writer: c2sW, MaxLineLength: -1}
}

func (l *hostileLink) dial() (mcp.Transport, error) {
	l.mu.Lock()
	l.dials++
	if l.fail > 0 {
		l.fail--
		l.mu.Unlock()
		return nil, errors.New("connection refused (test)")
	}
	l.mu.Unlock()
	return l.connect(), nil
}

// kill cuts the current connection.
func (l *hostileLink) kill() {
	l.mu.Lock()
	cut := l.cuts[len(l.cuts)-1]
	l.mu.Unlock()
	cut()
}

func (l *hostileLink) counts() (dials int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dials
}

func connectLinked(t *testing.T, e *env, se, idem string, clk *stepClock) (*upstream.Upstream, *hostileLink) {
	t.Helper()
	l := &hostileLink{t: t, h: hostile.New(hostile.Config{})}
	opts := upstream.Options{
		Server: server(hostileID, se, idem, "low", "mcp.hostile"), Registry: e.reg, Store: e.store, Logger: testLogger(t),
		Transport: l.connect(), RefreshDebounce: 20 * time.Millisecond,
		ReconnectMin: 100 * time.Millisecond, ReconnectMax: 400 * time.Millisecond,
	}
	upstream.SetClock(&opts, clk)
	upstream.SetDialer(&opts, l.dial)
	u, err := upstream.Connect(e.ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return u, l
}

// TestReconnect_Loop: a lost server keeps its tools advertised and answers
// upstream_offline (retryable) while it is down; one loop reconnects it with a doubling,
// jittered, capped wait; the catalog is then refreshed as for a list_changed (a tool
// that changed meanwhile answers tool_changed in the session that pinned it) and the
// reconnection is recorded; Close stops the loop.
func TestReconnect_Loop(t *testing.T) {
	e := newEnv(t)
	clk := newStepClock()
	u, l := connectLinked(t, e, "read", "idempotent", clk)
	const min, max = 100 * time.Millisecond, 400 * time.Millisecond

	wantOutcome(t, e.call("s1", hname(hostile.ToolEcho), `{"message":"before"}`), runtime.OutcomeSucceeded, "")
	wantOutcome(t, e.call("s1", hname(hostile.ToolRuggable), `{"a":1,"b":2}`), runtime.OutcomeSucceeded, "")

	l.kill()
	wantWait(t, clk.next(t), 0, min, max)
	if !errors.Is(u.Err(), upstream.ErrConnectionLost) {
		t.Fatalf("Err() = %v, want ErrConnectionLost", u.Err())
	}
	// Down: still advertised, retryable, nothing sent.
	if !slices.Contains(u.ToolNames(), hname(hostile.ToolEcho)) {
		t.Fatalf("tools withdrawn while down: %v", u.ToolNames())
	}
	for _, session := range []string{"s1", "fresh"} {
		o := e.call(session, hname(hostile.ToolEcho), `{"message":"while down"}`)
		wantOutcome(t, o, runtime.OutcomeUnavailable, runtime.ReasonUpstreamOffline)
		if !o.Retryable {
			t.Fatal("upstream_offline must be retryable")
		}
	}
	// The server changes a tool while the adapter is away.
	l.h.RugPull()

	// Two attempts fail: the wait doubles each time, capped at max.
	l.mu.Lock()
	l.fail = 2
	l.mu.Unlock()
	clk.release <- struct{}{}
	wantWait(t, clk.next(t), 1, min, max)
	clk.release <- struct{}{}
	wantWait(t, clk.next(t), 2, min, max)
	gen := upstream.RefreshGen(u)
	clk.release <- struct{}{}
	waitRefresh(t, u, gen)
	if err := u.Err(); err != nil {
		t.Fatalf("Err() after the reconnection = %v", err)
	}
	if got := l.counts(); got != 3 {
		t.Fatalf("%d dials, want 3 (one per attempt, never one per call)", got)
	}

	// Back: the same session calls again; the changed tool is refused there, and a new
	// session sees the new definition.
	wantOutcome(t, e.call("s1", hname(hostile.ToolEcho), `{"message":"after"}`), runtime.OutcomeSucceeded, "")
	wantOutcome(t, e.call("s1", hname(hostile.ToolRuggable), `{"a":1,"b":2}`), runtime.OutcomeUnavailable, runtime.ReasonToolChanged)
	wantOutcome(t, e.call("s2", hname(hostile.ToolRuggable), `{"a":1,"b":2}`), runtime.OutcomeSucceeded, "")

	// Recorded: one list_changed row triggered by the reconnection, and the events.
	var row *store.CatalogChange
	for _, c := range e.history(hostileID) {
		if c.Change == upstream.ChangeListChanged && c.Tool == "" {
			row = &c
		}
	}
	if row == nil {
		t.Fatal("no list_changed row for the reconnection")
	}
	var d struct {
		Triggers    []string            `json:"triggers"`
		Attempts    int                 `json:"attempts"`
		Cause       string              `json:"cause"`
		DownSince   string              `json:"down_since"`
		Differences map[string][]string `json:"differences"`
	}
	if err := json.Unmarshal(row.Detail, &d); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Triggers, []string{upstream.TriggerReconnect}) || d.Attempts != 3 || d.Cause == "" || d.DownSince == "" ||
		!slices.Contains(d.Differences[upstream.ChangeChanged], hname(hostile.ToolRuggable)) {
		t.Fatalf("reconnection row %s", row.Detail)
	}
	evs, err := e.store.EventList(e.ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range evs {
		if ev.Server == hostileID && (ev.Kind == upstream.EventUpstreamDisconnected || ev.Kind == upstream.EventUpstreamReconnected) {
			kinds = append(kinds, ev.Kind)
		}
	}
	if !slices.Equal(kinds, []string{upstream.EventUpstreamDisconnected, upstream.EventUpstreamReconnected}) {
		t.Fatalf("events %v", kinds)
	}

	// Lost again at once (a server that crashes after every start): the backoff goes on
	// where it stopped instead of starting again.
	l.kill()
	wantWait(t, clk.next(t), 3, min, max)
	gen = upstream.RefreshGen(u)
	clk.release <- struct{}{}
	waitRefresh(t, u, gen)
	// Lost after a stable connection (longer than ReconnectMax): from the start again.
	clk.advance(time.Hour)
	l.kill()
	wantWait(t, clk.next(t), 0, min, max)

	// Close while the loop waits: it stops, and nothing is dialled any more.
	dials := l.counts()
	if err := u.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if got := l.counts(); got != dials {
		t.Fatalf("dialled after Close: %d, then %d", dials, got)
	}
	wantOutcome(t, e.call("s1", hname(hostile.ToolEcho), `{}`), runtime.OutcomeUnavailable, runtime.ReasonToolWithdrawn)
}

// TestReconnect_InFlight: a call in flight when the connection dies is decided by the
// pipeline's rules: UNCERTAIN when its watermark is set and it is not safe to repeat,
// upstream_disconnected (retryable) when it is.
func TestReconnect_InFlight(t *testing.T) {
	for _, tc := range []struct {
		se, idem string
		status   runtime.OutcomeStatus
		reason   runtime.ReasonCode
	}{
		{"write", "non_idempotent", runtime.OutcomeUncertain, runtime.ReasonEffectMayHaveHappened},
		{"write", "idempotent", runtime.OutcomeUnavailable, runtime.ReasonUpstreamDisconnected},
		{"read", "idempotent", runtime.OutcomeUnavailable, runtime.ReasonUpstreamDisconnected},
	} {
		t.Run(tc.se+"_"+tc.idem, func(t *testing.T) {
			e := newEnv(t)
			clk := newStepClock()
			hanging := make(chan struct{}, 1)
			l := &hostileLink{t: t, h: hostile.New(hostile.Config{Hanging: func() { hanging <- struct{}{} }})}
			opts := upstream.Options{
				Server: server(hostileID, tc.se, tc.idem, "low", "mcp.hostile"), Registry: e.reg, Store: e.store, Logger: testLogger(t),
				Transport: l.connect(), ReconnectMin: time.Millisecond, ReconnectMax: time.Millisecond,
			}
			upstream.SetClock(&opts, clk)
			upstream.SetDialer(&opts, l.dial)
			u, err := upstream.Connect(e.ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { u.Close() })
			done := make(chan runtime.Outcome, 1)
			go func() { done <- e.call("s1", hname(hostile.ToolHang), `{}`) }()
			<-hanging
			l.kill()
			o := <-done
			wantOutcome(t, o, tc.status, tc.reason)
			if tc.status == runtime.OutcomeUnavailable && !o.Retryable {
				t.Fatal("not retryable")
			}
			clk.next(t)
			gen := upstream.RefreshGen(u)
			clk.release <- struct{}{}
			waitRefresh(t, u, gen)
			wantOutcome(t, e.call("s1", hname(hostile.ToolEcho), `{}`), runtime.OutcomeSucceeded, "")
		})
	}
}

// TestReconnect_Backoff: the wait doubles from min, is capped at max, and is jittered
// by at most half of it (never longer, never zero).
func TestReconnect_Backoff(t *testing.T) {
	const lo, hi = 500 * time.Millisecond, 30 * time.Second
	for level := 0; level < 70; level++ {
		seen := map[time.Duration]bool{}
		for i := 0; i < 200; i++ {
			d := upstream.Backoff(level, lo, hi)
			wantWait(t, d, level, lo, hi)
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Fatalf("level %d: no jitter (%v)", level, seen)
		}
	}
}

// TestReconnect_HandedIn: a connection handed in (Options.Transport, as the device
// gateway does) is not made again by the adapter: calls answer upstream_offline until
// its owner calls Reconnect.
func TestReconnect_HandedIn(t *testing.T) {
	e := newEnv(t)
	l := &hostileLink{t: t, h: hostile.New(hostile.Config{})}
	u, err := upstream.Connect(e.ctx, upstream.Options{
		Server: server(hostileID, "read", "idempotent", "low", "mcp.hostile"), Registry: e.reg, Store: e.store,
		Logger: testLogger(t), Transport: l.connect(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	l.kill()
	waitFor(t, "the lost connection", func() bool { return errors.Is(u.Err(), upstream.ErrConnectionLost) })
	wantOutcome(t, e.call("s1", hname(hostile.ToolEcho), `{}`), runtime.OutcomeUnavailable, runtime.ReasonUpstreamOffline)
	if err := u.Reconnect(e.ctx, l.connect()); err != nil {
		t.Fatal(err)
	}
	if err := u.Reconnect(e.ctx, l.connect()); !errors.Is(err, upstream.ErrStillConnected) {
		t.Fatalf("Reconnect of a live connection = %v", err)
	}
	wantOutcome(t, e.call("s1", hname(hostile.ToolEcho), `{}`), runtime.OutcomeSucceeded, "")
}
