package server

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/runtime"
)

// Output schemas (issue 15, point 8).
//
// MCP asks a tool that declares an outputSchema to return, on every success, a
// structuredContent that conforms to it, and clients check (the TypeScript SDK's
// client refuses a result without one, or one that does not validate). Every tool has
// an output budget, and a result over it is excerpted (RT-9): its structured value is
// moved, whole, to an artifact, because a cut JSON value is no value. And a call that
// does not succeed answers isError with the six-field outcome as structuredContent
// (RT-7), which that client validates too. So the declared schema alone cannot be
// promised. The decision: advertise, and always return valid structured content —
// against a schema that says what the platform guarantees:
//
//	{"type": "object", "anyOf": [DECLARED, ELIDED, OUTCOME]}
//
// DECLARED is the tool's own output schema (its $schema, $defs and definitions hoisted
// to the top, so that its local references still resolve; its "format" keywords
// dropped, since the pipeline's validator does not check them and a client's may).
// ELIDED is {"io.toolgen/elided": {"artifacts": [...]}}, sent instead of the value when
// a success carries none inline: the pipeline moved it to an artifact (the references
// are the result's artifacts, also in _meta io.toolgen/artifacts), or the tool
// returned none. Otherwise structuredContent is the tool's structured result, which the
// pipeline validated against DECLARED at step 12 — for an upstream server's tool too:
// the adapter passes its structuredContent through unchanged (trust labels go on the
// content items and the result's _meta, never inside the value, MCP-3), so what is
// returned is valid against the server's own schema or the call ended invalid_result.
// OUTCOME is the six-field shape of an isError result.
//
// Not advertised (the declared schema stays in _meta io.toolgen/output_schema): a
// schema whose top-level type is not "object" (MCP wants an object), one with an $id or
// a reference other than "#/$defs/..." or "#/definitions/..." (nesting it would move
// what the reference points at), and a suspending control tool's (RT-11: its reply is
// not its result).

// ElidedKey is the one key of the structuredContent that stands for a structured
// result that is not inline.
const ElidedKey = "io.toolgen/elided"

// elidedSchema is ELIDED (see above).
const elidedSchema = `{"type":"object","required":["` + ElidedKey + `"],"additionalProperties":false,"properties":{"` + ElidedKey + `":{"type":"object","description":"The structured result is not inline: it exceeded the tool's output budget and is stored whole as one of these artifacts, or the tool returned none.","required":["artifacts"],"properties":{"artifacts":{"type":"array","items":{"type":"object","required":["uri","sha256","size"],"properties":{"uri":{"type":"string"},"sha256":{"type":"string"},"size":{"type":"integer"},"media_type":{"type":"string"}}}}}}}}`

// outcomeSchema is OUTCOME (see above): the structuredContent of an isError result.
const outcomeSchema = `{"type":"object","required":["status","reason_code","message","retryable","call_id","external_detail"],"additionalProperties":false,"properties":{"status":{"enum":["denied","failed","unavailable","uncertain"]},"reason_code":{"type":"string"},"message":{"type":"string"},"retryable":{"type":"boolean"},"call_id":{"type":"string"},"external_detail":{"anyOf":[{"type":"null"},{"type":"object","required":["type","text","trust"],"properties":{"type":{"type":"string"},"text":{"type":"string"},"mime_type":{"type":"string"},"trust":{"type":"string"}}}]}}}`

