package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/toolgen/toolgen/runtime/store"
)

// TestRelaxedInsertRestoresFull: a relaxed insert (a record-once read row) commits with
// synchronous=NORMAL on the relaxed connection, and the writer connection stays FULL —
// also after an insert that met an existing key — so no watermark or settle ever
// commits without fsync.
func TestRelaxedInsertRestoresFull(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	full := func(when string) {
		t.Helper()
		var mode int
		if err := s.write.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if mode != 2 {
			t.Fatalf("%s: the writer's synchronous is %d, want 2 (FULL)", when, mode)
		}
	}
	full("after Open")
	var relaxed int
	if err := s.relaxed.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&relaxed); err != nil || relaxed != 1 {
		t.Fatalf("the relaxed connection's synchronous is %d (%v), want 1 (NORMAL)", relaxed, err)
	}
	p := store.InsertRecordOnce(store.Call{Key: "k1", Tenant: "t", Tool: "demo.read", Decision: store.DecisionAllow},
		store.SettleSucceeded([]byte(`{"status":"succeeded"}`)))
	inv, inserted, err := s.InvocationInsert(ctx, p)
	if err != nil || !inserted || inv.Key != "k1" || inv.Status != store.StatusSucceeded {
		t.Fatalf("relaxed insert: %+v, %v, %v", inv, inserted, err)
	}
	full("after a relaxed insert")
	if again, inserted, err := s.InvocationInsert(ctx, p); err != nil || inserted || again.ID != inv.ID {
		t.Fatalf("relaxed insert of an existing key: %+v, %v, %v; want the existing row", again, inserted, err)
	}
	full("after a relaxed insert that met its key")
	if got, err := s.InvocationGetByKey(ctx, "k1"); err != nil || got.ID != inv.ID {
		t.Fatalf("the relaxed row is not readable: %v", err)
	}
}
