//go:build unix

package tools

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/toolgen/toolgen/runtime"
)

// Issue 14, finding 13: special files are refused before they are opened, so no builtin
// blocks on a FIFO that no one writes. Opening one for reading would block in open(2)
// forever: each test here would hang, and the go test timeout fail it, if the refusal
// regressed.

// mkfifo makes a named pipe at rel under dir, or skips where that is impossible.
func mkfifo(t *testing.T, dir, rel string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
}

func TestReadText_FIFOIsRefused(t *testing.T) {
	dir := t.TempDir()
	mkfifo(t, dir, "pipe")
	newCall(t, dir).fails(t, readText, `{"path": "pipe"}`, codeNotRegularFile)
}

func TestWriteText_AppendToAFIFOIsRefused(t *testing.T) {
	dir := t.TempDir()
	mkfifo(t, dir, "pipe")
	c := newCall(t, dir)
	c.fails(t, writeText, `{"path": "pipe", "text": "x", "mode": "append"}`, codeNotRegularFile)
	if c.marked {
		t.Error("a refused append recorded a watermark")
	}
}

// Prepare saw a regular file; a FIFO stands at the path by the time Commit reads the
// current content to append to it.
func TestWriteText_AppendToAFIFOSwappedInAfterPrepareIsRefused(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "log.txt", "old\n")
	c := newCall(t, dir)
	c.onMark = func() error {
		if err := os.Remove(filepath.Join(dir, "log.txt")); err != nil {
			return err
		}
		mkfifo(t, dir, "log.txt")
		return nil
	}
	c.fails(t, writeText, `{"path": "log.txt", "text": "new\n", "mode": "append"}`, codeNotRegularFile)
	if fi, err := os.Lstat(filepath.Join(dir, "log.txt")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO was replaced: %v %v", fi, err)
	}
	assertNoTempFiles(t, dir)
}

func TestApprove_FIFOAsTheRecordIsRefused(t *testing.T) {
	g := newGitRepo(t)
	g.git("switch", "-q", "-c", "feature")
	tip := g.commit("f.txt", "f\n", "f")
	// The record's path is in the work tree, which a run may have written.
	mkfifo(t, g.dir, approvalRecordPath("feature"))
	newCall(t, g.dir).fails(t, approve, jsonArgs(t, map[string]any{"branch": "feature", "commit": tip}), codeNotRegularFile)
}

// The stat in openRegular refuses a FIFO before opening it; a FIFO swapped in after the
// stat is opened without blocking and refused by the fstat that follows.
func TestOpenChecked_FIFOOpensWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	mkfifo(t, dir, "pipe")
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, _, err := openChecked(r, "pipe", "pipe")
	if err == nil {
		f.Close()
		t.Fatal("a FIFO was opened as a regular file")
	}
	if tf, ok := err.(*runtime.ToolFailure); !ok || tf.Code != codeNotRegularFile {
		t.Fatalf("got %v, want %s", err, codeNotRegularFile)
	}
}
