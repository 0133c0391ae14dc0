package walvfs

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"modernc.org/libc"
	_ "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// open opens path through the VFS (or the unix VFS when plain) with the store's WAL
// settings and spilling off, one connection per pool.
func open(t testing.TB, path string, plain bool, extra string) *sql.DB {
	t.Helper()
	if err := Register(); err != nil {
		t.Fatal(err)
	}
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=cache_spill(0)" + extra
	if !plain {
		dsn += "&vfs=" + Name
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func exec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// TestCommitIsOneWrite: a commit that dirties several pages reaches the WAL file in
// one write through the VFS, and in two per page without it.
func TestCommitIsOneWrite(t *testing.T) {
	for _, plain := range []bool{false, true} {
		t.Run(fmt.Sprintf("plain=%v", plain), func(t *testing.T) {
			db := open(t, filepath.Join(t.TempDir(), "db"), plain, "&_pragma=synchronous(NORMAL)")
			exec(t, db, "CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b TEXT, c TEXT)")
			exec(t, db, "CREATE INDEX t_a ON t (a)")
			exec(t, db, "CREATE INDEX t_b ON t (b)")
			exec(t, db, "CREATE INDEX t_c ON t (c)")
			exec(t, db, "INSERT INTO t (a, b, c) VALUES ('warm', 'up', 'row')") // the WAL's header is written
			before := writes.Load()
			exec(t, db, "INSERT INTO t (a, b, c) VALUES (?, ?, ?)", "x", "y", "z") // the table and three indexes: 4 frames
			got := writes.Load() - before
			switch {
			case !plain && got != 1:
				t.Errorf("a commit of 4 frames made %d writes through the VFS, want 1", got)
			case plain && got != 0:
				t.Errorf("the unix VFS's writes were counted (%d)", got)
			}
		})
	}
}

// TestConsistentAcrossConnections commits from two writers of one file, one of them
// through the unix VFS, with readers in between and checkpoints that restart the WAL,
// and checks every row and the file's integrity after each round: the frames the VFS
// holds back are always written before another connection can look for them.
func TestConsistentAcrossConnections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	a := open(t, path, false, "&_pragma=synchronous(FULL)")
	b := open(t, path, false, "&_pragma=synchronous(NORMAL)")
	c := open(t, path, true, "&_pragma=synchronous(NORMAL)")
	r := open(t, path, false, "&_pragma=query_only(1)")
	exec(t, a, "CREATE TABLE t (id INTEGER PRIMARY KEY, w TEXT, v TEXT)")
	exec(t, a, "CREATE INDEX t_v ON t (v)")
	writers := []*sql.DB{a, b, c}
	want := 0
	for round := range 300 {
		w := writers[round%len(writers)]
		rows := 1 + round%7
		tx, err := w.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for i := range rows {
			// a value big enough that some rows overflow a page, and the commit grows
			if _, err := tx.Exec("INSERT INTO t (w, v) VALUES (?, ?)", round%len(writers), strings.Repeat(fmt.Sprint(round, i), 50+round*3%900)); err != nil {
				t.Fatal(err)
			}
		}
		if round%5 == 4 {
			if err := tx.Rollback(); err != nil { // a rolled-back commit writes nothing
				t.Fatal(err)
			}
		} else {
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			want += rows
		}
		var got int
		if err := r.QueryRow("SELECT count(*) FROM t").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("round %d: a reader sees %d rows, want %d", round, got, want)
		}
		if round%50 == 49 {
			exec(t, writers[(round/50)%len(writers)], "PRAGMA wal_checkpoint(TRUNCATE)")
		}
	}
	for _, db := range []*sql.DB{a, c} {
		var ok string
		if err := db.QueryRowContext(context.Background(), "PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
			t.Fatalf("integrity_check: %q, %v", ok, err)
		}
	}
}

