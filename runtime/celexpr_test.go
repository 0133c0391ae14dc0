package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolgen/toolgen/internal/cellang"
)

func mustTool(t testing.TB, src string) *BoolExpr {
	t.Helper()
	e, err := CompileToolExpr(src, nil)
	if err != nil {
		t.Fatalf("CompileToolExpr(%q): %v", src, err)
	}
	return e
}

func evalArgs(t testing.TB, e *BoolExpr, args map[string]any) (bool, error) {
	t.Helper()
	return e.Eval(context.Background(), map[string]any{"args": args})
}

func decodeArgs(t testing.TB, raw string) map[string]any {
	t.Helper()
	m, err := DecodeCELArgs([]byte(raw))
	if err != nil {
		t.Fatalf("DecodeCELArgs(%s): %v", raw, err)
	}
	return m
}

func TestToolExprEval(t *testing.T) {
	for _, c := range []struct {
		expr, args string
		want       bool
	}{
		{"args.count > 3", `{"count": 3}`, false},
		{"args.count > 3", `{"count": 4}`, true},
		{"args.count > 3", `{"count": 4.0}`, true},
		{"args.count > 3", `{"count": 3.5}`, true},
		{"args.count + 1 > 3", `{"count": 3}`, true},
		{"args.count + 1 > 3", `{"count": 3e0}`, true},
		{"args.count == 9007199254740993", `{"count": 9007199254740993}`, true},
		{"args.mode == 'overwrite'", `{"mode": "overwrite"}`, true},
		{"args.path.startsWith('.git/')", `{"path": ".git/config"}`, true},
		{"has(args.force) && args.force", `{}`, false},
		{"has(args.force) && args.force", `{"force": true}`, true},
		{"args.force", `{"force": true}`, true}, // dyn without a schema, bool when typed
		{"size(args.tags) > 2", `{"tags": ["a", "b", "c"]}`, true},
		{"args.tags.exists(t, t == 'x')", `{"tags": ["a", "x"]}`, true},
		{"'x' in args.tags", `{"tags": ["a"]}`, false},
		{"args.opts.depth >= 2", `{"opts": {"depth": 2}}`, true},
		{"args.items[1] == 2", `{"items": [1, 2]}`, true},
		// ext.Strings (version 5).
		{"args.branch.lowerAscii().startsWith('release/')", `{"branch": "Release/1.2"}`, true},
		{"args.csv.split(',').size() == 3", `{"csv": "a,b,c"}`, true},
		{"args.s.trim() == 'x' && args.s.indexOf('x') == 1", `{"s": " x "}`, true},
		{"args.s.replace('a', 'b') == 'bbb'", `{"s": "aba"}`, true},
		{"['a','b'].join('-') == 'a-b'", `{}`, true},
		{"args.s.matches('^[a-z]+$')", `{"s": "abc"}`, true},
	} {
		e := mustTool(t, c.expr)
		got, err := evalArgs(t, e, decodeArgs(t, c.args))
		if err != nil {
			t.Errorf("%s with %s: %v", c.expr, c.args, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s with %s = %v, want %v", c.expr, c.args, got, c.want)
		}
	}
}

func TestToolExprEvalErrors(t *testing.T) {
	for _, c := range []struct{ expr, args string }{
		{"args.missing > 1", `{}`},
		{"args.force", `{"force": "yes"}`},         // not a bool
		{"args.count * 2.0 > 1.0", `{"count": 3}`}, // int * double: see ArgTypes
		{"args.s.startsWith('a')", `{"s": 1}`},
	} {
		e := mustTool(t, c.expr)
		if got, err := evalArgs(t, e, decodeArgs(t, c.args)); err == nil {
			t.Errorf("%s with %s = %v, want an error", c.expr, c.args, got)
		}
	}
	// Without args bound at all.
	if _, err := mustTool(t, "args.x == 1").Eval(context.Background(), nil); err == nil {
		t.Error("evaluation without args succeeded")
	}
}

func TestCompileToolExprErrors(t *testing.T) {
	for _, src := range []string{
		"", "   ", "args.", "args.count >", "1 + 2", "'x'", "tool == 'x'", "principal.id == 'x'",
		"args.s.matches('[')", // cel.ExtendedValidations: regex checked at compile time
		"unknown(args)",       // no such function
		"args.x == 1 && " + strings.Repeat("true && ", 600) + "true", // over the length limit
	} {
		if e, err := CompileToolExpr(src, nil); err == nil {
			t.Errorf("CompileToolExpr(%.40q) = %v, want an error", src, e)
		}
	}
	if _, err := CompileToolExpr("args.x == '"+strings.Repeat("a", cellang.MaxExpressionLength-16)+"'", nil); err != nil {
		t.Errorf("an expression within the length limit: %v", err)
	}
}

func TestCompilePolicyRule(t *testing.T) {
	src := "principal.tenant == 'prod' && 'admin' in principal.scopes && principal.id != '' && " +
		"tool.startsWith('mcp.') && risk == 'high' && side_effect == 'write' && trust == 'user' && args.n == 1"
	e, err := CompilePolicyRule(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	act := &policyActivation{tool: "mcp.gh.merge", risk: "high", sideEffect: "write", trust: "user",
		principal: Principal{ID: "alice", Tenant: "prod", Scopes: []string{"admin"}}, args: map[string]any{"n": int64(1)}}
	got, err := e.eval(context.Background(), act, true)
	if err != nil || !got {
		t.Fatalf("got %v, %v; want true", got, err)
	}
	if e.String() != src || !e.UsesArgs() {
		t.Errorf("String/UsesArgs wrong: %q %v", e.String(), e.UsesArgs())
	}
	if e, _ := CompilePolicyRule("risk == 'high'", nil); e.UsesArgs() {
		t.Error("UsesArgs true for an expression without args")
	}
	for _, bad := range []string{"unknown_var == 1", "tool", "risk + 1 == 2", "args == 1 ||"} {
		if _, err := CompilePolicyRule(bad, nil); err == nil {
			t.Errorf("CompilePolicyRule(%q) succeeded", bad)
		}
	}
}

// Numbers: the schema-less rule makes integral values int64; the schema makes
// "number" fields double, so arithmetic typed at build time works.
func TestArgTypes(t *testing.T) {
	schema := `{"type":"object","properties":{
		"price":{"type":"number"},
		"count":{"type":"integer"},
		"maybe":{"type":["number","null"]},
		"nested":{"type":"object","properties":{"rate":{"type":"number"}}},
		"weights":{"type":"array","items":{"type":"number"}}}}`
	at, err := NewArgTypes([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	args, err := at.Decode([]byte(`{"price": 3, "count": 3.0, "maybe": 2, "nested": {"rate": 1}, "weights": [1, 2.5], "other": 4}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"price": 3.0, "count": int64(3), "maybe": 2.0, "nested": map[string]any{"rate": 1.0},
		"weights": []any{1.0, 2.5}, "other": int64(4)}
	if fmt.Sprintf("%#v", args) != fmt.Sprintf("%#v", want) {
		t.Fatalf("decoded\n %#v\nwant\n %#v", args, want)
	}
	e := mustTool(t, "args.price * 2.0 > 5.0 && args.count + 1 == 4 && args.nested.rate * 1.5 == 1.5 && args.weights[0] / 2.0 == 0.5")
	if ok, err := evalArgs(t, e, args); err != nil || !ok {
		t.Fatalf("got %v, %v", ok, err)
	}
	// Normalize does the same to arguments decoded by encoding/json.
	var std map[string]any
	json.Unmarshal([]byte(`{"price": 3, "count": 3, "nested": {"rate": 1}, "weights": [1, 2.5]}`), &std)
	if ok, err := evalArgs(t, mustTool(t, "args.price * 2.0 > 5.0 && args.count + 1 == 4"), at.Normalize(std)); err != nil || !ok {
		t.Fatalf("normalized: got %v, %v", ok, err)
	}
	var nilTypes *ArgTypes
	std = map[string]any{"n": 3.0, "big": 1e300, "f": 2.5}
	nilTypes.Normalize(std)
	if std["n"] != int64(3) || std["big"] != 1e300 || std["f"] != 2.5 {
		t.Errorf("schema-less Normalize: %#v", std)
	}
	for _, bad := range []string{`[1]`, `"x"`, `{"a":1} {}`, `{`} {
		if _, err := DecodeCELArgs([]byte(bad)); err == nil {
			t.Errorf("DecodeCELArgs(%s) succeeded", bad)
		}
	}
	for _, empty := range []string{``, ` `, `null`, `{}`} {
		if m, err := DecodeCELArgs([]byte(empty)); err != nil || len(m) != 0 || m == nil {
			t.Errorf("DecodeCELArgs(%q) = %v, %v; want an empty map", empty, m, err)
		}
	}
	if at, err := NewArgTypes(nil); at != nil || err != nil {
		t.Errorf("NewArgTypes(nil) = %v, %v", at, err)
	}
	if _, err := NewArgTypes([]byte(`{`)); err == nil {
		t.Error("NewArgTypes accepted invalid JSON")
	}
}

func bigList(n int) []any {
	l := make([]any, n)
	for i := range l {
		l[i] = int64(i)
	}
	return l
}

// The build's cost budget is a hard limit at run time: an input larger than the
// build assumed stops the evaluation with an error.
func TestToolExprCostLimit(t *testing.T) {
	e := mustTool(t, "args.s.lowerAscii().startsWith('a')")
	if ok, err := evalArgs(t, e, map[string]any{"s": "Abc"}); err != nil || !ok {
		t.Fatalf("small input: %v, %v", ok, err)
	}
	// lowerAscii costs about one unit per ten bytes (ext.Strings version 5).
	big := strings.Repeat("A", 11*cellang.CostBudget)
	_, err := evalArgs(t, e, map[string]any{"s": big})
	if err == nil || !strings.Contains(err.Error(), "cost limit") {
		t.Fatalf("an 11 MB string: err = %v, want the cost limit", err)
	}
	// Comprehensions are limited too.
	e = mustTool(t, "args.items.all(x, args.items.all(y, x != y || x == y))")
	_, err = evalArgs(t, e, map[string]any{"items": bigList(500)})
	if err == nil || !strings.Contains(err.Error(), "cost limit") {
		t.Fatalf("250,000 iterations: err = %v, want the cost limit", err)
	}
}

// A context deadline stops a comprehension; a done context stops any expression.
func TestToolExprContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := mustTool(t, "args.x == 1").Eval(ctx, map[string]any{"args": map[string]any{"x": int64(1)}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("done context: err = %v, want context.Canceled", err)
	}
	// Under the cost budget but slow: 990 × 990 iterations of a string operation.
	e := mustTool(t, "args.items.all(x, args.items.all(y, string(x) != 'no'))")
	ctx, cancel = context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	time.Sleep(2 * time.Millisecond)
	_, err = e.Eval(ctx, map[string]any{"args": map[string]any{"items": bigList(990)}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline: err = %v, want context.DeadlineExceeded", err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	start := time.Now()
	_, err = e.Eval(ctx2, map[string]any{"args": map[string]any{"items": bigList(990)}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline mid-evaluation: err = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the deadline stopped the evaluation only after %v", d)
	}
}

// benchmarkEval evaluates e, a tool expression over args.count and args.mode, in a loop.
func benchmarkEval(b *testing.B, e *BoolExpr) {
	vars := map[string]any{"args": map[string]any{"count": int64(2), "mode": "append"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Eval(ctx, vars); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkToolExprEval(b *testing.B) {
	e := mustTool(b, "args.count > 3 && args.mode == 'overwrite'")
	benchmarkEval(b, e)
}

// The cost-tracking program is skipped only when cel-go's static estimate proves the
// budget cannot be exceeded.
func TestBoundedProgram(t *testing.T) {
	for _, c := range []struct {
		src     string
		policy  bool
		bounded bool
	}{
		{"args.count > 3 && args.mode == 'overwrite'", false, true},
		{"args.path.startsWith('.git/')", false, true},
		{"has(args.force) && args.force", false, true},
		{"true", false, true},
		{"args.a == args.b", false, false},              // both sizes unknown
		{"args.path.contains('..')", false, false},      // grows with args.path
		{"args.tags.exists(t, t == 'x')", false, false}, // grows with args.tags
		{"args.s.lowerAscii().startsWith('a')", false, false},
		{"side_effect == 'write' && trust == 'external_untrusted' && principal.tenant == 'prod'", true, true},
		{"'admin' in principal.scopes", true, true},
		{"principal.scopes.exists(s, s.contains('zz'))", true, true},
		{"tool.startsWith('mcp.') && risk in ['high', 'critical']", true, true},
		{"'x' in args.tags", true, false},
	} {
		var e *BoolExpr
		var err error
		if c.policy {
			e, err = CompilePolicyRule(c.src, nil)
		} else {
			e, err = CompileToolExpr(c.src, nil)
		}
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		if got := e.bounded != nil; got != c.bounded {
			t.Errorf("%s: bounded program %v, want %v", c.src, got, c.bounded)
		}
	}
	// Through Eval, a policy rule's variables are not bound-checked, so the budget is
	// enforced: 2,000 scopes of 10,000 characters are far beyond what was estimated.
	e, err := CompilePolicyRule("principal.scopes.exists(s, s.contains('zz'))", nil)
	if err != nil {
		t.Fatal(err)
	}
	scopes := make([]string, 2000)
	for i := range scopes {
		scopes[i] = strings.Repeat("a", 10000)
	}
	_, err = e.Eval(context.Background(), map[string]any{"principal": map[string]any{"id": "", "tenant": "", "scopes": scopes}})
	if err == nil || !strings.Contains(err.Error(), "cost limit") {
		t.Errorf("huge principal through Eval: err = %v, want the cost limit", err)
	}
}

// typedSchema is the InputSchema toolgen generates for review.merge-like arguments.
const typedSchema = `{"additionalProperties":false,"properties":{"branch":{"type":"string"},"count":{"type":"integer"},` +
	`"force":{"type":"boolean"},"price":{"type":"number"}},"type":"object"}`

// With the tool's input schema args is typed as toolgen checked it: a misspelt field
// or a type mismatch is refused when the tool is registered, and numbers are read as
// declared.
func TestTypedToolExpr(t *testing.T) {
	at, err := NewArgTypes([]byte(typedSchema))
	if err != nil {
		t.Fatal(err)
	}
	for src, want := range map[string]string{
		"args.cuont > 1":         "undefined field 'cuont'",
		"args.branch + 1 == 2":   "no matching overload",
		"args.count":             "must evaluate to bool",
		"args.count + 0.5 > 1.0": "no matching overload",
	} {
		if _, err := CompileToolExpr(src, at); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CompileToolExpr(%q) typed: %v, want %q", src, err, want)
		}
		if _, err := CompileToolExpr(src, nil); src != "args.count" && err != nil {
			t.Errorf("CompileToolExpr(%q) untyped: %v", src, err)
		}
	}
	e, err := CompileToolExpr("args.force && args.price * 2.0 > 5.0 && args.count + 1 == 4 && args.branch.startsWith('release/')", at)
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{`{"force": true, "price": 3, "count": 3.0, "branch": "release/1"}`} {
		args, err := at.Decode([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := evalArgs(t, e, args); err != nil || !ok {
			t.Errorf("%s: %v, %v", raw, ok, err)
		}
		var plain map[string]any
		json.Unmarshal([]byte(raw), &plain)
		if ok, err := evalArgs(t, e, plain); err != nil || !ok {
			t.Errorf("%s decoded by encoding/json: %v, %v", raw, ok, err)
		}
	}
}

// A policy rule limited to one tool is typed by the schema toolgen checked it with
// (PolicyRule.ArgsSchema); without it, or naming more than one tool, args is dyn.
func TestTypedPolicyRule(t *testing.T) {
	rule := PolicyRule{Name: "r", Tools: []string{"review.merge"}, Effect: PolicyApprove, When: "args.brnch == 'main'", ArgsSchema: []byte(typedSchema)}
	if _, err := NewPolicy([]PolicyRule{rule}); err == nil || !strings.Contains(err.Error(), "undefined field 'brnch'") {
		t.Errorf("typed rule with a misspelt field: %v", err)
	}
	rule.ArgsSchema = nil
	if _, err := NewPolicy([]PolicyRule{rule}); err != nil {
		t.Errorf("untyped rule: %v", err)
	}
	rule.ArgsSchema, rule.Tools = []byte(typedSchema), []string{"review.merge", "review.close"}
	if _, err := NewPolicy([]PolicyRule{rule}); err != nil {
		t.Errorf("a rule over two tools: %v", err)
	}
	rule.Tools, rule.When = []string{"review.merge"}, "args.branch.startsWith('release/') && principal.tenant == 'prod'"
	p := mustPolicy(t, rule)
	d, err := p.Decide(context.Background(), DecisionInput{
		Spec:      spec("review.merge", SideEffectWrite, RiskLow),
		Principal: Principal{ID: "a", Tenant: "prod"}, InMode: true,
		OriginTrust: TrustUser, ArgumentTrust: TrustUser,
		Args: map[string]any{"branch": "release/2"},
	})
	if err != nil || d.Verdict != VerdictNeedsApproval || d.Rule != "r" {
		t.Errorf("typed rule: %+v, %v", d, err)
	}
}

func BenchmarkToolExprEvalTyped(b *testing.B) {
	at, err := NewArgTypes([]byte(`{"type":"object","properties":{"count":{"type":"integer"},"mode":{"type":"string"}}}`))
	if err != nil {
		b.Fatal(err)
	}
	e, err := CompileToolExpr("args.count > 3 && args.mode == 'overwrite'", at)
	if err != nil {
		b.Fatal(err)
	}
	benchmarkEval(b, e)
}
