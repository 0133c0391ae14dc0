//go:build unix

package walvfs

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestFailedWriteLosesOnlyItsCommit makes the buffered write of a commit fail: a child
// process limits the size of the files it may write (RLIMIT_FSIZE) just above the WAL's,
// and commits until a commit fails. The failing commit reports SQLite's I/O error, the
// commits before it stay, and the file, opened again without the limit, is intact and
// takes new commits: a write that fails half-way leaves frames SQLite never published,
// as a failed write of any one frame did without the VFS.
func TestFailedWriteLosesOnlyItsCommit(t *testing.T) {
	if path := os.Getenv("WALVFS_FSIZE_CHILD"); path != "" {
		fsizeChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "db")
	cmd := osexec.Command(os.Args[0], "-test.run=^TestFailedWriteLosesOnlyItsCommit$")
	cmd.Env = append(os.Environ(), "WALVFS_FSIZE_CHILD="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var committed int
	var failure string
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "committed "); ok {
			committed, _ = strconv.Atoi(v)
		}
		if v, ok := strings.CutPrefix(line, "failed "); ok {
			failure = v
		}
	}
	t.Logf("the child committed %d, then: %s", committed, failure)
	if committed < 5 || !strings.Contains(failure, "disk I/O error") {
		t.Fatalf("the child committed %d and then failed with %q, want at least 5 and SQLite's I/O error\n%s", committed, failure, out)
	}
	db := open(t, path, false, "")
	var n int
	var ok string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check: %q, %v", ok, err)
	}
	if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil || n != committed {
		t.Fatalf("%d rows after the failed commit, want the %d committed (%v)", n, committed, err)
	}
	exec(t, db, "INSERT INTO t (v) VALUES ('after')")
	if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil || n != committed+1 {
		t.Fatalf("%d rows after a new commit, want %d (%v)", n, committed+1, err)
	}
}

// fsizeChild is the child of TestFailedWriteLosesOnlyItsCommit: it prints "committed N"
// and "failed ERROR", or a reason to fail.
func fsizeChild(path string) {
	fail := func(err error) {
		fmt.Println("child:", err)
		os.Exit(1)
	}
	signal.Ignore(syscall.SIGXFSZ) // a write past the limit then fails with EFBIG
	if err := Register(); err != nil {
		fail(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=cache_spill(0)&_pragma=wal_autocheckpoint(0)&vfs="+Name)
	if err != nil {
		fail(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"); err != nil {
		fail(err)
	}
	st, err := os.Stat(path + "-wal")
	if err != nil {
		fail(err)
	}
	limit := uint64(st.Size()) + 200<<10
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		fail(err)
	}
	committed := 0
	for i := range 1000 {
		_, err := db.Exec("INSERT INTO t (v) VALUES (?)", strings.Repeat(strconv.Itoa(i), 3000))
		if err != nil {
			fmt.Println("committed", committed)
			fmt.Println("failed", err)
			var n int
			if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil || n != committed {
				fail(errors.Join(fmt.Errorf("the connection counts %d rows after the failed commit, want %d", n, committed), err))
			}
			return
		}
		committed++
	}
	fail(fmt.Errorf("1000 commits and none failed under a limit of %d bytes", limit))
}
