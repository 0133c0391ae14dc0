package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// mcpTests are appended to tests by init: the MCP sessions and the task cancellation
// of issue 16 (store.MCPSessions, store.Tasks), which every driver implements.
var mcpTests = []struct {
	name string
	fn   func(t *testing.T, e *env)
}{
	{"MCPSession_CreateGetTouchEnd", testMCPSessionLifecycle},
	{"MCPSession_OtherHandleAndTenant", testMCPSessionOtherHandleAndTenant},
	{"InvocationCancelPending_SettlesOnlyPending", testInvocationCancelPending},
	{"MCPCancel_RecordedAndReadInOrder", testMCPCancelRecordAndRead},
}

func init() { tests = append(tests, mcpTests...) }

func mcpSessions(t *testing.T, s store.Store) store.MCPSessions {
	t.Helper()
	m, ok := s.(store.MCPSessions)
	if !ok {
		t.Fatalf("%T does not implement store.MCPSessions", s)
	}
	return m
}

func testMCPSessionLifecycle(t *testing.T, e *env) {
	m := mcpSessions(t, e.s)
	state := json.RawMessage(`{"initializeParams":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}},"logLevel":"info"}`)
	sess := store.MCPSession{ID: "mcp-" + randomHex(8), Tenant: "acme", UserID: "alice", ProtocolVersion: "2025-11-25", State: state}
	noErr(t, "create", m.MCPSessionCreate(e.ctx, sess))
	wantErr(t, "create again", m.MCPSessionCreate(e.ctx, sess), store.ErrConflict)
	wantErr(t, "create without a tenant", m.MCPSessionCreate(e.ctx, store.MCPSession{ID: "x", State: state}), store.ErrInvalid)
	wantErr(t, "create with bad state", m.MCPSessionCreate(e.ctx, store.MCPSession{ID: "y", Tenant: "acme", State: json.RawMessage(`{`)}), store.ErrInvalid)

	for _, idle := range []time.Duration{0, time.Hour} {
		got, err := m.MCPSessionGet(e.ctx, sess.ID, idle)
		noErr(t, "get", err)
		var a, b any
		_ = json.Unmarshal(got.State, &a)
		_ = json.Unmarshal(state, &b)
		if got.ID != sess.ID || got.Tenant != "acme" || got.UserID != "alice" || got.ProtocolVersion != "2025-11-25" ||
			mustJSON(a) != mustJSON(b) || got.CreatedAt.IsZero() || got.LastSeenAt.Before(got.CreatedAt) {
			t.Fatalf("get (idle %s) = %+v (state %s)", idle, got, got.State)
		}
	}
	_, err := m.MCPSessionGet(e.ctx, "mcp-unknown", 0)
	wantErr(t, "get unknown", err, store.ErrNotFound)

	newState := json.RawMessage(`{"initializeParams":{"protocolVersion":"2025-11-25"},"logLevel":"debug"}`)
	noErr(t, "touch with state", m.MCPSessionTouch(e.ctx, "acme", sess.ID, newState))
	got, err := m.MCPSessionGet(e.ctx, sess.ID, 0)
	noErr(t, "get after touch", err)
	if !json.Valid(got.State) || !contains(string(got.State), `"debug"`) {
		t.Fatalf("state after touch: %s", got.State)
	}
	noErr(t, "touch without state", m.MCPSessionTouch(e.ctx, "acme", sess.ID, nil))
	if got, _ := m.MCPSessionGet(e.ctx, sess.ID, 0); got == nil || !contains(string(got.State), `"debug"`) {
		t.Fatalf("a touch without state changed the state: %+v", got)
	}

	noErr(t, "end", m.MCPSessionEnd(e.ctx, "acme", sess.ID))
	_, err = m.MCPSessionGet(e.ctx, sess.ID, 0)
	wantErr(t, "get after end", err, store.ErrNotFound)
	wantErr(t, "touch after end", m.MCPSessionTouch(e.ctx, "acme", sess.ID, nil), store.ErrNotFound)
	wantErr(t, "end twice", m.MCPSessionEnd(e.ctx, "acme", sess.ID), store.ErrNotFound)
	wantErr(t, "an ended id is not reused", m.MCPSessionCreate(e.ctx, sess), store.ErrConflict)
}

func testMCPSessionOtherHandleAndTenant(t *testing.T, e *env) {
	m, other := mcpSessions(t, e.s), mcpSessions(t, e.other)
	sess := store.MCPSession{ID: "mcp-" + randomHex(8), Tenant: "acme", State: json.RawMessage(`{}`)}
	noErr(t, "create", m.MCPSessionCreate(e.ctx, sess))
	got, err := other.MCPSessionGet(e.ctx, sess.ID, time.Hour)
	noErr(t, "get through the other handle", err)
	if got.Tenant != "acme" || got.UserID != "" {
		t.Fatalf("get through the other handle: %+v", got)
	}
	wantErr(t, "touch by another tenant", other.MCPSessionTouch(e.ctx, "evil", sess.ID, json.RawMessage(`{"x":1}`)), store.ErrNotFound)
	wantErr(t, "end by another tenant", other.MCPSessionEnd(e.ctx, "evil", sess.ID), store.ErrNotFound)
	if got, err := m.MCPSessionGet(e.ctx, sess.ID, 0); err != nil || string(got.State) == `{"x":1}` {
		t.Fatalf("another tenant's writes reached the session: %+v %v", got, err)
	}
}

