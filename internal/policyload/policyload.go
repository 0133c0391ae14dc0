// Package policyload turns a checked policy.yaml (spec.Policy) into the run-time
// operator rules of the pipeline (runtime.PolicyRule), so the host loads the same
// rules toolgen checked. It exists because runtime must not import spec.
//
// It imports spec and runtime and nothing else of this module.
package policyload

import (
	"fmt"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/spec"
)

// Rules converts p's rules, in order. A nil policy has no rules.
func Rules(p *spec.Policy) []runtime.PolicyRule {
	if p == nil {
		return nil
	}
	out := make([]runtime.PolicyRule, 0, len(p.Rules))
	for _, r := range p.Rules {
		if r == nil || r.When == nil {
			continue
		}
		rule := runtime.PolicyRule{Name: r.Name, Effect: r.Effect, When: r.When.Source}
		if r.ArgsTool != nil {
			// The rule was checked with args typed by this tool: it runs so too.
			rule.ArgsSchema = r.ArgsTool.InputSchema()
		}
		for _, t := range r.Tools {
			rule.Tools = append(rule.Tools, t.Name)
		}
		out = append(out, rule)
	}
	return out
}

// Load loads and checks the spec root dir and compiles its policy for the runtime. A
// spec finding is an error: a host never runs with a policy toolgen would reject.
func Load(dir string) (*runtime.Policy, error) {
	tree, diags, err := spec.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	if len(diags) > 0 {
		return nil, fmt.Errorf("%s: %d spec problems, first: %s", dir, len(diags), diags[0])
	}
	return runtime.NewPolicy(Rules(tree.Policy))
}
