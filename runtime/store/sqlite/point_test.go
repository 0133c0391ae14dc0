package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/storetest"
)

// TestPointWrite_WaitsUnderItsContext pins what a point write does with its context
// (Store.pointWrite), with another process's writer simulated by a second database
// handle holding the file's write lock:
//   - a point write queued behind another point write of this process leaves when its
//     context ends, at once, and writes nothing;
//   - a point write that holds the point writer (here: waiting for the other writer's
//     lock) is not ended by its context: it writes once the lock is released
//     (busy_timeout bounds that wait). Holding the point writer is the instant that
//     decides: a test that cancelled between that and the statement failed under load
//     when the write still looked at its context there.
func TestPointWrite_WaitsUnderItsContext(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	other, err := sql.Open("sqlite", "file:"+uriEscaper.Replace(s.path)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lock, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			if _, err := lock.ExecContext(context.Background(), "ROLLBACK"); err != nil {
				t.Error(err)
			}
		}
	}
	defer release()

	pending := func(key string) store.InsertParams { return store.InsertPending(store.Call{Key: key, Tenant: "t"}) }
	firstCtx, cancelFirst := context.WithCancel(ctx)
	defer cancelFirst()
	first := make(chan error, 1)
	go func() {
		_, _, err := s.InvocationInsert(firstCtx, pending("first"))
		first <- err
	}()
	for len(s.pointWriter) == 0 { // the first holds the point writer, waiting for the lock
		runtime.Gosched()
	}

	secondCtx, cancelSecond := context.WithCancel(ctx)
	second := make(chan error, 1)
	go func() {
		_, _, err := s.InvocationInsert(secondCtx, pending("second"))
		second <- err
	}()
	cancelSecond()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Fatalf("the queued point write, its context ended: %v, want context.Canceled", err)
	}
	select {
	case err := <-first:
		t.Fatalf("the first point write returned (%v) while the other writer held the lock", err)
	default:
	}

	cancelFirst() // during its wait for the lock: the write goes on
	release()
	if err := <-first; err != nil {
		t.Fatalf("the point write whose context ended while it waited for the lock: %v, want it written", err)
	}
	if _, err := s.InvocationGetByKey(ctx, "first"); err != nil {
		t.Fatalf("the first row: %v", err)
	}
	if _, err := s.InvocationGetByKey(ctx, "second"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the second row, whose write left the queue: %v, want ErrNotFound", err)
	}
	if len(s.pointWriter) != 0 {
		t.Fatal("the point writer is still held")
	}
}

// BenchmarkInsertRecordOnce is one caller's record-once insert (a read call's record)
// under a context that cannot end and under one that can, as an agent's request
// context can: the two cost the same since the statement runs detached once the
// writer is held (issue 20; before, the second started two goroutines per insert).
func BenchmarkInsertRecordOnce(b *testing.B) {
	cancellable, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"background", context.Background()}, {"cancellable", cancellable}} {
		b.Run(c.name, func(b *testing.B) {
			s := newTestStore(b)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, _, err := s.InvocationInsert(c.ctx, recordOnce("k"+strconv.Itoa(i))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPriorCalls: storetest.BenchPriorCalls on a SQLite file.
func BenchmarkPriorCalls(b *testing.B) { storetest.BenchPriorCalls(b, newTestStore(b)) }

// BenchmarkInsert: storetest.BenchInsert on SQLite.
func BenchmarkInsert(b *testing.B) { storetest.BenchInsert(b, newTestStore(b)) }

// TestPointRead_EitherConnection: the reads of a call's identity and breaker
// (pointRead) answer the same on the relaxed connection, where they run when it is
// free, and on a reader, where they run when it is busy; a busy relaxed connection
// never makes them wait (a guard, not a measurement: were they to wait for it, the
// read would never return here); and on either they see what the writer committed
// last, with synchronous=FULL, as well as the relaxed connection's own rows.
func TestPointRead_EitherConnection(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	call := func(key, callID string) store.Call {
		return store.Call{Key: key, Tenant: "t", RunID: "r", CallID: callID, Tool: "read", Args: []byte(`{}`), ArgsHash: "h"}
	}
	read := func() store.PriorCalls {
		t.Helper()
		got := make(chan store.PriorCalls, 1)
		go func() {
			pc, err := s.InvocationPriorCalls(ctx, store.PriorCallsParams{Tenant: "t", RunID: "r", ArgsHash: "h", CallIDBase: "auto-x"})
			if err != nil {
				t.Error(err)
			}
			got <- pc
		}()
		select {
		case pc := <-got:
			return pc
		case <-time.After(30 * time.Second):
			t.Fatal("a point read waited for the busy relaxed connection")
			return store.PriorCalls{}
		}
	}
	if _, _, err := s.InvocationInsert(ctx, store.InsertRecordOnce(call("k1", "auto-x"), store.SettleSucceeded([]byte(`{}`)))); err != nil {
		t.Fatal(err)
	}
	for _, busy := range []bool{false, true, false} {
		if busy {
			s.relaxedMu.Lock()
		}
		pc := read()
		if pc.Breaker.Total != 1 || !pc.HasLatest || pc.Latest.CallID != "auto-x" || pc.Latest.Status != store.StatusSucceeded {
			t.Fatalf("busy=%v: %+v, want the relaxed connection's record", busy, pc)
		}
		if busy {
			s.relaxedMu.Unlock()
		}
	}
	// A row the writer commits (FULL) is seen at once, on the relaxed connection too.
	if _, _, err := s.InvocationInsert(ctx, store.InsertRunning(call("k2", "auto-x-1"), "w1", time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, busy := range []bool{false, true} {
		if busy {
			s.relaxedMu.Lock()
		}
		if pc := read(); pc.Breaker.Total != 2 || pc.Latest.CallID != "auto-x-1" || pc.Latest.Status != store.StatusRunning {
			t.Fatalf("busy=%v, after the writer's commit: %+v", busy, pc)
		}
		if busy {
			s.relaxedMu.Unlock()
		}
	}
}
