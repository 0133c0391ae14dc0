package codegen

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/dave/jennifer/jen"

	"github.com/toolgen/toolgen/spec"
)

// Standard library imports of generated code.
const (
	ctxPkg  = "context"
	jsonPkg = "encoding/json"
	fmtPkg  = "fmt"
	timePkg = "time"
)

// toolGen renders the file of one tool.
type toolGen struct {
	t   *spec.Tool
	g   *spec.GoNames
	rt  string // runtime import path
	pkg string

	input, output []byte // the canonical JSON Schemas
	sha           string // t.SchemaSHA256()
}

func newToolGen(t *spec.Tool, rt, pkg string) (*toolGen, error) {
	tg := &toolGen{t: t, g: t.GoNames(), rt: rt, pkg: pkg}
	tg.input, tg.output, tg.sha = t.Schemas()
	for _, c := range []struct{ what, v string }{
		{"kind", t.Kind}, {"side_effect", t.SideEffect}, {"idempotency", t.Idempotency},
		{"risk", t.Risk}, {"output_trust", t.OutputTrust},
	} {
		if _, ok := runtimeConsts[c.what][c.v]; !ok {
			return nil, fmt.Errorf("codegen: %s: %s %q has no runtime constant; check the spec first", t.File, c.what, c.v)
		}
	}
	return tg, nil
}

// runtimeConsts names the runtime constant of every classification value.
var runtimeConsts = map[string]map[string]string{
	"kind":        {"action": "KindAction", "control": "KindControl"},
	"side_effect": {"none": "SideEffectNone", "read": "SideEffectRead", "write": "SideEffectWrite"},
	"idempotency": {
		"idempotent":               "Idempotent",
		"conditionally_idempotent": "ConditionallyIdempotent",
		"non_idempotent":           "NonIdempotent",
	},
	"risk": {"low": "RiskLow", "medium": "RiskMedium", "high": "RiskHigh", "critical": "RiskCritical"},
	"output_trust": {
		"system": "TrustSystem", "user": "TrustUser", "tool": "TrustTool",
		"external_untrusted": "TrustExternalUntrusted",
	},
}

// idents lists the package-level identifiers the tool's file declares, in
// declaration order.
func (tg *toolGen) idents() []string {
	g := tg.g
	out := []string{g.Args, g.Result, g.Spec, g.Impl, g.New, g.InputSchema, g.OutputSchema, g.Wrapper}
	var walk func(fields []*spec.Field)
	walk = func(fields []*spec.Field) {
		for _, fd := range fields {
			for x := fd; x != nil; x = x.Items {
				if name, ok := g.Types[x]; ok {
					out = append(out, name)
					out = append(out, g.EnumConsts[x]...)
					walk(x.Properties)
				}
			}
		}
	}
	walk(tg.t.Args)
	walk(tg.t.Result)
	return out
}

// watermarked reports whether the author implements Prepare and Commit (GEN-2).
func (tg *toolGen) watermarked() bool { return tg.t.Idempotency != "idempotent" }

func (tg *toolGen) render() ([]byte, error) {
	f := newFile(tg.pkg, tg.rt, tg.t.File)
	tg.types(f)
	tg.schemas(f)
	tg.specVar(f)
	tg.impl(f)
	tg.wrapper(f)
	return render(f, tg.t.File)
}

// types emits Args, Result and the named types of their fields, each struct followed by
// the types it uses, in declaration order.
func (tg *toolGen) types(f *jen.File) {
	name := tg.t.Name
	tg.structDecl(f, tg.g.Args, []string{fmt.Sprintf("%s are the arguments of %s.", tg.g.Args, name)}, tg.t.Args)
	tg.fieldTypes(f, "args", tg.t.Args)
	tg.structDecl(f, tg.g.Result, []string{fmt.Sprintf("%s is the result of %s.", tg.g.Result, name)}, tg.t.Result)
	tg.fieldTypes(f, "result", tg.t.Result)
}

