package runtime

import (
	"context"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// storeWait is the wait between two reads of a waiter on the store (the approval
// hold, awaitRecorded): until the store wakes it for its topic, or the fallback
// interval passes (store.WaitInterval: poll without wake-ups of other processes, the
// store's fallback with them), or its context ends. A hold observer is told of the
// hold every poll meanwhile, as it was when the hold polled, without a read.
type storeWait struct {
	waker   store.Waker
	sub     *store.Subscription
	poll    time.Duration
	timer   *time.Timer
	ticker  *time.Ticker // observer ticks; nil without an observer
	observe func()       // no-op without an observer
}

func newStoreWait(waker store.Waker, sub *store.Subscription, poll time.Duration, obs HoldObserver, bound time.Duration) *storeWait {
	w := &storeWait{waker: waker, sub: sub, poll: poll, timer: time.NewTimer(time.Hour), observe: func() {}}
	w.timer.Stop()
	if obs != nil {
		start := time.Now()
		w.observe = func() { obs(time.Since(start), bound) }
		w.ticker = time.NewTicker(poll)
	}
	return w
}

// wait blocks until the next read is due; false when ctx ended first.
func (w *storeWait) wait(ctx context.Context) bool {
	d := store.WaitInterval(w.waker, w.poll)
	w.timer.Reset(d)
	defer w.timer.Stop()
	var ticks <-chan time.Time
	if w.ticker != nil && d > w.poll {
		// reads are further apart than the observer's ticks: tick between them
		ticks = w.ticker.C
	}
	for {
		select {
		case <-ctx.Done():
			return false
		case <-w.sub.C():
			return true
		case <-w.timer.C:
			return true
		case <-ticks:
			w.observe()
		}
	}
}

func (w *storeWait) stop() {
	w.timer.Stop()
	if w.ticker != nil {
		w.ticker.Stop()
	}
}
