package storetest

import (
	"testing"

	"github.com/toolgen/toolgen/runtime/store"
)

// testInsertRelaxedRoundTrips: a relaxed terminal row (a record-once read, whose loss
// to a power failure only means the read runs again) is written and read like any
// other, and a relaxed insert of an existing key returns the existing row.
func testInsertRelaxedRoundTrips(t *testing.T, e *env) {
	p := params(func(p *row) {
		p.Status, p.Outcome, p.Relaxed = store.StatusSucceeded, []byte(`{"status":"succeeded"}`), true
		p.Idempotency = store.IdempotencyIdempotent
	})
	inv, inserted, err := e.s.InvocationInsert(e.ctx, p)
	if err != nil || !inserted {
		t.Fatalf("relaxed insert: inserted %v, %v", inserted, err)
	}
	got := e.get(t, inv.ID)
	if got.Status != store.StatusSucceeded || string(got.Outcome) != `{"status":"succeeded"}` || got.Key != p.Key {
		t.Errorf("relaxed row read back as %+v", got)
	}
	again, inserted, err := e.other.InvocationInsert(e.ctx, p)
	if err != nil || inserted || again.ID != inv.ID {
		t.Errorf("relaxed insert of an existing key: %+v, inserted %v, %v; want the existing row", again, inserted, err)
	}
	// A normal write after it works (the relaxed commit left nothing behind).
	e.insert(t)
}
