package codegen

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/build"
	"go/format"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/spec"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

const (
	specDir   = "testdata/specs"
	goldenDir = "testdata/golden"
)

// loadTree loads dir and fails the test on any diagnostic.
func loadTree(t testing.TB, dir string) *spec.Tree {
	t.Helper()
	tree, diags, err := spec.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(diags) > 0 {
		t.Fatalf("%s has diagnostics:\n%v", dir, diags)
	}
	return tree
}

func generate(t testing.TB, tree *spec.Tree) []File {
	t.Helper()
	files, err := Generate(tree, Options{Package: "gen"})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func fileData(t testing.TB, files []File, name string) string {
	t.Helper()
	for _, f := range files {
		if f.Name == name {
			return string(f.Data)
		}
	}
	t.Fatalf("no generated file %s", name)
	return ""
}

// TestGolden compares the output for testdata/specs with testdata/golden. Run
// go test ./codegen -run TestGolden -update to accept a change.
func TestGolden(t *testing.T) {
	files := generate(t, loadTree(t, specDir))
	changes, err := Sync(goldenDir, files, !*update)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		for _, c := range changes {
			t.Logf("%s %s", c.Action, c.Name)
		}
		return
	}
	for _, c := range changes {
		if c.Action == ActionDelete {
			t.Errorf("%s/%s is no longer generated (run with -update)", goldenDir, c.Name)
			continue
		}
		old, err := os.ReadFile(filepath.Join(goldenDir, c.Name))
		if err != nil {
			t.Errorf("%s/%s is missing (run with -update): %v", goldenDir, c.Name, err)
			continue
		}
		t.Errorf("%s/%s differs from the generated output (run with -update):\n%s", goldenDir, c.Name, firstDiff(string(old), fileData(t, files, c.Name)))
	}
}

// firstDiff describes the first line where want and got differ.
func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\n golden:    %q\n generated: %q", i+1, w, g)
		}
	}
	return "(no line differs)"
}

func TestDeterministic(t *testing.T) {
	for _, dir := range []string{specDir, "testdata/edge"} {
		testDeterministic(t, dir)
	}
}

func testDeterministic(t *testing.T, dir string) {
	tree := loadTree(t, dir)
	first := generate(t, tree)
	for i := range 10 {
		// A tree in another order, loaded again, must give the same bytes.
		other := loadTree(t, dir)
		rand.New(rand.NewPCG(uint64(i), 1)).Shuffle(len(other.Tools), func(a, b int) {
			other.Tools[a], other.Tools[b] = other.Tools[b], other.Tools[a]
		})
		again := generate(t, other)
		if !slices.EqualFunc(first, again, func(a, b File) bool { return a.Name == b.Name && bytes.Equal(a.Data, b.Data) }) {
			t.Fatalf("run %d: the output differs from the first run", i)
		}
	}
	if !slices.IsSortedFunc(first, func(a, b File) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("%s: files are not sorted by name", dir)
	}
	for _, f := range first {
		if !strings.HasSuffix(f.Name, ".go") {
			continue
		}
		if formatted, err := format.Source(f.Data); err != nil || !bytes.Equal(formatted, f.Data) {
			t.Errorf("%s: %s is not gofmt'd (%v)", dir, f.Name, err)
		}
	}
}

func TestGeneratedShape(t *testing.T) {
	tree := loadTree(t, specDir)
	files := generate(t, tree)
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	want := []string{"catalog.json", "registry.gen.go",
		"tool.conversation.ask_user.gen.go", "tool.ticket.create.gen.go",
		"tool.workspace.read_text.gen.go", "tool.workspace.write_text.gen.go"}
	if !slices.Equal(names, want) {
		t.Fatalf("files = %v, want %v", names, want)
	}
	for _, tool := range tree.Tools {
		src := fileData(t, files, ToolFileName(tool.Name))
		head := fmt.Sprintf("%s\n// source: %s\n\npackage gen\n", Header, tool.File)
		if !strings.HasPrefix(src, head) {
			t.Errorf("%s does not start with\n%s", tool.Name, head)
		}
		// GEN-2: MarkEffectSent appears exactly once, between Prepare and Commit, in a
		// watermarked tool's file, and never in an idempotent tool's.
		n := strings.Count(src, "MarkEffectSent(")
		if tool.Idempotency == "idempotent" {
			if n != 0 || strings.Contains(src, "Prepare(") {
				t.Errorf("%s is idempotent but its file mentions MarkEffectSent or Prepare", tool.Name)
			}
			continue
		}
		prep := strings.Index(src, "w.impl.Prepare(")
		mark := strings.Index(src, "tc.MarkEffectSent(ctx)")
		commit := strings.Index(src, "w.impl.Commit(")
		if n != 1 || prep < 0 || !(prep < mark && mark < commit) {
			t.Errorf("%s: MarkEffectSent appears %d times, Prepare at %d, mark at %d, Commit at %d", tool.Name, n, prep, mark, commit)
		}
		if strings.Contains(src, "Run(ctx") {
			t.Errorf("%s is %s but its file has a Run method", tool.Name, tool.Idempotency)
		}
	}
	// The embedded schemas are exactly spec's, and the SHA is the catalog's.
	var cat struct {
		Tools []struct {
			Name         string          `json:"name"`
			InputSchema  json.RawMessage `json:"input_schema"`
			SchemaSHA256 string          `json:"schema_sha256"`
		} `json:"tools"`
	}
	catalog := fileData(t, files, CatalogFile)
	if err := json.Unmarshal([]byte(catalog), &cat); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(catalog, "}\n") || !strings.HasPrefix(catalog, "{\n  \"tools\": [") {
		t.Errorf("catalog.json is not two-space indented with a trailing newline")
	}
	if len(cat.Tools) != len(tree.Tools) {
		t.Fatalf("catalog lists %d tools, want %d", len(cat.Tools), len(tree.Tools))
	}
	for i, tool := range tree.Tools {
		c := cat.Tools[i]
		var compact bytes.Buffer
		json.Compact(&compact, c.InputSchema)
		if c.Name != tool.Name || c.SchemaSHA256 != tool.SchemaSHA256() || compact.String() != string(tool.InputSchema()) {
			t.Errorf("catalog entry %d (%s) does not match the spec of %s", i, c.Name, tool.Name)
		}
		src := fileData(t, files, ToolFileName(tool.Name))
		if !strings.Contains(src, strconv.Quote(tool.SchemaSHA256())) {
			t.Errorf("%s does not embed its SchemaSHA256", tool.Name)
		}
	}
}

