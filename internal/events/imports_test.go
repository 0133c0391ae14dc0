package events

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// doc.go: the package imports runtime/store and the standard library only (its tests
// may open a real store).
func TestImports_StoreAndStandardLibraryOnly(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if path != "github.com/toolgen/toolgen/runtime/store" && strings.Contains(strings.Split(path, "/")[0], ".") {
				t.Errorf("%s imports %s", f, path)
			}
		}
	}
}
