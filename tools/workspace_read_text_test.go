package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"unicode/utf8"

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

// Issue 14, finding 1: a binary file is refused as a whole, whatever the window asked
// for, or a database could be read window by window through its text-looking stretches.
func TestReadText_BinaryFileIsRefusedWhole(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "db.sqlite", strings.Repeat("SQLite format 3 text\n", 100<<10/21+1)+"\x00")
	c := newCall(t, dir)
	c.fails(t, readText, `{"path": "db.sqlite", "offset": 0, "max_bytes": 10}`, "not_text")
	c.fails(t, readText, `{"path": "db.sqlite", "offset": 21, "max_bytes": 21}`, "not_text")
	// Invalid UTF-8 far from the window, and a file ending inside a character.
	writeFile(t, dir, "latin1.txt", strings.Repeat("x", 100<<10)+"caf\xe9 au lait\n")
	c.fails(t, readText, `{"path": "latin1.txt", "max_bytes": 10}`, "not_text")
	writeFile(t, dir, "cut.txt", "abc\xe2\x82")
	c.fails(t, readText, `{"path": "cut.txt", "max_bytes": 4}`, "not_text")
}

// The file is checked as it is copied, 32 KiB at a time (io.Copy's buffer): a character
// straddling two chunks is valid, an invalid sequence straddling them is not.
func TestReadText_CharacterAcrossTheCopyBuffer(t *testing.T) {
	dir := t.TempDir()
	prefix := strings.Repeat("a", 32<<10-1) // "€" (3 bytes) then spans bytes 32767..32769
	writeFile(t, dir, "ok.txt", prefix+"€b")
	writeFile(t, dir, "bad.txt", prefix+"\xe2\x82b")
	c := newCall(t, dir)
	var res gen.WorkspaceReadTextResult
	c.ok(t, readText, `{"path": "ok.txt", "max_bytes": 10}`, &res)
	if res.Text != "aaaaaaaaaa" || res.Size != int64(len(prefix))+4 {
		t.Fatalf("got %+v", res)
	}
	c.ok(t, readText, jsonArgs(t, map[string]any{"path": "ok.txt", "offset": len(prefix), "max_bytes": 10}), &res)
	if res.Text != "€b" {
		t.Fatalf("got %q, want the euro sign across the chunk boundary", res.Text)
	}
	c.fails(t, readText, `{"path": "bad.txt", "max_bytes": 10}`, "not_text")
}

// textCheck agrees with utf8.Valid and a NUL search however the stream is cut in two.
func TestTextCheck_AnySplit(t *testing.T) {
	for _, s := range []string{
		"", "plain", "ab€cd", "😀x", "€😀€", "é", "a\x00b",
		"\xe2\x82", "\xe2\x82A", "\xff", "a\x80", "\xf0\x9f\x98", "\xed\xa0\x80", // cut, bad, surrogate
		"\xc0\xaf", "x\xe2\x82\xacy\xf0\x9f\x98\x80z",
	} {
		want := utf8.ValidString(s) && !strings.ContainsRune(s, 0)
		for cut := 0; cut <= len(s); cut++ {
			for cut2 := cut; cut2 <= len(s); cut2++ {
				c := &textCheck{}
				var err error
				for _, part := range []string{s[:cut], s[cut:cut2], s[cut2:]} {
					if err == nil {
						_, err = c.Write([]byte(part))
					}
				}
				if err == nil {
					err = c.finish()
				}
				if got := err == nil; got != want {
					t.Errorf("%q cut at %d and %d: text %v, want %v (%v)", s, cut, cut2, got, want, err)
				}
			}
		}
	}
}
