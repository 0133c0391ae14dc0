package storetest

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/runtime/store"
)

// BenchPriorCalls measures InvocationPriorCalls on s, the read every call makes before
// it decides (its identity and the breaker's counter), for a derived call id, under a
// context that can end, as an agent's request context can. The run holds a thousand
// recorded calls of other arguments. Sub-benchmarks:
//   - first: arguments the run has not seen (the counter is zero, there is no
//     generation), what an agent's calls mostly are;
//   - repeat: a call with three settled generations before it.
//
// A driver's tests call it from a Benchmark function on a fresh store:
//
//	go test -run XXX -bench BenchmarkPriorCalls ./runtime/store/sqlite/
func BenchPriorCalls(b *testing.B, s store.Store) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	insert := func(argsHash, callID string) {
		p := params(func(r *row) {
			r.RunID, r.Step, r.ArgsHash, r.CallID, r.Status = "run-bench", 0, argsHash, callID, store.StatusSucceeded
		})
		if _, _, err := s.InvocationInsert(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 1000 {
		insert("h-other-"+strconv.Itoa(i), "auto-other-"+strconv.Itoa(i))
	}
	for _, callID := range []string{"auto-rep", "auto-rep-1", "auto-rep-2"} {
		insert("h-rep", callID)
	}
	for _, c := range []struct{ name, argsHash, base string }{
		{"first", "h-first", "auto-first"},
		{"repeat", "h-rep", "auto-rep"},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := store.PriorCallsParams{Tenant: "tenant-a", RunID: "run-bench", ArgsHash: c.argsHash, CallIDBase: c.base}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.InvocationPriorCalls(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchInsert measures InvocationInsert on s, the write every call makes once: a
// RUNNING row (a write call's step 7) and a record-once row (a read call's step 13,
// with an outcome of a few hundred bytes), each under a fresh key.
//
//	go test -run XXX -bench BenchmarkInsert ./runtime/store/postgres/
func BenchInsert(b *testing.B, s store.Store) {
	b.Helper()
	ctx := context.Background()
	outcome := []byte(`{"status":"succeeded","call_id":"c","content":[{"type":"text","text":"` +
		strings.Repeat("x", 300) + `"}]}`)
	for _, c := range []struct {
		name string
		mod  func(*row)
	}{
		{"running", running("worker-bench", longLease)},
		{"record-once", func(r *row) {
			r.Status, r.Relaxed, r.Idempotency = store.StatusSucceeded, true, store.IdempotencyIdempotent
			r.Outcome = json.RawMessage(outcome)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				p := params(c.mod, func(r *row) { r.Key = c.name + "-" + strconv.Itoa(i) + "-" + randomHex(4) })
				if _, inserted, err := s.InvocationInsert(ctx, p); err != nil || !inserted {
					b.Fatal(inserted, err)
				}
			}
		})
	}
}
