// Package celparity holds that an expression evaluates the same with the build's
// typed declaration of args (package spec) and the runtime's map(string, dyn) with its
// number conversion (package runtime). The language itself — library, limits, budget,
// policy bounds — is one, internal/cellang's; what remains two is the declaration of
// args, and these tests are what keeps its two readings equal.
package celparity

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"

	"github.com/toolgen/toolgen/internal/cellang"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/spec"
)

const toolYAML = `name: parity.calc
version: 1
kind: action
description: A tool whose arguments exercise every CEL type.
side_effect: read
idempotency: idempotent
risk: low
approval_when: "has(args.force) && args.force"
args:
  count: {type: integer, description: An integer., min: 0, max: 1000}
  price: {type: number, description: A number., min: 0, max: 1000000}
  name: {type: string, description: A string., max_length: 100}
  force: {type: boolean, description: A flag.}
  tags:
    type: array
    description: Strings.
    max_items: 10
    items: {type: string, description: A tag., max_length: 20}
  opts:
    type: object
    description: An object.
    properties:
      depth: {type: integer, description: Depth.}
      rate: {type: number, description: Rate.}
result:
  ok: {type: boolean, description: Always true.}
`

// Expressions over the tool's typed arguments. Each passes toolgen check (as a policy
// rule limited to the tool, so with typed args, types and cost checked).
var toolExprs = []string{
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
}

// Argument documents as a caller sends them: integral numbers where doubles are
// declared, and the reverse.
var argDocs = []string{
	`{"count": 4, "price": 3, "name": "Release", "force": true, "tags": ["a", "x"], "opts": {"depth": 2, "rate": 1}}`,
	`{"count": 3.0, "price": 2.5, "name": "main", "force": false, "tags": ["x"], "opts": {"depth": 1, "rate": 1.25}}`,
	`{"count": 0, "price": 0, "name": "re", "tags": [], "opts": {"depth": 3, "rate": 2}}`,
	`{"count": 1000, "price": 1e6, "name": "", "force": true, "tags": ["b", "ab", "x"], "opts": {"depth": 0, "rate": 0.5}}`,
}

func loadTree(t *testing.T) (*spec.Tree, *spec.Tool) {
	t.Helper()
	var rules strings.Builder
	rules.WriteString("rules:\n")
	for i, e := range toolExprs {
		fmt.Fprintf(&rules, "  - name: e%d\n    tools: [parity.calc]\n    approve_when: %q\n", i, e)
	}
	for i, e := range policyExprs {
		fmt.Fprintf(&rules, "  - name: p%d\n    deny_when: %q\n", i, e)
	}
	fsys := fstest.MapFS{
		"tools/parity.calc.yaml": {Data: []byte(toolYAML)},
		"policy.yaml":            {Data: []byte(rules.String())},
	}
	tree, diags, err := spec.LoadFS(fsys, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(diags) > 0 {
		t.Fatalf("the parity specs do not pass toolgen check:\n%v", diags.Sorted())
	}
	tool := tree.Tool("parity.calc")
	if tool == nil {
		t.Fatal("parity.calc not loaded")
	}
	return tree, tool
}

// What toolgen checked is what runs: every expression gives the same result, or
// fails alike, under spec's typed environment and runtime's.
func TestToolExpressionsRunTheSame(t *testing.T) {
	_, tool := loadTree(t)
	env, err := spec.NewArgsEnv(tool)
	if err != nil {
		t.Fatal(err)
	}
	argTypes, err := runtime.NewArgTypes(tool.InputSchema())
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range toolExprs {
		ast, iss := env.Compile(src)
		if iss != nil && iss.Err() != nil {
			t.Fatalf("spec: %s: %v", src, iss.Err())
		}
		prg, err := env.Program(ast, cel.CostLimit(cellang.CostBudget))
		if err != nil {
			t.Fatal(err)
		}
		rt, err := runtime.CompileToolExpr(src)
		if err != nil {
			t.Errorf("runtime cannot compile %q, which toolgen accepts: %v", src, err)
			continue
		}
		for _, doc := range argDocs {
			var specArgs map[string]any
			if err := json.Unmarshal([]byte(doc), &specArgs); err != nil {
				t.Fatal(err)
			}
			out, _, specErr := prg.Eval(map[string]any{"args": specArgs})
			rtArgs, err := argTypes.Decode([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			got, rtErr := rt.Eval(context.Background(), map[string]any{"args": rtArgs})
			if (specErr != nil) != (rtErr != nil) {
				t.Errorf("%s with %s: spec error %v, runtime error %v", src, doc, specErr, rtErr)
				continue
			}
			if specErr == nil && out != types.Bool(got) {
				t.Errorf("%s with %s: spec %v, runtime %v", src, doc, out, got)
			}
		}
	}
	// The one the tool spec declares.
	if _, err := runtime.CompileToolExpr(tool.ApprovalWhen.Source); err != nil {
		t.Errorf("approval_when: %v", err)
	}
}

var policyExprs = []string{
	"side_effect == 'write' && trust == 'external_untrusted' && principal.tenant == 'prod'",
	"'admin' in principal.scopes",
	"principal.id.startsWith('svc-') || size(principal.scopes) > 3",
	"tool.startsWith('mcp.') && risk in ['high', 'critical']",
	"has(args.branch) && args.branch == 'main'",
}

func TestPolicyExpressionsRunTheSame(t *testing.T) {
	loadTree(t) // the expressions pass toolgen check
	env, err := spec.NewPolicyEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	varSets := []map[string]any{
		{"tool": "mcp.gh.merge", "risk": "high", "side_effect": "write", "trust": "external_untrusted",
			"principal": map[string]any{"id": "svc-ci", "tenant": "prod", "scopes": []string{"admin"}},
			"args":      map[string]any{"branch": "main"}},
		{"tool": "review.merge", "risk": "low", "side_effect": "read", "trust": "user",
			"principal": map[string]any{"id": "alice", "tenant": "dev", "scopes": []string{}},
			"args":      map[string]any{}},
	}
	for _, src := range policyExprs {
		ast, iss := env.Compile(src)
		if iss != nil && iss.Err() != nil {
			t.Fatalf("spec: %s: %v", src, iss.Err())
		}
		prg, err := env.Program(ast, cel.CostLimit(cellang.CostBudget))
		if err != nil {
			t.Fatal(err)
		}
		rt, err := runtime.CompilePolicyRule(src)
		if err != nil {
			t.Errorf("runtime cannot compile %q, which toolgen accepts: %v", src, err)
			continue
		}
		for _, vars := range varSets {
			out, _, specErr := prg.Eval(vars)
			got, rtErr := rt.Eval(context.Background(), vars)
			if (specErr != nil) != (rtErr != nil) || specErr == nil && out != types.Bool(got) {
				t.Errorf("%s with %v: spec %v (%v), runtime %v (%v)", src, vars, out, specErr, got, rtErr)
			}
		}
	}
}