func testInvocationCancelPending(t *testing.T, e *env) {
	ts, ok := e.s.(store.Tasks)
	if !ok {
		t.Fatalf("%T does not implement store.Tasks", e.s)
	}
	held := e.insert(t, func(p *row) { p.Decision = store.DecisionNeedsApproval })
	outcome := json.RawMessage(`{"status":"denied","reason_code":"task_cancelled"}`)
	st := store.Settlement{Status: store.StatusDenied, ReasonCode: "task_cancelled", Outcome: outcome}
	_, err := ts.InvocationCancelPending(e.ctx, held.Tenant, held.ID, store.Settlement{Status: store.StatusPending}, nil)
	wantErr(t, "a settlement that is not terminal", err, store.ErrInvalid)
	_, err = ts.InvocationCancelPending(e.ctx, held.Tenant, held.ID, st, &store.AuditEntry{Tenant: "other", Kind: "task_cancel"})
	wantErr(t, "another tenant's audit entry", err, store.ErrInvalid)
	_, err = ts.InvocationCancelPending(e.ctx, "other", held.ID, st, nil)
	wantErr(t, "another tenant's row", err, store.ErrNotFound)
	_, err = ts.InvocationCancelPending(e.ctx, held.Tenant, held.ID+1000, st, nil)
	wantErr(t, "no row", err, store.ErrNotFound)

	audits := func() int {
		list, err := e.s.AuditList(e.ctx, held.Tenant, 0, 0)
		noErr(t, "audit list", err)
		return len(list)
	}
	before := audits()
	inv, err := ts.InvocationCancelPending(e.ctx, held.Tenant, held.ID, st, &store.AuditEntry{Tenant: held.Tenant, Kind: "task_cancel", Key: held.Key})
	noErr(t, "cancel", err)
	if inv.Status != store.StatusDenied || inv.ReasonCode != "task_cancelled" || !json.Valid(inv.Outcome) {
		t.Fatalf("cancelled row: %+v", inv)
	}
	if audits() != before+1 {
		t.Fatal("the cancellation's audit entry was not appended")
	}
	// Nothing claims a cancelled row; cancelling again is a conflict with the row as it is.
	_, err = e.s.InvocationClaimIfPending(e.ctx, held.ID, "w", longLease)
	wantErr(t, "claim after cancel", err, store.ErrConflict)
	inv, err = ts.InvocationCancelPending(e.ctx, held.Tenant, held.ID, st, &store.AuditEntry{Tenant: held.Tenant, Kind: "task_cancel"})
	wantErr(t, "cancel again", err, store.ErrConflict)
	if inv == nil || inv.Status != store.StatusDenied || audits() != before+1 {
		t.Fatalf("cancel again: %+v (audit entries %d, want %d)", inv, audits(), before+1)
	}
	running := e.insert(t, running("w1", longLease))
	inv, err = ts.InvocationCancelPending(e.ctx, running.Tenant, running.ID, st, nil)
	wantErr(t, "cancel a RUNNING row", err, store.ErrConflict)
	if inv == nil || inv.Status != store.StatusRunning {
		t.Fatalf("cancel a RUNNING row changed it: %+v", inv)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func testMCPCancelRecordAndRead(t *testing.T, e *env) {
	m, other := mcpSessions(t, e.s), mcpSessions(t, e.other)
	before, err := other.MCPCancelsSince(e.ctx, 0, time.Hour, 0)
	noErr(t, "list", err)
	after := int64(0)
	if len(before) > 0 {
		after = before[len(before)-1].ID
	}
	wantErr(t, "no session", m.MCPCancelRecord(e.ctx, "", "7"), store.ErrInvalid)
	wantErr(t, "a request id that is not JSON", m.MCPCancelRecord(e.ctx, "s", "seven"), store.ErrInvalid)
	noErr(t, "record", m.MCPCancelRecord(e.ctx, "s-1", "7"))
	noErr(t, "record", m.MCPCancelRecord(e.ctx, "s-2", `"abc"`))
	got, err := other.MCPCancelsSince(e.ctx, after, time.Hour, 0)
	noErr(t, "list through the other handle", err)
	if len(got) != 2 || got[0].SessionID != "s-1" || got[0].RequestID != "7" || got[1].RequestID != `"abc"` || got[0].ID >= got[1].ID {
		t.Fatalf("cancellations: %+v", got)
	}
	if got, _ := other.MCPCancelsSince(e.ctx, got[0].ID, time.Hour, 0); len(got) != 1 || got[0].SessionID != "s-2" {
		t.Fatalf("after the first: %+v", got)
	}
	if got, _ := other.MCPCancelsSince(e.ctx, after, time.Hour, 1); len(got) != 1 {
		t.Fatalf("limit 1: %+v", got)
	}
}
