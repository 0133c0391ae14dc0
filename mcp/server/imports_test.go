package server_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// doc.go: the package never imports a store driver, codegen, cmd or mcp/upstream (its
// tests may assemble a real store).
func TestImports_NoForbiddenPackages(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := []string{
		"github.com/toolgen/toolgen/runtime/store/sqlite", "github.com/toolgen/toolgen/runtime/store/postgres",
		"github.com/toolgen/toolgen/codegen", "github.com/toolgen/toolgen/cmd", "github.com/toolgen/toolgen/mcp/upstream",
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
			for _, bad := range forbidden {
				if path == bad || strings.HasPrefix(path, bad+"/") {
					t.Errorf("%s imports %s", f, path)
				}
			}
		}
	}
}
