package scaffold

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/printer"
	"go/token"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgen/toolgen/codegen"
	"github.com/toolgen/toolgen/spec"
)

// AllFileName is the file [AllFile] is written to in the tools package.
const AllFileName = "all.go"

// Package is the tools package as its source says, parsed without type checking.
type Package struct {
	Dir  string
	Name string // the package clause; "" when the directory holds no Go package yet
	// All is where `func All() []runtime.Tool` is declared (File "" when it is not);
	// BadAll lists the declarations named All that are not that function.
	All    Finding
	BadAll []Finding

	fset  *token.FileSet
	files []*file
	// layout is what Args types are resolved against.
	layout Layout
}

// file is one parsed file of the package.
type file struct {
	path    string // absolute
	ast     *ast.File
	imports map[string]importSpec // by the name the file refers to the import by
}

// importSpec is an import as a file writes it.
type importSpec struct {
	name string // the explicit name, or "" for none
	path string
}

// ParsePackage parses the Go files of the tools package at l.ToolsDir that a build for
// this machine would compile (build constraints apply; test files are left out). A
// directory that does not exist or holds no Go files is an empty package.
func ParsePackage(l Layout) (*Package, error) {
	pkg := &Package{Dir: l.ToolsDir, fset: token.NewFileSet(), layout: l}
	bp, err := build.Default.ImportDir(l.ToolsDir, 0)
	var noGo *build.NoGoError
	switch {
	case errors.As(err, &noGo) || err != nil && !exists(l.ToolsDir):
		return pkg, nil
	case err != nil:
		return nil, fmt.Errorf("tools package %s: %w", l.ToolsDir, err)
	}
	pkg.Name = bp.Name
	names := append(slices.Clone(bp.GoFiles), bp.CgoFiles...)
	slices.Sort(names)
	for _, name := range names {
		p := filepath.Join(l.ToolsDir, name)
		af, err := parser.ParseFile(pkg.fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		f := &file{path: p, ast: af, imports: map[string]importSpec{}}
		for _, is := range af.Imports {
			ip, err := strconv.Unquote(is.Path.Value)
			if err != nil {
				continue
			}
			imp := importSpec{path: ip}
			local := assumedName(ip, l)
			if is.Name != nil {
				imp.name, local = is.Name.Name, is.Name.Name
			}
			if local == "_" || local == "." {
				continue
			}
			f.imports[local] = imp
		}
		pkg.files = append(pkg.files, f)
		pkg.findAll(f)
	}
	return pkg, nil
}

// assumedName is the name a file refers to an unnamed import by: the gen package's own
// name, runtime, or else the last element of the path (before a major version, without
// a go- prefix or -go suffix), the convention goimports assumes too.
func assumedName(importPath string, l Layout) string {
	switch importPath {
	case l.GenImport:
		return l.GenName
	case codegen.DefaultRuntimeImport:
		return "runtime"
	}
	elems := strings.Split(importPath, "/")
	last := elems[len(elems)-1]
	if majorVersion.MatchString(last) && len(elems) > 1 {
		last = elems[len(elems)-2]
	}
	if i := strings.Index(last, ".v"); i > 0 && majorVersion.MatchString(last[i+1:]) {
		last = last[:i] // gopkg.in/yaml.v3
	}
	last = strings.TrimSuffix(strings.TrimPrefix(last, "go-"), "-go")
	return strings.ReplaceAll(last, "-", "_")
}

func (pkg *Package) pos(p token.Pos) spec.Pos {
	tp := pkg.fset.Position(p)
	return spec.Pos{Line: tp.Line, Col: tp.Column}
}

// findAll records the package-level declarations named All.
func (pkg *Package) findAll(f *file) {
	for _, decl := range f.ast.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv != nil || d.Name.Name != "All" {
				continue
			}
			at := Finding{File: f.path, Pos: pkg.pos(d.Name.Pos())}
			if f.isAllSignature(d.Type) && d.Type.TypeParams == nil {
				pkg.All = at
				continue
			}
			pkg.BadAll = append(pkg.BadAll, at)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				var ids []*ast.Ident
				switch s := s.(type) {
				case *ast.TypeSpec:
					ids = []*ast.Ident{s.Name}
				case *ast.ValueSpec:
					ids = s.Names
				}
				for _, id := range ids {
					if id.Name == "All" {
						pkg.BadAll = append(pkg.BadAll, Finding{File: f.path, Pos: pkg.pos(id.Pos())})
					}
				}
			}
		}
	}
}

// isAllSignature reports whether ft is func() []runtime.Tool.
func (f *file) isAllSignature(ft *ast.FuncType) bool {
	if ft.Params.NumFields() != 0 || ft.Results.NumFields() != 1 {
		return false
	}
	arr, ok := ft.Results.List[0].Type.(*ast.ArrayType)
	if !ok || arr.Len != nil {
		return false
	}
	return f.refersTo(arr.Elt, codegen.DefaultRuntimeImport, "Tool")
}

