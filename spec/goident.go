package spec

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Go identifiers derived from spec names. The derivation is mechanical so a reader can
// predict every generated name: split on "." and "_", capitalise each part, join
// (workspace.write_text -> WorkspaceWriteText). No initialisms are applied and nothing is
// ever renamed to dodge a clash: a clash is a SPEC-1 error at both YAML locations.

// GoName is the exported Go identifier for a registry or field name.
func GoName(name string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(name, func(r rune) bool { return r == '.' || r == '_' }) {
		b.WriteString(strings.ToUpper(part[:1]))
		b.WriteString(part[1:])
	}
	return b.String()
}

// GoNames are the package-level identifiers generated for one tool.
type GoNames struct {
	Base         string // WorkspaceWriteText
	Args         string // WorkspaceWriteTextArgs
	Result       string // WorkspaceWriteTextResult
	Spec         string // WorkspaceWriteTextSpec: the runtime.ToolSpec value
	Impl         string // WorkspaceWriteTextImpl: the interface the author implements
	New          string // NewWorkspaceWriteText: adapts an Impl to runtime.Tool
	InputSchema  string // WorkspaceWriteTextInputSchema
	OutputSchema string // WorkspaceWriteTextOutputSchema
	Wrapper      string // workspaceWriteTextTool: the unexported runtime.Tool adapter
	// Types names the named type generated for an enum or object field
	// (WorkspaceWriteTextArgsMode); EnumConsts its constants, in enum order.
	Types      map[*Field]string
	EnumConsts map[*Field][]string
	// Fields is the Go struct field name of each field.
	Fields map[*Field]string
}

// GoNames returns the identifiers generated for t.
func (t *Tool) GoNames() *GoNames {
	base := GoName(t.Name)
	g := &GoNames{
		Base: base, Args: base + "Args", Result: base + "Result", Spec: base + "Spec",
		Impl: base + "Impl", New: "New" + base, InputSchema: base + "InputSchema",
		OutputSchema: base + "OutputSchema",
		Wrapper:      strings.ToLower(base[:1]) + base[1:] + "Tool",
		Types:        map[*Field]string{}, EnumConsts: map[*Field][]string{}, Fields: map[*Field]string{},
	}
	var walk func(prefix string, fs []*Field)
	var named func(prefix string, f *Field)
	named = func(typeName string, f *Field) {
		switch {
		case f.Enum != nil:
			g.Types[f] = typeName
			for _, v := range f.Enum {
				g.EnumConsts[f] = append(g.EnumConsts[f], typeName+enumConstSuffix(v))
			}
		case f.Type == TypeObject:
			g.Types[f] = typeName
			walk(typeName, f.Properties)
		case f.Type == TypeArray && f.Items != nil:
			named(typeName+"Item", f.Items)
		}
	}
	walk = func(prefix string, fs []*Field) {
		for _, f := range fs {
			g.Fields[f] = GoName(f.Name)
			named(prefix+GoName(f.Name), f)
		}
	}
	walk(g.Args, t.Args)
	walk(g.Result, t.Result)
	return g
}

// enumConstSuffix turns an enum value into the tail of its constant's name:
// "overwrite" -> Overwrite, "text/plain" -> TextPlain, 3 -> 3, -1 -> Minus1.
func enumConstSuffix(v any) string {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return "Minus" + strconv.FormatInt(-x, 10)
		}
		return strconv.FormatInt(x, 10)
	case string:
		var b strings.Builder
		upper := true
		for _, r := range x {
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) || r > unicode.MaxASCII {
				upper = true
				continue
			}
			if upper {
				r = unicode.ToUpper(r)
				upper = false
			}
			b.WriteRune(r)
		}
		if b.Len() == 0 {
			return "Empty"
		}
		return b.String()
	}
	return fmt.Sprint(v)
}

// goIdent is one generated identifier and the spec location that caused it.
type goIdent struct {
	name string
	tool *Tool
	pos  Pos
	what string
}

// idents lists every package-level identifier generated for t (and the struct fields,
// which must be unique within their struct), with the YAML position responsible.
func (t *Tool) idents() (pkg []goIdent, structs map[string][]goIdent) {
	g := t.GoNames()
	at := t.At("name")
	for _, n := range []string{g.Args, g.Result, g.Spec, g.Impl, g.New, g.InputSchema, g.OutputSchema, g.Wrapper} {
		pkg = append(pkg, goIdent{name: n, tool: t, pos: at, what: "the name"})
	}
	structs = map[string][]goIdent{}
	var walk func(owner string, fs []*Field)
	walk = func(owner string, fs []*Field) {
		for _, f := range fs {
			structs[owner] = append(structs[owner], goIdent{name: g.Fields[f], tool: t, pos: f.Pos, what: "field " + f.Name})
			for x := f; x != nil; x = x.Items {
				if tn, ok := g.Types[x]; ok {
					pkg = append(pkg, goIdent{name: tn, tool: t, pos: f.Pos, what: "field " + f.Name})
					for i, c := range g.EnumConsts[x] {
						pkg = append(pkg, goIdent{name: c, tool: t, pos: x.EnumPos[i], what: fmt.Sprintf("enum value %#v of field %s", x.Enum[i], f.Name)})
					}
					if x.Type == TypeObject {
						walk(tn, x.Properties)
					}
				}
			}
		}
	}
	walk(g.Args, t.Args)
	walk(g.Result, t.Result)
	return pkg, structs
}
