package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/internal/relay"
	"github.com/toolgen/toolgen/runtime"
)

// Failure codes of the results this adapter returns (runtime.ToolFailure.Code). The
// remote text goes to the failure's Message, which the pipeline puts only in
// external_detail (MCP-3), never in the outcome's message.
const (
	// FailureToolError: the server answered the call with isError.
	FailureToolError = "mcp_tool_error"
	// FailureProtocolError: the server answered with a JSON-RPC error.
	FailureProtocolError = "mcp_protocol_error"
	// FailureInputRequestDeclined: the server answered with inputRequests (2026-07-28
	// multi round-trip: roots, sampling or elicitation), which are never fulfilled
	// (MCP-6). The code is the reason code the outcome should carry.
	FailureInputRequestDeclined = string(runtime.ReasonInputRequestDeclined)
)

// maxFailureText bounds the remote text kept in a failure; the pipeline bounds
// external_detail again (runtime.MaxExternalDetailBytes).
const maxFailureText = 64 << 10

// classification is the operator's classification of the server, as runtime values,
// with anything unknown read as its most restrictive value (MCP-2).
func (u *Upstream) classification() (runtime.SideEffect, runtime.Idempotency, runtime.Risk, []string) {
	s := u.opts.Server
	se := runtime.SideEffectWrite
	switch s.SideEffect {
	case runtime.SideEffectNone, runtime.SideEffectRead:
		se = s.SideEffect
	}
	idem := runtime.NonIdempotent
	switch s.Idempotency {
	case runtime.Idempotent:
		idem = runtime.Idempotent
	case runtime.ConditionallyIdempotent:
		// A server file has no idempotent_when: with no condition recorded, recovery
		// treats the call as non-idempotent.
		idem = runtime.ConditionallyIdempotent
	}
	if se == runtime.SideEffectNone {
		idem = runtime.Idempotent
	}
	risk := runtime.RiskCritical
	switch s.Risk {
	case runtime.RiskLow, runtime.RiskMedium, runtime.RiskHigh:
		risk = s.Risk
	}
	scopes := make([]string, 0, len(s.RequiredScopes))
	scopes = append(scopes, s.RequiredScopes...)
	return se, idem, risk, scopes
}

func (u *Upstream) classificationDetail() map[string]any {
	se, idem, risk, scopes := u.classification()
	return map[string]any{"side_effect": se, "idempotency": idem, "risk": risk, "required_scopes": scopes, "source": u.opts.Server.File}
}

// toolSpec is the ToolSpec of a remote tool: its classification is the server file's
// (MCP-2), never the server's annotations; output trust is external_untrusted (MCP-3).
func (u *Upstream) toolSpec(name, description string, input, output json.RawMessage, hash string) *runtime.ToolSpec {
	se, idem, risk, scopes := u.classification()
	return &runtime.ToolSpec{
		Name: name, Version: 1, Kind: runtime.KindAction, Description: description,
		SideEffect: se, Idempotency: idem, Risk: risk, RequiredScopes: scopes,
		OutputTrust: runtime.TrustExternalUntrusted,
		Timeout:     u.opts.ToolTimeout, OutputMaxBytes: u.opts.OutputMaxBytes,
		InputSchema: input, OutputSchema: output, SchemaSHA256: hash, Source: u.opts.Server.File,
		Tenant: u.tenantScope(),
	}
}

// tenantScope is the tenant whose principals alone see and call the tools (ID-2): a
// tenant-configured server's, or a device's (a device is one tenant's machine); ""
// (every tenant) for an operator's server.
func (u *Upstream) tenantScope() string {
	if u.opts.Server.ConfiguredBy == "tenant" || u.domain == DeviceDomain {
		return u.opts.Tenant
	}
	return ""
}

// remoteTool is one upstream tool as a runtime.Tool (MCP-8). Only the pipeline calls
// Execute.
type remoteTool struct {
	up     *Upstream
	remote string
	spec   *runtime.ToolSpec
}

func (t *remoteTool) Spec() *runtime.ToolSpec { return t.spec }

