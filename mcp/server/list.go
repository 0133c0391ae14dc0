package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/internal/lru"
	"github.com/toolgen/toolgen/internal/names"
	"github.com/toolgen/toolgen/runtime"
)

// listTools answers tools/list: the session's pinned catalog, filtered by its active
// mode, as wire tools, sorted by wire name, paginated.
func (s *Server) listTools(ctx context.Context, req *mcp.ListToolsRequest) (*mcp.ListToolsResult, error) {
	var meta mcp.Meta
	var cursor string
	if req.Params != nil {
		meta, cursor = req.Params.Meta, req.Params.Cursor
	}
	principal, err := s.principalOf(req.Extra)
	if err != nil {
		return nil, err
	}
	session, _, err := s.sessionOf(ctx, req.Session, meta, principal.Tenant)
	if err != nil {
		return nil, err
	}
	tools, mode, err := s.visibleTools(ctx, session, principal.Tenant)
	if err != nil {
		s.log.Error("mcp/server: tools/list: the session's pinned catalog or active mode", "session_id", session, "error", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "toolgen: the session's catalog or active mode could not be read"}
	}
	start := 0
	if cursor != "" {
		after, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil {
			return nil, invalidParams("invalid tools/list cursor")
		}
		start, _ = slices.BinarySearchFunc(tools, string(after), func(t *mcp.Tool, name string) int {
			return strings.Compare(t.Name, name)
		})
		if start < len(tools) && tools[start].Name == string(after) {
			start++
		}
	}
	end := start + min(s.opts.PageSize, len(tools)-start)
	res := &mcp.ListToolsResult{Tools: append([]*mcp.Tool{}, tools[start:end]...)}
	if end < len(tools) {
		res.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(tools[end-1].Name))
	}
	// The list is this tenant's (private) and, where the session's mode can change,
	// stale at once (doc.go, "Revision 2026-07-28": cache hints).
	res.Cacheable = mcp.Cacheable{TTLMs: s.listTTLMs(), CacheScope: "private"}
	res.Meta = mcp.Meta{MetaSessionID: session}
	if mode != "" {
		res.Meta[MetaMode] = mode
	}
	return res, nil
}

