package spec

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"unicode/utf8"

	"github.com/google/cel-go/cel"

	"github.com/toolgen/toolgen/internal/cellang"
)

// celToolHead is the start of every tool spec of these tests: the expression under
// test starts on line 14. Fields named b* are bounded.
const celToolHead = `name: fs.write
version: 1
description: Write a file.
side_effect: write
risk: medium
args:
  path: {type: string}
  count: {type: integer}
  mode: {type: string, enum: [create, overwrite]}
  tags: {type: array, items: {type: string}}
  opts: {type: object, properties: {depth: {type: integer}}}
  bpath: {type: string, max_length: 4096}
  btags: {type: array, max_items: 1000, items: {type: string, max_length: 256}}
`

const celToolFile = "tools/fs.write.yaml"

// celCheckTool loads a tool spec, requires it to load cleanly, and returns what
// checkToolCEL reports about it.
func celCheckTool(t *testing.T, src string) []string {
	t.Helper()
	tool, diags := LoadTool(celToolFile, celToolFile, []byte(src))
	if len(diags) > 0 || tool == nil {
		t.Fatalf("the test spec does not load cleanly:\n%s\n%v", src, diags)
	}
	var got Diagnostics
	checkToolCEL(reporter{path: celToolFile, diags: &got}, tool)
	return celStrings(got)
}

func celStrings(ds Diagnostics) []string {
	out := []string{}
	for _, d := range ds.Sorted() {
		out = append(out, d.String())
	}
	return out
}

