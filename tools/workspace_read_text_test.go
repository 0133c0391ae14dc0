package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/gen"
)

var readText = gen.NewWorkspaceReadText(workspaceReadText{})

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestReadText_WholeFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "src/main.go", "package main\n")
	c := newCall(t, dir)
	var res gen.WorkspaceReadTextResult
	c.ok(t, readText, `{"path": "src/main.go"}`, &res)
	want := gen.WorkspaceReadTextResult{Text: "package main\n", Size: 13, Sha256: sha("package main\n"), NextOffset: 13}
	if res != want {
		t.Fatalf("got %+v, want %+v", res, want)
	}
	if c.marked {
		t.Error("an idempotent read recorded a watermark")
	}
}

func TestReadText_WindowsPageThroughTheFile(t *testing.T) {
	dir := t.TempDir()
	content := "0123456789abcdef"
	writeFile(t, dir, "f.txt", content)
	c := newCall(t, dir)
	var got strings.Builder
	var offset int64
	for range 10 {
		var res gen.WorkspaceReadTextResult
		c.ok(t, readText, jsonArgs(t, map[string]any{"path": "f.txt", "offset": offset, "max_bytes": 5}), &res)
		if res.Sha256 != sha(content) || res.Size != int64(len(content)) {
			t.Fatalf("window at %d: sha256/size describe the window, not the file: %+v", offset, res)
		}
		got.WriteString(res.Text)
		offset = res.NextOffset
		if !res.Truncated {
			break
		}
	}
	if got.String() != content {
		t.Fatalf("pages joined to %q, want %q", got.String(), content)
	}
}

func TestReadText_WindowNeverSplitsACharacter(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "u.txt", "ab€cd") // € is 3 bytes: a b [e2 82 ac] c d
	c := newCall(t, dir)
	var res gen.WorkspaceReadTextResult
	c.ok(t, readText, `{"path": "u.txt", "max_bytes": 4}`, &res)
	if res.Text != "ab" || !res.Truncated || res.NextOffset != 2 {
		t.Fatalf("got %+v, want the window to stop before the euro sign", res)
	}
	c.ok(t, readText, `{"path": "u.txt", "offset": 2, "max_bytes": 4}`, &res)
	if res.Text != "€c" || res.NextOffset != 6 {
		t.Fatalf("got %+v", res)
	}
	c.fails(t, readText, `{"path": "u.txt", "offset": 3}`, "invalid_offset")
	c.fails(t, readText, `{"path": "u.txt", "offset": 8}`, "invalid_offset")
}

func TestReadText_Refusals(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	writeFile(t, outside, "secret.txt", "secret")
	writeFile(t, dir, "bin.dat", "a\x00b")
	writeFile(t, dir, "latin1.txt", "caf\xe9")
	writeFile(t, dir, "sub/x.txt", "x")
	symlink(t, outside+"/secret.txt", dir, "leak.txt")
	symlink(t, outside, dir, "out")
	c := newCall(t, dir)
	for _, tc := range []struct{ path, code string }{
		{"missing.txt", "not_found"},
		{"sub", "is_directory"},
		{".", "is_directory"},
		{"bin.dat", "not_text"},
		{"latin1.txt", "not_text"},
		{"../secret.txt", "invalid_path"},
		{"sub/../../secret.txt", "invalid_path"},
		{outside + "/secret.txt", "path_outside_workspace"},
		{"leak.txt", "path_outside_workspace"},
		{"out/secret.txt", "path_outside_workspace"},
		{"out/missing.txt", "path_outside_workspace"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			c.fails(t, readText, jsonArgs(t, map[string]any{"path": tc.path}), tc.code)
		})
	}
}

// A path given to the tool is one the pipeline resolved (workspace_path): one that
// still goes through a symlink changed after the checks, and is refused.
func TestReadText_PathThroughASymlinkIsRefusedAsChanged(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "real/a.txt", "A")
	symlink(t, "real", dir, "alias")
	newCall(t, dir).fails(t, readText, `{"path": "alias/a.txt"}`, "path_changed")
}

func TestReadText_NoWorkspace(t *testing.T) {
	newCall(t, "").fails(t, readText, `{"path": "a.txt"}`, "no_workspace")
}
