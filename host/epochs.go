package host

import (
	"context"
	"fmt"
	"time"
)

// epochPoll is how often a started host looks for forced epochs in the store.
const epochPoll = time.Second

// watchForcedEpochs applies the forced epochs Operator.ForceEpoch records (in this or
// another process) to the sessions' pinned catalogs, in the store and in this host's
// memory: the catalog history is the channel, so the operator's command needs no
// connection to the server. Every serving process applies each epoch; they write the
// same pins, so applying it twice changes nothing. Epochs
// recorded before the call are past: it reads the history once before it returns,
// then polls it in a goroutine until ctx ends.
func (h *Host) watchForcedEpochs(ctx context.Context) error {
	history, err := h.st.CatalogHistoryList(ctx, "")
	if err != nil {
		return fmt.Errorf("reading the catalog history: %w", err)
	}
	var seen int64
	for _, ch := range history {
		seen = max(seen, ch.ID)
	}
	go func() {
		tick := time.NewTicker(epochPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
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
					// The store could not be written: the next poll does not see this
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
