package protocol_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/toolgen/toolgen/protocol"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
	"github.com/toolgen/toolgen/tools"
)

// host is what a server does: the builtins behind a real pipeline and SQLite store,
// with the protocol runtime as the pipeline's mode resolver and AfterCall after every
// call.
type host struct {
	t        *testing.T
	st       *sqlite.Store
	p        *runtime.Pipeline
	r        *protocol.Runtime
	sessions *protocol.MemorySessionModes
	ws       string
}

var caller = runtime.Principal{ID: "alice", Tenant: "acme",
	Scopes: []string{"workspace.read", "workspace.write", "review.merge", "review.approve"}}

func newHost(t *testing.T, pinned string) *host {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sessions := &protocol.MemorySessionModes{}
	r := newRuntime(t, protocol.Config{PinnedMode: pinned, Sessions: sessions, Audit: st})
	reg := runtime.NewRegistry()
	if err := reg.Register(tools.Builtins()...); err != nil {
		t.Fatal(err)
	}
	p, err := runtime.NewPipeline(runtime.Config{Registry: reg, Store: st, Modes: r, WorkerID: "w1",
		Artifacts: runtime.NewFSArtifactWriter(t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	return &host{t: t, st: st, p: p, r: r, sessions: sessions, ws: t.TempDir()}
}

func (h *host) callOf(tool, callID, args string) runtime.Call {
	return runtime.Call{
		Tenant: "acme", Principal: caller, SessionID: "s1", RunID: "r1", Step: 1,
		CallID: callID, Tool: tool, Args: json.RawMessage(args),
		ContextTrust: []runtime.Trust{runtime.TrustUser}, ArgumentTrust: runtime.TrustUser,
		Workspace: h.ws,
	}
}

// call runs one call through the pipeline and then AfterCall, as a server does.
func (h *host) call(tool, callID, args string) (runtime.Outcome, protocol.Dispatch) {
	h.t.Helper()
	c := h.callOf(tool, callID, args)
	o, err := h.p.Execute(h.t.Context(), c)
	if err != nil {
		h.t.Fatalf("Execute(%s %s): %v", tool, callID, err)
	}
	d, err := h.r.AfterCall(h.t.Context(), c, o)
	if err != nil {
		h.t.Fatalf("AfterCall(%s %s): %v", tool, callID, err)
	}
	return o, d
}

func (h *host) mode() string {
	h.t.Helper()
	m, err := h.r.Mode(h.t.Context(), "acme", "s1")
	if err != nil {
		h.t.Fatal(err)
	}
	return m
}

// row is the invocation row (the tool_call entry) of a call: the latest row of the
// tool with that call id (a refusal is recorded under a key of its own, so rows are
// found by call, not by the call's key).
func (h *host) row(tool, callID, args string) *store.Invocation {
	h.t.Helper()
	rows, err := h.st.InvocationList(h.t.Context(), store.InvocationFilter{})
	if err != nil {
		h.t.Fatal(err)
	}
	for i := len(rows) - 1; i >= 0; i-- {
		if rows[i].Tool == tool && rows[i].CallID == callID {
			return rows[i]
		}
	}
	h.t.Fatalf("no row of %s %s (%s)", tool, callID, args)
	return nil
}

type dispatchEntry struct {
	store.AuditEntry
	detail struct {
		Protocol string `json:"protocol"`
		From     string `json:"from"`
		To       string `json:"to"`
		Reason   string `json:"reason"`
		Outcome  string `json:"outcome"`
		Refusal  string `json:"refusal"`
		RunID    string `json:"run_id"`
		Step     int    `json:"step"`
		CallID   string `json:"call_id"`
	}
}

// dispatches are the dispatch_request entries of the audit log, in order.
func (h *host) dispatches() []dispatchEntry {
	h.t.Helper()
	all, err := h.st.AuditList(h.t.Context(), "acme", 0, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []dispatchEntry
	for _, e := range all {
		if e.Kind != protocol.KindDispatchRequest {
			continue
		}
		d := dispatchEntry{AuditEntry: e}
		if err := json.Unmarshal(e.Detail, &d.detail); err != nil {
			h.t.Fatalf("detail %s: %v", e.Detail, err)
		}
		out = append(out, d)
	}
	return out
}

const (
	approveArgs   = `{"branch":"main","commit":"0123456789abcdef0123456789abcdef01234567"}`
	writeArgs     = `{"path":"PLAN.md","text":"plan","mode":"create"}`
	listArgs      = `{"path":"."}`
	toImplement   = `{"mode":"implement","reason":"the plan is written"}`
	toReview      = `{"mode":"review","reason":"the change is done"}`
	toUnknownMode = `{"mode":"deploy","reason":"ship it"}`
)

func TestPipeline_ToolOfAnotherMode_DeniedNotInMode(t *testing.T) {
	h := newHost(t, "")
	o, _ := h.call("review.approve", "c1", approveArgs)
	if o.Status != runtime.OutcomeDenied || o.ReasonCode != "not_in_mode" {
		t.Fatalf("review.approve in plan: %s/%s, want denied/not_in_mode", o.Status, o.ReasonCode)
	}
	if row := h.row("review.approve", "c1", approveArgs); row.Mode != "plan" || row.ReasonCode != "not_in_mode" {
		t.Errorf("row mode %q reason %q, want the denial recorded in mode plan (WF-5)", row.Mode, row.ReasonCode)
	}
	o, _ = h.call("workspace.list", "c2", listArgs)
	if o.Status != runtime.OutcomeSucceeded {
		t.Fatalf("workspace.list in plan: %s/%s, want success", o.Status, o.ReasonCode)
	}
	if row := h.row("workspace.list", "c2", listArgs); row.Mode != "plan" {
		t.Errorf("row mode %q, want plan", row.Mode)
	}
}

func TestPipeline_Dispatch_MovesModeAndAuditsTheModeAtDispatch(t *testing.T) {
	h := newHost(t, "")
	o, d := h.call("protocol.dispatch", "c1", toImplement)
	if o.Status != runtime.OutcomeSucceeded || d.Status != protocol.DispatchSwitched || d.From != "plan" || d.To != "implement" {
		t.Fatalf("dispatch: outcome %s/%s, dispatch %+v; want switched plan -> implement", o.Status, o.ReasonCode, d)
	}
	if m := h.mode(); m != "implement" {
		t.Fatalf("mode after dispatch %q, want implement", m)
	}
	entries := h.dispatches()
	if len(entries) != 1 {
		t.Fatalf("%d dispatch_request entries, want 1", len(entries))
	}
	e := entries[0]
	if e.Mode != "plan" || e.SessionID != "s1" || e.Principal != "alice" || e.Tool != "protocol.dispatch" || e.ID != d.AuditID {
		t.Errorf("entry %+v, want mode plan (active at dispatch), session s1, alice, protocol.dispatch", e.AuditEntry)
	}
	if e.detail.From != "plan" || e.detail.To != "implement" || e.detail.Reason != "the plan is written" ||
		e.detail.Outcome != "switched" || e.detail.Protocol != shipped || e.detail.CallID != "c1" || e.detail.RunID != "r1" {
		t.Errorf("detail %+v", e.detail)
	}
	if row := h.row("protocol.dispatch", "c1", toImplement); row.Mode != "plan" {
		t.Errorf("the dispatch's own row is in mode %q, want plan", row.Mode)
	}

	// The new mode's tools are exposed and accepted; the old mode's are not.
	if o, _ := h.call("workspace.write_text", "c2", writeArgs); o.Status != runtime.OutcomeSucceeded {
		t.Errorf("write in implement: %s/%s", o.Status, o.ReasonCode)
	}
	if row := h.row("workspace.write_text", "c2", writeArgs); row.Mode != "implement" {
		t.Errorf("write row mode %q, want implement", row.Mode)
	}
	if o, _ := h.call("review.approve", "c3", approveArgs); o.ReasonCode != "not_in_mode" {
		t.Errorf("review.approve in implement: %s/%s, want not_in_mode", o.Status, o.ReasonCode)
	}
}

func TestPipeline_DispatchReplay_NeitherAuditsNorMovesAgain(t *testing.T) {
	h := newHost(t, "")
	h.call("protocol.dispatch", "c1", toImplement)
	sets := h.sessions.Sets()

	o, d := h.call("protocol.dispatch", "c1", toImplement) // the same call, retried
	if !o.Replayed || d.Status != protocol.DispatchReplayed {
		t.Fatalf("retry: replayed %v, dispatch %+v; want a replayed outcome, not applied", o.Replayed, d)
	}
	if n := len(h.dispatches()); n != 1 || h.sessions.Sets() != sets {
		t.Errorf("after the replay: %d entries, %d mode writes; want 1 entry and no new write", n, h.sessions.Sets()-sets)
	}

	// Move on, then replay the first dispatch: the session must not move back.
	if _, d := h.call("protocol.dispatch", "c2", toReview); d.Status != protocol.DispatchSwitched || d.From != "implement" {
		t.Fatalf("second dispatch %+v, want switched from implement", d)
	}
	if _, d := h.call("protocol.dispatch", "c1", toImplement); d.Status != protocol.DispatchReplayed {
		t.Errorf("stale replay %+v, want replayed", d)
	}
	if m := h.mode(); m != "review" {
		t.Errorf("mode %q after a stale replay, want review", m)
	}
	if n := len(h.dispatches()); n != 2 {
		t.Errorf("%d entries, want 2", n)
	}
}

func TestPipeline_DispatchToUnknownMode_RefusedAuditedStays(t *testing.T) {
	h := newHost(t, "")
	o, d := h.call("protocol.dispatch", "c1", toUnknownMode)
	if o.Status != runtime.OutcomeSucceeded {
		t.Fatalf("the tool accepts any well-formed mode: %s/%s", o.Status, o.ReasonCode)
	}
	if d.Status != protocol.DispatchRefused || d.Refusal != protocol.RefusalUnknownMode {
		t.Fatalf("dispatch %+v, want refused unknown_mode", d)
	}
	if m := h.mode(); m != "plan" || h.sessions.Sets() != 0 {
		t.Errorf("mode %q after %d writes, want plan and no write", m, h.sessions.Sets())
	}
	entries := h.dispatches()
	if len(entries) != 1 || entries[0].Mode != "plan" || entries[0].detail.Outcome != "refused" ||
		entries[0].detail.Refusal != "unknown_mode" || entries[0].detail.To != "deploy" {
		t.Errorf("entries %+v, want one refusal in mode plan naming deploy", entries)
	}
}

func TestPipeline_PinnedServer_DispatchRefusedAuditedNeverMoves(t *testing.T) {
	h := newHost(t, "implement")
	o, d := h.call("protocol.dispatch", "c1", toReview)
	if o.Status != runtime.OutcomeSucceeded || d.Status != protocol.DispatchRefused || d.Refusal != protocol.RefusalPinnedMode {
		t.Fatalf("outcome %s, dispatch %+v; want refused pinned_mode", o.Status, d)
	}
	if m := h.mode(); m != "implement" || h.sessions.Sets() != 0 {
		t.Errorf("mode %q, %d writes; a pinned server never moves", m, h.sessions.Sets())
	}
	entries := h.dispatches()
	if len(entries) != 1 || entries[0].Mode != "implement" || entries[0].detail.Refusal != "pinned_mode" {
		t.Errorf("entries %+v, want one pinned_mode refusal in mode implement", entries)
	}
	if o, _ := h.call("review.approve", "c2", approveArgs); o.ReasonCode != "not_in_mode" {
		t.Errorf("review.approve on a server pinned to implement: %s/%s, want not_in_mode", o.Status, o.ReasonCode)
	}
}

func TestAfterCall_IgnoresOtherCallsAndFailures(t *testing.T) {
	h := newHost(t, "")
	if _, d := h.call("workspace.list", "c1", listArgs); d.Status != protocol.DispatchIgnored {
		t.Errorf("workspace.list: %+v", d)
	}
	// A blank reason is the tool's failure: nothing moves, nothing is audited.
	o, d := h.call("protocol.dispatch", "c2", `{"mode":"implement","reason":"  "}`)
	if o.Status == runtime.OutcomeSucceeded || d.Status != protocol.DispatchIgnored {
		t.Errorf("failed dispatch: outcome %s, dispatch %+v", o.Status, d)
	}
	if n := len(h.dispatches()); n != 0 || h.mode() != "plan" {
		t.Errorf("%d entries, mode %s; want none and plan", n, h.mode())
	}
}

func TestAfterCall_NoSession_Refused(t *testing.T) {
	h := newHost(t, "")
	c := h.callOf("protocol.dispatch", "c1", toImplement)
	c.SessionID = ""
	o, err := h.p.Execute(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	d, err := h.r.AfterCall(t.Context(), c, o)
	if err != nil || d.Status != protocol.DispatchRefused || d.Refusal != protocol.RefusalNoSession {
		t.Errorf("dispatch %+v, %v; want refused no_session", d, err)
	}
	if h.sessions.Sets() != 0 {
		t.Error("a call without a session moved something")
	}
}
