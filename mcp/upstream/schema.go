package upstream

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/runtime"
)

// MaxSchemaBytes bounds one upstream input or output schema (its JSON encoding). A larger
// schema is refused: it would be held by every session's pinned catalog.
const MaxSchemaBytes = 256 << 10

// MaxDescriptionBytes bounds a remote tool description. A longer one is refused rather
// than cut, so that the definition hash always covers exactly what is advertised.
const MaxDescriptionBytes = 16 << 10

// supportedSchemaDrafts are the $schema values jsonschema-go validates (draft-07 and
// 2020-12); "" means 2020-12. A schema naming another draft resolves but then fails every
// validation, which would turn each call into invalid_arguments, so it is refused up front.
var supportedSchemaDrafts = map[string]bool{
	"": true,
	"http://json-schema.org/draft-07/schema#":      true,
	"https://json-schema.org/draft-07/schema#":     true,
	"https://json-schema.org/draft/2020-12/schema": true,
}

// definition is the part of a remote tool that the catalog pins (MCP-7): the SHA-256 over
// its canonical JSON is the tool's SchemaSHA256.
type definition struct {
	Name         string               `json:"name"`
	Description  string               `json:"description"`
	InputSchema  any                  `json:"input_schema"`
	OutputSchema any                  `json:"output_schema"`
	Annotations  *mcp.ToolAnnotations `json:"annotations"`
}

// definitionHash is the hex SHA-256 over the canonical JSON (runtime.CanonicalJSON, RFC
// 8785) of a remote tool's name, description, input schema, output schema and
// annotations, exactly as the server sent them (before sanitizing): a change in any of
// them, a description included, is drift (the "rug pull").
func definitionHash(t *mcp.Tool) (string, error) {
	return hashJSON(definition{
		Name: t.Name, Description: t.Description,
		InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations,
	})
}

// hashJSON is the hex SHA-256 of v's canonical JSON.
func hashJSON(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode: %w", err)
	}
	canon, err := runtime.CanonicalJSON(raw)
	if err != nil {
		return "", fmt.Errorf("canonical JSON: %w", err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// sanitizeInputSchema turns an upstream input schema into one the registry accepts, or
// says why it cannot:
//
//   - absent (null) becomes {"type":"object"};
//   - it must be a JSON object of at most MaxSchemaBytes;
//   - a missing top-level "type" is set to "object"; any other top-level type (an array
//     of types included) is refused: tool arguments are a JSON object;
//   - a $schema other than draft-07 or 2020-12 is refused;
//   - it must resolve with jsonschema-go (no remote $ref, RE2 patterns, ...), exactly
//     as the registry will resolve it, and give argument types for CEL.
//
// Nothing else is changed: keywords the server wrote stay as written.
func sanitizeInputSchema(s any) (json.RawMessage, error) {
	if s == nil {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	m, raw, err := schemaObject(s)
	if err != nil {
		return nil, err
	}
	switch ty, ok := m["type"]; {
	case !ok:
		m["type"] = "object"
		if raw, err = json.Marshal(m); err != nil {
			return nil, fmt.Errorf("encode schema: %w", err)
		}
	case ty != "object":
		return nil, fmt.Errorf(`top-level "type" is %s; a tool's input schema must have type "object"`, short(ty))
	}
	if err := resolves(raw); err != nil {
		return nil, err
	}
	if _, err := runtime.NewArgTypes(raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// sanitizeOutputSchema checks an upstream output schema: nil when absent; else it must be
// a JSON object that resolves. Any top-level type is allowed (SEP-2106).
func sanitizeOutputSchema(s any) (json.RawMessage, error) {
	if s == nil {
		return nil, nil
	}
	_, raw, err := schemaObject(s)
	if err != nil {
		return nil, err
	}
	if err := resolves(raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// schemaObject encodes s and decodes it as a JSON object.
func schemaObject(s any) (map[string]any, json.RawMessage, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, nil, fmt.Errorf("encode schema: %w", err)
	}
	if len(raw) > MaxSchemaBytes {
		return nil, nil, fmt.Errorf("schema is %d bytes; at most %d are accepted", len(raw), MaxSchemaBytes)
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, nil, fmt.Errorf("schema is not a JSON object")
	}
	if _, err := runtime.CanonicalJSON(raw); err != nil { // depth, duplicate keys, ...
		return nil, nil, fmt.Errorf("schema: %w", err)
	}
	return m, raw, nil
}

// resolves checks that raw resolves with jsonschema-go, as the registry resolves it. A
// panic inside the library on hostile input is an error, never a crash.
func resolves(raw json.RawMessage) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("schema cannot be resolved: jsonschema panicked: %v", r)
		}
	}()
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("schema cannot be decoded: %w", err)
	}
	if !supportedSchemaDrafts[s.Schema] {
		return fmt.Errorf("schema declares $schema %s; only draft-07 and draft 2020-12 are supported", short(s.Schema))
	}
	if _, err := s.Resolve(nil); err != nil {
		return fmt.Errorf("schema cannot be resolved: %w", err)
	}
	return nil
}

// short renders v for an error message, bounded.
func short(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%T", v)
	}
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}
