package tools

import (
	"slices"
	"testing"

	"github.com/toolgen/toolgen/gen"
)

var list = gen.NewWorkspaceList(workspaceList{})

// listing renders entries as "path type" for comparison.
func listing(res gen.WorkspaceListResult) []string {
	var out []string
	for _, e := range res.Entries {
		out = append(out, e.Path+" "+string(e.Type))
	}
	return out
}

func newListTree(t *testing.T) (dir, outside string) {
	dir, outside = t.TempDir(), t.TempDir()
	writeFile(t, dir, "b.txt", "bb")
	writeFile(t, dir, "a/one.txt", "1")
	writeFile(t, dir, "a/deep/two.txt", "22")
	writeFile(t, dir, ".git/HEAD", "ref: refs/heads/main\n")
	writeFile(t, outside, "secret.txt", "s")
	symlink(t, outside, dir, "z-out")
	return dir, outside
}

func TestList_TopLevel(t *testing.T) {
	dir, _ := newListTree(t)
	var res gen.WorkspaceListResult
	newCall(t, dir).ok(t, list, `{}`, &res)
	want := []string{".git dir", "a dir", "b.txt file", "z-out symlink"}
	if got := listing(res); !slices.Equal(got, want) || res.Truncated {
		t.Fatalf("got %q (truncated %v), want %q", got, res.Truncated, want)
	}
	if res.Entries[2].Size != 2 {
		t.Errorf("b.txt size %d, want 2", res.Entries[2].Size)
	}
}

func TestList_RecursiveSkipsGitInternalsAndSymlinkTargets(t *testing.T) {
	dir, _ := newListTree(t)
	var res gen.WorkspaceListResult
	newCall(t, dir).ok(t, list, `{"recursive": true}`, &res)
	want := []string{".git dir", "a dir", "a/deep dir", "a/deep/two.txt file", "a/one.txt file", "b.txt file", "z-out symlink"}
	if got := listing(res); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestList_Subdirectory(t *testing.T) {
	dir, _ := newListTree(t)
	var res gen.WorkspaceListResult
	newCall(t, dir).ok(t, list, `{"path": "a/", "recursive": true}`, &res)
	want := []string{"a/deep dir", "a/deep/two.txt file", "a/one.txt file"}
	if got := listing(res); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestList_MaxEntriesTruncates(t *testing.T) {
	dir, _ := newListTree(t)
	var res gen.WorkspaceListResult
	newCall(t, dir).ok(t, list, `{"recursive": true, "max_entries": 3}`, &res)
	want := []string{".git dir", "a dir", "a/deep dir"}
	if got := listing(res); !slices.Equal(got, want) || !res.Truncated {
		t.Fatalf("got %q (truncated %v), want %q truncated", got, res.Truncated, want)
	}
	newCall(t, dir).ok(t, list, `{"max_entries": 4}`, &res)
	if len(res.Entries) != 4 || res.Truncated {
		t.Fatalf("exactly max_entries entries must not be reported as truncated: %+v", res)
	}
}

func TestList_EmptyDirectoryIsAnEmptyList(t *testing.T) {
	dir := t.TempDir()
	c := newCall(t, dir)
	res := c.exec(t, list, `{}`)
	if string(res.Structured) != `{"entries":[],"truncated":false}` {
		t.Fatalf("got %s", res.Structured)
	}
}

func TestList_Refusals(t *testing.T) {
	dir, outside := newListTree(t)
	c := newCall(t, dir)
	for _, tc := range []struct{ path, code string }{
		{"b.txt", "not_a_directory"},
		{"nope", "not_found"},
		{"..", "invalid_path"},
		{outside, "path_outside_workspace"},
		{"z-out", "path_outside_workspace"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			c.fails(t, list, jsonArgs(t, map[string]any{"path": tc.path}), tc.code)
		})
	}
}
