package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// Issue 14, finding 5: a recorded outcome is returned only to a caller who passes the
// same checks now. Tenant-mates alice (who holds the tool's scope) and bob (who does
// not) present the same key: bob gets his refusal, never alice's recorded result, and
// alice's row is left as it was.

var bob = runtime.Principal{ID: "bob", Tenant: "acme", Scopes: []string{"notes.read"}}

func (h *harness) callAs(p runtime.Principal, tool, callID, args string) runtime.Call {
	c := h.call(tool, callID, args)
	c.Principal, c.Tenant = p, p.Tenant
	return c
}

func TestReplay_RefusedCallerNeverGetsTheRecordedOutcome(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			secret := newTestTool("demo.secret", runtime.SideEffectRead, runtime.Idempotent)
			secret.spec.RequiredScopes = []string{"all"}
			secret.run = func(ctx context.Context, tc *runtime.ExecContext, args json.RawMessage) (runtime.ToolResult, error) {
				secret.effects.Add(1)
				return runtime.ToolResult{OK: true, Content: []runtime.Item{{Type: "text", Text: "the launch codes", Trust: runtime.TrustTool}}}, nil
			}
			send := newTestTool("demo.send", runtime.SideEffectWrite, runtime.NonIdempotent)
			send.spec.RequiredScopes = []string{"all"}
			h := newHarnessOn(t, d.open(t), runtime.Config{}, secret, send)

			for _, tool := range []string{"demo.secret", "demo.send"} {
				first := h.exec(h.callAs(alice, tool, "c1", `{"n":1}`))
				wantStatus(t, first, runtime.OutcomeSucceeded, "")
				before, err := h.store.InvocationGetByKey(h.ctx, keyOf(h, alice, tool, "c1", `{"n":1}`))
				if err != nil {
					t.Fatal(err)
				}
				for range 3 { // a retried replay is refused each time
					o := h.exec(h.callAs(bob, tool, "c1", `{"n":1}`))
					wantStatus(t, o, runtime.OutcomeDenied, runtime.ReasonMissingScope)
					if o.Replayed || o.Result != nil {
						t.Fatalf("%s: bob's replay returned a recorded result: %+v", tool, o)
					}
				}
				after, err := h.store.InvocationGet(h.ctx, before.ID)
				if err != nil || after.Status != store.StatusSucceeded || string(after.Outcome) != string(before.Outcome) || after.Principal != "alice" {
					t.Fatalf("%s: alice's row after bob's replays: %+v, %v", tool, after, err)
				}
				// alice's own retry still finds her outcome.
				if again := h.exec(h.callAs(alice, tool, "c1", `{"n":1}`)); !again.Replayed || again.Status != runtime.OutcomeSucceeded {
					t.Fatalf("%s: alice's retry: %+v", tool, again)
				}
			}
			if n := secret.effects.Load(); n != 1 {
				t.Errorf("the read ran %d times, want 1", n)
			}
			// Each refused replay is in the audit view, naming bob.
			audit, err := h.store.AuditList(h.ctx, "acme", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, a := range audit {
				if a.Kind == runtime.AuditReplayRefused && a.Principal == "bob" && strings.Contains(string(a.Detail), "missing_scope") {
					n++
				}
			}
			if n != 6 {
				t.Errorf("%d replay_refused entries for bob, want 6: %+v", n, audit)
			}
		})
	}
}

// The breaker counts a call's own row: a retry of a recorded call is answered from
// its record, but a caller who fails step 6 gets the refusal, not the record.
func TestReplay_BreakerOwnRowAnswersOnlyAPassingCaller(t *testing.T) {
	send := newTestTool("demo.send", runtime.SideEffectWrite, runtime.NonIdempotent)
	send.spec.RequiredScopes = []string{"all"}
	send.run = func(ctx context.Context, tc *runtime.ExecContext, args json.RawMessage) (runtime.ToolResult, error) {
		if err := tc.MarkEffectSent(ctx); err != nil {
			return runtime.ToolResult{}, err
		}
		return runtime.ToolResult{}, errors.New("connection reset after the request was written")
	}
	h := newHarness(t, runtime.Config{}, send)
	wantStatus(t, h.exec(h.callAs(alice, "demo.send", "c1", `{"n":1}`)), runtime.OutcomeUncertain, runtime.ReasonEffectMayHaveHappened)
	// alice's retry: uncertain_repeat counts her own row, so her record answers.
	if o := h.exec(h.callAs(alice, "demo.send", "c1", `{"n":1}`)); !o.Replayed || o.Status != runtime.OutcomeUncertain {
		t.Fatalf("alice's retry: %+v, want her recorded UNCERTAIN outcome", o)
	}
	// bob, without the scope, with the same key: his refusal.
	o := h.exec(h.callAs(bob, "demo.send", "c1", `{"n":1}`))
	wantStatus(t, o, runtime.OutcomeDenied, runtime.ReasonMissingScope)
	if o.Replayed {
		t.Fatalf("bob got a replay: %+v", o)
	}
}

// A caller whose call needs an approval does not get the outcome of another
// principal's call recorded without one.
func TestReplay_NeedsApprovalNotAnsweredByAnUnapprovedRow(t *testing.T) {
	read := newTestTool("demo.read", runtime.SideEffectRead, runtime.Idempotent)
	policy, err := runtime.NewPolicy([]runtime.PolicyRule{{Name: "bob-asks", Effect: runtime.PolicyApprove, When: "principal.id == 'bob'"}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, runtime.Config{Policy: policy, ApprovalHold: 50 * time.Millisecond, ApprovalPoll: 5 * time.Millisecond}, read)
	wantStatus(t, h.exec(h.callAs(alice, "demo.read", "c1", `{"n":1}`)), runtime.OutcomeSucceeded, "")
	o := h.exec(h.callAs(bob, "demo.read", "c1", `{"n":1}`))
	wantStatus(t, o, runtime.OutcomeDenied, runtime.ReasonReplayNeedsApproval)
	if o.Result != nil || o.Replayed {
		t.Fatalf("bob got alice's result: %+v", o)
	}
	// With a call id of his own, bob's call is held for approval as it should be.
	c := h.callAs(bob, "demo.read", "c2", `{"n":1}`)
	if o := h.exec(c); o.ReasonCode != runtime.ReasonApprovalPending && o.ReasonCode != runtime.ReasonApprovalExpired {
		t.Fatalf("bob's own call: %+v, want it held", o)
	}
}

func keyOf(h *harness, p runtime.Principal, tool, callID, args string) string {
	canon, err := runtime.CanonicalJSON([]byte(args))
	if err != nil {
		h.t.Fatal(err)
	}
	return runtime.IdempotencyKey(runtime.KeyInput{Tenant: p.Tenant, RunID: "r1", Step: 1, CallID: callID, Tool: tool, ToolVersion: 1, CanonicalArgs: canon})
}
