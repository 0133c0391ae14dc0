package postgres

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// BenchmarkWakeTriggerCost: what migration 010's notifications cost the calls
// themselves. A call is the write-idempotent shape (an INSERT RUNNING and a fenced
// settle: two commits, each writing an event), made by 1 or 16 callers, on:
//
//   - no-010: the schema before migration 010 (no wake-up triggers);
//   - 010-unwatched: with 010, nobody waiting (the events' trigger finds no
//     registration and notifies nothing);
//   - 010-watched: with 010 and a stream of every tenant's events open (a registered
//     'e*'): every commit notifies, and notifying commits serialize on PostgreSQL's
//     notification lock.
//
// The three run interleaved in one-second slices (A B C, then C B A, ...) until each
// has run TOOLGEN_BENCH_CELL (default 6s), so that load from elsewhere falls on all of
// them alike; each is reported in calls/s. Run it with
//
//	TOOLGEN_PG_DSN=... go test -run XXX -bench BenchmarkWakeTriggerCost -benchtime 1x ./runtime/store/postgres/
func BenchmarkWakeTriggerCost(b *testing.B) {
	ctx := context.Background()
	cell := 6 * time.Second
	if v := os.Getenv("TOOLGEN_BENCH_CELL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		cell = d
	}
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
	configs := []struct {
		name string
		s    *Store
	}{{"no-010", before}, {"010-unwatched", unwatched}, {"010-watched", watched}}
	var seq atomic.Int64
	call := func(s *Store) error {
		n := seq.Add(1)
		inv, _, err := s.InvocationInsert(ctx, store.InsertRunning(store.Call{Key: fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), n),
			Tenant: fmt.Sprintf("tenant-%d", n%10), Tool: "demo.put", ToolVersion: 1, Idempotency: store.IdempotencyIdempotent,
			Decision: store.DecisionAllow}, "w", time.Minute))
		if err != nil {
			return err
		}
		return s.InvocationSettleIfLeased(ctx, inv.Fence(), store.SettleSucceeded([]byte(`{"ok":true}`)))
	}
	// slice runs callers goroutines making calls on s for d; it returns the calls made.
	slice := func(s *Store, callers int, d time.Duration) int64 {
		var calls atomic.Int64
		deadline := time.Now().Add(d)
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				for time.Now().Before(deadline) {
					if err := call(s); err != nil {
						b.Error(err)
						return
					}
					calls.Add(1)
				}
			})
		}
		wg.Wait()
		return calls.Load()
	}
	for _, callers := range []int{1, 16} {
		b.Run(fmt.Sprintf("callers-%d", callers), func(b *testing.B) {
			for range b.N {
				calls := make([]int64, len(configs))
				took := make([]time.Duration, len(configs))
				order := []int{0, 1, 2}
				for took[0] < cell {
					for _, i := range order {
						start := time.Now()
						calls[i] += slice(configs[i].s, callers, time.Second)
						took[i] += time.Since(start)
					}
					slices.Reverse(order)
				}
				for i, c := range configs {
					b.ReportMetric(float64(calls[i])/took[i].Seconds(), c.name+"-calls/s")
				}
			}
		})
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
