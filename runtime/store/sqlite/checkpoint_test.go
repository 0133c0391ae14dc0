package sqlite

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// recordReads records n read calls, one record-once insert each, keys prefix-0...
func recordReads(t *testing.T, s *Store, prefix string, n int) {
	t.Helper()
	for i := range n {
		key := prefix + "-" + strconv.Itoa(i)
		c := store.Call{Key: key, Tenant: "t", RunID: "r", CallID: key, Tool: "t", Args: []byte(`{"k":"` + key + `"}`), ArgsHash: key}
		if _, _, err := s.InvocationInsert(t.Context(), store.InsertRecordOnce(c, store.SettleSucceeded([]byte(`{"ok":true}`)))); err != nil {
			t.Fatal(err)
		}
	}
}

// walBytes is the WAL file's size: the most it ever held since it was created (a
// checkpointed WAL is written over from its start, never shortened).
func walBytes(t testing.TB, s *Store) int64 {
	t.Helper()
	fi, err := os.Stat(s.path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// walPages is walBytes in pages.
func walPages(t testing.TB, s *Store) int64 {
	t.Helper()
	var size int64
	if err := s.write.QueryRowContext(t.Context(), "PRAGMA page_size").Scan(&size); err != nil {
		t.Fatal(err)
	}
	return walBytes(t, s) / (size + 24) // each page in a frame with its header
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCheckpoint_NotByTheCalls: the commits leave checkpoints to the store's own
// goroutine. With it stopped, records far past SQLite's default of 1,000 WAL pages
// leave the database file as it was: no commit copied a page into it.
func TestCheckpoint_NotByTheCalls(t *testing.T) {
	s := newTestStore(t)
	if err := s.checkpoints.close(); err != nil {
		t.Fatal(err)
	}
	recordReads(t, s, "first", 10) // past the migrations' own commits
	before := readFile(t, s.path)
	recordReads(t, s, "read", 600) // some 3,500 pages
	if n := walPages(t, s); n < 2000 || n >= autocheckpointPages {
		t.Fatalf("the WAL holds %d pages, want between 2,000 and %d for this test", n, autocheckpointPages)
	}
	if !bytes.Equal(readFile(t, s.path), before) {
		t.Fatal("the database file changed: a commit ran a checkpoint")
	}
}

// TestWAL_BytesPerRecord: a read call's record on a new file (pageSize) writes about
// half the WAL bytes it writes on a file of 4 KiB pages, as every file had before: a
// commit writes each page it changed whole, and a record changes about as many pages
// whatever their size. Checkpoints are stopped, so the WAL file's growth is what the
// records wrote.
func TestWAL_BytesPerRecord(t *testing.T) {
	perRecord := func(s *Store) int64 {
		if err := s.checkpoints.close(); err != nil {
			t.Fatal(err)
		}
		recordReads(t, s, "first", 10)
		before := walBytes(t, s)
		recordReads(t, s, "read", 1000)
		return (walBytes(t, s) - before) / 1000
	}
	older, err := Open(t.Context(), olderFile(t, 4096))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { older.Close() })
	onNew, onOlder := perRecord(newTestStore(t)), perRecord(older)
	t.Logf("WAL bytes per record: %d on a new file, %d on 4 KiB pages", onNew, onOlder)
	if onNew > onOlder*6/10 {
		t.Fatalf("a record writes %d WAL bytes on a new file against %d on 4 KiB pages: want at most 60 %%", onNew, onOlder)
	}
}

// TestCheckpoint_InTheBackground: with no call doing it, the store's goroutine copies
// the WAL's pages into the database file.
func TestCheckpoint_InTheBackground(t *testing.T) {
	s := newTestStore(t)
	recordReads(t, s, "first", 10)
	before := readFile(t, s.path)
	recordReads(t, s, "read", 600)
	deadline := time.Now().Add(time.Minute) // a bound for a loaded machine, not a timing
	for s.checkpoints.copied.Load() == 0 || bytes.Equal(readFile(t, s.path), before) {
		if time.Now().After(deadline) {
			t.Fatal("no background checkpoint in a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNextCheckpoint(t *testing.T) {
	idle := walState{frames: 40, checkpointed: 40}
	for _, c := range []struct {
		name      string
		wait      time.Duration
		last, now walState
		err       error
		want      time.Duration
	}{
		{"frames arrived", checkpointIdleMax, idle, walState{frames: 90, checkpointed: 90}, nil, checkpointEvery},
		{"the WAL started over", checkpointIdleMax, idle, walState{frames: 12, checkpointed: 12}, nil, checkpointEvery},
		{"a reader held frames back", checkpointEvery, walState{frames: 90, checkpointed: 60}, walState{frames: 90, checkpointed: 60}, nil, checkpointEvery},
		{"nothing written: back off", checkpointEvery, idle, idle, nil, 2 * checkpointEvery},
		{"nothing written for long", checkpointIdleMax, idle, idle, nil, checkpointIdleMax},
		{"an error", checkpointIdleMax, idle, idle, errors.New("disk full"), checkpointEvery},
	} {
		if got := nextCheckpoint(c.wait, c.last, c.now, c.err); got != c.want {
			t.Errorf("%s: next checkpoint in %v, want %v", c.name, got, c.want)
		}
	}
}
