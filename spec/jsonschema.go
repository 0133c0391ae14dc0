package spec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"

	"github.com/toolgen/toolgen/internal/canonjson"
)

// JSON Schema of a tool's arguments and result (SPEC-4), and the definition hash the
// catalog pins (GEN-4, MCP-7).

// SchemaDialect is the $schema of every generated schema.
const SchemaDialect = "https://json-schema.org/draft/2020-12/schema"

// InputSchema returns the JSON Schema (draft 2020-12) of t's arguments as canonical
// JSON: an object with one property per argument, "required" listing the required ones
// in declaration order (omitted when there are none) and no additional properties.
// A tool without arguments gets an object schema with empty properties.
func (t *Tool) InputSchema() []byte { return mustCanonical(rootSchema(t.Args)) }

// OutputSchema returns the JSON Schema (draft 2020-12) of t's result, shaped like
// [Tool.InputSchema].
func (t *Tool) OutputSchema() []byte { return mustCanonical(rootSchema(t.Result)) }

// SchemaSHA256 returns the hex SHA-256 that a catalog pins for t (GEN-4, MCP-7): the
// canonical JSON (see [CanonicalJSON]) of
//
//	{"name", "version", "description", "input_schema", "output_schema",
//	 "classification": {"kind", "side_effect", "idempotency", "idempotent_when",
//	   "risk", "required_scopes", "output_trust", "confers_approval", "parallel_safe",
//	   "suspends", "approval_when", "timeout"}}
//
// where idempotent_when and approval_when are the CEL sources and are left out when
// the spec has none, required_scopes is a list (empty when none) and timeout is a Go
// duration string left out when the spec sets none.
//
// Everything a caller relies on is hashed, not only the schemas: a changed
// description or classification is drift too. A tool that keeps its name and schema
// but rewrites its description (the text the model reads) or quietly drops an
// approval condition is MCP-7's "rug pull", and a session that pinned the old hash
// refuses it (unavailable/tool_changed).
func (t *Tool) SchemaSHA256() string {
	return t.schemaSHA256(t.InputSchema(), t.OutputSchema())
}

// Schemas returns [Tool.InputSchema], [Tool.OutputSchema] and [Tool.SchemaSHA256],
// computing each schema once.
func (t *Tool) Schemas() (input, output []byte, sha string) {
	input, output = t.InputSchema(), t.OutputSchema()
	return input, output, t.schemaSHA256(input, output)
}

func (t *Tool) schemaSHA256(input, output []byte) string {
	scopes := make([]any, 0, len(t.RequiredScopes))
	for _, s := range t.RequiredScopes {
		scopes = append(scopes, s.Name)
	}
	class := map[string]any{
		"kind":             t.Kind,
		"side_effect":      t.SideEffect,
		"idempotency":      t.Idempotency,
		"risk":             t.Risk,
		"required_scopes":  scopes,
		"output_trust":     t.OutputTrust,
		"confers_approval": t.ConfersApproval,
		"parallel_safe":    t.ParallelSafe,
		"suspends":         t.Suspends,
	}
	if t.IdempotentWhen != nil {
		class["idempotent_when"] = t.IdempotentWhen.Source
	}
	if t.ApprovalWhen != nil {
		class["approval_when"] = t.ApprovalWhen.Source
	}
	if t.Timeout != 0 {
		class["timeout"] = t.Timeout.String()
	}
	def := map[string]any{
		"name":           t.Name,
		"version":        t.Version,
		"description":    t.Description,
		"input_schema":   json.RawMessage(input),
		"output_schema":  json.RawMessage(output),
		"classification": class,
	}
	sum := sha256.Sum256(mustCanonical(def))
	return hex.EncodeToString(sum[:])
}

// rootSchema is the object schema of a tool's args or result.
func rootSchema(fields []*Field) map[string]any {
	s := objectSchema(fields)
	s["$schema"] = SchemaDialect
	return s
}

func objectSchema(fields []*Field) map[string]any {
	props := make(map[string]any, len(fields))
	var required []any
	for _, f := range fields {
		props[f.Name] = fieldSchema(f)
		if f.Required {
			required = append(required, f.Name)
		}
	}
	s := map[string]any{
		"type":                 TypeObject,
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// fieldSchema is the schema of one field, an array's items or an object's property.
func fieldSchema(f *Field) map[string]any {
	var s map[string]any
	switch f.Type {
	case TypeObject:
		s = objectSchema(f.Properties)
	default:
		s = map[string]any{"type": f.Type}
	}
	if f.Description != "" {
		s["description"] = f.Description
	}
	if f.Bound != "" {
		s[BoundKeyword] = f.Bound
	}
	if f.WorkspacePath {
		s[WorkspacePathKeyword] = true
	}
	if f.Enum != nil {
		s["enum"] = f.Enum
	}
	if f.HasDefault {
		s["default"] = schemaValue(f.Default)
	}
	if f.Min != nil {
		s["minimum"] = schemaNumber(*f.Min)
	}
	if f.Max != nil {
		s["maximum"] = schemaNumber(*f.Max)
	}
	setInt := func(key string, v *int64) {
		if v != nil {
			s[key] = *v
		}
	}
	setInt("minLength", f.MinLength)
	setInt("maxLength", f.MaxLength)
	setInt("minItems", f.MinItems)
	setInt("maxItems", f.MaxItems)
	if f.Pattern != "" {
		s["pattern"] = f.Pattern
	}
	if f.Type == TypeArray && f.Items != nil {
		s["items"] = fieldSchema(f.Items)
	}
	return s
}

// schemaNumber renders a whole number as an integer (minimum: 1, not 1.0 or 1e+00;
// -0 as 0).
func schemaNumber(x float64) any {
	if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
		return int64(x)
	}
	return x
}

// schemaValue copies a default value (string, int64, float64, bool, []any or
// map[string]any) with every float64 in canonical form, leaving the model untouched.
func schemaValue(v any) any {
	switch x := v.(type) {
	case float64:
		return schemaNumber(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = schemaValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = schemaValue(e)
		}
		return out
	}
	return v
}

// mustCanonical is CanonicalJSON of a tree built in this file (maps, slices, strings,
// bools, numbers, raw JSON), which always encodes.
func mustCanonical(v any) []byte {
	b, err := CanonicalJSON(v)
	if err != nil {
		// Only reachable through a NaN or infinite number, which the loader never produces.
		panic(fmt.Sprintf("spec: canonical JSON: %v", err))
	}
	return b
}

// CanonicalJSON encodes v as canonical JSON: the one canonical JSON of toolgen
// (internal/canonjson: RFC 8785, numbers keeping their exact digits), so a definition
// hash ([Tool.SchemaSHA256]) is computed exactly as the runtime computes the key of a
// call and the MCP adapter the hash of an upstream tool. v may be anything
// encoding/json marshals; a json.RawMessage is canonicalized as it is, a []byte is
// marshalled as encoding/json does (a base64 string).
func CanonicalJSON(v any) ([]byte, error) {
	raw, ok := v.(json.RawMessage)
	if !ok {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return nil, err
		}
		raw = buf.Bytes()
	}
	return canonjson.Canonical(raw)
}
