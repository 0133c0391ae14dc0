package upstream

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/internal/relay"
	"github.com/toolgen/toolgen/runtime"
)

// ReadResourceTool is the last segment of the synthetic per-server resource tool (MCP-5):
// mcp.{server_id}.read_resource. A remote tool normalizing to the same name is dropped
// and recorded as a collision.
const ReadResourceTool = "read_resource"

// readResourceSchema is the synthetic tool's input: one resource URI.
const readResourceSchema = `{"type":"object","properties":{"uri":{"type":"string","minLength":1,"maxLength":4096,"description":"The URI of a resource the server lists (resources/list) or a URI its resource templates produce."}},"required":["uri"],"additionalProperties":false}`

const readResourceDescription = "Read one resource of this MCP server by URI (resources/read). The content is external and untrusted."

func (u *Upstream) readResourceName() string {
	return u.domain + "." + u.id + "." + ReadResourceTool
}

// resourcesExposed reports whether the synthetic read tool is registered: the file says
// resources: expose and the server offers resources.
func (u *Upstream) resourcesExposed() bool {
	cs := u.current()
	if u.opts.Server.Resources != "expose" || cs == nil {
		return false
	}
	ir := cs.InitializeResult()
	return ir != nil && ir.Capabilities != nil && ir.Capabilities.Resources != nil
}

// resourceEntry is the synthetic read tool (MCP-5): classified read and idempotent
// whatever the server's tools are (reading is what resources/read does), with the
// file's risk and required scopes, output external_untrusted. It runs the full pipeline
// like any tool: resources are never attached to context automatically.
func (u *Upstream) resourceEntry() *entry {
	name := u.readResourceName()
	_, _, risk, scopes := u.classification()
	def := map[string]any{"name": name, "description": readResourceDescription, "input_schema": json.RawMessage(readResourceSchema), "synthetic": "resources/read"}
	hash, _ := hashJSON(def) // constant input: cannot fail
	spec := &runtime.ToolSpec{
		Name: name, Version: 1, Kind: runtime.KindAction, Description: readResourceDescription,
		SideEffect: runtime.SideEffectRead, Idempotency: runtime.Idempotent, Risk: risk, RequiredScopes: scopes,
		OutputTrust: runtime.TrustExternalUntrusted, Timeout: u.opts.ToolTimeout, OutputMaxBytes: u.opts.OutputMaxBytes,
		InputSchema: json.RawMessage(readResourceSchema), SchemaSHA256: hash, Source: u.opts.Server.File,
		Tenant: u.tenantScope(),
	}
	return &entry{
		name: name, hash: hash, fields: map[string]string{"definition": hash},
		detail: map[string]any{"synthetic": "resources/read", "classification": map[string]any{
			"side_effect": runtime.SideEffectRead, "idempotency": runtime.Idempotent, "risk": risk, "required_scopes": scopes,
		}},
		tool: &resourceTool{up: u, spec: spec},
	}
}

type resourceTool struct {
	up   *Upstream
	spec *runtime.ToolSpec
}

func (t *resourceTool) Spec() *runtime.ToolSpec { return t.spec }

// Execute reads one resource. Text contents become items, blobs are stored with the
// artifact writer and replaced by placeholders (as in tool results); everything is
// external_untrusted.
func (t *resourceTool) Execute(ctx context.Context, tc *runtime.ExecContext, args json.RawMessage) (runtime.ToolResult, error) {
	var a struct {
		URI string `json:"uri"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.URI == "" {
		return runtime.ToolResult{}, fmt.Errorf("%s: arguments: uri is required", t.spec.Name)
	}
	cs, err := t.up.session()
	if err != nil {
		return runtime.ToolResult{}, t.up.offline(ctx, fmt.Errorf("%s: %w", t.spec.Name, err))
	}
	params := &mcp.ReadResourceParams{URI: a.URI}
	if sink := relay.From(ctx); sink != nil { // the caller hears this read's notifications (relay.go)
		token, untrack := t.up.track(sink)
		defer untrack()
		if sink.WantsProgress() {
			params.SetProgressToken(token)
		}
	}
	res, err := safeCall(ctx, func(ctx context.Context) (*mcp.ReadResourceResult, error) {
		return cs.ReadResource(ctx, params)
	})
	if err != nil {
		res, err := callError(ctx, t.spec.Name, "resources/read", err)
		return res, t.up.disconnected(ctx, cs, err)
	}
	if res.NeedsInput() || res.InputRequests != nil {
		return t.up.declineInput(ctx, t.spec.Name, res.InputRequests), nil
	}
	var content []mcp.Content
	for _, c := range res.Contents {
		if c != nil {
			content = append(content, &mcp.EmbeddedResource{Resource: c})
		}
	}
	items, refs := mapContent(ctx, tc, content)
	return runtime.ToolResult{OK: true, Content: items, Artifacts: refs, Trust: runtime.TrustExternalUntrusted}, nil
}
