package toolgen

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
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

// TestToolgenDoesNotDependOnGeneratedCode: cmd/toolgen regenerates gen/, so nothing it
// builds from may be gen/ or depend on it (tools imports gen; runtime is what gen
// imports and toolgen never needs).
func TestToolgenDoesNotDependOnGeneratedCode(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", "./cmd/toolgen").Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/toolgen: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, bad := range []string{"github.com/toolgen/toolgen/gen", "github.com/toolgen/toolgen/tools", "github.com/toolgen/toolgen/runtime"} {
			if p == bad || strings.HasPrefix(p, bad+"/") {
				t.Errorf("cmd/toolgen depends on %s", p)
			}
		}
	}
}