// TestNoFrameWaitsOutsideACommit checks the package doc's condition where it could
// break: a transaction far larger than the page cache. With cache_spill=0 no frame is
// written before the commit, so none waits in a buffer after any of its statements,
// nor after its rollback, which would leave it to be written later over frames another
// connection had committed at the same offsets; with spilling on, this test fails.
func TestNoFrameWaitsOutsideACommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	a := open(t, path, false, "&_pragma=cache_size(10)")
	b := open(t, path, false, "")
	exec(t, a, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
	exec(t, a, "CREATE INDEX t_v ON t (v)")
	for _, commit := range []bool{false, true} {
		tx, err := a.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2000 {
			if _, err := tx.Exec("INSERT INTO t (v) VALUES (?)", strings.Repeat(fmt.Sprint(i), 40)); err != nil {
				t.Fatal(err)
			}
			if n := buffered.Load(); n != 0 {
				t.Fatalf("commit=%v: %d bytes of frames wait in a buffer after statement %d of a transaction", commit, n, i)
			}
		}
		end := tx.Rollback
		if commit {
			end = tx.Commit
		}
		if err := end(); err != nil {
			t.Fatal(err)
		}
		if n := buffered.Load(); n != 0 {
			t.Fatalf("commit=%v: %d bytes of frames wait in a buffer after the transaction", commit, n)
		}
		exec(t, b, "INSERT INTO t (v) VALUES ('b')")
	}
	var n int
	var ok string
	if err := a.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil || n != 2002 {
		t.Fatalf("%d rows, want 2002 (%v)", n, err)
	}
	if err := b.QueryRow("PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check: %q, %v", ok, err)
	}
}

// TestClockIsGos: SQLite's 'now' through the VFS is Go's clock, answered by the VFS's
// own function, on the unix VFS's scale: read between two readings of Go's clock and of
// the unix VFS's, it falls between each pair (millisecond resolution, as SQLite keeps).
func TestClockIsGos(t *testing.T) {
	if err := Register(); err != nil {
		t.Fatal(err)
	}
	tls := libc.NewTLS()
	defer tls.Close()
	name, err := libc.CString(Name)
	if err != nil {
		t.Fatal(err)
	}
	defer libc.Xfree(tls, name)
	vfs := sqlite3.Xsqlite3_vfs_find(tls, name)
	if vfs == 0 {
		t.Fatal("the VFS is not registered")
	}
	if got, want := (*sqlite3.Tsqlite3_vfs)(ptr(vfs)).FxCurrentTimeInt64, cFunc(xCurrentTimeInt64); got != want {
		t.Fatal("the VFS's clock is not xCurrentTimeInt64")
	}

	path := filepath.Join(t.TempDir(), "db")
	ours, unix := open(t, path, false, ""), open(t, path, true, "")
	const q = "SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER)"
	now := func(db *sql.DB) (ms int64) {
		t.Helper()
		if err := db.QueryRow(q).Scan(&ms); err != nil {
			t.Fatal(err)
		}
		return ms
	}
	for range 20 {
		goBefore, unixBefore := time.Now().UnixMilli(), now(unix)
		got := now(ours)
		unixAfter, goAfter := now(unix), time.Now().UnixMilli()
		if got < goBefore || got > goAfter || got < unixBefore || got > unixAfter {
			t.Fatalf("SQLite's clock through the VFS read %d ms; Go's clock read %d and %d around it, the unix VFS's %d and %d",
				got, goBefore, goAfter, unixBefore, unixAfter)
		}
	}
}

// BenchmarkClock reads SQLite's clock in a statement through the VFS and through the
// unix VFS (issue 20: the unix VFS's system call, per statement that reads 'now').
func BenchmarkClock(b *testing.B) {
	for _, plain := range []bool{false, true} {
		b.Run(map[bool]string{false: "vfs=" + Name, true: "vfs=unix"}[plain], func(b *testing.B) {
			db := open(b, filepath.Join(b.TempDir(), "db"), plain, "")
			st, err := db.Prepare("SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER)")
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			var ms int64
			for b.Loop() {
				if err := st.QueryRow().Scan(&ms); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
