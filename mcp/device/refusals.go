package device

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Defaults of the refusal audit (Options.RefusalWindow, Options.RefusalBurst).
const (
	DefaultRefusalWindow = time.Minute
	DefaultRefusalBurst  = 10
)

// refusals rate-limits and aggregates the audit entries of refused device connections
// (SEC-2, issue 14 finding 17). Anyone who reaches the gateway can be refused, without
// a token, as often as they like; one entry per attempt would let them grow the store
// without bound. So per (device, reason) — the device only when the id is one of the
// operator's files, every unknown id sharing one key, so the keys are a bounded set —
// the first burst refusals of a window are written one by one, as before, and the rest
// are counted and written as one summary entry when the window ends (or the gateway
// closes): at most burst+1 entries per key and window, whatever the rate of attempts,
// and the audit log still tells how many refusals there were.
type refusals struct {
	window time.Duration
	burst  int
	// write appends one audit entry (Gateway.audit).
	write func(ctx context.Context, id string, detail map[string]any)

	mu     sync.Mutex
	open   map[refusalKey]*refusalWindow
	closed bool
	// flushing counts the summaries timers are writing, which close waits for (the
	// store closes after the gateway).
	flushing sync.WaitGroup
}

type refusalKey struct{ device, reason string }

// refusalWindow is one key's current window.
type refusalWindow struct {
	start      time.Time
	written    int // entries written one by one
	suppressed int // refusals counted, not written
	// Samples of what the counted refusals came from, for the summary (bounded).
	remotes, claimed []string
	timer            *time.Timer
}

// maxSamples bounds the remote addresses and claimed ids a summary names.
const maxSamples = 8

func newRefusals(window time.Duration, burst int, write func(context.Context, string, map[string]any)) *refusals {
	if window <= 0 {
		window = DefaultRefusalWindow
	}
	if burst <= 0 {
		burst = DefaultRefusalBurst
	}
	return &refusals{window: window, burst: burst, write: write, open: map[refusalKey]*refusalWindow{}}
}

// admit counts one refusal and reports whether its own entry is to be written now.
// A window of the key that ended without its summary written yet (its timer has not
// run) is summarized first.
func (r *refusals) admit(ctx context.Context, key refusalKey, remote, claimed string) bool {
	now := time.Now()
	r.mu.Lock()
	w := r.open[key]
	var ended *summary
	if w != nil && now.Sub(w.start) >= r.window {
		ended = r.endLocked(key, w, now)
		w = nil
	}
	if w == nil {
		w = &refusalWindow{start: now}
		r.open[key] = w
	}
	writeNow := w.written < r.burst
	if writeNow {
		w.written++
	} else {
		w.suppressed++
		w.remotes = addSample(w.remotes, remote)
		w.claimed = addSample(w.claimed, bound(claimed))
		if w.timer == nil && !r.closed {
			w.timer = time.AfterFunc(w.start.Add(r.window).Sub(now), func() { r.flushWindow(key, w) })
		}
	}
	r.mu.Unlock()
	if ended != nil {
		ended.writeTo(ctx, r)
	}
	return writeNow
}

// flushWindow ends w when its time is up (the timer), unless a later window replaced it.
func (r *refusals) flushWindow(key refusalKey, w *refusalWindow) {
	r.mu.Lock()
	var s *summary
	if r.open[key] == w && !r.closed {
		if s = r.endLocked(key, w, time.Now()); s != nil {
			r.flushing.Add(1)
		}
	}
	r.mu.Unlock()
	if s != nil {
		defer r.flushing.Done()
		s.writeTo(context.Background(), r)
	}
}

// close writes the summary of every open window; refusals after it are written one
// by one up to the burst and counted no further (the process is ending).
func (r *refusals) close() {
	r.mu.Lock()
	r.closed = true
	var out []*summary
	now := time.Now()
	for key, w := range r.open {
		if s := r.endLocked(key, w, now); s != nil {
			out = append(out, s)
		}
	}
	r.mu.Unlock()
	for _, s := range out {
		s.writeTo(context.Background(), r)
	}
	r.flushing.Wait()
}

// endLocked removes w and returns its summary, nil when nothing was counted unwritten.
func (r *refusals) endLocked(key refusalKey, w *refusalWindow, now time.Time) *summary {
	delete(r.open, key)
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.suppressed == 0 {
		return nil
	}
	end := w.start.Add(r.window)
	if now.Before(end) {
		end = now
	}
	return &summary{key: key, n: w.suppressed, start: w.start, end: end, remotes: w.remotes, claimed: w.claimed}
}

type summary struct {
	key              refusalKey
	n                int
	start, end       time.Time
	remotes, claimed []string
}

func (s *summary) writeTo(ctx context.Context, r *refusals) {
	detail := map[string]any{
		"reason": s.key.reason, "summary": true, "count": s.n,
		"window_start": s.start.UTC().Format(time.RFC3339Nano), "window_end": s.end.UTC().Format(time.RFC3339Nano),
		"remote_addrs": s.remotes,
	}
	if s.key.device == "" {
		detail["claimed_ids"] = s.claimed
	}
	r.write(ctx, s.key.device, detail)
}

func addSample(set []string, v string) []string {
	if len(set) >= maxSamples || slices.Contains(set, v) {
		return set
	}
	return append(set, v)
}