// Execute sends tools/call with the validated arguments. For the classes that need a
// watermark (non_idempotent, conditionally_idempotent) it calls tc.MarkEffectSent
// immediately before sending, after marshalling, and sends nothing if that fails.
//
// The result is mapped by [mapCallResult]. A JSON-RPC error from the server is a failure
// the server reported (mcp_protocol_error); anything else that stops the call (the
// connection died, an undecodable or oversized answer, the pipeline's deadline) is an
// error, so that a call whose watermark is set and whose class is not safe to repeat
// ends UNCERTAIN (effect_may_have_happened).
func (t *remoteTool) Execute(ctx context.Context, tc *runtime.ExecContext, args json.RawMessage) (runtime.ToolResult, error) {
	cs, err := t.up.session()
	if err != nil {
		return runtime.ToolResult{}, t.up.offline(ctx, fmt.Errorf("%s: %w", t.spec.Name, err))
	}
	if a := bytes.TrimSpace(args); len(a) == 0 || bytes.Equal(a, []byte("null")) {
		args = json.RawMessage("{}") // never "arguments": null (a typed nil is sent as null)
	}
	params := &mcp.CallToolParams{Name: t.remote, Arguments: args}
	if sink := relay.From(ctx); sink != nil { // the caller hears this call's notifications (relay.go)
		token, untrack := t.up.track(sink)
		defer untrack()
		if sink.WantsProgress() {
			params.SetProgressToken(token)
		}
		t.up.askLogsOf(params)
	}
	if t.spec.Idempotency.NeedsWatermark() {
		// Marshal first: nothing that can fail before the request is written may come
		// after the watermark (the SDK marshals again; arguments are small, validated
		// JSON). A call with no watermark lets the SDK's one marshal fail it.
		if _, err := json.Marshal(params); err != nil {
			return runtime.ToolResult{}, fmt.Errorf("%s: encode tools/call: %w", t.spec.Name, err)
		}
		if err := tc.MarkEffectSent(ctx); err != nil {
			return runtime.ToolResult{}, err
		}
	}
	res, err := safeCall(ctx, func(ctx context.Context) (*mcp.CallToolResult, error) {
		callCtx, release := detachedUntilDone(ctx)
		defer release()
		return cs.CallTool(callCtx, params)
	})
	if err != nil {
		res, err := callError(ctx, t.spec.Name, "tools/call", err)
		return res, t.up.disconnected(ctx, cs, err)
	}
	if res.NeedsInput() || res.InputRequests != nil {
		return t.up.declineInput(ctx, t.spec.Name, res.InputRequests), nil
	}
	return mapCallResult(ctx, tc, t.spec, res), nil
}

// drainGrace is how long a request's context outlives the answer, so that the HTTP
// transport can finish reading the response and keep its connection.
const drainGrace = 5 * time.Second

// detachedUntilDone returns a context for one request that is cancelled when ctx is
// (a deadline or a caller's cancel still stops the request at once), but not merely
// because the call returned: the go-sdk hands back the result before it has read the
// rest of the HTTP response, and the pipeline cancels the call's context as soon as the
// tool returns, which made the transport drop the kept-alive connection on 7-30 % of
// calls (a new TCP — for a remote server, TLS — handshake each time; see mcp/bench).
// release, called when the request returned, cancels the context after drainGrace.
func detachedUntilDone(ctx context.Context) (context.Context, func()) {
	callCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	return callCtx, func() {
		if stop() { // ctx is not done: let the response finish, then release
			time.AfterFunc(drainGrace, cancel)
		}
	}
}

// callError maps an error of a request: a JSON-RPC error is the server's answer (a
// failure it reports); a cancelled or expired context is reported as such, so the
// pipeline sees context.DeadlineExceeded for a timeout; anything else is an error.
func callError(ctx context.Context, tool, method string, err error) (runtime.ToolResult, error) {
	if cerr := ctx.Err(); cerr != nil {
		return runtime.ToolResult{}, fmt.Errorf("%s: %s: %w (%v)", tool, method, cerr, err)
	}
	var werr *jsonrpc.Error
	if errors.As(err, &werr) && !localWireCodes[werr.Code] {
		return runtime.ToolResult{OK: false, Failure: &runtime.ToolFailure{
			Code:    FailureProtocolError,
			Message: bound(fmt.Sprintf("JSON-RPC error %d: %s", werr.Code, werr.Message)),
		}}, nil
	}
	return runtime.ToolResult{}, fmt.Errorf("%s: %s: %w", tool, method, err)
}

// localWireCodes are the go-sdk's own JSON-RPC error codes for a call that could not be
// exchanged (client closing -32003, server closing -32004, rejected by the transport
// -32005): the client made them up, the server said nothing, so they are transport
// errors, not failures the server reported.
var localWireCodes = map[int64]bool{-32003: true, -32004: true, -32005: true}

// safeCall runs one SDK request, turning a panic into an error.
func safeCall[R any](ctx context.Context, f func(context.Context) (R, error)) (res R, err error) {
	defer func() {
		if r := recover(); r != nil {
			var zero R
			res, err = zero, fmt.Errorf("mcp client panicked: %v", r)
		}
	}()
	return f(ctx)
}

// declineInput is the answer to an inputRequests result (MCP-6): nothing is fulfilled and
// the call ends failed with the input_request_declined code. The requested methods are
// named in the failure text; what the server asked for is not.
func (u *Upstream) declineInput(ctx context.Context, tool string, reqs mcp.InputRequestMap) runtime.ToolResult {
	methods := inputMethods(reqs)
	for _, m := range methods {
		u.refused(ctx, m, "inputRequests of "+tool)
	}
	if len(methods) == 0 {
		methods = []string{"(none named)"}
	}
	return runtime.ToolResult{OK: false, Failure: &runtime.ToolFailure{
		Code:    FailureInputRequestDeclined,
		Message: "the server asked for client input, which is never granted: " + strings.Join(methods, ", "),
	}}
}

