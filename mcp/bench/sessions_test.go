package bench

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkSessionsInStore measures what keeping the session-based revisions' MCP
// sessions in the store costs a read call (issue 16: within 10 %): the same 2025-11-25
// client code calling one toolgen whose sessions are in the store (every replica serves
// them) and one whose sessions are in its process only, one caller, in interleaved
// slices of one run.
//
//	go test -run XXX -bench BenchmarkSessionsInStore -benchtime 1x -v ./mcp/bench/
func BenchmarkSessionsInStore(b *testing.B) {
	r := newRig(b)
	ctx := context.Background()
	sides := []*side{r.toolgen, r.memorySessions}
	cell, slice := durationEnv(b, "TOOLGEN_BENCH_CELL", defaultCell), 500*time.Millisecond
	for range b.N {
		var lat [2][]time.Duration
		for _, s := range sides { // warm both
			if _, err := runSlice(ctx, s, 1, 100*time.Millisecond, nil); err != nil {
				b.Fatal(err)
			}
		}
		for range int(cell / slice) {
			for i, s := range sides {
				m, err := runSlice(ctx, s, 1, slice, nil)
				if err != nil {
					b.Fatal(err)
				}
				lat[i] = append(lat[i], m.lat...)
			}
		}
		p50 := func(l []time.Duration) time.Duration { slices.Sort(l); return l[len(l)/2] }
		store, memory := p50(lat[0]), p50(lat[1])
		ratio := float64(store) / float64(memory)
		b.Logf("one caller, %s per side in %s slices: sessions in the store p50 %d µs (%d calls), in memory p50 %d µs (%d calls): %+.1f %%",
			cell, slice, store.Microseconds(), len(lat[0]), memory.Microseconds(), len(lat[1]), (ratio-1)*100)
		b.ReportMetric(float64(store.Microseconds()), "store-p50-us")
		b.ReportMetric(float64(memory.Microseconds()), "memory-p50-us")
		b.ReportMetric((ratio-1)*100, "pct-slower")
	}
}

// TestSessionsInStoreSmoke: both sides of BenchmarkSessionsInStore make new calls.
func TestSessionsInStoreSmoke(t *testing.T) {
	r := newRig(t)
	for _, s := range []*side{r.toolgen, r.memorySessions} {
		for range 3 {
			if err := s.call(context.Background()); err != nil {
				t.Fatal(fmt.Errorf("%s: %w", s.name, err))
			}
		}
	}
}
