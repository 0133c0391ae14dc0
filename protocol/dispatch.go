package protocol

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// DispatchTool is the control tool that asks to move a session to another mode.
const DispatchTool = "protocol.dispatch"

// DispatchStatus says what [Runtime.AfterCall] did.
type DispatchStatus string

const (
	// DispatchIgnored: the call was not a succeeded protocol.dispatch; nothing was done.
	DispatchIgnored DispatchStatus = ""
	// DispatchSwitched: the entry was written and the session moved.
	DispatchSwitched DispatchStatus = "switched"
	// DispatchRefused: the entry records the refusal (see Refusal); the session stays.
	DispatchRefused DispatchStatus = "refused"
	// DispatchReplayed: the outcome was replayed from the store (step 8); the execution
	// that recorded it already acted, so nothing was written.
	DispatchReplayed DispatchStatus = "replayed"
)

// Why a dispatch is refused.
const (
	RefusalUnknownMode = "unknown_mode" // the protocol has no such mode
	RefusalPinnedMode  = "pinned_mode"  // the server serves one mode and never moves
	RefusalNoSession   = "no_session"   // the call named no session to move
)

// Dispatch is what [Runtime.AfterCall] did with a call.
type Dispatch struct {
	Status DispatchStatus
	// From is the mode active when the dispatch was made; To the mode asked for.
	From, To string
	// Refusal is set when Status is DispatchRefused.
	Refusal string
	// AuditID is the dispatch_request entry's id (0 when none was written).
	AuditID int64
}

// dispatchDetail is the detail of a dispatch_request entry. run_id, step and call_id
// join it to the invocation row (the tool_call entry) of the same call.
type dispatchDetail struct {
	Protocol string `json:"protocol"`
	From     string `json:"from"`
	To       string `json:"to"`
	Reason   string `json:"reason"`
	Outcome  string `json:"outcome"` // switched | refused
	Refusal  string `json:"refusal,omitempty"`
	RunID    string `json:"run_id,omitempty"`
	Step     int    `json:"step"`
	CallID   string `json:"call_id"`
}

// AfterCall acts on the outcome o that Pipeline.Execute returned for call. The host
// calls it after every Execute (it ignores everything but a protocol.dispatch that
// succeeded), so the session's mode moves only through the pipeline: step 6 already
// checked that protocol.dispatch is in the active mode and the tool checked its
// arguments.
//
// It writes one dispatch_request entry (Mode = the mode active when the dispatch was
// made; Detail = protocol, from, to, reason, outcome, refusal, run_id, step, call_id)
// and, when the dispatch is accepted, records the new current_mode. The entry comes
// first: a failure between the two leaves an entry whose move did not happen (the
// invocation rows that follow still record their real mode), never a move that no
// entry explains.
//
// Refused, audited, the session staying where it is: a mode the protocol does not
// declare, any dispatch on a pinned server, a call with no session id.
//
// Idempotent: a replayed outcome (o.Replayed, found at step 8 — a retry, or an
// identical call that raced this one) writes nothing and moves nothing, because the
// execution that recorded the outcome already acted. The one gap: a crash after the
// pipeline recorded the dispatch and before AfterCall ran leaves a succeeded call that
// moved nothing; its replay does not move either (it cannot tell that crash from a
// stale replay of a dispatch the session has since moved past), and the agent, denied
// not_in_mode, dispatches again with a new call id.
//
// The error is the store's (or a malformed succeeded outcome's); a refusal is not an
// error.
func (r *Runtime) AfterCall(ctx context.Context, call runtime.Call, o runtime.Outcome) (Dispatch, error) {
	if call.Tool != DispatchTool || o.Status != runtime.OutcomeSucceeded {
		return Dispatch{}, nil
	}
	if o.Replayed {
		r.log.Debug("replayed protocol.dispatch not applied again", "session_id", call.SessionID, "call_id", call.CallID)
		return Dispatch{Status: DispatchReplayed}, nil
	}
	to, reason, err := dispatchRequest(call, o)
	if err != nil {
		return Dispatch{}, err
	}
	from, err := r.Mode(ctx, call.Tenant, call.SessionID)
	if err != nil {
		return Dispatch{}, err
	}
	d := Dispatch{Status: DispatchSwitched, From: from, To: to}
	switch {
	case r.pinned != "":
		d.Status, d.Refusal = DispatchRefused, RefusalPinnedMode
	case !r.proto.HasMode(to):
		d.Status, d.Refusal = DispatchRefused, RefusalUnknownMode
	case call.SessionID == "":
		d.Status, d.Refusal = DispatchRefused, RefusalNoSession
	}
	detail, err := json.Marshal(dispatchDetail{
		Protocol: r.proto.name, From: from, To: to, Reason: reason, Outcome: string(d.Status),
		Refusal: d.Refusal, RunID: call.RunID, Step: call.Step, CallID: call.CallID,
	})
	if err != nil {
		return Dispatch{}, fmt.Errorf("protocol: encode dispatch_request: %w", err)
	}
	d.AuditID, err = r.audit.AuditAppend(ctx, store.AuditEntry{
		Tenant: call.Tenant, Kind: KindDispatchRequest, Principal: call.Principal.ID,
		SessionID: call.SessionID, Mode: from, Tool: DispatchTool, Detail: detail,
	})
	if err != nil {
		return Dispatch{}, fmt.Errorf("protocol: audit dispatch_request: %w", err)
	}
	if d.Status == DispatchRefused {
		r.log.Info("protocol.dispatch refused", "protocol", r.proto.name, "session_id", call.SessionID,
			"from", from, "to", to, "refusal", d.Refusal)
		return d, nil
	}
	if err := r.sessions.SessionModeSet(ctx, call.Tenant, call.SessionID, to); err != nil {
		return Dispatch{}, fmt.Errorf("protocol: move session %s to mode %s: %w", call.SessionID, to, err)
	}
	r.log.Info("protocol.dispatch switched mode", "protocol", r.proto.name, "session_id", call.SessionID, "from", from, "to", to)
	return d, nil
}

// dispatchRequest reads the mode the tool accepted (its result echoes it) and the
// reason from a succeeded call.
func dispatchRequest(call runtime.Call, o runtime.Outcome) (to, reason string, err error) {
	var args struct {
		Mode   string `json:"mode"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(call.Args, &args); err != nil {
		return "", "", fmt.Errorf("protocol: decode protocol.dispatch arguments: %w", err)
	}
	to = args.Mode
	if o.Result != nil && len(o.Result.Structured) > 0 {
		var res struct {
			Mode string `json:"mode"`
		}
		if err := json.Unmarshal(o.Result.Structured, &res); err != nil {
			return "", "", fmt.Errorf("protocol: decode protocol.dispatch result: %w", err)
		}
		if res.Mode != "" {
			to = res.Mode
		}
	}
	return to, args.Reason, nil
}
