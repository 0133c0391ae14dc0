package upstream

import (
	"context"
	"io"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SetStdioTap makes the stdio transport copy every byte written to the server to w.
func SetStdioTap(o *Options, w io.Writer) { o.stdioTap = w }

// RefreshGen returns the number of completed refreshes (the first listing included).
func RefreshGen(u *Upstream) uint64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.gen
}

// WaitRefresh waits until more than after refreshes have completed.
func WaitRefresh(ctx context.Context, u *Upstream, after uint64) error {
	for {
		u.mu.Lock()
		gen, ch := u.gen, u.genCh
		u.mu.Unlock()
		if gen > after {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// SetStdioStarted makes the stdio transport tell f the pid of every server it starts.
func SetStdioStarted(o *Options, f func(pid int)) { o.stdioStarted = f }

// SetClock gives the reconnection loop c as its clock.
func SetClock(o *Options, c interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}) {
	o.clock = c
}

// SetDialer makes the reconnection loop connect with f (also with Options.Transport).
func SetDialer(o *Options, f func() (mcp.Transport, error)) { o.dialer = f }

// Backoff is the wait before a reconnection attempt at level.
func Backoff(level int, min, max time.Duration) time.Duration { return backoff(level, min, max) }
