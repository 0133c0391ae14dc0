// Package protocol is ADR 017 at run time (DESIGN.md section 8): it applies a protocol
// of modes that passed toolgen's checks, answers which mode is active for a session,
// filters what a server exposes and accepts to that mode's tools, and moves a session
// between modes when a protocol.dispatch call succeeds, recording every move and every
// refusal in the audit log with the mode that was active.
//
//   - Loading is not here: internal/protocolload reads a whole spec root through
//     spec.LoadFS, because WF-1/WF-2 need every tool spec (confers_approval) and every
//     server classification (mcp.<server>.* references): the checks are the spec
//     package's own, never re-implemented. A tree with any finding is refused, and
//     when a finding is WF-1 or WF-2 one wf1_violation entry ([KindWF1Violation]) is
//     written to the audit log first (WF-5). Its mode is the mode the host asked to pin
//     (--mode), or else the protocol's declared initial_mode: no session exists yet,
//     and that is the mode that would have been active. A clean tree's protocol comes
//     here as the run-time model spec produces (model.Protocol, [FromModel]).
//   - Exposure (WF-3, INV2): a mode exposes and accepts exactly the tools it declares
//     (an mcp.<server>.* reference holds every tool of that server). Nothing is
//     implicit: a tool named in no mode is exposed in none, and protocol.dispatch is
//     reachable only in the modes that list it. A mode that does not list it is a
//     terminal mode — the run cannot leave it except by an operator. The shipped
//     protocols list protocol.dispatch (and conversation.ask_user) in every mode. This
//     keeps ADR 017's promise that a mode's capability is its declared tools list.
//     [Runtime] is the pipeline's runtime.ModeResolver, so step 6 denies a call to a
//     tool outside the active mode (not_in_mode); [Runtime.ToolsFor] filters tools/list.
//   - Active mode (WF-4, [Runtime.Mode]): the pinned mode when the server serves one;
//     otherwise the session's persisted current_mode ([SessionModes], keyed by tenant
//     and session id: another tenant's session of the same id has its own, SES-1);
//     otherwise the protocol's initial_mode. A persisted mode the protocol no longer declares (the file
//     changed between runs) falls back to initial_mode, with a warning, rather than
//     stranding the session in a mode with no tools. A call with no session id has no
//     persisted state and is in initial_mode (or the pinned mode).
//   - Dispatch ([Runtime.AfterCall]): the host calls it with every call and the outcome
//     Pipeline.Execute returned; it acts only on a succeeded protocol.dispatch call, so
//     the mode moves only through the pipeline (the tool itself cannot reach protocol
//     state, RT-2). It writes one dispatch_request entry (Mode = the mode active when
//     the dispatch was made, Detail = from, to, reason, outcome) and then records the
//     new current_mode — audit first, so that no move is ever unaudited. It refuses,
//     audited and without moving: an unknown mode, any dispatch on a pinned server (a
//     server that serves one mode never moves; the entry tells whoever orchestrates the
//     pinned servers that the agent asked to hand over), and a call with no session id.
//     A replayed outcome (Outcome.Replayed, step 8) is never applied: the execution
//     that recorded the outcome applied it, so a retried or concurrent identical call
//     writes no second entry and moves nothing.
//
// tool_call entries are the invocation rows themselves (their mode column is written
// from [Runtime.ActiveMode] at step 7 or 13); this package writes the wf1_violation and
// dispatch_request entries.
//
// protocol imports model, runtime and runtime/store (for its types and ErrNotFound). It
// must never import spec, mcp, codegen, cmd or a store driver: it talks to persistence only
// through the small interfaces [AuditLog] and [SessionModes], which store.Store
// satisfies.
package protocol