// visibleTools is the wire list of a session: pinned catalog ∩ active mode (WF-3).
func (s *Server) visibleTools(ctx context.Context, session, tenant string) ([]*mcp.Tool, string, error) {
	var out []*mcp.Tool
	var mode string
	pinned, err := s.opts.Registry.Tools(ctx, runtime.SessionKey{Tenant: tenant, ID: session})
	if err != nil {
		return nil, "", fmt.Errorf("pinned catalog: %w", err)
	}
	specs := slices.DeleteFunc(pinned, func(t *runtime.ToolSpec) bool { return !t.VisibleTo(tenant) })
	perTool := s.opts.Modes != nil
	if lister, ok := s.opts.Modes.(modeLister); ok {
		// The session's mode is read once for the whole list, not once per tool.
		if specs, mode, err = listedSpecs(ctx, lister, tenant, session, specs); err != nil {
			return nil, "", err
		}
		perTool = false
	}
	for _, spec := range specs {
		if perTool {
			m, in, err := s.opts.Modes.ActiveMode(ctx, tenant, session, spec.Name)
			if err != nil {
				return nil, "", fmt.Errorf("active mode of %s: %w", spec.Name, err)
			}
			mode = m
			if !in {
				continue
			}
		}
		if t := s.tools.wire(spec, s); t != nil {
			out = append(out, t)
		}
	}
	// Registry order is by registry name; the wire order may differ ("_" sorts after
	// "."), and pagination needs the wire order.
	slices.SortFunc(out, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	return out, mode, nil
}

// modeLister is a ModeResolver that can resolve a session's mode once for a whole list
// (protocol.Runtime does).
type modeLister interface {
	Mode(ctx context.Context, tenant, sessionID string) (string, error)
	ToolsFor(ctx context.Context, tenant, sessionID string, all []string) ([]string, error)
}

// listedSpecs keeps the specs whose tools the session's active mode exposes.
func listedSpecs(ctx context.Context, l modeLister, tenant, session string, specs []*runtime.ToolSpec) ([]*runtime.ToolSpec, string, error) {
	mode, err := l.Mode(ctx, tenant, session)
	if err != nil {
		return nil, "", fmt.Errorf("active mode: %w", err)
	}
	all := make([]string, len(specs))
	for i, spec := range specs {
		all[i] = spec.Name
	}
	keep, err := l.ToolsFor(ctx, tenant, session, all)
	if err != nil {
		return nil, "", fmt.Errorf("active mode: %w", err)
	}
	out := specs[:0:0]
	for _, spec := range specs {
		if len(keep) > 0 && keep[0] == spec.Name { // ToolsFor keeps the order
			out = append(out, spec)
			keep = keep[1:]
		}
	}
	return out, mode, nil
}

// toolCache keeps the wire form of each pinned definition: specs are immutable once
// registered, so the pointer names the definition. It is bounded (maxWireTools): a
// definition evicted is rendered again when listed.
type toolCache struct {
	m *lru.Cache[*runtime.ToolSpec, wireEntry] // the tool is nil when it cannot be listed
}

// maxWireTools bounds toolCache: every definition registered and retired, with room.
const maxWireTools = 2 * runtime.MaxRetiredDefinitions

type wireEntry struct{ tool *mcp.Tool }

func (c *toolCache) wire(spec *runtime.ToolSpec, s *Server) *mcp.Tool {
	if e, ok := c.m.Get(spec); ok {
		return e.tool
	}
	t := s.wireTool(spec)
	c.m.Add(spec, wireEntry{t})
	return t
}

// wireTool is the MCP form of a spec, or nil (logged) when its input schema cannot
// describe an object.
func (s *Server) wireTool(spec *runtime.ToolSpec) *mcp.Tool {
	in, why := objectSchema(runtime.AdvertisedInputSchema(spec)) // without bound arguments (SPEC-4)
	if why != "" {
		s.log.Warn("mcp/server: tool left out of tools/list: its input schema "+why+"; it stays callable by name",
			"tool", spec.Name)
		return nil
	}
	meta := mcp.Meta{
		MetaName:                  spec.Name,
		"io.toolgen/version":      spec.Version,
		"io.toolgen/side_effect":  string(spec.SideEffect),
		"io.toolgen/idempotency":  string(spec.Idempotency),
		"io.toolgen/risk":         string(spec.Risk),
		"io.toolgen/output_trust": string(spec.OutputTrust),
	}
	if spec.SchemaSHA256 != "" {
		meta["io.toolgen/schema_sha256"] = spec.SchemaSHA256
	}
	t := &mcp.Tool{
		Name:        names.Wire(spec.Name),
		Description: spec.Description,
		InputSchema: in,
		Annotations: &mcp.ToolAnnotations{
			ReadOnlyHint:   spec.SideEffect != runtime.SideEffectWrite,
			IdempotentHint: spec.Idempotency == runtime.Idempotent,
		},
		Meta: meta,
	}
	if names.Reserved(spec.Name) {
		open := true // an adapter's tool reaches a system outside this platform
		t.Annotations.OpenWorldHint = &open
	}
	if out := bytes.TrimSpace(spec.OutputSchema); len(out) > 0 && json.Valid(out) {
		if adv, why := advertisedOutputSchema(spec); adv != nil {
			t.OutputSchema = adv
		} else {
			meta[MetaOutputSchema] = json.RawMessage(out)
			s.log.Debug("mcp/server: output schema not advertised, kept in _meta", "tool", spec.Name, "why", why)
		}
	}
	return t
}

// objectSchema returns the input schema to advertise: raw when its top-level type is
// "object"; {"type":"object"} for no schema; the schema with type "object" when it had
// no type or a type list holding "object" (the arguments of a call are always an
// object). why is set when the schema cannot describe an object.
func objectSchema(raw json.RawMessage) (schema json.RawMessage, why string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return json.RawMessage(`{"type":"object"}`), ""
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // re-encoding keeps every number as written
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil || dec.More() {
		return nil, "is not a JSON object"
	}
	switch t := m["type"].(type) {
	case string:
		if t == "object" {
			return raw, ""
		}
		return nil, fmt.Sprintf("has type %q, not \"object\"", t)
	case nil:
		if _, present := m["type"]; present {
			return nil, "has type null, not \"object\""
		}
	case []any:
		if !slices.Contains(t, any("object")) {
			return nil, "has a type list without \"object\""
		}
	default:
		return nil, "has a type that is not a string"
	}
	m["type"] = "object"
	b, err := json.Marshal(m)
	if err != nil {
		return nil, "cannot be re-encoded"
	}
	return b, ""
}

// listTTLMs is the ttlMs of a tools/list result: always 0, stale at once. A list is a
// session's — its pinned catalog in its active mode — and the session is named by
// _meta io.toolgen/session_id, which no cache key holds: the go-sdk v1.8.0 client keys
// its list cache by the cursor alone, so any positive ttlMs would let one session's
// list stand for another's, with other pins (a changed definition, the rug pull MCP-7
// guards against) or another mode's tools. cacheScope is "private" for the same reason:
// the list is the tenant's.
func (s *Server) listTTLMs() int { return 0 }
