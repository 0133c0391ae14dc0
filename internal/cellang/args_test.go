package cellang

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// schema is the InputSchema toolgen generates for a tool whose arguments exercise
// every CEL type (spec.Tool.InputSchema: canonical JSON, no additional properties).
const schema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,"properties":{
	"count":{"description":"An integer.","maximum":1000,"minimum":0,"type":"integer"},
	"force":{"description":"A flag.","type":"boolean"},
	"name":{"description":"A string.","maxLength":100,"type":"string"},
	"opts":{"additionalProperties":false,"description":"An object.","properties":{
		"depth":{"description":"Depth.","type":"integer"},
		"rate":{"description":"Rate.","type":"number"}},"type":"object"},
	"price":{"description":"A number.","maximum":1000000,"minimum":0,"type":"number"},
	"sizes":{"description":"Integers.","items":{"type":"integer"},"type":"array"},
	"tags":{"description":"Strings.","items":{"description":"A tag.","maxLength":20,"type":"string"},"maxItems":10,"type":"array"},
	"entries":{"items":{"additionalProperties":false,"properties":{"n":{"type":"integer"}},"type":"object"},"type":"array"}},
	"required":["count"],"type":"object"}`

// Expressions over the typed arguments, each valid with args typed (as toolgen
// checks a tool's expressions and the rules limited to the tool) and with
// map(string, dyn) (a rule over every tool).
var exprs = []string{
	"args.count > 3",
	"args.count + 1 > 4",
	"args.count * 2 == 8",
	"args.price * 2.0 > 5.0",
	"args.price > 3.0",
	"args.price + 0.5 == 3.5",
	"has(args.force) && args.force",
	"args.force == true",
	"args.name.lowerAscii().startsWith('re')",
	"args.name.indexOf('e') == 1",
	"size(args.tags) > 1 && 'x' in args.tags",
	"args.tags.exists(t, t.startsWith('a'))",
	"args.opts.depth * 2 >= 4 && args.opts.rate < 1.5",
	"args.opts.rate * 2.0 >= 2.0",
	"has(args.opts) && has(args.opts.depth)",
	"args.sizes.map(s, s * 2) == [2, 4]",
	"args.entries.exists(e, e.n + 1 == 3)",
}

// Argument documents as a caller sends them: integral numbers where doubles are
// declared, and the reverse; the last lacks optional fields.
var docs = []string{
	`{"count": 4, "price": 3, "name": "Release", "force": true, "tags": ["a", "x"], "opts": {"depth": 2, "rate": 1}, "sizes": [1, 2], "entries": [{"n": 2}]}`,
	`{"count": 3.0, "price": 2.5, "name": "main", "force": false, "tags": ["x"], "opts": {"depth": 1, "rate": 1.25}, "sizes": [1.0, 2e0], "entries": []}`,
	`{"count": 0, "price": 0, "name": "re", "tags": [], "opts": {"depth": 3, "rate": 2}, "sizes": [], "entries": [{"n": 1.0}, {"n": 2}]}`,
	`{"count": 1000, "price": 1e6, "name": "", "force": true, "tags": ["b", "ab", "x"], "opts": {"depth": 0, "rate": 0.5}, "sizes": [2], "entries": [{"n": 5}]}`,
	`{"count": 1}`,
}

func mustArgs(t *testing.T) *Args {
	t.Helper()
	a, err := NewArgs("parity.calc", []byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	if !a.Typed() {
		t.Fatal("an object schema with properties declares typed args")
	}
	return a
}

func compile(t *testing.T, env *cel.Env, src string) cel.Program {
	t.Helper()
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		t.Fatalf("%s: %v", src, iss.Err())
	}
	prg, err := env.Program(ast, ProgramOptions(true)...)
	if err != nil {
		t.Fatal(err)
	}
	return prg
}

type outcome struct {
	val ref.Val
	err error
}

func (o outcome) String() string {
	if o.err != nil {
		return "error: " + o.err.Error()
	}
	return fmt.Sprint(o.val)
}

func (o outcome) same(p outcome) bool {
	if (o.err != nil) != (p.err != nil) {
		return false
	}
	return o.err != nil || o.val.Equal(p.val) == types.True
}

// One declaration, every way in: an expression gives the same result, or fails
// alike, whether args is typed (a tool's expressions, a rule limited to the tool)
// or map(string, dyn) (a rule over every tool), and whether the arguments were
// decoded by the schema (Decode, as the runtime does) or are plain encoding/json
// values read through the typed fields.
func TestExpressionsRunTheSameEveryWay(t *testing.T) {
	a := mustArgs(t)
	toolEnv, _, err := ToolEnv(a)
	if err != nil {
		t.Fatal(err)
	}
	typedPolicy, _, err := PolicyEnv(a)
	if err != nil {
		t.Fatal(err)
	}
	dynPolicy, _, err := PolicyEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	principal := map[string]any{"id": "u", "tenant": "t", "scopes": []string{}}
	policyVars := func(args map[string]any) map[string]any {
		return map[string]any{"tool": "parity.calc", "risk": "low", "side_effect": "read", "trust": "user", "principal": principal, "args": args}
	}
	eval := func(prg cel.Program, vars map[string]any) outcome {
		out, _, err := prg.Eval(vars)
		return outcome{out, err}
	}
	held := map[string]bool{}
	for _, src := range exprs {
		tool, typed, dyn := compile(t, toolEnv, src), compile(t, typedPolicy, src), compile(t, dynPolicy, src)
		for _, doc := range docs {
			decoded, err := a.Decode([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			var plain map[string]any
			if err := json.Unmarshal([]byte(doc), &plain); err != nil {
				t.Fatal(err)
			}
			want := eval(tool, map[string]any{"args": decoded})
			if want.err == nil && want.val == types.True {
				held[src] = true
			}
			for name, got := range map[string]outcome{
				"typed, plain JSON":         eval(tool, map[string]any{"args": plain}),
				"policy typed, decoded":     eval(typed, policyVars(decoded)),
				"policy typed, plain JSON":  eval(typed, policyVars(plain)),
				"policy dyn, decoded":       eval(dyn, policyVars(decoded)),
				"policy dyn, schema-less ":  eval(dyn, policyVars(mustDecodeArgs(t, doc))),
				"typed, decoded, no schema": eval(tool, map[string]any{"args": mustDecodeArgs(t, doc)}),
			} {
				if name == "policy dyn, schema-less " || name == "typed, decoded, no schema" {
					// Without the schema an integral price is an int: only the
					// expressions that do no arithmetic on a double hold alike.
					if strings.Contains(src, "price") || strings.Contains(src, "rate") {
						continue
					}
				}
				if !want.same(got) {
					t.Errorf("%s with %s: %s; %s gives %s", src, doc, want, name, got)
				}
			}
		}
	}
	for _, src := range exprs {
		if !held[src] {
			t.Errorf("%s holds for none of the documents: the table tests too little", src)
		}
	}
}

func mustDecodeArgs(t *testing.T, doc string) map[string]any {
	t.Helper()
	m, err := DecodeArgs([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The policy's own variables, with principal typed alike in every environment.
func TestPolicyVariables(t *testing.T) {
	env, _, err := PolicyEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	for src, want := range map[string]bool{
		"side_effect == 'write' && trust == 'external_untrusted' && principal.tenant == 'prod'": true,
		"'admin' in principal.scopes":                                         true,
		"principal.id.startsWith('svc-') || size(principal.scopes) > 3":       true,
		"tool.startsWith('mcp.') && risk in ['high', 'critical']":             true,
		"has(args.branch) && args.branch == 'main'":                           true,
		"principal.scopes.exists(s, s == 'admin') && principal.id != 'alice'": true,
	} {
		prg := compile(t, env, src)
		for _, scopes := range []any{[]string{"admin"}, []any{"admin"}} {
			out, _, err := prg.Eval(map[string]any{"tool": "mcp.gh.merge", "risk": "high", "side_effect": "write", "trust": "external_untrusted",
				"principal": map[string]any{"id": "svc-ci", "tenant": "prod", "scopes": scopes},
				"args":      map[string]any{"branch": "main"}})
			if err != nil || out != types.Bool(want) {
				t.Errorf("%s with scopes %T: %v, %v; want %v", src, scopes, out, err, want)
			}
		}
	}
	if _, iss := env.Compile("principal.tennant == 'x'"); iss.Err() == nil {
		t.Error("a misspelt field of principal compiled")
	}
}

// Typed args refuse what the schema does not declare, and say what was meant.
func TestTypedArgsDiagnose(t *testing.T) {
	env, p, err := ToolEnv(mustArgs(t))
	if err != nil {
		t.Fatal(err)
	}
	// spec's closest is an edit distance; an anagram will do here.
	closest := func(s string, known []string) string {
		sorted := func(s string) string { r := []rune(s); slices.Sort(r); return string(r) }
		for _, k := range known {
			if sorted(k) == sorted(s) {
				return k
			}
		}
		return ""
	}
	for src, want := range map[string]string{
		"args.cuont > 1":        `; did you mean "count"?`,
		"args.opts.zz == 1":     "; the fields of args.opts are depth, rate",
		"args.entries[0].q > 1": "; the fields of args.entries[] are n",
	} {
		p.ForgetMisses()
		_, iss := env.Compile(src)
		if iss.Err() == nil || !strings.Contains(iss.Err().Error(), "undefined field") {
			t.Errorf("%s: %v, want an undefined field", src, iss.Err())
			continue
		}
		field := strings.Split(strings.Split(iss.Err().Error(), "undefined field '")[1], "'")[0]
		if got := p.SuggestField(field, closest); got != want {
			t.Errorf("%s: suggestion %q, want %q", src, got, want)
		}
	}
	for src, why := range map[string]string{
		"args.count + 1.5 > 2": "no matching overload",
		"args.name > 1":        "no matching overload",
		"args.force":           "", // bool: compiles
	} {
		_, iss := env.Compile(src)
		if why == "" {
			if iss.Err() != nil {
				t.Errorf("%s: %v", src, iss.Err())
			}
		} else if iss.Err() == nil || !strings.Contains(iss.Err().Error(), why) {
			t.Errorf("%s: %v, want %q", src, iss.Err(), why)
		}
	}
	if got := p.Fields("args"); strings.Join(got, ",") != "count,entries,force,name,opts,price,sizes,tags" {
		t.Errorf("Fields(args) = %v", got)
	}
}

// Reading a typed field converts a copy: the caller's arguments stay as they were.
func TestFieldsDoNotModifyTheArguments(t *testing.T) {
	env, _, err := ToolEnv(mustArgs(t))
	if err != nil {
		t.Fatal(err)
	}
	var plain map[string]any
	json.Unmarshal([]byte(`{"count": 2, "sizes": [1, 2]}`), &plain)
	out, _, err := compile(t, env, "args.sizes.map(s, s * args.count) == [2, 4]").Eval(map[string]any{"args": plain})
	if err != nil || out != types.True {
		t.Fatalf("got %v, %v", out, err)
	}
	if plain["count"] != 2.0 || plain["sizes"].([]any)[0] != 1.0 {
		t.Errorf("the arguments were modified: %#v", plain)
	}
}

func TestDecode(t *testing.T) {
	a, err := NewArgs("t", []byte(`{"type":"object","properties":{
		"price":{"type":"number"},
		"count":{"type":"integer"},
		"maybe":{"type":["number","null"]},
		"nested":{"type":"object","properties":{"rate":{"type":"number"}}},
		"loose":{"properties":{"rate":{"type":"number"}}},
		"weights":{"type":"array","items":{"type":"number"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	args, err := a.Decode([]byte(`{"price": 3, "count": 3.0, "maybe": 2, "nested": {"rate": 1}, "loose": {"rate": 1}, "weights": [1, 2.5], "other": 4, "frac": 2.5, "big": 9007199254740993}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"price": 3.0, "count": int64(3), "maybe": 2.0, "nested": map[string]any{"rate": 1.0}, "loose": map[string]any{"rate": 1.0},
		"weights": []any{1.0, 2.5}, "other": int64(4), "frac": 2.5, "big": int64(9007199254740993)}
	if fmt.Sprintf("%#v", args) != fmt.Sprintf("%#v", want) {
		t.Fatalf("decoded\n %#v\nwant\n %#v", args, want)
	}
	for _, s := range []string{``, `  `} {
		if a, err := NewArgs("t", []byte(s)); a != nil || err != nil {
			t.Errorf("NewArgs(%q) = %v, %v", s, a, err)
		}
	}
	for _, s := range []string{`{"type":"object"}`, `{"type":"string"}`, `true`} {
		if a, err := NewArgs("t", []byte(s)); err != nil || a.Typed() {
			t.Errorf("NewArgs(%s): typed %v, %v; want map(string, dyn)", s, a.Typed(), err)
		}
	}
	if _, err := NewArgs("t", []byte(`{`)); err == nil {
		t.Error("NewArgs accepted invalid JSON")
	}
}

func TestTypeName(t *testing.T) {
	for in, want := range map[string]string{"fs.write": "toolgen.args.fs_write", "": "toolgen.args.tool", "A-b": "toolgen.args.__b"} {
		if got := TypeName(in); got != want {
			t.Errorf("TypeName(%q) = %q, want %q", in, got, want)
		}
	}
}