// A tool name must never turn its file into a build-constrained or test file.
func TestToolFileNameHasNoConstraint(t *testing.T) {
	ctxt := build.Default
	ctxt.GOOS, ctxt.GOARCH = "plan9", "386"
	for _, name := range []string{"fs.read_linux", "fs.read_windows_amd64", "x.y_test", "js.wasm"} {
		fn := ToolFileName(name)
		if strings.HasSuffix(fn, "_test.go") {
			t.Errorf("%s: %s is a test file", name, fn)
		}
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, fn), []byte("package gen\n"), 0o644)
		ok, err := ctxt.MatchFile(dir, fn)
		if err != nil || !ok {
			t.Errorf("%s: %s is excluded on plan9/386 (%v)", name, fn, err)
		}
	}
}

func TestGenerateErrors(t *testing.T) {
	tree := loadTree(t, specDir)
	if _, err := Generate(nil, Options{Package: "gen"}); err == nil {
		t.Error("Generate(nil) succeeded")
	}
	for _, pkg := range []string{"", "_", "gen-x", "1gen", "func"} {
		if _, err := Generate(tree, Options{Package: pkg}); err == nil {
			t.Errorf("Generate with package %q succeeded", pkg)
		}
	}
	dup := *tree
	dup.Tools = append(slices.Clone(tree.Tools), tree.Tools[0])
	if _, err := Generate(&dup, Options{Package: "gen"}); err == nil {
		t.Error("Generate with a tool twice succeeded")
	}
}

// Two enum values that map to one constant name must be refused rather than generate
// code that does not compile.
func TestGenerateRefusesDuplicateIdent(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "tools"), 0o755)
	os.WriteFile(filepath.Join(dir, "tools", "a.b.yaml"), []byte(`name: a.b
version: 1
description: x
side_effect: none
risk: low
args:
  mode: {type: string, enum: [a-b, a_b]}
`), 0o644)
	tree, _, err := spec.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(tree, Options{Package: "gen"}); err == nil || !strings.Contains(err.Error(), "ABArgsModeAB") {
		t.Errorf("Generate = %v, want an error naming ABArgsModeAB", err)
	}
}

func TestRuntimeImportOption(t *testing.T) {
	files, err := Generate(loadTree(t, specDir), Options{Package: "tools", RuntimeImport: "example.com/fork/runtime"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !strings.HasSuffix(f.Name, ".go") {
			continue
		}
		s := string(f.Data)
		if !strings.Contains(s, "\npackage tools\n") || !strings.Contains(s, `"example.com/fork/runtime"`) || strings.Contains(s, DefaultRuntimeImport) {
			t.Errorf("%s does not use package tools and the given runtime import", f.Name)
		}
	}
}

// codegen must never import runtime, mcp or a store package (doc.go).
func TestImports(t *testing.T) {
	fset := token.NewFileSet()
	matches, _ := filepath.Glob("*.go")
	for _, m := range matches {
		if strings.HasSuffix(m, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, m, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range []string{"github.com/toolgen/toolgen/runtime", "github.com/toolgen/toolgen/mcp", "github.com/toolgen/toolgen/store"} {
				if p == bad || strings.HasPrefix(p, bad+"/") {
					t.Errorf("%s imports %s", m, p)
				}
			}
		}
	}
}
