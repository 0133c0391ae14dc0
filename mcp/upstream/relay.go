//lint:file-ignore SA1019 logging, roots and sampling are deprecated at 2026-07-28 (SEP-2577) but live in the 2025 revisions toolrun still serves and relays

package upstream

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/internal/relay"
)

// Upstream notifications relayed to the calling client (issue 15, point 3).
//
// A call whose context carries a relay.Sink (the MCP server puts one there for the
// client that made the request) is tracked while it is in flight:
//
//   - Progress. When the client asked for progress (it sent a progressToken), the
//     adapter sends its own token upstream — random, one per call, never the client's —
//     and relays each notifications/progress carrying it to that call's sink, which
//     speaks to the client under the client's own token. So a client can keep a long
//     upstream call alive past its request timeout. The message is bounded to one line.
//     The go-sdk client runs notification handlers from a queue that may lag behind the
//     result: a notification it hands over after the call returned is dropped (nothing
//     may follow a result), so the last ones of a call can be missing.
//   - Log lines. notifications/message says nothing about the request it belongs to
//     (a server may log on its own at any time), and one upstream connection serves
//     every caller of the server. A line is therefore relayed only when every call in
//     flight on the connection comes from one client (relay.Sink.Client), to that
//     client; otherwise, and when no call is in flight, it is only logged here, at debug
//     level, so that no client ever sees what another client's call caused. The client's
//     logging/setLevel is applied by the MCP server. After connecting the adapter asks a
//     server that offers logging for Options.LogLevel and above (2025-11-25 and older;
//     under 2026-07-28 the level travels per request and is not asked for).
//
// Everything relayed is the upstream's text: untrusted (MCP-3). It goes to the client
// as notifications labelled external_untrusted by the sink, bounded here, and never
// into a call's result or an outcome's message (RT-7).

// DefaultLogLevel is the level asked of a server that offers logging when
// Options.LogLevel is empty.
const DefaultLogLevel = "info"

// Bounds of what is relayed.
const (
	maxRelayedLogBytes = 16 << 10 // the JSON of one log line's data
	maxLoggerBytes     = 128
)

// mcpLevels are the logging levels of MCP (RFC 5424's), lowest first.
var mcpLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

func knownLevel(l string) bool {
	for _, k := range mcpLevels {
		if k == l {
			return true
		}
	}
	return false
}

// inflight is one call whose client hears the upstream's notifications.
type inflight struct {
	sink relay.Sink
	seq  uint64 // start order: a log line goes to the oldest call of its client
}

// track registers a call of sink until untrack is called; token is the progress token
// to send upstream for it.
func (u *Upstream) track(sink relay.Sink) (token string, untrack func()) {
	token = "toolgen-" + rand.Text()
	u.relayMu.Lock()
	u.relaySeq++
	u.calls[token] = &inflight{sink: sink, seq: u.relaySeq}
	u.relayMu.Unlock()
	return token, func() {
		u.relayMu.Lock()
		delete(u.calls, token)
		u.relayMu.Unlock()
	}
}

// onProgress relays a notifications/progress to the call whose token it carries; a
// token of no call in flight (a late or forged notification) is dropped.
func (u *Upstream) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if req == nil || req.Params == nil {
		return
	}
	p := req.Params
	tok, ok := p.ProgressToken.(string)
	if !ok {
		return
	}
	u.relayMu.Lock()
	c := u.calls[tok]
	u.relayMu.Unlock()
	if c == nil || !c.sink.WantsProgress() {
		return
	}
	msg := ""
	if p.Message != "" {
		msg = oneLine(p.Message) // the upstream's text: untrusted, bounded
	}
	c.sink.Progress(p.Progress, p.Total, msg)
}

// onLog relays a notifications/message to the one client every call in flight comes
// from (see the comment at the top of this file).
func (u *Upstream) onLog(_ context.Context, req *mcp.LoggingMessageRequest) {
	if req == nil || req.Params == nil {
		return
	}
	p := req.Params
	u.relayMu.Lock()
	var to *inflight
	clients, n := 0, len(u.calls)
	for _, c := range u.calls {
		switch {
		case to == nil:
			to, clients = c, 1
		case c.sink.Client() != to.sink.Client():
			clients++
		case c.seq < to.seq:
			to = c
		}
	}
	u.relayMu.Unlock()
	if to == nil || clients != 1 {
		u.log.Debug("upstream log line not relayed: no call, or calls of several clients, in flight", "calls_in_flight", n, "level", string(p.Level))
		return
	}
	level := string(p.Level)
	if !knownLevel(level) {
		level = "info"
	}
	logger := u.domain + "." + u.id
	if p.Logger != "" {
		l := oneLine(p.Logger)
		if len(l) > maxLoggerBytes {
			l = l[:maxLoggerBytes]
		}
		logger += "/" + strings.ToValidUTF8(l, "")
	}
	// The upstream's data, untrusted: relayed as it is when small, else as its text cut.
	data := p.Data
	if raw, err := json.Marshal(data); err != nil {
		data = "[log data that cannot be encoded]"
	} else if len(raw) > maxRelayedLogBytes {
		data = bound(string(raw[:maxRelayedLogBytes])) + "\n[... cut ...]"
	}
	to.sink.Log(level, logger, data)
}

// askLogs asks a server that offers logging, on a revision where the level is a session
// state, for Options.LogLevel and above. A refusal only costs the log lines.
func (u *Upstream) askLogs(ctx context.Context, cs *mcp.ClientSession) {
	level := u.opts.LogLevel
	ir := cs.InitializeResult()
	if level == "off" || ir == nil || ir.Capabilities == nil || ir.Capabilities.Logging == nil || ir.ProtocolVersion >= ProtocolStateless {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := safeCall(ctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: mcp.LoggingLevel(level)})
	}); err != nil {
		u.log.Warn("the server refused logging/setLevel; its log lines may not reach callers", "level", level, "error", err)
	}
}

// askLogsOf asks for the log lines of one request on 2026-07-28, where the level is no
// session state but travels in each request's _meta.
func (u *Upstream) askLogsOf(params *mcp.CallToolParams) {
	if u.opts.LogLevel == "off" || u.ProtocolVersion() < ProtocolStateless {
		return
	}
	if params.Meta == nil {
		params.Meta = mcp.Meta{}
	}
	params.Meta[mcp.MetaKeyLogLevel] = u.opts.LogLevel
}
