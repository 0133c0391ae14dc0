package upstream

import (
	"context"
	"io"
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
