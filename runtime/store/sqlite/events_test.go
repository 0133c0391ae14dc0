package sqlite

import (
	"errors"
	"testing"

	"github.com/toolgen/toolgen/runtime/store"
)

// A PostgreSQL cursor (TX-ID) would select nothing here, forever: it is refused.
func TestEventList_RefusesTransactionCursor(t *testing.T) {
	s := newTestStore(t)
	if _, err := s.EventList(t.Context(), store.EventFilter{After: store.EventCursor{TX: 5, ID: 1}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("EventList after 5-1: %v, want ErrInvalid", err)
	}
}
