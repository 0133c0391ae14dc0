package tools

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgen/toolgen/gen"
)

var writeText = gen.NewWorkspaceWriteText[writeTextPlan](workspaceWriteText{})

func TestWriteText_CreateMakesParentsAndReportsWhatWasWritten(t *testing.T) {
	dir := t.TempDir()
	c := newCall(t, dir)
	var res gen.WorkspaceWriteTextResult
	c.ok(t, writeText, `{"path": "docs/plan/PLAN.md", "text": "# Plan\n"}`, &res)
	if got := readFile(t, dir, "docs/plan/PLAN.md"); got != "# Plan\n" {
		t.Fatalf("file holds %q", got)
	}
	if res.BytesWritten != 7 || res.Sha256 != sha("# Plan\n") {
		t.Fatalf("got %+v", res)
	}
	if !c.marked {
		t.Fatal("the write happened without a watermark")
	}
	assertNoTempFiles(t, dir)
}

func TestWriteText_CreateRefusesAnExistingFileBeforeTheWatermark(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.txt", "old")
	c := newCall(t, dir)
	c.fails(t, writeText, `{"path": "a.txt", "text": "new"}`, "already_exists")
	if c.marked {
		t.Error("a refused create recorded a watermark: recovery would think it may have happened")
	}
	if got := readFile(t, dir, "a.txt"); got != "old" {
		t.Fatalf("file changed to %q", got)
	}
}

func TestWriteText_OverwriteReplacesAndKeepsTheMode(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.txt", "old content")
	if err := os.Chmod(filepath.Join(dir, "a.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	var res gen.WorkspaceWriteTextResult
	newCall(t, dir).ok(t, writeText, `{"path": "a.txt", "text": "new", "mode": "overwrite"}`, &res)
	if got := readFile(t, dir, "a.txt"); got != "new" {
		t.Fatalf("file holds %q", got)
	}
	fi, err := os.Stat(filepath.Join(dir, "a.txt"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode after overwrite: %v, %v; want 0600 kept", fi.Mode(), err)
	}
	// Overwriting is the idempotent case: the same call again leaves the same file.
	newCall(t, dir).ok(t, writeText, `{"path": "a.txt", "text": "new", "mode": "overwrite"}`, &res)
	if got := readFile(t, dir, "a.txt"); got != "new" {
		t.Fatalf("file holds %q", got)
	}
	newCall(t, dir).ok(t, writeText, `{"path": "fresh.txt", "text": "x", "mode": "overwrite"}`, &res)
	if got := readFile(t, dir, "fresh.txt"); got != "x" {
		t.Fatalf("overwrite of a missing file: %q", got)
	}
}

func TestWriteText_AppendAddsAtTheEnd(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "log.txt", "one\n")
	var res gen.WorkspaceWriteTextResult
	newCall(t, dir).ok(t, writeText, `{"path": "log.txt", "text": "two\n", "mode": "append"}`, &res)
	if got := readFile(t, dir, "log.txt"); got != "one\ntwo\n" {
		t.Fatalf("file holds %q", got)
	}
	if res.BytesWritten != 4 || res.Sha256 != sha("two\n") {
		t.Fatalf("got %+v, want the appended bytes described", res)
	}
	newCall(t, dir).ok(t, writeText, `{"path": "new/log.txt", "text": "first", "mode": "append"}`, &res)
	if got := readFile(t, dir, "new/log.txt"); got != "first" {
		t.Fatalf("append to a missing file: %q", got)
	}
	assertNoTempFiles(t, dir)
}

func TestWriteText_EffectOnlyAfterTheWatermark(t *testing.T) {
	dir := t.TempDir()
	c := newCall(t, dir)
	c.onMark = func() error {
		// Everything Prepare did must have left no mark: neither the file nor its directory.
		if _, err := os.Lstat(filepath.Join(dir, "new")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("when the watermark is recorded, new/ already exists (%v)", err)
		}
		return nil
	}
	var res gen.WorkspaceWriteTextResult
	c.ok(t, writeText, `{"path": "new/a.txt", "text": "x"}`, &res)
	if got := readFile(t, dir, "new/a.txt"); got != "x" {
		t.Fatalf("file holds %q", got)
	}
}

func TestWriteText_FailedWatermarkWritesNothing(t *testing.T) {
	for _, mode := range []string{"create", "overwrite", "append"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "keep.txt", "old")
			for _, path := range []string{"keep.txt", "new/a.txt"} {
				if mode == "create" && path == "keep.txt" {
					continue
				}
				c := newCall(t, dir)
				c.onMark = func() error { return errors.New("store unavailable") }
				_, err := writeText.Execute(t.Context(), c.tc, []byte(jsonArgs(t, map[string]any{"path": path, "text": "new", "mode": mode})))
				if err == nil {
					t.Fatalf("%s %s: a failed watermark must fail the call", mode, path)
				}
			}
			if got := readFile(t, dir, "keep.txt"); got != "old" {
				t.Errorf("keep.txt changed to %q", got)
			}
			notExist(t, dir, "new")
			assertNoTempFiles(t, dir)
		})
	}
}

func TestWriteText_Refusals(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	writeFile(t, dir, "sub/x.txt", "x")
	writeFile(t, dir, "file.txt", "f")
	writeFile(t, outside, "victim.txt", "untouched")
	symlink(t, outside, dir, "out")
	symlink(t, filepath.Join(outside, "victim.txt"), dir, "victim-link.txt")
	symlink(t, filepath.Join(outside, "nothing-yet.txt"), dir, "dangling.txt")
	for _, tc := range []struct{ path, mode, code string }{
		{"", "create", "invalid_path"},
		{"../escape.txt", "create", "invalid_path"},
		{"sub/../../escape.txt", "overwrite", "invalid_path"},
		{filepath.Join(outside, "abs.txt"), "create", "path_outside_workspace"},
		{"out/new.txt", "create", "path_outside_workspace"},
		{"out/deeper/new.txt", "create", "path_outside_workspace"},
		{"victim-link.txt", "overwrite", "path_outside_workspace"},
		{"victim-link.txt", "append", "path_outside_workspace"},
		{"dangling.txt", "overwrite", "not_found"},
		{"sub", "overwrite", "is_directory"},
		{".", "overwrite", "is_directory"},
		{"file.txt/child.txt", "create", "not_a_directory"},
	} {
		t.Run(tc.path+" "+tc.mode, func(t *testing.T) {
			c := newCall(t, dir)
			c.fails(t, writeText, jsonArgs(t, map[string]any{"path": tc.path, "text": "pwned", "mode": tc.mode}), tc.code)
			if c.marked {
				t.Error("a refused write recorded a watermark")
			}
		})
	}
	if got := readFile(t, outside, "victim.txt"); got != "untouched" {
		t.Fatalf("a file outside the workspace was changed: %q", got)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Fatalf("files appeared outside the workspace: %v", entries)
	}
}

func TestWriteText_PathThroughASymlinkIsRefusedAsChanged(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "real/a.txt", "old")
	symlink(t, "real/a.txt", dir, "alias.txt")
	newCall(t, dir).fails(t, writeText, `{"path": "alias.txt", "text": "new", "mode": "overwrite"}`, "path_changed")
	if got := readFile(t, dir, "real/a.txt"); got != "old" {
		t.Fatalf("target holds %q", got)
	}
}

// assertNoTempFiles fails when a temporary file of atomicWrite was left behind.
func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && filepath.Ext(p) == ".tmp" {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}
