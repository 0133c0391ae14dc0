package runtime_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

const boundSchema = `{"type":"object","properties":{"owner":{"type":"string","x-toolgen-bound":"principal.id"},` +
	`"text":{"type":"string"}},"required":["owner","text"],"additionalProperties":false}`

// TestBoundArguments (SPEC-4): the advertised schema lacks the bound field; a caller
// supplying it is refused; the tool receives the principal's id; two principals making
// the same call get different keys; an adapter's schema binds nothing.
func TestBoundArguments(t *testing.T) {
	tool := newTestTool("notes.add", runtime.SideEffectWrite, runtime.Idempotent)
	tool.spec.InputSchema = json.RawMessage(boundSchema)
	var got []string
	tool.run = func(_ context.Context, _ *runtime.ExecContext, args json.RawMessage) (runtime.ToolResult, error) {
		got = append(got, string(args))
		return runtime.StructuredResult(&tool.spec, map[string]any{"ok": true})
	}
	h := newHarness(t, runtime.Config{}, tool)

	adv := string(runtime.AdvertisedInputSchema(tool.Spec()))
	if strings.Contains(adv, "owner") || !strings.Contains(adv, `"text"`) {
		t.Fatalf("advertised schema %s", adv)
	}

	wantStatus(t, h.exec(h.call("notes.add", "c1", `{"text":"hi","owner":"mallory"}`)), runtime.OutcomeFailed, runtime.ReasonBoundArgumentSupplied)
	if len(got) != 0 {
		t.Fatalf("the tool ran: %v", got)
	}
	o1 := h.exec(h.call("notes.add", "c2", `{"text":"hi"}`))
	wantStatus(t, o1, runtime.OutcomeSucceeded, "")
	if len(got) != 1 || got[0] != `{"owner":"alice","text":"hi"}` {
		t.Fatalf("tool got %v", got)
	}
	bob := h.call("notes.add", "c2", `{"text":"hi"}`)
	bob.Principal = runtime.Principal{ID: "bob", Tenant: "acme", Scopes: []string{"all"}}
	o2 := h.exec(bob)
	wantStatus(t, o2, runtime.OutcomeSucceeded, "")
	if o2.Replayed || len(got) != 2 || got[1] != `{"owner":"bob","text":"hi"}` {
		t.Fatalf("bob's identical call: replayed %v, tool got %v", o2.Replayed, got)
	}
	rows, err := h.store.InvocationList(h.ctx, store.InvocationFilter{})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, r := range rows {
		keys[r.Key] = true
	}
	if len(keys) != len(rows) || len(rows) < 2 {
		t.Fatalf("%d rows, %d keys: the two principals' calls share a key", len(rows), len(keys))
	}

	// An adapter's tool never binds: its schema is advertised as it is.
	adapter := newTestTool("mcp.srv.note", runtime.SideEffectRead, runtime.Idempotent)
	adapter.spec.InputSchema = json.RawMessage(boundSchema)
	if got := string(runtime.AdvertisedInputSchema(adapter.Spec())); got != boundSchema {
		t.Fatalf("adapter schema changed: %s", got)
	}
}
