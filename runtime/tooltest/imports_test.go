package tooltest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// tooltest is for tests only: no production file of the module may import it.
func TestNoProductionCodeImportsTooltest(t *testing.T) {
	const self = "github.com/toolgen/toolgen/runtime/tooltest"
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); p != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".")) {
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return nil // not ours to judge here; the build reports it
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == self {
				rel, _ := filepath.Rel(root, p)
				t.Errorf("%s imports %s; only _test.go files may", rel, self)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
