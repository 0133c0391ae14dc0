package host

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// TestOperator_HoldReason (issue 18): why each held call was held is found among
// thousands of audit entries of its own and another tenant, recorded before and after
// it; a row of another tenant is not the actor's to read.
func TestOperator_HoldReason(t *testing.T) {
	ctx := t.Context()
	write := implOf(t, writeYAML)
	dir := specRoot(t, map[string]string{"tools/demo.write.yaml": writeYAML})
	h, agent := newAgentHost(t, Config{Dir: dir, Tools: []runtime.Tool{write}, ApprovalHold: 1})
	noise := func(n int) {
		for i := range n {
			tenant := agent.Tenant
			if i%2 == 1 {
				tenant = "other"
			}
			if _, err := h.Store().AuditAppend(ctx, store.AuditEntry{Tenant: tenant, Kind: "note", Principal: "x", Key: fmt.Sprint("k", i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var held []int64
	for i := range 4 {
		noise(700)
		o, err := h.Call(ctx, CallRequest{Tool: "demo.write", Args: json.RawMessage(fmt.Sprintf(`{"text":"x%d"}`, i)), Principal: agent,
			CallID: fmt.Sprint("c", i), ArgumentTrust: runtime.TrustExternalUntrusted})
		if err != nil || o.ReasonCode != runtime.ReasonApprovalPending {
			t.Fatalf("call %d: %v %s", i, err, o.ReasonCode)
		}
	}
	noise(700)
	op := h.Operator()
	invs, err := op.Approvals(ctx, agent)
	if err != nil || len(invs) != 4 {
		t.Fatalf("approvals: %d %v", len(invs), err)
	}
	for _, inv := range invs {
		held = append(held, inv.ID)
		r, ok, err := op.HoldReason(ctx, agent, inv)
		if err != nil || !ok || r.Cause != runtime.HoldUntrustedWrite || r.Why == "" {
			t.Errorf("invocation %d: %+v %v %v", inv.ID, r, ok, err)
		}
		if _, _, err := op.HoldReason(ctx, runtime.Principal{ID: "eve", Tenant: "other"}, inv); err == nil {
			t.Errorf("another tenant read why invocation %d was held", inv.ID)
		}
	}
	// Audit lines name their invocation, run and decision.
	lines, err := op.Audit(ctx, agent, AuditFilter{Kind: runtime.AuditHeld})
	if err != nil || len(lines) != 4 {
		t.Fatalf("held lines: %d %v", len(lines), err)
	}
	for i, l := range lines {
		if l.Invocation != held[i] || l.Decision != store.DecisionNeedsApproval || l.RunID == "" || l.Mode != "" {
			t.Errorf("held line %+v", l)
		}
	}
}
