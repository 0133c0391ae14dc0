package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// A lost connection (issue 15, point 2).
//
// When the session with a server ends on its own — a stdio server exited or was
// killed, an HTTP server went away or forgot the session (a restart) — the adapter
// keeps every tool registered: sessions that pinned them still see them, and a call
// fails at once, before any watermark, unavailable/upstream_offline (retryable). A
// call in flight when the connection died is decided by the pipeline's rules: with
// its watermark set and a class that is not safe to repeat it ends UNCERTAIN
// (effect_may_have_happened), otherwise unavailable/upstream_disconnected
// (retryable).
//
// Then, for a server of the file (not one whose connection was handed in,
// Options.Transport), one reconnection loop per server — never one per call, so a
// burst of calls cannot stampede a server that is coming back — starts the command
// again (stdio) or opens a new session (HTTP). The wait before each attempt doubles
// from Options.ReconnectMin up to Options.ReconnectMax and a random part of up to half
// of it is taken off ("equal jitter"), so that the gateways and workers that lost one
// server at the same moment do not come back at the same moment either. A connection
// that is lost again before it has lived ReconnectMax resumes the backoff where it
// stopped (a server that crashes right after every start is not restarted in a tight
// loop); one that lived longer starts again from ReconnectMin.
//
// A new session is made current only once its tools/list is accepted (CheckTools);
// then the catalog is applied as for a list_changed: unchanged tools stay registered
// as they were, so pinned sessions go on calling them; a changed tool is replaced, so
// sessions that pinned it get unavailable/tool_changed; a removed one is withdrawn
// (MCP-7). Every reconnection appends a list_changed row to mcp_catalog_history
// (trigger "reconnect", with down_since, attempts and the cause of the loss), and the
// event stream gets upstream_disconnected and upstream_reconnected (a device's own
// events are the gateway's). Attempts are logged. Close stops the loop.

// Event kinds the adapter appends to the event stream (store.EventAppend) for a server
// of the mcp domain.
const (
	EventUpstreamDisconnected = "upstream_disconnected"
	EventUpstreamReconnected  = "upstream_reconnected"
)

// TriggerReconnect is the trigger of the list_changed row a reconnection records.
const TriggerReconnect = "reconnect"

