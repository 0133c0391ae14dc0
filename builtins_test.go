package toolgen

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestRootPackageImportsOnlyEmbed: toolgen (cmd/toolgen -> spec -> this package) must
// build when gen/ is stale or broken, so the root package imports nothing of the
// module, and nothing else at all but embed.
func TestRootPackageImportsOnlyEmbed(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p != "embed" {
				t.Errorf("%s imports %s; the root package may import embed only", f, p)
			}
		}
	}
}

// TestBuiltinSpecsAreToolsYAML: the embedded files are exactly tools/*.yaml.
func TestBuiltinSpecsAreToolsYAML(t *testing.T) {
	want, err := filepath.Glob(filepath.Join("tools", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = fs.WalkDir(BuiltinSpecs, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			got = append(got, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		want[i] = filepath.ToSlash(want[i])
	}
	if len(got) == 0 || !slices.Equal(got, want) {
		t.Errorf("embedded %v, want %v", got, want)
	}
}
