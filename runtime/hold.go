package runtime

import (
	"context"
	"time"
)

// HoldObserver is told, while a call waits in its approval hold (POL-3), how long it
// has waited and the bound of the wait; first when the hold starts, then at every read
// of the store and at least every ApprovalPoll (a hold woken by the store's wake-ups
// reads it far less often). It runs on the caller's goroutine and must return quickly. The MCP
// server uses it to send progress notifications, so a client sees a held call is alive.
type HoldObserver func(waited, bound time.Duration)

type holdObserverKey struct{}

// WithHoldObserver returns a context whose calls report their approval hold to fn.
func WithHoldObserver(ctx context.Context, fn HoldObserver) context.Context {
	return context.WithValue(ctx, holdObserverKey{}, fn)
}

func holdObserver(ctx context.Context) HoldObserver {
	fn, _ := ctx.Value(holdObserverKey{}).(HoldObserver)
	return fn
}