// clock is the time of the reconnection loop; tests inject their own.
type clock interface {
	Now() time.Time
	// Sleep waits d, or until ctx is done (then it returns ctx's error).
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// backoff is the wait before a reconnection attempt at level (0 for the first): min
// doubled level times, at most max, less a random part of up to half of it.
func backoff(level int, min, max time.Duration) time.Duration {
	d := max
	if level < 32 {
		if m := min << level; m > 0 && m < max {
			d = m
		}
	}
	half := d / 2
	return d - time.Duration(rand.Int64N(int64(half)+1))
}

// watch waits for the end of the session cs. If it ended on its own while it was the
// current session, calls fail from now on (upstream_offline), OnConnectionLost hears
// it, and the reconnection loop starts.
func (u *Upstream) watch(cs *mcp.ClientSession) {
	defer u.wg.Done()
	err := cs.Wait()
	if err == nil {
		err = errors.New("the server ended the connection")
	}
	u.mu.Lock()
	current := u.cs == cs && !u.closed && u.ctx.Err() == nil
	var loop uint64
	if current {
		u.lost = fmt.Errorf("%w (%v)", ErrConnectionLost, err)
		u.lostAt = u.clock.Now()
		if u.dial != nil && u.loop == 0 {
			if u.lostAt.Sub(u.connectedAt) >= u.opts.ReconnectMax {
				u.level = 0 // the connection was stable: start the backoff again
			}
			u.loops++
			u.loop, loop = u.loops, u.loops
			u.wg.Add(1)
		}
	}
	u.mu.Unlock()
	if !current {
		return
	}
	_ = cs.Close() // reaps a stdio server; idempotent
	if loop != 0 {
		u.log.Warn("upstream connection lost; its tools answer upstream_offline until it is reconnected", "error", err)
	} else {
		u.log.Warn("upstream connection ended; calls fail until it is reconnected", "error", err)
	}
	u.event(EventUpstreamDisconnected)
	if u.opts.OnConnectionLost != nil {
		u.opts.OnConnectionLost(err)
	}
	if loop != 0 {
		go u.reconnectLoop(loop)
	}
}

// reconnectLoop makes new connections until one is installed, Close is called, or
// another reconnection took over.
func (u *Upstream) reconnectLoop(id uint64) {
	defer u.wg.Done()
	u.mu.Lock()
	level, since, cause := u.level, u.lostAt, u.lost
	u.mu.Unlock()
	for attempt := 1; ; attempt++ {
		wait := backoff(level, u.opts.ReconnectMin, u.opts.ReconnectMax)
		u.log.Info("upstream reconnection attempt scheduled", "attempt", attempt, "wait", wait)
		if u.clock.Sleep(u.ctx, wait) != nil {
			return // closed
		}
		level++
		u.mu.Lock()
		mine := u.loop == id
		u.level = level
		u.mu.Unlock()
		if !mine {
			return
		}
		installed := false
		t, err := u.dial()
		if err == nil {
			ctx, cancel := context.WithTimeout(u.ctx, DefaultConnectTimeout)
			detail := map[string]any{"down_since": since.UTC().Format(time.RFC3339Nano), "attempts": attempt, "cause": bound(fmt.Sprint(cause))}
			installed, err = u.reconnectOver(ctx, t, detail)
			cancel()
		}
		switch {
		case installed:
			if err != nil {
				u.log.Error("upstream reconnected, but its catalog was not wholly recorded", "error", err)
			}
			u.log.Info("upstream reconnected", "attempts", attempt, "down_for", u.clock.Now().Sub(since), "protocol", u.ProtocolVersion())
			u.event(EventUpstreamReconnected)
			return
		case errors.Is(err, ErrClosed), errors.Is(err, ErrStillConnected), u.ctx.Err() != nil:
			return
		}
		u.log.Warn("upstream reconnection attempt failed", "attempt", attempt, "error", err)
	}
}

// ErrStillConnected refuses a Reconnect while the connection is up.
var ErrStillConnected = errors.New("upstream: the connection is still up")

// Reconnect replaces a lost connection with a new one over t (a device that dialled
// again) and lists the catalog again: unchanged tools stay registered as they were, so
// sessions that pinned them go on calling them; changed ones are replaced, removed ones
// withdrawn, and the differences recorded (catalog history kind list_changed, trigger
// "reconnect"), as for a list_changed. While the connection is still up it fails with
// ErrStillConnected and changes nothing. If the new catalog is refused (CheckTools) the
// new connection is closed again and the old catalog stays.
func (u *Upstream) Reconnect(ctx context.Context, t mcp.Transport) error {
	u.mu.Lock()
	since, cause := u.lostAt, u.lost
	u.mu.Unlock()
	detail := map[string]any{"cause": bound(fmt.Sprint(cause))}
	if !since.IsZero() {
		detail["down_since"] = since.UTC().Format(time.RFC3339Nano)
	}
	installed, err := u.reconnectOver(ctx, t, detail)
	if installed && err != nil {
		if cs := u.current(); cs != nil {
			_ = cs.Close()
		}
	}
	if err == nil {
		u.log.Info("upstream reconnected", "protocol", u.ProtocolVersion())
	}
	return err
}

// reconnectOver connects over t and, once the new session's tools/list is accepted,
// makes it the current session and applies the catalog (refreshLocked). installed
// reports whether the new session became current; err may then still report that the
// catalog was not wholly recorded. A session that was not installed is closed.
func (u *Upstream) reconnectOver(ctx context.Context, t mcp.Transport, detail map[string]any) (installed bool, err error) {
	u.reconnectMu.Lock()
	defer u.reconnectMu.Unlock()
	u.mu.Lock()
	switch {
	case u.closed:
		u.mu.Unlock()
		return false, ErrClosed
	case u.lost == nil:
		u.mu.Unlock()
		return false, ErrStillConnected
	}
	u.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(u.ctx, cancel)() // Close ends a reconnection in progress
	if _, ok := ctx.Deadline(); !ok {
		var cancelT context.CancelFunc
		ctx, cancelT = context.WithTimeout(ctx, DefaultConnectTimeout)
		defer cancelT()
	}
	version := u.opts.ProtocolVersion
	if version == "" {
		version = ProtocolLegacy
	}
	cs, err := safeConnect(ctx, u.client, t, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		return false, fmt.Errorf("upstream %s: reconnect: %w", u.id, err)
	}
	install := func() error {
		u.mu.Lock()
		if u.closed {
			u.mu.Unlock()
			return ErrClosed
		}
		old := u.cs
		u.cs, u.lost, u.protocol = cs, nil, negotiated(cs)
		u.connectedAt = u.clock.Now()
		u.loop = 0
		u.wg.Add(1)
		u.mu.Unlock()
		installed = true
		if old != nil {
			_ = old.Close()
		}
		go u.watch(cs)
		return nil
	}
	u.refreshMu.Lock()
	err = u.refreshLocked(ctx, cs, []string{TriggerReconnect}, detail, install)
	u.refreshMu.Unlock()
	if !installed {
		_ = cs.Close()
		return false, err
	}
	u.askLogs(ctx, cs)
	return true, err
}

// event appends a connection event of a server of the mcp domain to the event stream
// (a device's are the gateway's: device_connected, device_disconnected).
func (u *Upstream) event(kind string) {
	if u.domain != Domain {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := u.opts.Store.EventAppend(ctx, store.Event{
		Kind: kind, Tenant: u.opts.Tenant, Server: u.id, Tool: u.domain + "." + u.id,
	}); err != nil {
		u.log.Error("upstream event not written", "kind", kind, "error", err)
	}
}

// offline gives the error of a call made while the connection is down its reason:
// device_offline for a device, upstream_offline for a server (unavailable,
// retryable: nothing was sent). When the call's own deadline or cancellation stopped
// it, and for a server after Close (nothing reconnects it), err is returned as it is.
func (u *Upstream) offline(ctx context.Context, err error) error {
	switch {
	case err == nil || ctx.Err() != nil:
		return err
	case u.domain == DeviceDomain:
		return &runtime.UnavailableError{Reason: runtime.ReasonDeviceOffline, Err: err}
	case errors.Is(err, ErrClosed):
		return err
	}
	return &runtime.UnavailableError{Reason: runtime.ReasonUpstreamOffline, Err: err}
}

// disconnected gives the error of a request over cs that could not be exchanged its
// reason, where the connection is what failed: for a device any transport error is
// device_disconnected (DEV-3); for a server, upstream_disconnected when err says the
// connection closed, ended or never reached the server, or cs is no longer the live
// session, or a ping finds it broken (see broken). The pipeline reports the reason
// only where no effect is in doubt (RT-4). Other errors (an undecodable or oversized
// answer on a connection that still works), and a call stopped by its own deadline or
// cancellation, keep their meaning.
func (u *Upstream) disconnected(ctx context.Context, cs *mcp.ClientSession, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	switch {
	case u.domain == DeviceDomain:
		return &runtime.UnavailableError{Reason: runtime.ReasonDeviceDisconnected, Err: err}
	case connectionError(err) || !u.live(cs) || broken(ctx, cs):
		return &runtime.UnavailableError{Reason: runtime.ReasonUpstreamDisconnected, Err: err}
	}
	return err
}

// probeTimeout bounds the ping of broken.
const probeTimeout = 5 * time.Second

// broken asks cs whether it still works, after a request failed with an error that
// does not say. A write the transport refused for good (server-everything, restarted,
// answers a request of a session it does not know with HTTP 400) breaks the session
// at once, though the session only ends a moment later: a ping then fails at once with
// ErrConnectionClosed. A working session answers it.
func broken(ctx context.Context, cs *mcp.ClientSession) bool {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	defer cancel()
	_, err := safeCall(pctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, cs.Ping(ctx, nil) })
	return err != nil && connectionError(err)
}

// live reports whether cs is the current session and up.
func (u *Upstream) live(cs *mcp.ClientSession) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.cs == cs && u.lost == nil && !u.closed
}

// connectionError reports whether err says the connection, not the server's answer,
// failed: the go-sdk's closing codes and ErrConnectionClosed, the end of the stream, an
// HTTP session the server no longer knows (it restarted), or a request that never
// reached the server.
func connectionError(err error) bool {
	var werr *jsonrpc.Error
	var uerr *url.Error
	var nerr net.Error
	switch {
	case errors.Is(err, mcp.ErrConnectionClosed), errors.Is(err, mcp.ErrSessionMissing),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.ErrClosedPipe):
		return true
	case errors.As(err, &uerr), errors.As(err, &nerr):
		return true
	case errors.As(err, &werr):
		return werr.Code == -32003 || werr.Code == -32004 // client or server closing
	}
	return false
}
