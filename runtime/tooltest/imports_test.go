package tooltest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const self = "github.com/toolgen/toolgen/runtime/tooltest"

// tooltest is for tests only: no production file of the module may import it or its
// sibling packages (tooltestpg). They may import each other.
func TestNoProductionCodeImportsTooltest(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	here, err := filepath.Abs(".")
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
		if rel, err := filepath.Rel(here, p); err == nil && !strings.HasPrefix(rel, "..") {
			return nil // tooltest itself and its siblings
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return nil // not ours to judge here; the build reports it
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == self || strings.HasPrefix(path, self+"/") {
				rel, _ := filepath.Rel(root, p)
				t.Errorf("%s imports %s; only _test.go files may", rel, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An author's test binary that imports tooltest links SQLite, not the PostgreSQL
// driver: that one comes only with tooltestpg.
func TestTooltestDoesNotLinkThePostgresDriver(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", self).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", self, err, out)
	}
	deps := strings.Fields(string(out))
	for _, dep := range deps {
		if strings.HasPrefix(dep, "github.com/jackc/") || dep == "github.com/toolgen/toolgen/runtime/store/postgres" {
			t.Errorf("%s depends on %s: keep PostgreSQL in tooltestpg", self, dep)
		}
	}
	if !strings.Contains(string(out), "github.com/toolgen/toolgen/runtime/store/sqlite\n") {
		t.Errorf("go list -deps %s does not list the SQLite store: is the output what this test thinks it is?\n%s", self, out)
	}
}
