package runtime_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// TestHeldCallRecordsWhy (issue 18): a call held for approval leaves an audit entry
// beside its PENDING row saying which check of POL-1 held it — the operator rule by
// name, the spec's approval_when, or the cell of the risk x trust matrix — so a
// reviewer sees why before deciding. A retry of the held call writes no second entry.
func TestHeldCallRecordsWhy(t *testing.T) {
	critical := newTestTool("demo.deploy", runtime.SideEffectWrite, runtime.NonIdempotent)
	critical.spec.Risk = runtime.RiskCritical
	ruled := newTestTool("demo.merge", runtime.SideEffectWrite, runtime.NonIdempotent)
	high := newTestTool("demo.publish", runtime.SideEffectWrite, runtime.NonIdempotent)
	high.spec.Risk = runtime.RiskHigh
	policy, err := runtime.NewPolicy([]runtime.PolicyRule{{Name: "merges-need-review", Tools: []string{"demo.merge"}, Effect: "approve", When: "true"}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, runtime.Config{Policy: policy, ApprovalHold: time.Millisecond, ApprovalPoll: time.Millisecond}, critical, ruled, high)

	untrusted := h.call("demo.publish", "c-publish", `{"n":1}`)
	untrusted.ContextTrust = []runtime.Trust{runtime.TrustTool}
	for _, c := range []runtime.Call{h.call("demo.deploy", "c-deploy", `{"n":1}`), h.call("demo.merge", "c-merge", `{"n":1}`), untrusted} {
		wantStatus(t, h.exec(c), runtime.OutcomeUnavailable, runtime.ReasonApprovalPending)
		wantStatus(t, h.exec(c), runtime.OutcomeUnavailable, runtime.ReasonApprovalPending) // a retry
	}
	entries, err := h.store.AuditList(context.Background(), "acme", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]runtime.HeldDetail{}
	for _, e := range entries {
		if e.Kind != runtime.AuditHeld {
			continue
		}
		var d runtime.HeldDetail
		if err := json.Unmarshal(e.Detail, &d); err != nil {
			t.Fatal(err)
		}
		if _, dup := got[e.Tool]; dup {
			t.Errorf("%s: a second held entry (the retry wrote one)", e.Tool)
		}
		inv, err := h.store.InvocationGet(context.Background(), d.Invocation)
		if err != nil || inv.Key != e.Key || inv.Status != store.StatusPending || e.Principal != alice.ID || e.SessionID != "s1" {
			t.Errorf("%s: entry %+v does not name its held row (%+v, %v)", e.Tool, e, inv, err)
		}
		got[e.Tool] = d
	}
	for tool, want := range map[string]runtime.HeldDetail{
		"demo.deploy":  {Cause: runtime.HoldRiskCritical, Why: "risk critical"},
		"demo.merge":   {Cause: runtime.HoldPolicyRule, Rule: "merges-need-review", Why: "rule merges-need-review requires approval"},
		"demo.publish": {Cause: runtime.HoldRiskTrust, Why: "risk high and trust tool is below user"},
	} {
		d := got[tool]
		d.Invocation = 0
		if d != want {
			t.Errorf("%s: held entry %+v, want %+v", tool, d, want)
		}
	}
}