// fieldTypes emits the enum and struct types of fields (and of their items and
// properties), depth first in declaration order. path names the fields' parent in the
// spec (args, result.warnings[]), for doc comments.
func (tg *toolGen) fieldTypes(f *jen.File, path string, fields []*spec.Field) {
	for _, fd := range fields {
		p := path + "." + fd.Name
		for x := fd; x != nil; x = x.Items {
			if name, ok := tg.g.Types[x]; ok {
				switch {
				case x.Enum != nil:
					tg.enumDecl(f, name, p, x)
				case x.Type == spec.TypeObject:
					doc := []string{fmt.Sprintf("%s is %s of %s.", name, p, tg.t.Name)}
					if d := descLines(x.Description); len(d) > 0 {
						doc = append(append(doc, ""), d...)
					}
					tg.structDecl(f, name, doc, x.Properties)
					tg.fieldTypes(f, p, x.Properties)
				}
			}
			p += "[]"
		}
	}
}

func (tg *toolGen) structDecl(f *jen.File, name string, doc []string, fields []*spec.Field) {
	f.Line()
	comment(f, doc)
	f.Type().Id(name).StructFunc(func(g *jen.Group) {
		for _, fd := range fields {
			comment(g, fieldDoc(fd))
			tag := fd.Name
			if !fd.Required {
				if fd.Type == spec.TypeObject {
					tag += ",omitzero" // omitempty never omits a struct
				} else {
					tag += ",omitempty"
				}
			}
			g.Id(tg.g.Fields[fd]).Add(tg.goType(fd)).Tag(map[string]string{"json": tag})
		}
	})
}

// fieldDoc is a field's description, then its default, so the author sees what an
// absent argument becomes.
func fieldDoc(fd *spec.Field) []string {
	doc := descLines(fd.Description)
	if fd.Bound != "" {
		if len(doc) > 0 {
			doc = append(doc, "")
		}
		doc = append(doc, "Bound to "+fd.Bound+": the pipeline fills it from the verified caller or the call; a caller that supplies it is refused, and models never see it.")
	}
	if fd.WorkspacePath {
		if len(doc) > 0 {
			doc = append(doc, "")
		}
		doc = append(doc, "A workspace path: the pipeline resolves its symlinks before the checks, so it arrives resolved; refuse it when it no longer resolves to itself.")
	}
	if fd.HasDefault {
		if b, err := spec.CanonicalJSON(fd.Default); err == nil {
			if len(doc) > 0 {
				doc = append(doc, "")
			}
			doc = append(doc, "Default: "+string(b)+".")
		}
	}
	return doc
}

func (tg *toolGen) enumDecl(f *jen.File, name, path string, fd *spec.Field) {
	vals := make([]string, len(fd.Enum))
	for i, v := range fd.Enum {
		b, _ := spec.CanonicalJSON(v)
		vals[i] = string(b)
	}
	under := jen.String()
	if fd.Type == spec.TypeInteger {
		under = jen.Int64()
	}
	f.Line()
	doc := []string{fmt.Sprintf("%s is the type of %s of %s: one of %s.", name, path, tg.t.Name, strings.Join(vals, ", "))}
	if d := descLines(fd.Description); len(d) > 0 {
		doc = append(append(doc, ""), d...)
	}
	comment(f, doc)
	f.Type().Id(name).Add(under)
	f.Line()
	comment(f, []string{fmt.Sprintf("The values of %s, in the order the spec lists them.", name)})
	consts := tg.g.EnumConsts[fd]
	f.Const().DefsFunc(func(g *jen.Group) {
		for i, v := range fd.Enum {
			g.Id(consts[i]).Id(name).Op("=").Add(scalarLit(v))
		}
	})
}

// goType is the Go type of a field.
func (tg *toolGen) goType(fd *spec.Field) jen.Code {
	if name, ok := tg.g.Types[fd]; ok {
		return jen.Id(name)
	}
	switch fd.Type {
	case spec.TypeString:
		return jen.String()
	case spec.TypeInteger:
		return jen.Int64()
	case spec.TypeNumber:
		return jen.Float64()
	case spec.TypeBoolean:
		return jen.Bool()
	case spec.TypeArray:
		return jen.Index().Add(tg.goType(fd.Items))
	}
	return jen.Any() // unreachable for a checked spec
}

