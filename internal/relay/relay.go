// Package relay carries, in the context of one tool call, where the notifications an
// adapter's tool receives during the call go (issue 15, point 3): the MCP server puts
// a [Sink] for the calling client into the request's context, the pipeline passes the
// context to the tool unchanged, and the MCP client adapter (mcp/upstream) relays what
// the upstream server reports about the call — progress, log lines — to it.
//
// Everything a Sink receives from an adapter was written by a remote server: it is
// external_untrusted data for the client to show, never text the platform speaks.
// Nothing of it may reach an outcome's message (RT-7).
//
// relay imports only the standard library; it must never import the runtime, the mcp
// packages or a store.
package relay

import "context"

// Sink receives, for one call, what the server behind the called tool reports. Its
// methods are called from the adapter's notification goroutine: they must not block
// (a sink drops what it cannot send at once) and must be safe for concurrent use.
// After the call returned, they may still be called and must do nothing.
type Sink interface {
	// WantsProgress reports whether the client asked for progress of the call (it sent
	// a progressToken): only then is the upstream asked for progress.
	WantsProgress() bool
	// Progress relays the upstream's progress: progress so far, total (0: unknown) and
	// an optional message, the upstream's text.
	Progress(progress, total float64, message string)
	// Log relays one log line of the upstream: an MCP logging level ("debug" ...
	// "emergency"), the upstream's logger name and its data (any JSON value, the
	// upstream's).
	Log(level, logger string, data any)
	// Client names the client connection the call came from (a comparable value):
	// a log line, which says nothing about the call it belongs to, is relayed only
	// when every call in flight on an upstream connection comes from one client.
	Client() any
}

type key struct{}

// With returns a context whose tool calls report to s.
func With(ctx context.Context, s Sink) context.Context {
	return context.WithValue(ctx, key{}, s)
}

// From returns the sink of ctx, or nil.
func From(ctx context.Context) Sink {
	s, _ := ctx.Value(key{}).(Sink)
	return s
}
