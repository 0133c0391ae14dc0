package policyload

import (
	"context"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/gen"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/spec"
)

// The repository's own policy.yaml, checked by toolgen, compiles and decides at run time.
func TestRepositoryPolicyCompilesAndDecides(t *testing.T) {
	p, err := Load("../..")
	if err != nil {
		t.Fatal(err)
	}
	mergeArgs, err := runtime.NewArgTypes(gen.ReviewMergeSpec.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	merge, err := runtime.CompileToolExpr(gen.ReviewMergeSpec.ApprovalWhen, mergeArgs)
	if err != nil {
		t.Fatal(err)
	}
	reviewer := runtime.Principal{ID: "rita", Tenant: "acme", Scopes: []string{"review.merge"}}
	d, err := p.Decide(context.Background(), runtime.DecisionInput{
		Spec: &gen.ReviewMergeSpec, Principal: reviewer, InMode: true,
		OriginTrust: runtime.TrustUser, ArgumentTrust: runtime.TrustUser,
		Args: map[string]any{"branch": "release/1.0"}, ApprovalWhen: merge,
	})
	if err != nil {
		t.Fatal(err)
	}
	if d.Verdict != runtime.VerdictNeedsApproval || d.Rule == "" {
		t.Errorf("release merge: %+v, want needs_approval by the operator rule", d)
	}
	prod := runtime.Principal{ID: "p", Tenant: "prod", Scopes: []string{"workspace.write"}}
	d, err = p.Decide(context.Background(), runtime.DecisionInput{
		Spec: &gen.WorkspaceWriteTextSpec, Principal: prod, InMode: true,
		OriginTrust: runtime.TrustUser, ArgumentTrust: runtime.TrustExternalUntrusted,
		Args: map[string]any{"path": "a.txt", "text": "x", "mode": "create"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d.Verdict != runtime.VerdictDeny || d.ReasonCode != "policy_denied" {
		t.Errorf("untrusted write in prod: %+v, want deny policy_denied", d)
	}
}

// A rule that names one tool runs with args typed by that tool's schema, as toolgen
// checked it; the others with map(string, dyn).
func TestRulesCarryTheSchemaTheyWereCheckedWith(t *testing.T) {
	tree, diags, err := spec.LoadDir("../..")
	if err != nil || len(diags) > 0 {
		t.Fatal(err, diags)
	}
	typed := 0
	for _, r := range Rules(tree.Policy) {
		switch {
		case len(r.Tools) == 1 && !strings.Contains(r.Tools[0], "*"):
			if r.ArgsSchema == nil {
				t.Errorf("rule %s names %s but carries no schema", r.Name, r.Tools[0])
			}
			typed++
			// Typed, a misspelt field is refused at run time as at build time.
			bad := r
			bad.When = "args.no_such_field == 1"
			if _, err := runtime.NewPolicy([]runtime.PolicyRule{bad}); err == nil || !strings.Contains(err.Error(), "undefined field") {
				t.Errorf("rule %s with a misspelt field: %v", r.Name, err)
			}
		case r.ArgsSchema != nil:
			t.Errorf("rule %s carries a schema", r.Name)
		}
	}
	if typed == 0 {
		t.Error("the repository's policy has no rule naming one tool")
	}
}