// refersTo reports whether expr is importPath.name in this file.
func (f *file) refersTo(expr ast.Expr, importPath, name string) bool {
	sel, ok := expr.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	q, ok := sel.X.(*ast.Ident)
	return ok && f.imports[q.Name].path == importPath
}

// Impl is the implementation of one tool found in the package.
type Impl struct {
	Tool *spec.Tool
	Type string // the implementing type, declared in the package
	// Pointer is set when a method of the implementation has a pointer receiver, so
	// only *Type implements it.
	Pointer bool
	// Composite is set when Type{} is a valid expression (a struct, array, slice or map
	// type), as it is for nearly every implementation.
	Composite bool
	// Plan is the plan type of a Prepare/Commit tool as its Prepare writes it; "" for
	// a Run tool.
	Plan string
	// imports are those the plan type needs.
	imports map[string]importSpec
}

// method is a Run, Prepare or Commit method found in the package.
type method struct {
	name    string // Run | Prepare | Commit
	recv    string
	pointer bool
	args    string // the Go name of the tool whose Args the method takes: AcmeLookup
	plan    ast.Expr
	f       *file
	at      Finding
}

// methods lists the Run, Prepare and Commit methods of the package's non-generic types,
// in file and source order, leaving out the file named skip (absolute; "" for none).
func (pkg *Package) methods(skip string) []method {
	var out []method
	for _, f := range pkg.files {
		if f.path == skip {
			continue
		}
		for _, decl := range f.ast.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Recv.NumFields() != 1 {
				continue
			}
			switch fd.Name.Name {
			case "Run", "Prepare", "Commit":
			default:
				continue
			}
			recv, pointer, ok := receiver(fd.Recv.List[0].Type)
			if !ok {
				continue
			}
			m := method{name: fd.Name.Name, recv: recv, pointer: pointer, f: f,
				at: Finding{File: f.path, Pos: pkg.pos(fd.Name.Pos())}}
			if m.name != "Commit" {
				params := flatten(fd.Type.Params)
				if len(params) < 3 {
					continue
				}
				sel, ok := params[2].(*ast.SelectorExpr)
				if !ok || !strings.HasSuffix(sel.Sel.Name, "Args") || !f.refersTo(sel, pkg.layout.GenImport, sel.Sel.Name) {
					continue
				}
				m.args = strings.TrimSuffix(sel.Sel.Name, "Args")
				if m.name == "Prepare" {
					results := flatten(fd.Type.Results)
					if len(results) != 2 {
						continue
					}
					m.plan = results[0]
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// receiver is the type name of a method receiver, and whether it is a pointer; ok is
// false for a generic type, whose zero value All could not write.
func receiver(expr ast.Expr) (name string, pointer bool, ok bool) {
	for {
		switch e := expr.(type) {
		case *ast.ParenExpr:
			expr = e.X
		case *ast.StarExpr:
			if pointer {
				return "", false, false
			}
			pointer, expr = true, e.X
		case *ast.Ident:
			return e.Name, pointer, true
		default:
			return "", false, false
		}
	}
}

// flatten lists the types of a parameter list, one per parameter.
func flatten(fl *ast.FieldList) []ast.Expr {
	if fl == nil {
		return nil
	}
	var out []ast.Expr
	for _, f := range fl.List {
		n := max(1, len(f.Names))
		for range n {
			out = append(out, f.Type)
		}
	}
	return out
}

// Implementations finds the implementation of each tool, in the order of tools: the
// one type with a Run method taking the tool's Args (an idempotent tool), or with a
// Prepare method taking them and returning (P, error) (the others). A tool with no
// such type, or with several, is a finding at its spec's name. skip (absolute; "" for
// none) is a file of the package to leave out, the one about to be overwritten. show
// prints a Go file's path in a message.
func (pkg *Package) Implementations(tools []*spec.Tool, skip string, show func(string) string) ([]Impl, []Finding) {
	ms := pkg.methods(skip)
	types := pkg.typeSpecs(skip)
	var impls []Impl
	var findings []Finding
	for _, t := range tools {
		g := spec.GoName(t.Name)
		want, other := "Run", "Prepare"
		if t.Idempotency != "idempotent" {
			want, other = "Prepare", "Run"
		}
		var found, wrong []method
		for _, m := range ms {
			switch {
			case m.args != g:
			case m.name == want:
				found = append(found, m)
			case m.name == other:
				wrong = append(wrong, m)
			}
		}
		at := Finding{Tool: t, Pos: t.At("name"), Rule: "HOST-3"}
		switch len(found) {
		case 0:
			at.Message = fmt.Sprintf("%s has no implementation in %s (package %s): write a type with the method%s",
				t.Name, showDir(show, pkg.Dir), pkg.layout.ToolsImport, signature(t, pkg.layout.GenName))
			for _, m := range wrong {
				needs := "Run"
				if want == "Prepare" {
					needs = "Prepare and Commit"
				}
				at.Message += fmt.Sprintf("; %s.%s (%s) takes its args, but %s is %s: it implements %s",
					m.recv, m.name, show(m.at.File)+":"+posString(m.at.Pos), t.Name, t.Idempotency, needs)
			}
			findings = append(findings, at)
			continue
		case 1:
		default:
			var where []string
			for _, m := range found {
				where = append(where, fmt.Sprintf("%s (%s)", m.recv, show(m.at.File)+":"+posString(m.at.Pos)))
			}
			at.Message = fmt.Sprintf("%s has %d implementations in %s: %s; keep one, or write func All() []runtime.Tool yourself",
				t.Name, len(found), showDir(show, pkg.Dir), strings.Join(where, ", "))
			findings = append(findings, at)
			continue
		}
		m := found[0]
		im := Impl{Tool: t, Type: m.recv, Pointer: m.pointer, imports: map[string]importSpec{}}
		im.Composite = composite(types, m.recv)
		for _, o := range ms {
			if o.recv == m.recv && o.pointer && o.name == "Commit" && want == "Prepare" {
				im.Pointer = true
			}
		}
		if m.plan != nil {
			var buf bytes.Buffer
			if err := printer.Fprint(&buf, pkg.fset, m.plan); err != nil {
				at.Message = fmt.Sprintf("%s: the plan type of %s.Prepare: %v", t.Name, m.recv, err)
				findings = append(findings, at)
				continue
			}
			im.Plan = buf.String()
			if q := m.f.planImports(m.plan, im.imports); q != "" {
				at.Message = fmt.Sprintf("%s: the plan type %s of %s.Prepare (%s) names %s, which is no import of its file toolgen host can read; write func All() []runtime.Tool yourself",
					t.Name, im.Plan, m.recv, show(m.at.File)+":"+posString(m.at.Pos), q)
				findings = append(findings, at)
				continue
			}
		}
		impls = append(impls, im)
	}
	return impls, findings
}

// planImports adds the imports the plan type expr refers to; it returns the first
// qualifier that is none of the file's imports.
func (f *file) planImports(expr ast.Expr, into map[string]importSpec) string {
	var missing string
	ast.Inspect(expr, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		q, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		is, ok := f.imports[q.Name]
		if !ok {
			if missing == "" {
				missing = q.Name
			}
			return false
		}
		into[q.Name] = is
		return false
	})
	return missing
}

// signature is the method set the author writes for t, as the message of a missing
// implementation shows it.
func signature(t *spec.Tool, genName string) string {
	g := t.GoNames()
	if t.Idempotency == "idempotent" {
		return fmt.Sprintf(" Run(ctx context.Context, tc *runtime.ExecContext, args %[1]s.%[2]s) (%[1]s.%[3]s, error)",
			genName, g.Args, g.Result)
	}
	return fmt.Sprintf("s Prepare(ctx context.Context, tc *runtime.ExecContext, args %[1]s.%[2]s) (P, error) "+
		"and Commit(ctx context.Context, tc *runtime.ExecContext, plan P) (%[1]s.%[3]s, error), P a plan type of yours",
		genName, g.Args, g.Result)
}

// showDir is a directory as messages name it, with a trailing slash (tools/).
func showDir(show func(string) string, dir string) string {
	return strings.TrimSuffix(filepath.ToSlash(show(dir)), "/") + "/"
}

func posString(p spec.Pos) string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// typeSpecs are the package's type declarations by name.
func (pkg *Package) typeSpecs(skip string) map[string]ast.Expr {
	out := map[string]ast.Expr{}
	for _, f := range pkg.files {
		if f.path == skip {
			continue
		}
		for _, decl := range f.ast.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				if ts, ok := s.(*ast.TypeSpec); ok && ts.TypeParams == nil {
					out[ts.Name.Name] = ts.Type
				}
			}
		}
	}
	return out
}

// composite reports whether name{} is a valid expression: its type is a struct, array,
// slice or map type, directly or through the package's own named types. A type it
// cannot see (declared under a build constraint this machine leaves out) is assumed to
// be a struct, as an implementation nearly always is.
func composite(types map[string]ast.Expr, name string) bool {
	expr, ok := types[name]
	if !ok {
		return true
	}
	for range 16 {
		switch e := expr.(type) {
		case *ast.ParenExpr:
			expr = e.X
		case *ast.StructType, *ast.ArrayType, *ast.MapType:
			return true
		case *ast.Ident:
			next, ok := types[e.Name]
			if !ok {
				return false // a predeclared type: bool, int, string, ...
			}
			expr = next
		default:
			return false
		}
	}
	return false
}

// ImportName is how a tools package named pkgName is imported from main: unnamed when
// the path's last element is its name.
func importName(importPath, pkgName string) string {
	if path.Base(importPath) == pkgName {
		return ""
	}
	return pkgName
}