// advertisedOutputSchema is the outputSchema spec advertises, or nil and why not.
func advertisedOutputSchema(spec *runtime.ToolSpec) (json.RawMessage, string) {
	if spec.Suspends {
		return nil, "a suspending control tool's reply is not its result"
	}
	dec := json.NewDecoder(bytes.NewReader(spec.OutputSchema))
	dec.UseNumber() // numbers stay as written
	var root map[string]any
	if err := dec.Decode(&root); err != nil || root == nil {
		return nil, "not a JSON object"
	}
	if root["type"] != "object" {
		return nil, `its top-level type is not "object"`
	}
	if why := nestable(root, true); why != "" {
		return nil, why
	}
	var elided, outcome any
	_ = json.Unmarshal([]byte(elidedSchema), &elided) // constants
	_ = json.Unmarshal([]byte(outcomeSchema), &outcome)
	wrapper := map[string]any{"type": "object"}
	for _, k := range []string{"$schema", "$defs", "definitions"} {
		if v, ok := root[k]; ok {
			wrapper[k] = v
			delete(root, k)
		}
	}
	wrapper["anyOf"] = []any{root, elided, outcome}
	b, err := json.Marshal(wrapper)
	if err != nil {
		return nil, "cannot be re-encoded"
	}
	return b, ""
}

// Keywords whose value is a subschema, a list of them, or a map of names to them.
var (
	subschemaKeywords = []string{"additionalProperties", "additionalItems", "items", "contains", "not", "if", "then", "else",
		"propertyNames", "unevaluatedProperties", "unevaluatedItems", "contentSchema"}
	subschemaListKeywords = []string{"allOf", "anyOf", "oneOf", "prefixItems", "items"}
	subschemaMapKeywords  = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)

// nestable walks a schema (a JSON-decoded map, changed in place: "format" keywords are
// removed) and says why it cannot be nested in the advertised wrapper, or "".
func nestable(node any, root bool) string {
	m, ok := node.(map[string]any)
	if !ok {
		return "" // true, false, or a value of a keyword this walk does not enter
	}
	if _, ok := m["$id"]; ok {
		return "it has an $id"
	}
	for _, k := range []string{"$dynamicRef", "$recursiveRef"} {
		if _, ok := m[k]; ok {
			return "it has a " + k
		}
	}
	if ref, ok := m["$ref"]; ok {
		r, _ := ref.(string)
		if !strings.HasPrefix(r, "#/$defs/") && !strings.HasPrefix(r, "#/definitions/") {
			return "it has a reference other than #/$defs/... or #/definitions/..."
		}
	}
	if _, ok := m["format"].(string); ok {
		delete(m, "format")
	}
	for _, k := range subschemaKeywords {
		if why := nestable(m[k], false); why != "" {
			return why
		}
	}
	for _, k := range subschemaListKeywords {
		list, _ := m[k].([]any)
		for _, sub := range list {
			if why := nestable(sub, false); why != "" {
				return why
			}
		}
	}
	for _, k := range subschemaMapKeywords {
		subs, _ := m[k].(map[string]any)
		for _, sub := range subs {
			if why := nestable(sub, false); why != "" {
				return why
			}
		}
	}
	return ""
}

// elidedShape is the ELIDED value.
type elidedShape struct {
	Elided struct {
		Artifacts []artifactShape `json:"artifacts"`
	} `json:"io.toolgen/elided"`
}

// honourOutputSchema gives a success of a tool that advertises an outputSchema, and
// carries no structured content inline, the ELIDED value: a client that validates
// structuredContent against the advertised schema always has one that conforms.
func (s *Server) honourOutputSchema(ctx context.Context, res *mcp.CallToolResult, o runtime.Outcome, k runtime.SessionKey, tool string) {
	if res.IsError || res.StructuredContent != nil || o.Result == nil || o.Suspended != nil {
		return
	}
	c, err := s.opts.Registry.Pin(ctx, k)
	if err != nil {
		s.log.Error("mcp/server: tools/call: the session's pinned catalog", "session_id", k.ID, "error", err)
		return
	}
	spec := c[tool]
	if spec == nil {
		return
	}
	if t := s.tools.wire(spec, s); t == nil || t.OutputSchema == nil {
		return
	}
	var v elidedShape
	v.Elided.Artifacts = []artifactShape{}
	for _, a := range o.Result.Artifacts {
		v.Elided.Artifacts = append(v.Elided.Artifacts, artifactShape(a))
	}
	res.StructuredContent = v
}
