package scaffold

import (
	"errors"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/spec"
)

func TestModulePath(t *testing.T) {
	for in, want := range map[string]string{
		"module example.com/acme\n\ngo 1.26\n":            "example.com/acme",
		"// a comment\nmodule \"example.com/q\" // why\n": "example.com/q",
		"module\texample.com/tab\n":                       "example.com/tab",
		"go 1.26\n":                                       "",
		"modules example.com/x\n":                         "",
		"module a b\n":                                    "",
		"module \"unterminated\n":                         "",
	} {
		if got := modulePath([]byte(in)); got != want {
			t.Errorf("modulePath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDefaultName_SkipsMajorVersion(t *testing.T) {
	for in, want := range map[string]string{
		"example.com/acme":    "acme-host",
		"example.com/acme/v2": "acme-host",
		"acme":                "acme-host",
		"v2":                  "v2-host",
		"github.com/x/y.go":   "y.go-host",
	} {
		if got := DefaultName(in); got != want {
			t.Errorf("DefaultName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseDirective_TheToolgenGenerateForms(t *testing.T) {
	dir := filepath.FromSlash("/m/tools")
	cases := []struct {
		line          string
		ok            bool
		root, out, pk string
	}{
		{" go run github.com/toolgen/toolgen/cmd/toolgen generate -o ../gen ..", true, "/m", "/m/gen", "gen"},
		{" go tool toolgen generate -o ../gen ..", true, "/m", "/m/gen", "gen"},
		{" go run github.com/toolgen/toolgen/cmd/toolgen@v1.2.3 generate .. -pkg wrappers -o ../w", true, "/m", "/m/w", "wrappers"},
		{" toolgen generate", true, "/m/tools", "/m/tools/gen", "gen"},
		{" toolgen generate -o ../gen-out ..", true, "/m", "/m/gen-out", "gen_out"},
		{` toolgen generate -o "../g en" ..`, true, "/m", "/m/g en", "g en"},
		{" go run ../cmd/toolgen generate -check -v -format json ..", true, "/m", "/m/gen", "gen"},
		{" go tool toolgen check ..", false, "", "", ""},
		{" stringer -type=Mode", false, "", "", ""},
		{" toolgen generate -bogus ..", false, "", "", ""},
		{" toolgen generate a b", false, "", "", ""},
		{` toolgen generate "unterminated`, false, "", "", ""},
		{" toolgen", false, "", "", ""},
	}
	for _, c := range cases {
		d, ok := parseDirective(dir, c.line)
		if ok != c.ok {
			t.Errorf("%q: ok = %v, want %v", c.line, ok, c.ok)
			continue
		}
		if !ok {
			continue
		}
		if d.specRoot != filepath.FromSlash(c.root) || d.out != filepath.FromSlash(c.out) || d.pkg != c.pk {
			t.Errorf("%q: root %s out %s pkg %s, want %s %s %s", c.line, d.specRoot, d.out, d.pkg, c.root, c.out, c.pk)
		}
	}
}

// writeTree writes files (slash paths) under a new temporary directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const gomod = "module example.com/acme\n\ngo 1.26\n"

func TestFindLayout_FromTheGoGenerateLine(t *testing.T) {
	root := writeTree(t, map[string]string{
		"go.mod":                     gomod,
		"internal/impl/generate.go":  "package impl\n\n//go:generate go tool toolgen generate -o ../wrap -pkg wrap ../..\n",
		"other/gen.go":               "package other\n\n//go:generate go tool toolgen generate -o gen ../elsewhere\n",
		"testdata/x/x.go":            "package x\n\n//go:generate toolgen generate ../..\n",
		"nested/go.mod":              "module example.com/nested\n",
		"nested/tools/generate.go":   "package tools\n\n//go:generate toolgen generate ../..\n",
		"tools/acme.lookup.yaml":     "",
		"internal/impl/doc_notes.md": "//go:generate toolgen generate ../..\n",
	})
	mod, err := FindModule(filepath.Join(root, "tools"))
	if err != nil {
		t.Fatal(err)
	}
	if mod.Path != "example.com/acme" || canonical(mod.Root) != canonical(root) {
		t.Fatalf("FindModule = %+v", mod)
	}
	l, findings, err := FindLayout(mod, root)
	if err != nil || len(findings) > 0 {
		t.Fatal(err, findings)
	}
	if l.ToolsImport != "example.com/acme/internal/impl" || l.GenImport != "example.com/acme/internal/wrap" || l.GenName != "wrap" {
		t.Errorf("layout = %+v", l)
	}
	if !strings.HasSuffix(l.Directive, filepath.Join("internal", "impl", "generate.go")+":3") {
		t.Errorf("Directive = %q", l.Directive)
	}
}

func TestFindLayout_ConventionWithoutALine(t *testing.T) {
	root := writeTree(t, map[string]string{"go.mod": gomod, "specs/tools/a.b.yaml": ""})
	mod, err := FindModule(filepath.Join(root, "specs"))
	if err != nil {
		t.Fatal(err)
	}
	l, findings, err := FindLayout(mod, filepath.Join(root, "specs"))
	if err != nil || len(findings) > 0 {
		t.Fatal(err, findings)
	}
	if l.ToolsImport != "example.com/acme/specs/tools" || l.GenImport != "example.com/acme/specs/gen" || l.GenName != "gen" || l.Directive != "" {
		t.Errorf("layout = %+v", l)
	}
}

func TestFindLayout_TwoPackagesForOneRoot_IsAFinding(t *testing.T) {
	root := writeTree(t, map[string]string{
		"go.mod":        gomod,
		"a/generate.go": "package a\n\n//go:generate toolgen generate ..\n",
		"b/generate.go": "package b\n\n// x\n//go:generate toolgen generate -o ../gen ..\n",
	})
	mod, err := FindModule(root)
	if err != nil {
		t.Fatal(err)
	}
	_, findings, err := FindLayout(mod, root)
	if err != nil {
		t.Fatal(err)
	}
	if len(findings) != 1 || findings[0].Pos.Line != 4 || !strings.Contains(findings[0].Message, filepath.Join("a", "generate.go")+":3") {
		t.Errorf("findings = %+v", findings)
	}
}

func TestFindLayout_GenOutsideTheModule(t *testing.T) {
	root := writeTree(t, map[string]string{
		"go.mod":       gomod,
		"tools/gen.go": "package tools\n\n//go:generate toolgen generate -o ../../outside ..\n",
	})
	mod, _ := FindModule(root)
	if _, _, err := FindLayout(mod, root); err == nil || !strings.Contains(err.Error(), "outside module") {
		t.Errorf("FindLayout = %v, want the gen package outside the module", err)
	}
}

func TestFindModule_None(t *testing.T) {
	dir := t.TempDir()
	if m, err := FindModule(dir); err == nil {
		t.Skipf("the temporary directory is inside module %s", m.Path)
	} else if !errors.Is(err, ErrNoModule) {
		t.Errorf("FindModule = %v, want ErrNoModule", err)
	}
}

// loadTools loads the tools of a spec root of YAML files.
func loadTools(t *testing.T, files map[string]string) []*spec.Tool {
	t.Helper()
	root := writeTree(t, files)
	tree, diags, err := spec.LoadDir(root)
	if err != nil || len(diags) > 0 {
		t.Fatal(err, diags)
	}
	return tree.Tools
}

const (
	lookupYAML = "name: acme.lookup\nversion: 1\ndescription: d\nside_effect: read\nidempotency: idempotent\nrisk: low\nargs:\n  id: {type: string, max_length: 9}\nresult:\n  name: {type: string}\n"
	chargeYAML = "name: acme.charge\nversion: 1\ndescription: d\nside_effect: write\nidempotency: non_idempotent\nrisk: low\nargs:\n  n: {type: integer}\nresult:\n  id: {type: string}\n"
	countYAML  = "name: acme.count\nversion: 1\ndescription: d\nside_effect: write\nidempotency: non_idempotent\nrisk: low\nargs:\n  n: {type: integer}\nresult:\n  id: {type: string}\n"
)

func packageOf(t *testing.T, files map[string]string) (*Package, Layout) {
	t.Helper()
	files["go.mod"] = gomod
	root := writeTree(t, files)
	mod, err := FindModule(root)
	if err != nil {
		t.Fatal(err)
	}
	l, findings, err := FindLayout(mod, root)
	if err != nil || len(findings) > 0 {
		t.Fatal(err, findings)
	}
	pkg, err := ParsePackage(l)
	if err != nil {
		t.Fatal(err)
	}
	return pkg, l
}

func show(p string) string { return filepath.Base(p) }

func TestImplementations_RunPreparePointersPlansAndZeroValues(t *testing.T) {
	tools := loadTools(t, map[string]string{
		"tools/acme.lookup.yaml": lookupYAML, "tools/acme.charge.yaml": chargeYAML, "tools/acme.count.yaml": countYAML,
	})
	pkg, l := packageOf(t, map[string]string{
		"tools/impl.go": `package tools

import (
	"context"
	"time"

	g "example.com/acme/gen"
	"github.com/toolgen/toolgen/runtime"
)

type lookup struct{}

func (lookup) Run(ctx context.Context, tc *runtime.ExecContext, args g.AcmeLookupArgs) (g.AcmeLookupResult, error) {
	return g.AcmeLookupResult{}, nil
}

// charge has a value Prepare and a pointer Commit: only *charge implements it.
type charge struct{ n int }

func (c charge) Prepare(ctx context.Context, tc *runtime.ExecContext, args g.AcmeChargeArgs) (map[string]time.Duration, error) {
	return nil, nil
}

func (c *charge) Commit(ctx context.Context, tc *runtime.ExecContext, plan map[string]time.Duration) (g.AcmeChargeResult, error) {
	return g.AcmeChargeResult{}, nil
}

type counter int

func (c counter) Prepare(_, _ any, args g.AcmeCountArgs) (plan *int, err error) { return nil, nil }

func (c counter) Commit(ctx context.Context, tc *runtime.ExecContext, plan *int) (g.AcmeCountResult, error) {
	return g.AcmeCountResult{}, nil
}

// Generic types are not candidates: All could not name their type arguments.
type generic[T any] struct{}

func (generic[T]) Run(ctx context.Context, tc *runtime.ExecContext, args g.AcmeLookupArgs) (g.AcmeLookupResult, error) {
	return g.AcmeLookupResult{}, nil
}
`,
	})
	impls, findings := pkg.Implementations(tools, "", show)
	if len(findings) > 0 {
		t.Fatalf("findings: %+v", findings)
	}
	got := map[string]Impl{}
	for _, im := range impls {
		got[im.Tool.Name] = im
	}
	if im := got["acme.lookup"]; im.Type != "lookup" || im.Pointer || !im.Composite || im.Plan != "" {
		t.Errorf("lookup: %+v", im)
	}
	if im := got["acme.charge"]; im.Type != "charge" || !im.Pointer || !im.Composite || im.Plan != "map[string]time.Duration" {
		t.Errorf("charge: %+v", im)
	}
	if im := got["acme.count"]; im.Type != "counter" || im.Pointer || im.Composite || im.Plan != "*int" {
		t.Errorf("counter: %+v", im)
	}
	src, findings, err := AllFile("tools", l, impls, "cmd/acme-host")
	if err != nil || len(findings) > 0 {
		t.Fatal(err, findings)
	}
	want := `import (
	"example.com/acme/gen"
	"github.com/toolgen/toolgen/runtime"
	"time"
)

// All returns every tool of the specs, adapted by its generated wrapper: what
// cmd/acme-host serves. A Prepare/Commit tool's constructor names its plan type, so a
// missing method is a compile error that says which.
func All() []runtime.Tool {
	return []runtime.Tool{
		gen.NewAcmeCharge[map[string]time.Duration](&charge{}),
		gen.NewAcmeCount[*int](*new(counter)),
		gen.NewAcmeLookup(lookup{}),
	}
}
`
	if !strings.HasSuffix(string(src), want) {
		t.Errorf("all.go:\n%s\nwant it to end with:\n%s", src, want)
	}
	if _, err := parser.ParseFile(token.NewFileSet(), "all.go", src, parser.PackageClauseOnly|parser.ParseComments); err != nil {
		t.Error(err)
	}
	again, _, _ := AllFile("tools", l, impls, "cmd/acme-host")
	if string(again) != string(src) {
		t.Error("AllFile is not deterministic")
	}
}

func TestImplementations_MissingOrWrongKind_NamesTheSignature(t *testing.T) {
	tools := loadTools(t, map[string]string{"tools/acme.lookup.yaml": lookupYAML, "tools/acme.charge.yaml": chargeYAML})
	pkg, _ := packageOf(t, map[string]string{
		"tools/impl.go": `package tools

import (
	"context"

	"example.com/acme/gen"
	"github.com/toolgen/toolgen/runtime"
)

type charge struct{}

// Run, but acme.charge is non_idempotent.
func (charge) Run(ctx context.Context, tc *runtime.ExecContext, args gen.AcmeChargeArgs) (gen.AcmeChargeResult, error) {
	return gen.AcmeChargeResult{}, nil
}
`,
		// Excluded by its build constraint: its implementation does not count.
		"tools/other.go": "//go:build never\n\npackage tools\n\nimport \"example.com/acme/gen\"\n\ntype l struct{}\n\nfunc (l) Run(_, _ any, args gen.AcmeLookupArgs) (gen.AcmeLookupResult, error) { return gen.AcmeLookupResult{}, nil }\n",
	})
	_, findings := pkg.Implementations(tools, "", show)
	if len(findings) != 2 {
		t.Fatalf("findings: %+v", findings)
	}
	byTool := map[string]Finding{}
	for _, f := range findings {
		byTool[f.Tool.Name] = f
		if f.Pos != (spec.Pos{Line: 1, Col: 7}) || f.Rule != "HOST-3" {
			t.Errorf("%s: at %v [%s], want the spec's name at 1:7 [HOST-3]", f.Tool.Name, f.Pos, f.Rule)
		}
	}
	if m := byTool["acme.lookup"].Message; !strings.Contains(m, "Run(ctx context.Context, tc *runtime.ExecContext, args gen.AcmeLookupArgs) (gen.AcmeLookupResult, error)") {
		t.Errorf("lookup: %s", m)
	}
	if m := byTool["acme.charge"].Message; !strings.Contains(m, "Prepare(ctx context.Context, tc *runtime.ExecContext, args gen.AcmeChargeArgs) (P, error)") ||
		!strings.Contains(m, "charge.Run (impl.go:13:15) takes its args, but acme.charge is non_idempotent: it implements Prepare and Commit") {
		t.Errorf("charge: %s", m)
	}
}

func TestImplementations_SkipIgnoresTheFileToOverwrite(t *testing.T) {
	tools := loadTools(t, map[string]string{"tools/acme.lookup.yaml": lookupYAML})
	run := "func (%s) Run(_, _ any, args gen.AcmeLookupArgs) (gen.AcmeLookupResult, error) { return gen.AcmeLookupResult{}, nil }\n"
	pkg, l := packageOf(t, map[string]string{
		"tools/a.go":   "package tools\n\nimport \"example.com/acme/gen\"\n\ntype a struct{}\n\n" + strings.ReplaceAll(run, "%s", "a"),
		"tools/all.go": "package tools\n\nimport \"example.com/acme/gen\"\n\ntype b struct{}\n\n" + strings.ReplaceAll(run, "%s", "*b"),
	})
	if _, findings := pkg.Implementations(tools, "", show); len(findings) != 1 || !strings.Contains(findings[0].Message, "2 implementations") {
		t.Errorf("without skip: %+v", findings)
	}
	impls, findings := pkg.Implementations(tools, filepath.Join(l.ToolsDir, AllFileName), show)
	if len(findings) > 0 || len(impls) != 1 || impls[0].Type != "a" {
		t.Errorf("with skip: %+v %+v", impls, findings)
	}
}

func TestParsePackage_FindsAll(t *testing.T) {
	for name, c := range map[string]struct {
		src      string
		all, bad bool
	}{
		"all":         {"import \"github.com/toolgen/toolgen/runtime\"\n\nfunc All() []runtime.Tool { return nil }\n", true, false},
		"aliased":     {"import rt \"github.com/toolgen/toolgen/runtime\"\n\nfunc All() (tools []rt.Tool) { return nil }\n", true, false},
		"other sig":   {"func All(x int) []string { return nil }\n", false, true},
		"a var":       {"var All = 1\n", false, true},
		"a method":    {"type x struct{}\n\nfunc (x) All() {}\n", false, false},
		"other rt":    {"import \"example.com/runtime\"\n\nfunc All() []runtime.Tool { return nil }\n", false, true},
		"none at all": {"", false, false},
	} {
		pkg, _ := packageOf(t, map[string]string{"tools/x.go": "package tools\n\n" + c.src})
		if (pkg.All.File != "") != c.all || (len(pkg.BadAll) > 0) != c.bad {
			t.Errorf("%s: All %+v, BadAll %+v", name, pkg.All, pkg.BadAll)
		}
	}
}

func TestParsePackage_NoPackageYet(t *testing.T) {
	pkg, _ := packageOf(t, map[string]string{"tools/a.b.yaml": ""})
	if pkg.Name != "" || pkg.ToolsPackageName() != "tools" {
		t.Errorf("Name %q, ToolsPackageName %q", pkg.Name, pkg.ToolsPackageName())
	}
}

func TestAllFile_PlanImportClash_IsAFinding(t *testing.T) {
	tools := loadTools(t, map[string]string{"tools/acme.charge.yaml": chargeYAML})
	pkg, l := packageOf(t, map[string]string{
		"tools/impl.go": `package tools

import (
	"example.com/acme/gen"
	runtime "example.com/other/rt"
)

type c struct{}

func (c) Prepare(_, _ any, args gen.AcmeChargeArgs) (runtime.Plan, error) { return runtime.Plan{}, nil }
`,
	})
	impls, findings := pkg.Implementations(tools, "", show)
	if len(findings) > 0 {
		t.Fatal(findings)
	}
	if _, findings, _ := AllFile("tools", l, impls, "cmd/x"); len(findings) != 1 || !strings.Contains(findings[0].Message, "runtime (github.com/toolgen/toolgen/runtime and example.com/other/rt)") {
		t.Errorf("findings: %+v", findings)
	}
}

func TestMainFile(t *testing.T) {
	l := Layout{Module: Module{Path: "example.com/acme"}, ToolsImport: "example.com/acme/internal/acmetools"}
	src, err := MainFile("acme-host", l, "tools", []string{"review.approve", "protocol.dispatch"}, "go run ./cmd/acme-host serve --stdio")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\tgo run ./cmd/acme-host serve --stdio\n",
		"\ttools \"example.com/acme/internal/acmetools\"\n",
		"Builtins: []string{\"protocol.dispatch\", \"review.approve\"},\n",
		"Tools: tools.All(),\n",
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("main.go lacks %q:\n%s", want, src)
		}
	}
	src, err = MainFile("x", Layout{Module: Module{Path: "m"}, ToolsImport: "m/tools"}, "tools", nil, "go run ./cmd/x serve --stdio")
	if err != nil || strings.Contains(string(src), "Builtins") || strings.Contains(string(src), "tools \"m/tools\"") {
		t.Errorf("main.go without builtins (%v):\n%s", err, src)
	}
}

// TestAllFile_NoTools: a spec root with no tools of its own still gets an All that
// compiles: no gen import it would not use.
func TestAllFile_NoTools(t *testing.T) {
	l := Layout{Module: Module{Path: "m"}, ToolsImport: "m/tools", GenImport: "m/gen", GenName: "gen"}
	src, findings, err := AllFile("tools", l, nil, "cmd/m-host")
	if err != nil || len(findings) > 0 {
		t.Fatal(err, findings)
	}
	if strings.Contains(string(src), `"m/gen"`) || !strings.Contains(string(src), "return []runtime.Tool{}") {
		t.Errorf("all.go:\n%s", src)
	}
}
