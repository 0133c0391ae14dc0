package postgres

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// BenchmarkWakeTriggerCost: what migration 010's notifications cost the calls
// themselves. Each op is one call of the write-idempotent shape (an INSERT RUNNING and
// a fenced settle: two commits, each writing an event), by 1 or 16 callers, on:
//
//   - no-010: the schema before migration 010 (no wake-up triggers);
//   - 010-unwatched: with 010, nobody waiting (the events' trigger finds no
//     registration and notifies nothing);
//   - 010-watched: with 010 and a stream of every tenant's events open (a registered
//     'e*'): every commit notifies, and notifying commits serialize on PostgreSQL's
//     notification lock.
//
// Run it with
//
//	TOOLGEN_PG_DSN=... go test -run XXX -bench BenchmarkWakeTriggerCost -benchtime 5s -count 3 ./runtime/store/postgres/
func BenchmarkWakeTriggerCost(b *testing.B) {
	ctx := context.Background()
	open := func(b *testing.B) *Store {
		s := newTestStore(b)
		return reopenB(b, s, WithMaxConns(16))
	}
	before := open(b)
	if err := before.migrateDown(ctx, 9); err != nil {
		b.Fatal(err)
	}
	unwatched, watched := open(b), open(b)
	sub := watched.Subscribe(store.EventsTopic(""))
	defer sub.Close()
	<-sub.Ready()
	go func() { // keep the subscription drained, as a stream would
		for range sub.C() {
		}
	}()
	var seq atomic.Int64
	for _, callers := range []int{1, 16} {
		for _, c := range []struct {
			name string
			s    *Store
		}{{"no-010", before}, {"010-unwatched", unwatched}, {"010-watched", watched}} {
			b.Run(fmt.Sprintf("%s/callers-%d", c.name, callers), func(b *testing.B) {
				call := func() {
					n := seq.Add(1)
					inv, _, err := c.s.InvocationInsert(ctx, store.InsertParams{Key: fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), n),
						Tenant: fmt.Sprintf("tenant-%d", n%10), Tool: "demo.put", ToolVersion: 1, Idempotency: store.IdempotencyIdempotent,
						Decision: store.DecisionAllow, Status: store.StatusRunning, Owner: "w", Lease: time.Minute})
					if err != nil {
						b.Error(err)
						return
					}
					if err := c.s.InvocationSettleIfLeased(ctx, inv.Fence(), store.Settlement{Status: store.StatusSucceeded,
						Outcome: []byte(`{"ok":true}`)}); err != nil {
						b.Error(err)
					}
				}
				if callers == 1 {
					for range b.N {
						call()
					}
					return
				}
				b.SetParallelism(callers / max(1, goruntime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						call()
					}
				})
			})
		}
	}
}

func reopenB(b *testing.B, s *Store, opts ...Option) *Store {
	b.Helper()
	other, err := Open(context.Background(), dsn(b), append([]Option{WithSchema(s.schema)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { other.Close() })
	return other
}
