//go:build unix

package sqlite

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// BenchmarkSteadyRecords is one caller recording read calls at a steady rate, as a
// gateway under steady load does: for each call, its prior calls read and its
// record-once insert, with keys, arguments and sessions as random as an agent's, one
// call every 1/TOOLGEN_BENCH_RATE seconds (default 800; 0: as fast as it can) for
// b.N calls (run it with -benchtime 20000x). It shows the WAL's cycle under commits
// that never pause (checkpoint.go): wal-frames is the most the WAL held (its file is
// reused, not shortened, when it starts over), waits/1k the records whose insert took
// over 2 ms per thousand, under that cycle mostly the commits that ran SQLite's
// backstop checkpoint, max-wait-ms the longest insert. cpu-us/op is the process's CPU
// per call, the background checkpoints included.
func BenchmarkSteadyRecords(b *testing.B) {
	rate := 800
	if v := os.Getenv("TOOLGEN_BENCH_RATE"); v != "" {
		var err error
		if rate, err = strconv.Atoi(v); err != nil || rate < 0 {
			b.Fatalf("TOOLGEN_BENCH_RATE=%q: want calls per second, 0 for no pause", v)
		}
	}
	var every time.Duration
	if rate > 0 {
		every = time.Second / time.Duration(rate)
	}
	s := newTestStore(b)
	ctx := b.Context()
	call := func(i int) store.InsertParams {
		sum := sha256.Sum256(strconv.AppendInt(nil, int64(i), 10))
		h := hex.EncodeToString(sum[:])
		session := "s-" + h[:9] // a minted session per call: the index's leaf is random too
		return store.InsertRecordOnce(store.Call{Key: "t:" + session + ":" + h[:16], Tenant: "t", SessionID: session,
			RunID: session, CallID: "auto-" + h[:16], Tool: "lookup.get", Args: []byte(`{"key":"` + h[16:28] + `"}`),
			ArgsHash: h[32:]},
			store.SettleSucceeded([]byte(`{"content":[{"type":"text","text":"value of `+h[16:28]+`"}],"structured":{"key":"`+h[16:28]+`"}}`)))
	}
	var waits int
	var longest time.Duration
	cpu, next := processCPU(b), time.Now()
	for i := 0; b.Loop(); i++ {
		p := call(i)
		if _, err := s.InvocationPriorCalls(ctx, store.PriorCallsParams{Tenant: p.Tenant, RunID: p.RunID, ArgsHash: p.ArgsHash, CallIDBase: p.CallID}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, _, err := s.InvocationInsert(ctx, p); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		if took > 2*time.Millisecond {
			waits++
		}
		longest = max(longest, took)
		if every > 0 {
			next = next.Add(every)
			time.Sleep(time.Until(next))
		}
	}
	b.ReportMetric(float64((processCPU(b)-cpu).Microseconds())/float64(b.N), "cpu-us/op")
	b.ReportMetric(float64(walPages(b, s)), "wal-frames")
	b.ReportMetric(1000*float64(waits)/float64(b.N), "waits/1k")
	b.ReportMetric(float64(longest.Microseconds())/1000, "max-wait-ms")
}
