package policyload

import (
	"context"
	"testing"

	"github.com/toolgen/toolgen/gen"
	"github.com/toolgen/toolgen/runtime"
)

// The repository's own policy.yaml, checked by toolgen, compiles and decides at run time.
func TestRepositoryPolicyCompilesAndDecides(t *testing.T) {
	p, err := Load("../..")
	if err != nil {
		t.Fatal(err)
	}
	merge, err := runtime.CompileToolExpr(gen.ReviewMergeSpec.ApprovalWhen)
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
