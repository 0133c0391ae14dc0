package host

import (
	"context"
	"fmt"
	"time"
)

// epochPoll is how often a started host looks for forced epochs in the store.
const epochPoll = time.Second

// watchForcedEpochs applies the forced epochs Operator.ForceEpoch records (in this or
// another process) to this host's running sessions: the catalog history is the
// channel, so the operator's command needs no connection to the server. Epochs
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
				n := h.reg.ForceEpochServer("mcp." + ch.ServerID + ".")
				h.log.Warn("forced epoch applied: running sessions re-pinned to the server's current tools",
					"server", ch.ServerID, "sessions", n, "history_id", ch.ID)
			}
		}
	}()
	return nil
}