func TestToolCEL(t *testing.T) {
	const (
		non  = "idempotency: non_idempotent\n"
		cond = "idempotency: conditionally_idempotent\n"
	)
	tests := []struct {
		name string
		tail string // from line 14
		want []string
	}{
		{
			name: "valid",
			tail: non + "approval_when: args.path.startsWith('.git/') && args.count > 2 && args.mode == 'create' && args.opts.depth < 3\n",
			want: []string{},
		},
		{
			name: "misspelt field, plain",
			//                   col 16 ^    ^ col 21
			tail: non + "approval_when: args.pathh.startsWith('.git/')\n",
			want: []string{"tools/fs.write.yaml:15:21: approval_when: undefined field 'pathh'; did you mean \"path\"? [SPEC-5.cel-error]"},
		},
		{
			name: "misspelt field, double-quoted",
			tail: non + `approval_when: "args.pathh.startsWith('.git/')"` + "\n",
			want: []string{"tools/fs.write.yaml:15:22: approval_when: undefined field 'pathh'; did you mean \"path\"? [SPEC-5.cel-error]"},
		},
		{
			name: "misspelt field, double-quoted after escapes",
			// `"args.path == \"\x41\" && args.cont > 1"`: the quote is column 16, \" 30-31,
			// \x41 32-35, \" 36-37, args 42-45, cont 47.
			tail: non + `approval_when: "args.path == \"\x41\" && args.cont > 1"` + "\n",
			want: []string{"tools/fs.write.yaml:15:47: approval_when: undefined field 'cont'; did you mean \"count\"? [SPEC-5.cel-error]"},
		},
		{
			name: "misspelt field, single-quoted with '' escapes",
			// ' is column 16, ''create'' 30-39, args 44-47, cont 49.
			tail: non + "approval_when: 'args.mode == ''create'' && args.cont > 1'\n",
			want: []string{"tools/fs.write.yaml:15:49: approval_when: undefined field 'cont'; did you mean \"count\"? [SPEC-5.cel-error]"},
		},
		{
			name: "misspelt field, literal block",
			tail: non + "approval_when: |\n  args.mode == 'create' &&\n    args.cont > 1\n",
			want: []string{"tools/fs.write.yaml:17:10: approval_when: undefined field 'cont'; did you mean \"count\"? [SPEC-5.cel-error]"},
		},
		{
			name: "misspelt field, literal block with indentation indicator and blank lines",
			tail: non + "approval_when: |2-\n\n     args.mode == 'create'\n\n     && args.cont > 1\n",
			want: []string{"tools/fs.write.yaml:19:14: approval_when: undefined field 'cont'; did you mean \"count\"? [SPEC-5.cel-error]"},
		},
		{
			name: "misspelt field, folded block",
			tail: non + "approval_when: >-\n  args.mode == 'create'\n  && args.cont > 1\n",
			want: []string{"tools/fs.write.yaml:17:11: approval_when: undefined field 'cont'; did you mean \"count\"? [SPEC-5.cel-error]"},
		},
		{
			name: "misspelt field, multi-line plain",
			tail: non + "approval_when: args.mode == 'create'\n  && args.cont > 1\n",
			want: []string{"tools/fs.write.yaml:16:11: approval_when: undefined field 'cont'; did you mean \"count\"? [SPEC-5.cel-error]"},
		},
		{
			name: "misspelt nested field",
			// args.opts.dept: args 16-19, opts 21-24, dept 26.
			tail: non + "approval_when: args.opts.dept > 1\n",
			want: []string{"tools/fs.write.yaml:15:26: approval_when: undefined field 'dept'; did you mean \"depth\"? [SPEC-5.cel-error]"},
		},
		{
			name: "every error of an expression",
			// args.pathh: pathh at 21; args.cont: cont at 42.
			tail: non + "approval_when: args.pathh == 'x' || args.cont > 1\n",
			want: []string{
				"tools/fs.write.yaml:15:21: approval_when: undefined field 'pathh'; did you mean \"path\"? [SPEC-5.cel-error]",
				"tools/fs.write.yaml:15:42: approval_when: undefined field 'cont'; did you mean \"count\"? [SPEC-5.cel-error]",
			},
		},
		{
			name: "both expressions",
			// idempotent_when: args starts at 18, pathh at 23.
			tail: cond + "idempotent_when: args.pathh == 'x'\napproval_when: args.mode == 1\n",
			want: []string{
				"tools/fs.write.yaml:15:23: idempotent_when: undefined field 'pathh'; did you mean \"path\"? [SPEC-5.cel-error]",
				"tools/fs.write.yaml:16:26: approval_when: found no matching overload for '_==_' applied to '(string, int)' [SPEC-5.cel-error]",
			},
		},
		{
			name: "type mismatch",
			// args.count + 'x': + is column 27.
			tail: non + "approval_when: args.count + 'x' > 1\n",
			want: []string{"tools/fs.write.yaml:15:27: approval_when: found no matching overload for '_+_' applied to '(int, string)' [SPEC-5.cel-error]"},
		},
		{
			name: "function on the wrong type",
			// args.count.startsWith: startsWith is column 27.
			tail: non + "approval_when: args.count.startsWith('x')\n",
			want: []string{"tools/fs.write.yaml:15:27: approval_when: found no matching overload for 'startsWith' applied to 'int.(string)' [SPEC-5.cel-error]"},
		},
		{
			name: "non-bool result",
			tail: non + "approval_when: args.count + 1\n",
			want: []string{"tools/fs.write.yaml:15:16: approval_when: the expression must evaluate to bool, but its type is int [SPEC-5.cel-not-bool]"},
		},
		{
			name: "non-bool result, literal block",
			tail: non + "approval_when: |\n  args.tags\n",
			want: []string{"tools/fs.write.yaml:16:3: approval_when: the expression must evaluate to bool, but its type is list(string) [SPEC-5.cel-not-bool]"},
		},
		{
			name: "syntax error",
			// the expression is columns 18-44; the end of input is column 45.
			tail: cond + "idempotent_when: args.mode == 'overwrite' &&\n",
			want: []string{"tools/fs.write.yaml:15:45: idempotent_when: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER} [SPEC-5.cel-error]"},
		},
		{
			name: "syntax error, double-quoted",
			// the quote is column 18, the stray ) column 44.
			tail: cond + `idempotent_when: "args.mode == 'overwrite' ) "` + "\n",
			want: []string{"tools/fs.write.yaml:15:44: idempotent_when: Syntax error: extraneous input ')' expecting <EOF> [SPEC-5.cel-error]"},
		},
		{
			name: "undeclared variable",
			tail: non + "approval_when: arg.path == 'x'\n",
			want: []string{"tools/fs.write.yaml:15:16: approval_when: undeclared reference to 'arg' (in container ''); did you mean \"args\"? [SPEC-5.cel-error]"},
		},
		{
			name: "bad regex literal",
			// args.path.matches('['): the literal is column 34.
			tail: non + "approval_when: args.path.matches('[')\n",
			want: []string{"tools/fs.write.yaml:15:34: approval_when: invalid matches argument: error parsing regexp: missing closing ]: `[` [SPEC-5.cel-error]"},
		},
		{
			name: "strings extension",
			tail: non + "approval_when: args.bpath.lowerAscii().split('/').exists(s, s == '.git') && args.mode.upperAscii() == 'CREATE'\n",
			want: []string{},
		},
		{
			name: "cheap expression on an unbounded string passes",
			tail: non + "approval_when: args.path.startsWith('.git/') || args.path.endsWith('.key') || args.path == 'x' || size(args.tags) > 3\n",
			want: []string{},
		},
		{
			name: "comprehension over an unbounded list",
			tail: non + "approval_when: args.tags.exists(t, t.matches('^release/'))\n",
			want: []string{"tools/fs.write.yaml:15:16: approval_when: estimated cost 18446744073709551615 exceeds the budget of 1000000; bound the inputs it iterates over with max_length (strings) or max_items (arrays) on args.tags, args.tags.items [SPEC-5.cel-cost-budget]"},
		},
		{
			name: "membership in an unbounded list",
			tail: non + "approval_when: |\n  args.tags.exists(t, t == 'x')\n",
			want: []string{"tools/fs.write.yaml:16:3: approval_when: estimated cost 18446744073709551615 exceeds the budget of 1000000; bound the inputs it iterates over with max_length (strings) or max_items (arrays) on args.tags [SPEC-5.cel-cost-budget]"},
		},
		{
			name: "search in an unbounded string",
			tail: non + "approval_when: args.path.contains('..')\n",
			want: []string{"tools/fs.write.yaml:15:16: approval_when: estimated cost 1844674407370955266 exceeds the budget of 1000000; bound the inputs it iterates over with max_length (strings) or max_items (arrays) on args.path [SPEC-5.cel-cost-budget]"},
		},
		{
			name: "comprehension over a bounded list passes",
			tail: non + "approval_when: args.btags.exists(t, t.matches('^release/')) && args.bpath.contains('..')\n",
			want: []string{},
		},
		{
			name: "enum values bound a string",
			tail: non + "approval_when: args.mode.contains('over')\n",
			want: []string{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := celCheckTool(t, celToolHead+tc.tail)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

const celPolicyTool = `name: review.merge
version: 1
description: Merge a change.
side_effect: write
idempotency: non_idempotent
risk: high
args:
  branch: {type: string}
  labels: {type: array, items: {type: string}}
`

func TestPolicyCEL(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		want   []string
	}{
		{
			name: "typed args with one tool",
			policy: `rules:
  - name: merge-release
    tools: [review.merge]
    approve_when: "args.branch.startsWith('release/') || args.brnch == 'main'"
`,
			// the quote is column 19; args.brnch: brnch is column 63.
			want: []string{"policy.yaml:4:63: rule merge-release: approve_when: undefined field 'brnch'; did you mean \"branch\"? [POL-2.cel-error]"},
		},
		{
			name: "typed args: type mismatch",
			policy: `rules:
  - name: merge-release
    tools: [review.merge]
    deny_when: args.branch > 1
`,
			want: []string{"policy.yaml:4:28: rule merge-release: deny_when: found no matching overload for '_>_' applied to '(string, int)' [POL-2.cel-error]"},
		},
		{
			name: "map args without tools",
			policy: `rules:
  - name: anything
    deny_when: args.anything == 'x' && principal.tenant == 'prod' && 'admin' in principal.scopes
`,
			want: []string{},
		},
		{
			name: "map args with two tools",
			policy: `rules:
  - name: two
    tools: [review.merge, review.merge]
    deny_when: args.anything == 'x'
`,
			want: []string{},
		},
		{
			name: "every declared variable",
			policy: `rules:
  - name: vars
    allow_when: |
      tool.startsWith('review.') && risk != 'critical' && side_effect == 'write' &&
      trust == 'user' && principal.id != '' && principal.scopes.exists(s, s.startsWith('review:'))
`,
			want: []string{},
		},
		{
			name: "unknown variable",
			policy: `rules:
  - name: unknown
    deny_when: tenant == 'prod'
`,
			want: []string{"policy.yaml:3:16: rule unknown: deny_when: undeclared reference to 'tenant' (in container ''); did you mean \"principal.tenant\"? [POL-2.cel-error]"},
		},
		{
			name: "misspelt principal field, folded",
			policy: `rules:
  - name: principal
    deny_when: >-
      trust == 'external_untrusted'
      && principal.tenannt == 'prod'
`,
			want: []string{"policy.yaml:5:20: rule principal: deny_when: undefined field 'tenannt'; did you mean \"tenant\"? [POL-2.cel-error]"},
		},
		{
			name: "non-bool",
			policy: `rules:
  - name: dyn
    deny_when: args.flag
`,
			want: []string{"policy.yaml:3:16: rule dyn: deny_when: the expression must evaluate to bool, but its type is dyn; its value is only known at run time, so compare it explicitly (for example == true) [POL-2.cel-not-bool]"},
		},
		{
			name: "cost over untyped args",
			policy: `rules:
  - name: cost
    deny_when: args.labels.exists(l, l == 'x')
`,
			want: []string{"policy.yaml:3:16: rule cost: deny_when: estimated cost 18446744073709551615 exceeds the budget of 1000000; args is untyped in this rule: name exactly one tool in its tools so that the tool's max_length and max_items apply [POL-2.cel-cost-budget]"},
		},
		{
			name: "cost over typed args",
			policy: `rules:
  - name: cost
    tools: [review.merge]
    deny_when: args.labels.exists(l, l == 'x')
`,
			want: []string{"policy.yaml:4:16: rule cost: deny_when: estimated cost 18446744073709551615 exceeds the budget of 1000000; bound the inputs it iterates over with max_length (strings) or max_items (arrays) on args.labels [POL-2.cel-cost-budget]"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{
				"tools/review.merge.yaml": {Data: []byte(celPolicyTool)},
				"policy.yaml":             {Data: []byte(tc.policy)},
			}
			_, diags, err := LoadFS(fsys, "")
			if err != nil {
				t.Fatal(err)
			}
			got := celStrings(diags)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestArgsEnvEvaluates shows the provider serving the runtime: the checked expression
// evaluates against JSON decoded into map[string]any.
func TestArgsEnvEvaluates(t *testing.T) {
	src := `name: fs.write
version: 1
description: d
side_effect: write
idempotency: non_idempotent
risk: medium
args:
  path: {type: string}
  count: {type: integer}
  ratio: {type: number}
  mode: {type: string, enum: [create, overwrite], default: create}
  tags: {type: array, items: {type: string}}
  sizes: {type: array, items: {type: integer}}
  opts: {type: object, properties: {depth: {type: integer}}}
  entries: {type: array, items: {type: object, properties: {n: {type: integer}}}}
`
	tool, diags := LoadTool(celToolFile, celToolFile, []byte(src))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	env, err := NewArgsEnv(tool)
	if err != nil {
		t.Fatal(err)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(`{"path": ".git/config", "count": 3, "ratio": 1, "tags": ["a", "x"],
		"sizes": [1, 2], "opts": {"depth": 2}, "entries": [{"n": 2}]}`), &args); err != nil {
		t.Fatal(err)
	}
	for expr, want := range map[string]bool{
		"args.path.startsWith('.git/')":                                   true,
		"args.count + 1 == 4":                                             true,
		"args.ratio * 2.0 == 2.0":                                         true,
		"args.tags.exists(t, t == 'x')":                                   true,
		"args.sizes.map(s, s * 2) == [2, 4]":                              true,
		"args.opts.depth == 2":                                            true,
		"args.entries.exists(e, e.n + 1 == 3)":                            true,
		"has(args.mode)":                                                  false,
		"has(args.path) && !has(args.opts.depth) || size(args.tags) == 2": true,
	} {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Errorf("%s: %v", expr, iss.Err())
			continue
		}
		prg, err := env.Program(ast, cel.CostLimit(cellang.CostBudget))
		if err != nil {
			t.Errorf("%s: %v", expr, err)
			continue
		}
		out, _, err := prg.Eval(map[string]any{"args": args})
		if err != nil {
			t.Errorf("%s: %v", expr, err)
			continue
		}
		if out.Value() != want {
			t.Errorf("%s = %v, want %v", expr, out, want)
		}
	}
}

func TestPolicyEnvEvaluates(t *testing.T) {
	env, err := NewPolicyEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile("'admin' in principal.scopes && principal.tenant == 'prod' && args.n == 1 && tool == 'a.b'")
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := prg.Eval(map[string]any{
		"tool": "a.b", "risk": "low", "side_effect": "none", "trust": "user",
		"principal": map[string]any{"id": "u1", "tenant": "prod", "scopes": []any{"admin"}},
		"args":      map[string]any{"n": 1},
	})
	if err != nil || out.Value() != true {
		t.Fatalf("got %v, %v", out, err)
	}
}

// TestCELPositionsInFile checks that odd expressions in every scalar style never make
// the checker panic and never give a position outside the file.
func TestCELPositionsInFile(t *testing.T) {
	exprs := []string{
		"approval_when: \"\\\n  args.pathh\"",
		"approval_when: \"args.path == '\\u00e9\\U0001F600' && args.pathh\"",
		"approval_when: 'args.path == ''\u00e9'' && args.pathh'",
		"approval_when: \"args.path == '\\\n\n   x' && args.x\"",
		"approval_when: >\n  args.path ==\n\n    'x'\n  && args.pathh\n\n",
		"approval_when: |+\n  args.pathh\n\n\n",
		"approval_when: args.path == \"x\"\n\n\n   \n  && args.pathh",
		"approval_when: !!str 'args.pathh'",
		"approval_when: \"'''\"",
		"approval_when: \"r'''\\n\\n''' == args.pathh\"",
		"approval_when: |\n  '\n  ",
		"approval_when: \"" + strings.Repeat("(", 300) + "\"",
		"approval_when: \"" + strings.Repeat("a", cellang.MaxExpressionLength+1) + "\"",
		"approval_when: \"args.path\\tx\"",
		"approval_when: \"\\x00\"",
		"approval_when: \"args.tags.all(a, args.tags.all(b, args.tags.all(c, a + b + c == '')))\"",
		"approval_when: \"\\u00e9.x\"",
		"approval_when: >2\n     args\n   .pathh",
		"approval_when: args.path == 'x'\r\n  && args.pathh\r\n",
	}
	for _, x := range exprs {
		src := celToolHead + "idempotency: non_idempotent\n" + x + "\n"
		tool, diags := LoadTool(celToolFile, celToolFile, []byte(src))
		if tool == nil || len(diags) > 0 {
			t.Errorf("%q does not load: %v", x, diags)
			continue
		}
		var got Diagnostics
		checkToolCEL(reporter{path: celToolFile, diags: &got}, tool)
		if len(got) == 0 {
			t.Errorf("%q: no finding", x)
		}
		lines := strings.Split(src, "\n")
		for _, d := range got {
			p := d.Pos
			if p.Line < 1 || p.Line > len(lines) || p.Col < 1 || p.Col > utf8.RuneCountInString(lines[p.Line-1])+1 {
				t.Errorf("%q: %s is outside the file", x, d)
			}
			if strings.Contains(d.Message, "\n") || strings.Contains(d.Message, " | ") {
				t.Errorf("%q: %s prints a snippet", x, d)
			}
		}
		if strings.Contains(x, "pathh") && !strings.Contains(fmt.Sprint(got), "undefined field 'pathh'") {
			t.Errorf("%q: %v", x, got)
		}
	}
}

func FuzzToolCEL(f *testing.F) {
	f.Add("approval_when: args.pathh == 'x'")
	f.Add("approval_when: \"args.path == \\\"x\\\" && args.pathh\"")
	f.Add("approval_when: >\n  args.path ==\n  args.pathh\n")
	f.Add("approval_when: |\n  args.tags.exists(t,\n    t.matches('['))\n")
	f.Fuzz(func(t *testing.T, tail string) {
		src := celToolHead + "idempotency: non_idempotent\n" + tail + "\n"
		tool, _ := LoadTool(celToolFile, celToolFile, []byte(src))
		if tool == nil {
			return
		}
		var got Diagnostics
		checkToolCEL(reporter{path: celToolFile, diags: &got}, tool)
		// Every finding sits inside the file, names a rule and says something.
		checkFuzzDiags(t, "CEL", got, map[string][]int{celToolFile: editorLineLengths([]byte(src))})
	})
}

// BenchmarkCheckToolCEL1000 checks 1,000 tools with one expression each.
func BenchmarkCheckToolCEL1000(b *testing.B) {
	var tools []*Tool
	for i := range 1000 {
		src := fmt.Sprintf("name: fs.write%d\nversion: 1\ndescription: d\nside_effect: write\nidempotency: non_idempotent\nrisk: medium\n"+
			"approval_when: args.path.startsWith('.git/') && args.count > %d\nargs:\n  path: {type: string}\n  count: {type: integer}\n", i, i)
		tool, diags := LoadTool(fmt.Sprintf("tools/fs.write%d.yaml", i), "x", []byte(src))
		if len(diags) > 0 {
			b.Fatal(diags)
		}
		tools = append(tools, tool)
	}
	NewPolicyEnv(nil) // build the base environment before timing
	for b.Loop() {
		var diags Diagnostics
		for _, tool := range tools {
			checkToolCEL(reporter{path: "x", diags: &diags}, tool)
		}
		if len(diags) > 0 {
			b.Fatal(diags)
		}
	}
}

// The declaration the build checks with is the one the runtime reads from the
// registered InputSchema: reading the schema's value and its encoding agree, for every
// tool of the repository and the builtins.
func TestCELArgsAreTheInputSchemas(t *testing.T) {
	tree, diags, err := LoadDir("..")
	if err != nil || len(diags) > 0 {
		t.Fatal(err, diags)
	}
	tools := append(slices.Clone(tree.Tools), Builtins()...)
	for _, tool := range tools {
		checked, err := toolArgs(tool)
		if err != nil {
			t.Fatal(err)
		}
		run, err := cellang.NewArgs(tool.Name, tool.InputSchema())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(checked, run) || !checked.Typed() {
			t.Errorf("%s: the CEL declaration of args differs between its schema and the schema's encoding", tool.Name)
		}
	}
	if len(tools) < 10 {
		t.Errorf("only %d tools", len(tools))
	}
}
