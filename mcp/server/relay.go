//lint:file-ignore SA1019 logging, roots and sampling are deprecated at 2026-07-28 (SEP-2577) but live in the 2025 revisions toolrun still serves and relays

package server

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/internal/relay"
	"github.com/toolgen/toolgen/runtime"
)

// relayBuffer is how many relayed notifications of one call wait for the sender; more
// are dropped (a server that floods its log or progress slows no one down, and never
// the notification reader of its connection).
const relayBuffer = 64

// callRelay is what one tools/call's client hears while the call runs (issue 15,
// point 3): the approval hold as progress (POL-3, holdProgress) and, through the
// relay.Sink the pipeline hands to an adapter's tool, the upstream server's progress
// and log lines.
//
//   - Progress goes out only when the client sent a progressToken, under that token,
//     in order and strictly increasing: the upstream's values are offset by the last
//     value the hold sent (0 when there was no hold), one that does not increase is
//     dropped, and the relay's sender first lets the hold's sender finish.
//   - Log lines go out through ServerSession.Log with the request's context, so the
//     client's logging/setLevel (or, on 2026-07-28, the request's log level) decides
//     which are sent, and over HTTP they travel on the request's stream.
//
// The relayed message, logger and data are the upstream's text: untrusted. They are
// sent as the notifications' own fields with _meta io.toolgen/trust external_untrusted,
// and nothing of them enters the call's result or an outcome's message (RT-7). Nothing
// is sent after the call returned: close stops the senders after they wrote what they
// hold.
type callRelay struct {
	s     *Server
	ctx   context.Context // the request's
	ss    *mcp.ServerSession
	token any           // the client's progressToken; nil: no progress
	hold  *holdProgress // set with token

	holdOnce sync.Once // closes hold

	mu       sync.Mutex
	closed   bool
	holdOver bool     // something was relayed: the hold is over, its sender is closing
	relayed  bool     // upstream progress began
	base     float64  // the last progress sent when the upstream's began
	sent     bool     // a progress notification went out under the token (the hold's included)
	last     float64  // the last progress value sent
	out      chan any // *mcp.ProgressNotificationParams or *mcp.LoggingMessageParams
	done     chan struct{}
	dropped  int
}

func (s *Server) newCallRelay(ctx context.Context, ss *mcp.ServerSession, token any) *callRelay {
	r := &callRelay{s: s, ctx: ctx, ss: ss, token: token}
	if token != nil {
		r.hold = s.newHoldProgress(ctx, ss, token)
	}
	return r
}

// attach returns ctx with the hold observer (when the client wants progress) and the
// relay sink.
func (r *callRelay) attach(ctx context.Context) context.Context {
	if r.hold != nil {
		ctx = runtime.WithHoldObserver(ctx, r.observeHold)
	}
	return relay.With(ctx, r)
}

func (r *callRelay) observeHold(waited, bound time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.holdOver {
		return
	}
	r.hold.observe(waited, bound)
	if r.hold.sent {
		r.sent, r.last = true, r.hold.last.Seconds()
	}
}

// closeHold stops the hold's sender after it wrote what it holds.
func (r *callRelay) closeHold() {
	if r.hold != nil {
		r.holdOnce.Do(r.hold.close)
	}
}

func (r *callRelay) WantsProgress() bool { return r.token != nil }

func (r *callRelay) Client() any { return r.ss }

func untrustedMeta() mcp.Meta { return mcp.Meta{MetaTrust: string(runtime.TrustExternalUntrusted)} }

// Progress relays the upstream's progress under the client's token (see callRelay).
func (r *callRelay) Progress(progress, total float64, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.hold == nil {
		return
	}
	if !r.relayed {
		r.relayed, r.base = true, r.last
	}
	v := r.base + progress
	if r.sent && !(v > r.last) {
		return
	}
	p := &mcp.ProgressNotificationParams{ProgressToken: r.token, Progress: v, Message: message, Meta: untrustedMeta()}
	if total > 0 {
		p.Total = r.base + total
	}
	if r.queue(p) {
		r.sent, r.last = true, v
	}
}

// Log relays one upstream log line (see callRelay).
func (r *callRelay) Log(level, logger string, data any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.queue(&mcp.LoggingMessageParams{Level: mcp.LoggingLevel(level), Logger: logger, Data: data, Meta: untrustedMeta()})
}

// queue hands n to the sender, starting it on first use; false when n was dropped.
// r.mu is held.
func (r *callRelay) queue(n any) bool {
	if r.out == nil {
		r.holdOver = true // the sender closes the hold first
		r.out, r.done = make(chan any, relayBuffer), make(chan struct{})
		go r.send(r.out, r.done)
	}
	select {
	case r.out <- n:
		return true
	default:
		r.dropped++
		return false
	}
}

func (r *callRelay) send(out <-chan any, done chan<- struct{}) {
	defer close(done)
	r.closeHold() // the hold is over: its last notifications go first
	for n := range out {
		var err error
		switch n := n.(type) {
		case *mcp.ProgressNotificationParams:
			err = r.ss.NotifyProgress(r.ctx, n)
		case *mcp.LoggingMessageParams:
			// ServerSession.Log applies the client's level; the request's ctx routes it.
			err = r.ss.Log(r.ctx, n)
		}
		if err != nil {
			r.s.log.Debug("mcp/server: relayed notification not sent", "error", err)
		}
	}
}

// close stops relaying: the senders write what they hold, then nothing more is sent.
func (r *callRelay) close() {
	r.mu.Lock()
	r.closed = true
	out, done, dropped := r.out, r.done, r.dropped
	r.mu.Unlock()
	if out != nil {
		close(out)
		<-done
	}
	r.closeHold()
	if dropped > 0 {
		r.s.log.Debug("mcp/server: relayed notifications dropped (the client was slower than the server)", "dropped", dropped)
	}
}
