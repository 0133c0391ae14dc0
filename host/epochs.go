package host

import (
	"context"
	"fmt"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// epochPoll is how often a started host reads the catalog history for forced epochs
// when its store carries no wake-ups of other processes' writes (SQLite, or
// PostgreSQL while its listener is down); with them the host reads it when a catalog
// change is committed, and at the store's fallback interval otherwise.
const epochPoll = time.Second

// watchForcedEpochs applies the forced epochs Operator.ForceEpoch records (in this or
// another process) to the sessions' pinned catalogs, in the store and in this host's
// memory: the catalog history is the channel, so the operator's command needs no
// connection to the server. Every serving process applies each epoch; they write the
// same pins, so applying it twice changes nothing. Epochs
// recorded before the call are past: it reads the history once before it returns,
// then, in a goroutine until ctx ends, again whenever the store wakes it for a catalog
// change (store.CatalogTopic) or store.WaitInterval has passed.
func (h *Host) watchForcedEpochs(ctx context.Context) error {
	waker, poll := store.WakerOf(h.st), epochPoll
	if h.cfg.Test.EpochPoll > 0 {
		poll = h.cfg.Test.EpochPoll
	}
	// Subscribed before the first read: a change committed after it wakes the watcher.
	sub := waker.Subscribe(store.CatalogTopic())
	history, err := h.st.CatalogHistoryList(ctx, "")
	if err != nil {
		sub.Close()
		return fmt.Errorf("reading the catalog history: %w", err)
	}
	var seen int64
	for _, ch := range history {
		seen = max(seen, ch.ID)
	}
	go func() {
		defer sub.Close()
		timer := time.NewTimer(store.WaitInterval(waker, poll))
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-sub.C():
				timer.Stop()
			case <-timer.C:
			}
			timer.Reset(store.WaitInterval(waker, poll))
			history, err := h.st.CatalogHistoryList(ctx, "")
			if err != nil {
				if ctx.Err() == nil {
					h.log.Error("reading the catalog history for forced epochs", "err", err)
				}
				continue
			}
			for _, ch := range history {
				if ch.ID <= seen {
					continue
				}
				seen = ch.ID
				if ch.Change != ChangeForcedEpoch {
					continue
				}
				n, err := h.reg.ForceEpochServer(ctx, "mcp."+ch.ServerID+".")
				if err != nil {
					// The store could not be written: the next read does not see this
					// entry again, so say so loudly; the operator forces the epoch again.
					h.log.Error("forced epoch not applied to the stored pins", "server", ch.ServerID, "history_id", ch.ID, "err", err)
					continue
				}
				h.log.Warn("forced epoch applied: running sessions re-pinned to the server's current tools",
					"server", ch.ServerID, "sessions", n, "history_id", ch.ID)
			}
		}
	}()
	return nil
}
