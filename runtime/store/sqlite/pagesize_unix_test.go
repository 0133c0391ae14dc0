//go:build unix

package sqlite

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// BenchmarkRecordPageSize is a read call's record (a record-once insert, its events
// and indexes, the store's background checkpoints) on a new file (pageSize) and on a
// file of SQLite's default 4 KiB pages, as the store created before, after 20,000
// records, for a small result and one of 2 KiB. cpu-us/op is the process's CPU per
// record, the checkpoints' included.
func BenchmarkRecordPageSize(b *testing.B) {
	for _, result := range []int{100, 2000} {
		for _, file := range []struct {
			name string
			open func(b *testing.B) *Store
		}{
			{"new", func(b *testing.B) *Store { return newTestStore(b) }},
			{"4KiB", func(b *testing.B) *Store {
				s, err := Open(b.Context(), olderFile(b, 4096))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				return s
			}},
		} {
			b.Run("result="+strconv.Itoa(result)+"/file="+file.name, func(b *testing.B) {
				s := file.open(b)
				text := `{"content":[{"type":"text","text":"` + strings.Repeat("x", result) + `"}]}`
				record := func(key string) store.InsertParams {
					run := "s-2ABCDEFGHIJKLMNOPQRSTUVWXYZ234567ABCDEFGH" // a minted session's length
					return store.InsertRecordOnce(store.Call{Key: "t:" + run + ":" + key, Tenant: "t", SessionID: run, RunID: run,
						CallID: key, Tool: "lookup.get", Args: []byte(`{"key":"` + key + `"}`), ArgsHash: key},
						store.SettleSucceeded([]byte(text)))
				}
				for i := range 20000 {
					if _, _, err := s.InvocationInsert(b.Context(), record("before-"+strconv.Itoa(i))); err != nil {
						b.Fatal(err)
					}
				}
				cpu := processCPU(b)
				for i := 0; b.Loop(); i++ {
					if _, _, err := s.InvocationInsert(b.Context(), record(strconv.Itoa(i))); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64((processCPU(b)-cpu).Microseconds())/float64(b.N), "cpu-us/op")
			})
		}
	}
}

// processCPU is the CPU time this process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
