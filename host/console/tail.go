package console

import (
	"context"
	"errors"
	"sync"

	"github.com/toolgen/toolgen/runtime/store"
)

// tailCursor knows the event stream's latest cursor, so a page follows the stream from
// where it was rendered (the stream from the start would replay the store's history).
// It is found once by a search over cursors — a few reads however long the stream is —
// and then moved forward by reading what came after it.
type tailCursor struct {
	st    store.Events
	mu    sync.Mutex
	known bool
	cur   store.EventCursor
}

// tailPages bounds the pages one get reads forward; the rest is read by the next.
const tailPages = 16

func (t *tailCursor) get(ctx context.Context) (store.EventCursor, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.known {
		c, err := LastEventCursor(ctx, t.st)
		if err != nil {
			return store.EventCursor{}, err
		}
		t.cur, t.known = c, true
	}
	for range tailPages {
		evs, err := t.st.EventList(ctx, store.EventFilter{After: t.cur, Limit: 1000})
		if err != nil {
			return store.EventCursor{}, err
		}
		if len(evs) > 0 {
			t.cur = evs[len(evs)-1].Cursor
		}
		if len(evs) < 1000 {
			break
		}
	}
	return t.cur, nil
}

// LastEventCursor returns the cursor of the store's latest event (the zero cursor when
// there is none), by binary search: cursors are ordered (TX, ID), and "is there an
// event after c?" is monotone in c. A driver refusing a cursor it never formats
// (ErrInvalid: a SQLite store asked about a transaction id) counts as "none after".
func LastEventCursor(ctx context.Context, st store.Events) (store.EventCursor, error) {
	after := func(c store.EventCursor) (*store.Event, error) {
		evs, err := st.EventList(ctx, store.EventFilter{After: c, Limit: 1})
		switch {
		case errors.Is(err, store.ErrInvalid):
			return nil, nil
		case err != nil:
			return nil, err
		case len(evs) == 0:
			return nil, nil
		}
		return &evs[0], nil
	}
	// largest returns the largest v in [lo, ...) with has(v) true, given has(lo).
	largest := func(lo int64, has func(int64) (bool, error)) (int64, error) {
		hi := max(lo, 1)
		for {
			ok, err := has(hi)
			if err != nil {
				return 0, err
			}
			if !ok {
				break
			}
			lo, hi = hi, hi*2
			if hi <= 0 { // overflow
				return lo, nil
			}
		}
		// has(lo) is true, has(hi) false.
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			ok, err := has(mid)
			if err != nil {
				return 0, err
			}
			if ok {
				lo = mid
			} else {
				hi = mid
			}
		}
		return lo, nil
	}
	first, err := after(store.EventCursor{})
	if err != nil || first == nil {
		return store.EventCursor{}, err
	}
	// The last event's transaction: the largest TX with an event at or past (TX, 0).
	tx, err := largest(first.Cursor.TX, func(tx int64) (bool, error) {
		if tx == first.Cursor.TX {
			return true, nil
		}
		e, err := after(store.EventCursor{TX: tx})
		return e != nil, err
	})
	if err != nil {
		return store.EventCursor{}, err
	}
	// Within it, the largest id after which an event remains; that event is the last.
	start, err := after(store.EventCursor{TX: tx})
	if err != nil || start == nil {
		return store.EventCursor{}, err
	}
	id, err := largest(0, func(id int64) (bool, error) {
		if id == 0 {
			return true, nil
		}
		e, err := after(store.EventCursor{TX: tx, ID: id})
		return e != nil, err
	})
	if err != nil {
		return store.EventCursor{}, err
	}
	last, err := after(store.EventCursor{TX: tx, ID: id})
	if err != nil || last == nil {
		return store.EventCursor{}, err
	}
	return last.Cursor, nil
}
