package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/internal/names"
	"github.com/toolgen/toolgen/runtime"
)

// HoldProgressMessage is the message of the progress notifications of an approval hold.
const HoldProgressMessage = "waiting for approval"

// suspendedText is the content of a suspended control call (RT-11): the tool's own
// (empty) reply is not the answer, so it is not shown.
const suspendedText = "The run is suspended, waiting for input. This call completes when the run is resumed."

// scriptSuspendedText is the status of a task whose script is suspended until one of its
// calls, held for approval, is decided (SCR-1, RT-12).
const scriptSuspendedText = "A call of the script awaits approval. The script re-executes once that call is decided, and this task completes then."

// callTool answers tools/call: every call, whatever its name, goes through the pipeline.
func (s *Server) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx, done, stopping := s.callContext(ctx)
	defer done()
	if stopping {
		return nil, errShuttingDown
	}
	c, err := s.prepareCall(ctx, req)
	if err != nil {
		return nil, err
	}
	if req.Extra != nil && req.Extra.Header != nil {
		if ref := req.Extra.Header.Get(headerCallRef); ref != "" {
			// Another replica may receive the client's cancellation (streamable.go).
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			defer s.refs.add(ref, cancel)()
		}
	}
	o, err := s.execute(ctx, req.Session, req.Params.GetProgressToken(), c.call)
	return s.finishCall(ctx, c, o, err), nil
}

// preparedCall is a tools/call turned into the pipeline's call.
type preparedCall struct {
	call runtime.Call
	id   identity
}

// prepareCall applies the identity rule (doc.go) and the trust labels to a tools/call.
func (s *Server) prepareCall(ctx context.Context, req *mcp.CallToolRequest) (preparedCall, error) {
	p := req.Params
	if p == nil {
		return preparedCall{}, invalidParams("tools/call needs params")
	}
	tool := names.FromWire(p.Name)
	principal, err := s.principalOf(req.Extra)
	if err != nil {
		return preparedCall{}, err
	}
	id, err := s.identityOf(ctx, req.Session, p.Meta, principal.Tenant, tool, p.Arguments)
	if err != nil {
		return preparedCall{}, err
	}
	call := runtime.Call{
		Tenant:    principal.Tenant,
		Principal: principal,
		SessionID: id.SessionID,
		RunID:     id.RunID,
		NewRun:    id.NewRun,
		Step:      id.Step,
		CallID:    id.CallID,
		Derived:   id.Derived,
		Tool:      tool,
		Args:      p.Arguments,
		// RT-6: an MCP client is not a verified source of provenance. What was in the
		// room and where the arguments came from are unknown: external_untrusted.
		ContextTrust:  []runtime.Trust{runtime.TrustExternalUntrusted},
		ArgumentTrust: runtime.TrustExternalUntrusted,
	}
	if s.opts.WorkspaceFor != nil {
		call.Workspace = s.opts.WorkspaceFor(principal.Tenant, id.RunID)
	}
	return preparedCall{call: call, id: id}, nil
}

// finishCall turns what the pipeline returned into the MCP result.
func (s *Server) finishCall(ctx context.Context, c preparedCall, o runtime.Outcome, err error) *mcp.CallToolResult {
	id, tool := c.id, c.call.Tool
	switch {
	case err != nil && ctx.Err() != nil:
		// Cancelled (by the client, or a shutdown) while the pipeline read or wrote
		// the store: what it recorded stands, and a retry resumes from there.
		s.log.Debug("mcp/server: tools/call cancelled", "tool", logName(tool), "call_id", id.CallID, "error", err)
		o = runtime.NewOutcome(runtime.ReasonCanceled, id.CallID)
	case err != nil:
		// The store is unusable: report the platform's own fault, never its text.
		s.log.Error("mcp/server: tools/call: the pipeline could not record the call",
			"tool", logName(tool), "session_id", id.SessionID, "run_id", id.RunID, "step", id.Step, "call_id", id.CallID, "error", err)
		o = runtime.NewOutcome(runtime.ReasonInternalError, id.CallID)
	}
	if s.log.Enabled(ctx, slog.LevelDebug) { // the arguments would be boxed even when discarded
		s.log.Debug("mcp/server: tools/call", "tool", logName(tool), "session_id", id.SessionID, "call_id", id.CallID,
			"status", o.Status, "reason_code", o.ReasonCode, "replayed", o.Replayed)
	}
	res := toResult(o, id)
	s.honourOutputSchema(ctx, res, o, runtime.SessionKey{Tenant: c.call.Tenant, ID: id.SessionID}, tool) // output.go
	return res
}

