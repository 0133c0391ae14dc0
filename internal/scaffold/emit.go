package scaffold

import (
	"bytes"
	"fmt"
	"go/format"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgen/toolgen/codegen"
)

// HostCLIImport is the package a host main calls.
const HostCLIImport = "github.com/toolgen/toolgen/host/hostcli"

// ToolsPackageName is the package name the tools package has, or gets when all.go is
// its first file: the directory's name when that is an identifier, else "tools".
func (pkg *Package) ToolsPackageName() string {
	if pkg.Name != "" {
		return pkg.Name
	}
	if base := filepath.Base(pkg.Dir); token.IsIdentifier(base) && !token.IsKeyword(base) {
		return base
	}
	return "tools"
}

// MainFile is cmd/NAME/main.go: hostcli.Main with the tools of l's tools package (its
// package name pkgName) and builtins, the builtin tools the spec root names. run is the
// command that serves them over stdio, for the doc comment.
func MainFile(name string, l Layout, pkgName string, builtins []string, run string) ([]byte, error) {
	local := pkgName
	if local == "hostcli" || local == "main" {
		local = "tools"
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Command %s serves the tools of %s over MCP, with the whole host\n", name, l.Module.Path)
	fmt.Fprintf(&b, "// command line (package %s):\n", HostCLIImport)
	fmt.Fprintf(&b, "// serve --stdio or --http ADDR, call, recover, uncertain, resolve, approvals,\n")
	fmt.Fprintf(&b, "// approve, deny, audit, catalog, events (%s help lists them). From the\n", name)
	fmt.Fprintf(&b, "// module root:\n//\n//\t%s\n//\n", run)
	fmt.Fprintf(&b, "// Written once by `toolgen host` as a starting point: this file is yours now, and\n")
	fmt.Fprintf(&b, "// toolgen does not rewrite it unless run with -force.\n")
	b.WriteString("package main\n\nimport (\n")
	writeImport(&b, importName(l.ToolsImport, local), l.ToolsImport)
	writeImport(&b, "", HostCLIImport)
	b.WriteString(")\n\nfunc main() {\n\thostcli.Main(hostcli.Config{\n")
	fmt.Fprintf(&b, "\t\tName: %s,\n\t\tTools: %s.All(),\n", strconv.Quote(name), local)
	if len(builtins) > 0 {
		sorted := slices.Sorted(slices.Values(builtins))
		quoted := make([]string, len(sorted))
		for i, s := range sorted {
			quoted[i] = strconv.Quote(s)
		}
		b.WriteString("\t\t// The builtin tools the spec root's protocols and policy name.\n")
		fmt.Fprintf(&b, "\t\tBuiltins: []string{%s},\n", strings.Join(quoted, ", "))
	}
	b.WriteString("\t})\n}\n")
	return format.Source(b.Bytes())
}

func writeImport(b *bytes.Buffer, name, importPath string) {
	if name != "" {
		fmt.Fprintf(b, "\t%s %s\n", name, strconv.Quote(importPath))
		return
	}
	fmt.Fprintf(b, "\t%s\n", strconv.Quote(importPath))
}

// AllFile is the tools package's all.go: func All() []runtime.Tool returning each
// implementation, a zero value, adapted by its tool's generated constructor, in the
// order of impls. mainPath names the program that serves them, for the doc comment. A
// plan type whose import clashes with another import of the file is a finding.
func AllFile(pkgName string, l Layout, impls []Impl, mainPath string) ([]byte, []Finding, error) {
	imports := map[string]importSpec{"runtime": {path: codegen.DefaultRuntimeImport}}
	if len(impls) > 0 {
		imports[l.GenName] = importSpec{name: importName(l.GenImport, l.GenName), path: l.GenImport}
	}
	var findings []Finding
	var lines []string
	for _, im := range impls {
		clash := ""
		for _, local := range slices.Sorted(maps.Keys(im.imports)) {
			is := im.imports[local]
			if have, ok := imports[local]; ok && have.path != is.path {
				clash = fmt.Sprintf("%s (%s and %s)", local, have.path, is.path)
				break
			}
		}
		if clash != "" {
			findings = append(findings, Finding{Tool: im.Tool, Pos: im.Tool.At("name"), Rule: "HOST-3",
				Message: fmt.Sprintf("%s: the plan type %s of %s.Prepare needs an import whose name another import of %s takes: %s; write func All() []runtime.Tool yourself",
					im.Tool.Name, im.Plan, im.Type, AllFileName, clash)})
			continue
		}
		for local, is := range im.imports {
			imports[local] = is
		}
		g := im.Tool.GoNames()
		ctor := l.GenName + "." + g.New
		if im.Plan != "" {
			ctor += "[" + im.Plan + "]"
		}
		lines = append(lines, fmt.Sprintf("\t\t%s(%s),\n", ctor, zeroValue(im)))
	}
	if len(findings) > 0 {
		return nil, findings, nil
	}
	var b bytes.Buffer
	b.WriteString("// Written once by `toolgen host` as a starting point: this file is yours now, and\n")
	b.WriteString("// toolgen does not rewrite it. The implementations below are zero values: pass your\n")
	b.WriteString("// tools' dependencies (clients, configuration, paths) where each one is constructed.\n")
	b.WriteString("// A tool whose spec you add later needs its line here.\n\n")
	fmt.Fprintf(&b, "package %s\n\nimport (\n", pkgName)
	byPath := slices.SortedFunc(maps.Values(imports), func(a, b importSpec) int {
		return strings.Compare(a.path+" "+a.name, b.path+" "+b.name)
	})
	for _, is := range byPath {
		writeImport(&b, is.name, is.path)
	}
	b.WriteString(")\n\n")
	fmt.Fprintf(&b, "// All returns every tool of the specs, adapted by its generated wrapper: what\n")
	fmt.Fprintf(&b, "// %s serves. A Prepare/Commit tool's constructor names its plan type, so a\n", mainPath)
	b.WriteString("// missing method is a compile error that says which.\n")
	b.WriteString("func All() []runtime.Tool {\n\treturn []runtime.Tool{\n")
	for _, line := range lines {
		b.WriteString(line)
	}
	b.WriteString("\t}\n}\n")
	src, err := format.Source(b.Bytes())
	return src, nil, err
}

// zeroValue is the expression that constructs im's implementation.
func zeroValue(im Impl) string {
	switch {
	case im.Composite && im.Pointer:
		return "&" + im.Type + "{}"
	case im.Composite:
		return im.Type + "{}"
	case im.Pointer:
		return "new(" + im.Type + ")"
	default:
		return "*new(" + im.Type + ")"
	}
}