func inputMethods(reqs mcp.InputRequestMap) []string {
	seen := map[string]bool{}
	for _, r := range reqs {
		m := "unknown"
		switch r.(type) {
		//lint:ignore SA1019 names the deprecated requests an upstream may still send, to refuse them
		case *mcp.ListRootsParams:
			m = "roots/list"
		//lint:ignore SA1019 names the deprecated requests an upstream may still send, to refuse them
		case *mcp.CreateMessageParams, *mcp.CreateMessageWithToolsParams:
			m = "sampling/createMessage"
		case *mcp.ElicitParams:
			m = "elicitation/create"
		}
		seen[m] = true
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// mapCallResult maps a tools/call result (MCP-3, MCP-8):
//
//   - isError: a failure (mcp_tool_error) whose message is the remote text; the
//     pipeline puts it in external_detail only;
//   - each content item becomes one item labelled external_untrusted: text as it is;
//     an embedded text resource as its text; an image, audio or blob resource is stored
//     whole with the artifact writer and replaced by a one-line text placeholder naming
//     the artifact (without an artifact writer the placeholder says the bytes were not
//     kept); a resource link becomes a placeholder naming its URI;
//   - structuredContent becomes Structured only when the tool declares an output schema
//     (the pipeline validates it against that schema: a server breaking its own schema
//     gets failed/invalid_result); without one it is returned as JSON text, and it is
//     also returned as text when the server sent no content at all, so nothing is lost.
//
// Large output is the pipeline's business: it excerpts and artifactizes beyond the
// tool's OutputMaxBytes.
func mapCallResult(ctx context.Context, tc *runtime.ExecContext, spec *runtime.ToolSpec, res *mcp.CallToolResult) runtime.ToolResult {
	items, artifacts := mapContent(ctx, tc, res.Content)
	if res.IsError {
		var b strings.Builder
		for i, it := range items {
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(it.Text)
		}
		text := b.String()
		if text == "" {
			text = "the server reported an error without text"
		}
		return runtime.ToolResult{OK: false, Failure: &runtime.ToolFailure{Code: FailureToolError, Message: bound(text)}}
	}
	out := runtime.ToolResult{OK: true, Trust: runtime.TrustExternalUntrusted, Artifacts: artifacts}
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err == nil {
			if len(spec.OutputSchema) > 0 {
				out.Structured = raw
			}
			if len(spec.OutputSchema) == 0 || len(items) == 0 {
				items = append(items, untrusted(string(raw), "application/json"))
			}
		}
	}
	out.Content = items
	return out
}

// mapContent maps MCP content items to runtime items.
func mapContent(ctx context.Context, tc *runtime.ExecContext, content []mcp.Content) ([]runtime.Item, []runtime.ArtifactRef) {
	var items []runtime.Item
	var refs []runtime.ArtifactRef
	blob := func(kind, mime string, data []byte) {
		mime = safeMIME(mime)
		var w runtime.ArtifactWriter
		if tc != nil {
			w = tc.Artifacts()
		}
		if w == nil {
			items = append(items, untrusted(fmt.Sprintf("[%s %s, %d bytes, not kept: no artifact store]", kind, mime, len(data)), ""))
			return
		}
		ref, err := w.WriteArtifact(ctx, mime, bytes.NewReader(data))
		if err != nil {
			items = append(items, untrusted(fmt.Sprintf("[%s %s, %d bytes, not kept: %v]", kind, mime, len(data), err), ""))
			return
		}
		refs = append(refs, ref)
		items = append(items, untrusted(fmt.Sprintf("[%s %s, %d bytes, stored as %s]", kind, mime, len(data), ref.URI), ""))
	}
	for _, c := range content {
		switch c := c.(type) {
		case *mcp.TextContent:
			items = append(items, untrusted(c.Text, ""))
		case *mcp.ImageContent:
			blob("image", c.MIMEType, c.Data)
		case *mcp.AudioContent:
			blob("audio", c.MIMEType, c.Data)
		case *mcp.EmbeddedResource:
			if c.Resource == nil {
				continue
			}
			if c.Resource.Blob != nil {
				blob("resource "+oneLine(c.Resource.URI), c.Resource.MIMEType, c.Resource.Blob)
			} else {
				items = append(items, untrusted(c.Resource.Text, ""))
			}
		case *mcp.ResourceLink:
			items = append(items, untrusted(fmt.Sprintf("[resource link %s %s]", oneLine(c.URI), oneLine(c.Name)), ""))
		case nil:
		default:
			items = append(items, untrusted(fmt.Sprintf("[content of type %T omitted]", c), ""))
		}
	}
	return items, refs
}

func untrusted(text, mime string) runtime.Item {
	return runtime.Item{Type: "text", Text: text, MIMEType: mime, Trust: runtime.TrustExternalUntrusted}
}

var mimeRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,63}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,63}$`)

// safeMIME keeps a server's media type only when it is a plain type/subtype token.
func safeMIME(m string) string {
	if mimeRE.MatchString(m) {
		return strings.ToLower(m)
	}
	return "application/octet-stream"
}

// oneLine bounds a server string that goes inside a placeholder.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// bound keeps at most maxFailureText bytes of s, on a rune boundary.
func bound(s string) string {
	if len(s) <= maxFailureText {
		return s
	}
	cut := maxFailureText
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "\n[... cut ...]"
}