// principalOf is the caller of a request: its verified identity, or the operator's
// principal when it has none (stdio, or HTTP without authentication).
func (s *Server) principalOf(extra *mcp.RequestExtra) (runtime.Principal, error) {
	if extra == nil || extra.TokenInfo == nil {
		return s.opts.Principal, nil
	}
	if s.opts.PrincipalOf != nil {
		if p, ok := s.opts.PrincipalOf(extra.TokenInfo); ok && p.ID != "" && p.Tenant != "" {
			return p, nil
		}
	}
	return runtime.Principal{}, invalidParams("the request's credentials name no principal")
}

// execute runs the call through the pipeline, reporting an approval hold as progress
// when the client gave a progress token, and relaying what an upstream server reports
// about the call (relay.go). Every notification is written before it returns (or
// panics), so none follows the result.
func (s *Server) execute(ctx context.Context, ss *mcp.ServerSession, token any, call runtime.Call) (runtime.Outcome, error) {
	if ss != nil {
		r := s.newCallRelay(ctx, ss, token)
		defer r.close()
		ctx = r.attach(ctx)
	}
	return s.opts.Pipeline.Execute(ctx, call)
}

// logName bounds a client-chosen name in a log line.
func logName(name string) string {
	const limit = 128
	if len(name) <= limit {
		return name
	}
	return strings.ToValidUTF8(name[:limit], "") + "..."
}

// outcomeShape is the six-field shape of a non-success outcome (RT-7), as
// structuredContent. external_detail is always present, null when there is none.
type outcomeShape struct {
	Status         runtime.OutcomeStatus `json:"status"`
	ReasonCode     runtime.ReasonCode    `json:"reason_code"`
	Message        string                `json:"message"`
	Retryable      bool                  `json:"retryable"`
	CallID         string                `json:"call_id"`
	ExternalDetail *itemShape            `json:"external_detail"`
}

type itemShape struct {
	Type     string        `json:"type"`
	Text     string        `json:"text"`
	MIMEType string        `json:"mime_type,omitempty"`
	Trust    runtime.Trust `json:"trust"`
}

type artifactShape struct {
	URI       string `json:"uri"`
	SHA256    string `json:"sha256"`
	Size      int64  `json:"size"`
	MediaType string `json:"media_type,omitempty"`
}

// replayedText ends the content of a replayed outcome: what was answered, and how to
// make the call anew (SES-2).
const replayedText = "This is the recorded outcome of this call, which was not executed again: the same io.toolgen/call_id, or, " +
	"without one, an identical call (tool, arguments, session, run, step) made while the first was held or running, or " +
	"within the retry window after a write, is its retry. To make the call anew, send a new io.toolgen/call_id in _meta."

// toResult maps an outcome to the MCP result (doc.go, "Results").
func toResult(o runtime.Outcome, id identity) *mcp.CallToolResult {
	res := resultOf(o, id)
	if o.Replayed {
		res.Content = append(res.Content, &mcp.TextContent{Text: replayedText, Meta: mcp.Meta{MetaTrust: string(runtime.TrustSystem)}})
	}
	return res
}

// resultOf is toResult without the note of a replay.
func resultOf(o runtime.Outcome, id identity) *mcp.CallToolResult {
	callID := o.CallID
	if callID == "" {
		callID = id.CallID
	}
	meta := mcp.Meta{
		MetaSessionID: id.SessionID,
		MetaRunID:     id.RunID,
		MetaStep:      id.Step,
		MetaCallID:    callID,
		MetaStatus:    string(o.Status),
	}
	if o.Replayed {
		meta[MetaReplayed] = true
	}
	if o.Status != runtime.OutcomeSucceeded || o.Result == nil {
		return errorResult(o, callID, meta)
	}
	r := o.Result
	meta[MetaTrust] = string(r.Trust)
	res := &mcp.CallToolResult{Meta: meta, Content: []mcp.Content{}}
	if len(r.Artifacts) > 0 {
		arts := make([]artifactShape, 0, len(r.Artifacts))
		for _, a := range r.Artifacts {
			arts = append(arts, artifactShape(a))
		}
		meta[MetaArtifacts] = arts
	}
	if o.Suspended != nil {
		meta[MetaSuspended] = o.Suspended
		res.Content = append(res.Content, &mcp.TextContent{Text: suspendedText, Meta: mcp.Meta{MetaTrust: string(runtime.TrustSystem)}})
		return res
	}
	for _, it := range r.Content {
		// The pipeline enveloped external_untrusted text already (step 12).
		res.Content = append(res.Content, textItem(it))
	}
	if sc := bytes.TrimSpace(r.Structured); len(sc) > 0 && sc[0] == '{' && json.Valid(sc) {
		res.StructuredContent = json.RawMessage(sc)
	}
	return res
}

func textItem(it runtime.Item) *mcp.TextContent {
	m := mcp.Meta{MetaTrust: string(it.Trust)}
	if it.MIMEType != "" {
		m[MetaMIMEType] = it.MIMEType
	}
	return &mcp.TextContent{Text: it.Text, Meta: m}
}