func (tg *toolGen) schemas(f *jen.File) {
	for _, s := range []struct {
		name, of string
		data     []byte
	}{
		{tg.g.InputSchema, tg.g.Args, tg.input},
		{tg.g.OutputSchema, tg.g.Result, tg.output},
	} {
		f.Line()
		comment(f, []string{fmt.Sprintf("%s is the JSON Schema (draft 2020-12) of %s, as canonical JSON.", s.name, s.of)})
		f.Var().Id(s.name).Op("=").Qual(jsonPkg, "RawMessage").Call(stringLit(string(s.data)))
	}
}

func (tg *toolGen) specVar(f *jen.File) {
	t, rt := tg.t, tg.rt
	c := func(what, v string) jen.Code { return jen.Qual(rt, runtimeConsts[what][v]) }
	items := []jen.Code{
		kv("Name", jen.Lit(t.Name)),
		kv("Version", jen.Lit(t.Version)),
		kv("Kind", c("kind", t.Kind)),
		kv("Description", jen.Lit(t.Description)),
		kv("SideEffect", c("side_effect", t.SideEffect)),
		kv("Idempotency", c("idempotency", t.Idempotency)),
	}
	if t.IdempotentWhen != nil {
		items = append(items, kv("IdempotentWhen", jen.Lit(t.IdempotentWhen.Source)))
	}
	scopes := jen.Nil()
	if len(t.RequiredScopes) > 0 {
		scopes = jen.Index().String().ValuesFunc(func(g *jen.Group) {
			for _, s := range t.RequiredScopes {
				g.Lit(s.Name)
			}
		})
	}
	items = append(items,
		kv("Risk", c("risk", t.Risk)),
		kv("RequiredScopes", scopes),
		kv("OutputTrust", c("output_trust", t.OutputTrust)),
		kv("ConfersApproval", jen.Lit(t.ConfersApproval)),
		kv("ParallelSafe", jen.Lit(t.ParallelSafe)),
		kv("Suspends", jen.Lit(t.Suspends)),
	)
	if t.Timeout != 0 {
		items = append(items, kv("Timeout", durationLit(t.Timeout)))
	}
	if t.ApprovalWhen != nil {
		items = append(items, kv("ApprovalWhen", jen.Lit(t.ApprovalWhen.Source)))
	}
	items = append(items,
		kv("OutputMaxBytes", jen.Lit(t.OutputMaxBytes)),
		kv("InputSchema", jen.Id(tg.g.InputSchema)),
		kv("OutputSchema", jen.Id(tg.g.OutputSchema)),
		kv("SchemaSHA256", jen.Lit(tg.sha)),
		kv("Source", jen.Lit(t.File)),
	)
	f.Line()
	doc := []string{fmt.Sprintf("%s is the definition of %s, as checked by toolgen.", tg.g.Spec, t.Name)}
	if d := descLines(t.Description); len(d) > 0 {
		doc = append(append(doc, ""), d...)
	}
	comment(f, doc)
	f.Var().Id(tg.g.Spec).Op("=").Qual(rt, "ToolSpec").Custom(multiValues, items...)
}

func kv(key string, v jen.Code) jen.Code { return jen.Id(key).Op(":").Add(v) }

// durationLit renders d as a readable constant expression: 30 * time.Second, time.Minute,
// 1500 * time.Millisecond.
func durationLit(d time.Duration) jen.Code {
	for _, u := range []struct {
		name string
		d    time.Duration
	}{{"Hour", time.Hour}, {"Minute", time.Minute}, {"Second", time.Second}, {"Millisecond", time.Millisecond}, {"Microsecond", time.Microsecond}} {
		if d%u.d == 0 {
			if d == u.d {
				return jen.Qual(timePkg, u.name)
			}
			return jen.Id(strconv.FormatInt(int64(d/u.d), 10)).Op("*").Qual(timePkg, u.name)
		}
	}
	return jen.Qual(timePkg, "Duration").Call(jen.Id(strconv.FormatInt(int64(d), 10)))
}

