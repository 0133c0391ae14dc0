package wspath

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if err != nil {
		return "internal"
	}
	return ""
}

func TestResolve_SymlinkToGitIsTheGitPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".git", filepath.Join(dir, "scratch")); err != nil {
		t.Fatal(err)
	}
	root, err := Root(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{"scratch/config", ".git/config"},       // a file about to be created
		{"scratch", ".git"},                     // the link itself
		{"scratch/hooks/pre", ".git/hooks/pre"}, // missing components below the link
		{"plain/new.txt", "plain/new.txt"},
		{".", "."},
	} {
		r, err := Resolve(root, filepath.FromSlash(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if r.Slash() != tc.want {
			t.Errorf("Resolve(%s) = %s, want %s", tc.in, r.Slash(), tc.want)
		}
		_, err = ResolveUnchanged(root, filepath.FromSlash(tc.in))
		if changed := tc.in != tc.want; changed != (code(err) == CodePathChanged) {
			t.Errorf("ResolveUnchanged(%s): %v", tc.in, err)
		}
	}
}

func TestResolve_Refusals(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	os.Symlink(outside, filepath.Join(dir, "out"))
	os.Symlink("missing", filepath.Join(dir, "dangling"))
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o644)
	root, _ := Root(dir)
	for in, want := range map[string]string{
		"out/x":      CodeOutsideWorkspace,
		"dangling":   CodeNotFound,
		"dangling/x": CodeNotFound,
		"file/x":     CodeNotDirectory,
	} {
		if _, err := Resolve(root, in); code(err) != want {
			t.Errorf("Resolve(%s): got %v, want %s", in, err, want)
		}
	}
	for in, want := range map[string]string{
		"":          CodeInvalidPath,
		"/etc":      CodeOutsideWorkspace,
		"a/../b":    CodeInvalidPath,
		"./a":       CodeInvalidPath,
		"a//b":      CodeInvalidPath,
		"a\x00b":    CodeInvalidPath,
		"a/b/":      "",
		".git/hook": "",
	} {
		if _, err := Clean(in); code(err) != want {
			t.Errorf("Clean(%q): got %v, want %q", in, err, want)
		}
	}
}