// errorResult is a non-success outcome as an isError result with the six-field shape.
func errorResult(o runtime.Outcome, callID string, meta mcp.Meta) *mcp.CallToolResult {
	if o.Status == runtime.OutcomeSucceeded || !o.Status.Known() || o.Message == "" {
		// A success without a result, or an outcome that is not one of the table's:
		// never invent text, report the platform's fault.
		o = runtime.NewOutcome(runtime.ReasonInternalError, callID)
		meta[MetaStatus] = string(o.Status)
	}
	shape := outcomeShape{
		Status: o.Status, ReasonCode: o.ReasonCode, Message: o.Message,
		Retryable: o.Retryable, CallID: callID,
	}
	retry := "not retryable"
	if o.Retryable {
		retry = "retryable"
	}
	content := []mcp.Content{&mcp.TextContent{
		Text: fmt.Sprintf("%s (%s, %s): %s", o.ReasonCode, o.Status, retry, o.Message),
		Meta: mcp.Meta{MetaTrust: string(runtime.TrustSystem)},
	}}
	if d := o.ExternalDetail; d != nil {
		// Always external_untrusted and already enveloped by the runtime.
		shape.ExternalDetail = &itemShape{Type: d.Type, Text: d.Text, MIMEType: d.MIMEType, Trust: runtime.TrustExternalUntrusted}
		content = append(content, textItem(runtime.Item{Text: d.Text, MIMEType: d.MIMEType, Trust: runtime.TrustExternalUntrusted}))
	}
	return &mcp.CallToolResult{IsError: true, Content: content, StructuredContent: shape, Meta: meta}
}

// holdProgress turns an approval hold's observations into notifications/progress. The
// observer runs on the pipeline's goroutine and must not block: it hands a
// notification to a sender goroutine, dropping it when the sender is still busy with
// the previous one. Progress strictly increases, as MCP requires.
type holdProgress struct {
	ch       chan *mcp.ProgressNotificationParams
	done     chan struct{}
	token    any
	interval time.Duration
	sent     bool // only touched by observe (the pipeline's goroutine)
	last     time.Duration
}

func (s *Server) newHoldProgress(ctx context.Context, ss *mcp.ServerSession, token any) *holdProgress {
	hp := &holdProgress{
		ch:       make(chan *mcp.ProgressNotificationParams, 1),
		done:     make(chan struct{}),
		token:    token,
		interval: s.opts.ProgressInterval,
	}
	go func() {
		defer close(hp.done)
		for p := range hp.ch {
			// The request's ctx routes the notification to the request's stream (HTTP).
			if err := ss.NotifyProgress(ctx, p); err != nil {
				s.log.Debug("mcp/server: progress notification not sent", "error", err)
			}
		}
	}()
	return hp
}

func (hp *holdProgress) observe(waited, bound time.Duration) {
	if hp.sent && (waited <= hp.last || waited-hp.last < hp.interval) {
		return
	}
	p := &mcp.ProgressNotificationParams{
		ProgressToken: hp.token,
		Progress:      waited.Seconds(),
		Total:         bound.Seconds(),
		Message:       HoldProgressMessage,
	}
	select {
	case hp.ch <- p:
		hp.sent, hp.last = true, waited
	default: // the previous notification is still being written
	}
}

// close stops the sender after it has written what it holds.
func (hp *holdProgress) close() {
	close(hp.ch)
	<-hp.done
}

// modernResult is a tools/call result of revision 2026-07-28, which requires
// resultType on every result: the go-sdk sets it on a CallToolResult only when its own
// tool handler made it (go-sdk v1.8.0; this package answers tools/call in a middleware,
// doc.go), so it is added here, "complete" (toolgen asks no input, MCP-6).
type modernResult struct {
	*mcp.CallToolResult
}

// MarshalJSON writes the SDK's own object with resultType first. The SDK writes
// resultType only when it was set, which only its own tool handlers do; the results
// here are built by this package, so the SDK's object never has one, and the field is
// spliced in rather than the object decoded and written again (half the result's
// marshalling on the stateless path, BenchmarkModernResult, issue 20).
func (r modernResult) MarshalJSON() ([]byte, error) {
	data, err := json.Marshal(r.CallToolResult)
	if err != nil {
		return nil, err
	}
	if r.NeedsInput() { // has its own resultType; never made here (MCP-6)
		return data, nil
	}
	if len(data) < 2 || data[0] != '{' {
		return nil, fmt.Errorf("mcp/server: a tools/call result marshalled as %.20q, not an object", data)
	}
	const field = `"resultType":"complete"`
	out := make([]byte, 0, len(data)+len(field)+1)
	out = append(append(out, '{'), field...)
	if data[1] != '}' {
		out = append(out, ',')
	}
	return append(out, data[1:]...), nil
}

// forRevision wraps res for a request of revision 2026-07-28 or later.
func forRevision(version string, res *mcp.CallToolResult) mcp.Result {
	if version >= protocolStateless {
		return modernResult{res}
	}
	return res
}