// The author's side: the Impl interface and the New function.
func (tg *toolGen) impl(f *jen.File) {
	t, g, rt := tg.t, tg.g, tg.rt
	ctx := jen.Id("ctx").Qual(ctxPkg, "Context")
	tc := jen.Id("tc").Op("*").Qual(rt, "ExecContext")
	var suspend []string
	if t.Suspends {
		suspend = []string{"", "The tool may call tc.Suspend to suspend the run until the input it asks for arrives (suspends: true)."}
	}
	f.Line()
	if !tg.watermarked() {
		comment(f, append([]string{fmt.Sprintf("%s is implemented by the author of %s: one Run method, because retrying an idempotent tool is always safe.", g.Impl, t.Name)}, suspend...))
		f.Type().Id(g.Impl).Interface(
			jen.Comment("// Run performs the tool. It may run more than once for one call: after a crash"),
			jen.Comment("// the call is retried."),
			jen.Id("Run").Params(ctx, tc, jen.Id("args").Id(g.Args)).Params(jen.Id(g.Result), jen.Error()),
		)
		f.Line()
		comment(f, []string{fmt.Sprintf("%s adapts impl to runtime.Tool, to be registered with the runtime.", g.New)})
		f.Func().Id(g.New).Params(jen.Id("impl").Id(g.Impl)).Qual(rt, "Tool").Block(
			jen.If(jen.Id("impl").Op("==").Nil()).Block(
				jen.Panic(jen.Lit(g.New+": nil implementation")),
			),
			jen.Return(jen.Op("&").Id(g.Wrapper).Values(jen.Id("impl").Op(":").Id("impl"))),
		)
		return
	}
	doc := []string{
		fmt.Sprintf("%s is implemented by the author of %s (%s): Prepare, then Commit. "+
			"The generated wrapper durably records the effect watermark after Prepare returns and "+
			"before Commit is called, so a crash can always be told apart from a sent effect.", g.Impl, t.Name, t.Idempotency),
		"",
		"P is the author's plan type: whatever Prepare works out and Commit needs.",
	}
	comment(f, append(doc, suspend...))
	f.Type().Id(g.Impl).Types(jen.Id("P").Any()).Interface(
		jen.Comment("// Prepare does everything that cannot leave a mark on the world and returns the"),
		jen.Comment("// plan Commit carries out."),
		jen.Id("Prepare").Params(ctx, tc, jen.Id("args").Id(g.Args)).Params(jen.Id("P"), jen.Error()),
		jen.Comment("// Commit performs the effect. It runs only after the watermark is durably recorded."),
		jen.Id("Commit").Params(jen.Id("ctx").Qual(ctxPkg, "Context"), jen.Id("tc").Op("*").Qual(rt, "ExecContext"), jen.Id("plan").Id("P")).Params(jen.Id(g.Result), jen.Error()),
	)
	f.Line()
	plan := strings.ToLower(g.Base[:1]) + g.Base[1:] + "Plan"
	comment(f, []string{
		fmt.Sprintf("%s adapts impl to runtime.Tool, to be registered with the runtime. "+
			"A type without both Prepare and Commit does not compile here (GEN-2). Name the plan type P "+
			"(what Prepare returns) when calling it:", g.New),
		"",
		fmt.Sprintf("\t%s.%s[%s](impl)", tg.pkg, g.New, plan),
		"",
		"With the type argument, a type that lacks one of the methods fails to compile naming it " +
			"(\"missing method Commit\"); left to inference, the same mistake is reported only as \"cannot infer P\".",
	})
	f.Func().Id(g.New).Types(jen.Id("P").Any()).Params(jen.Id("impl").Id(g.Impl).Types(jen.Id("P"))).Qual(rt, "Tool").Block(
		jen.If(jen.Id("impl").Op("==").Nil()).Block(
			jen.Panic(jen.Lit(g.New+": nil implementation")),
		),
		jen.Return(jen.Op("&").Id(g.Wrapper).Types(jen.Id("P")).Values(jen.Id("impl").Op(":").Id("impl"))),
	)
}

// wrapper emits the unexported adapter that implements runtime.Tool.
func (tg *toolGen) wrapper(f *jen.File) {
	t, g, rt := tg.t, tg.g, tg.rt
	recvType := jen.Op("*").Id(g.Wrapper)
	implType := jen.Id(g.Impl)
	if tg.watermarked() {
		recvType = jen.Op("*").Id(g.Wrapper).Types(jen.Id("P"))
		implType = jen.Id(g.Impl).Types(jen.Id("P"))
	}
	f.Line()
	comment(f, []string{fmt.Sprintf("%s adapts a %s to runtime.Tool.", g.Wrapper, g.Impl)})
	typ := f.Type().Id(g.Wrapper)
	if tg.watermarked() {
		typ.Types(jen.Id("P").Any())
	}
	typ.Struct(jen.Id("impl").Add(implType))

	f.Line()
	comment(f, []string{fmt.Sprintf("Spec returns %s.", g.Spec)})
	f.Func().Params(jen.Id("w").Add(recvType)).Id("Spec").Params().Op("*").Qual(rt, "ToolSpec").Block(
		jen.Return(jen.Op("&").Id(g.Spec)),
	)

	body := []jen.Code{tg.argsDecl()}
	body = append(body,
		jen.If(jen.Err().Op(":=").Qual(rt, "DecodeArgs").Call(jen.Id("raw"), jen.Op("&").Id("args")), jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Qual(rt, "ToolResult").Values(), jen.Err()),
		),
	)
	failure := jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Qual(rt, "FailureResult").Call(jen.Err())))
	ctxArgs := func(last string) jen.Code {
		return jen.Call(jen.Id("ctx"), jen.Id("tc"), jen.Id(last))
	}
	var doc string
	if tg.watermarked() {
		doc = "Execute decodes the arguments over their defaults, runs Prepare, records the watermark and only then runs Commit."
		body = append(body,
			jen.List(jen.Id("plan"), jen.Err()).Op(":=").Id("w").Dot("impl").Dot("Prepare").Add(ctxArgs("args")),
			failure,
			jen.Comment("// The watermark (effect_sent_at) is committed here and nowhere else: after Prepare,"),
			jen.Comment("// which leaves no mark, and before Commit, which may. Recovery reads it to tell a call"),
			jen.Comment("// that never reached the world (retry) from one that may have (RT-4)."),
			jen.If(jen.Err().Op(":=").Id("tc").Dot("MarkEffectSent").Call(jen.Id("ctx")), jen.Err().Op("!=").Nil()).Block(
				jen.Return(jen.Qual(rt, "ToolResult").Values(), jen.Qual(fmtPkg, "Errorf").Call(jen.Lit(t.Name+": record watermark: %w"), jen.Err())),
			),
			jen.List(jen.Id("res"), jen.Err()).Op(":=").Id("w").Dot("impl").Dot("Commit").Add(ctxArgs("plan")),
			failure,
		)
	} else {
		doc = "Execute decodes the arguments over their defaults and runs Run."
		body = append(body,
			jen.List(jen.Id("res"), jen.Err()).Op(":=").Id("w").Dot("impl").Dot("Run").Add(ctxArgs("args")),
			failure,
		)
	}
	body = append(body, jen.Return(jen.Qual(rt, "StructuredResult").Call(jen.Op("&").Id(g.Spec), jen.Id("res"))))

	f.Line()
	comment(f, []string{doc})
	f.Func().Params(jen.Id("w").Add(recvType)).Id("Execute").Params(
		jen.Id("ctx").Qual(ctxPkg, "Context"),
		jen.Id("tc").Op("*").Qual(rt, "ExecContext"),
		jen.Id("raw").Qual(jsonPkg, "RawMessage"),
	).Params(jen.Qual(rt, "ToolResult"), jen.Error()).Block(body...)
}

// argsDecl declares args, pre-filled with every default, top-level and nested.
func (tg *toolGen) argsDecl() jen.Code {
	vals := tg.defaultFields(tg.t.Args, nil)
	if len(vals) == 0 {
		return jen.Var().Id("args").Id(tg.g.Args)
	}
	return jen.Id("args").Op(":=").Id(tg.g.Args).Custom(multiValues, vals...)
}

// defaultFields returns the keyed elements of a struct literal for fields: the value of
// the field in given (an object default) when present, else the field's own default,
// else, for an object, the defaults of its properties. Nothing is emitted for a field
// without any default.
func (tg *toolGen) defaultFields(fields []*spec.Field, given map[string]any) []jen.Code {
	var out []jen.Code
	for _, fd := range fields {
		var v jen.Code
		if gv, ok := given[fd.Name]; ok {
			v = tg.defaultValue(fd, gv)
		} else if fd.HasDefault {
			v = tg.defaultValue(fd, fd.Default)
		} else if fd.Type == spec.TypeObject {
			if nested := tg.defaultFields(fd.Properties, nil); len(nested) > 0 {
				v = jen.Id(tg.g.Types[fd]).Values(nested...)
			}
		}
		if v != nil {
			out = append(out, kv(tg.g.Fields[fd], v))
		}
	}
	return out
}

// defaultValue renders v, a default of field fd, as a Go expression of fd's type.
func (tg *toolGen) defaultValue(fd *spec.Field, v any) jen.Code {
	return tg.defaultLit(fd, v, false)
}

// defaultLit is defaultValue; elide leaves out the type of a composite literal, as
// inside a slice literal (gofmt -s style: [][]T{{...}}, not [][]T{[]T{...}}).
func (tg *toolGen) defaultLit(fd *spec.Field, v any, elide bool) jen.Code {
	if fd.Enum != nil {
		if i := slices.Index(fd.Enum, v); i >= 0 {
			return jen.Id(tg.g.EnumConsts[fd][i])
		}
	}
	typ := func(t jen.Code) *jen.Statement {
		if elide {
			return jen.Null()
		}
		return jen.Add(t)
	}
	switch x := v.(type) {
	case []any:
		return typ(jen.Index().Add(tg.goType(fd.Items))).ValuesFunc(func(g *jen.Group) {
			for _, e := range x {
				g.Add(tg.defaultLit(fd.Items, e, true))
			}
		})
	case map[string]any:
		// Properties in declaration order; the map is only looked up.
		return typ(jen.Id(tg.g.Types[fd])).Values(tg.defaultFields(fd.Properties, x)...)
	}
	return scalarLit(v)
}

// scalarLit renders a string, int64, float64 or bool as an untyped constant.
func scalarLit(v any) jen.Code {
	switch x := v.(type) {
	case int64:
		return jen.Id(strconv.FormatInt(x, 10))
	case float64:
		return jen.Id(floatLit(x))
	default:
		return jen.Lit(v)
	}
}

func floatLit(x float64) string {
	if x == 0 {
		return "0" // not -0
	}
	if x == math.Trunc(x) && math.Abs(x) < 1e21 {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// stringLit renders s as a raw string literal when it can be one (JSON reads best
// unescaped), else as an interpreted one.
func stringLit(s string) jen.Code {
	if !strings.ContainsAny(s, "`\r\ufeff") {
		return jen.Id("`" + s + "`")
	}
	return jen.Lit(s)
}

// comment adds doc lines to a file or group as // comments. Each line is rendered
// verbatim after "// ", so nothing in a spec's description can open a block comment.
// Lines longer than commentWidth are wrapped at spaces; lines are never joined.
func comment(c interface{ Comment(string) *jen.Statement }, lines []string) {
	for _, l := range lines {
		if l == "" {
			c.Comment("//")
			continue
		}
		if strings.HasPrefix(l, "\t") { // a code line: never wrapped
			c.Comment("//" + l)
			continue
		}
		for _, w := range wrap(l, commentWidth) {
			c.Comment("// " + w)
		}
	}
}

const commentWidth = 90

// wrap splits a line at spaces into pieces of at most width bytes where it can; the
// indentation of the line is kept on every piece.
func wrap(l string, width int) []string {
	if len(l) <= width {
		return []string{l}
	}
	indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
	if len(indent) > width/2 {
		return []string{l}
	}
	var out []string
	rest := l[len(indent):]
	for len(indent)+len(rest) > width {
		cut := strings.LastIndexByte(rest[:width-len(indent)+1], ' ')
		if cut <= 0 {
			cut = strings.IndexByte(rest, ' ')
			if cut < 0 {
				break
			}
		}
		out = append(out, indent+rest[:cut])
		rest = strings.TrimLeft(rest[cut:], " ")
	}
	return append(out, indent+rest)
}

// descLines splits a description into comment lines, dropping characters that cannot
// appear in Go source (control characters, a byte order mark).
func descLines(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if unicode.IsControl(r) || r == '\ufeff' || r == unicode.ReplacementChar {
			return -1
		}
		return r
	}, s)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	return lines
}
