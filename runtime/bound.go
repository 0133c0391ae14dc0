package runtime

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/toolgen/toolgen/internal/names"
)

// BoundKeyword marks a bound argument in a builtin's input schema (SPEC-4): the property
// is filled by the pipeline from the verified caller or the call — its source is the
// keyword's value — never by the caller, and it is not advertised to models. toolgen
// writes it; it is the same string as spec.BoundKeyword.
const BoundKeyword = "x-toolgen-bound"

// boundArgs reads the bound arguments of an input schema: property name -> source.
func boundArgs(schema json.RawMessage) (map[string]string, error) {
	if len(schema) == 0 {
		return nil, nil
	}
	var s struct {
		Properties map[string]map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, err
	}
	var out map[string]string
	for name, prop := range s.Properties {
		raw, ok := prop[BoundKeyword]
		if !ok {
			continue
		}
		var src string
		if err := json.Unmarshal(raw, &src); err != nil || !validBoundSource(src) {
			return nil, fmt.Errorf("argument %s: %s %s is not a bound source", name, BoundKeyword, raw)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = src
	}
	return out, nil
}

func validBoundSource(src string) bool {
	switch src {
	case "principal.id", "principal.tenant", "session.id", "run.id":
		return true
	}
	claim, ok := strings.CutPrefix(src, "principal.claims.")
	return ok && claim != ""
}

// boundValue is the value of a bound argument for call c; ok false when the source has
// none (an unauthenticated caller has no claims).
func boundValue(c *Call, src string) (string, bool) {
	switch src {
	case "principal.id":
		return c.Principal.ID, c.Principal.ID != ""
	case "principal.tenant":
		return c.Principal.Tenant, c.Principal.Tenant != ""
	case "session.id":
		return c.SessionID, c.SessionID != ""
	case "run.id":
		return c.RunID, c.RunID != ""
	}
	claim, _ := strings.CutPrefix(src, "principal.claims.")
	v, ok := c.Principal.Claims[claim]
	return v, ok && v != ""
}

// bindArgs refuses a call that supplies a bound argument and fills them in (SPEC-4):
// raw is the caller's JSON object; the result is the object with the bound arguments
// set. supplied reports whether the caller supplied any argument at all.
func bindArgs(c *Call, bound map[string]string, raw []byte) (out []byte, supplied bool, reason ReasonCode, detail string) {
	var args map[string]json.RawMessage
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, false, ReasonInvalidArguments, err.Error()
	}
	var given []string
	for name := range bound {
		if _, ok := args[name]; ok {
			given = append(given, name)
		}
	}
	if len(given) > 0 {
		slices.Sort(given)
		return nil, false, ReasonBoundArgumentSupplied, "bound argument(s) supplied: " + strings.Join(given, ", ")
	}
	supplied = len(args) > 0
	if args == nil {
		args = map[string]json.RawMessage{}
	}
	for name, src := range bound {
		v, ok := boundValue(c, src)
		if !ok {
			return nil, false, ReasonInvalidArguments, fmt.Sprintf("argument %s is bound to %s, which this call does not have", name, src)
		}
		b, _ := json.Marshal(v)
		args[name] = b
	}
	out, err := json.Marshal(args)
	if err != nil {
		return nil, false, ReasonInvalidArguments, err.Error()
	}
	return out, supplied, "", ""
}

// AdvertisedInputSchema is the input schema a model sees: a builtin's schema without
// its bound arguments (they are neither shown nor accepted from the caller). Adapters'
// tools are returned as they are: their schemas bind nothing.
func AdvertisedInputSchema(s *ToolSpec) json.RawMessage {
	if s == nil || names.Reserved(s.Name) || !strings.Contains(string(s.InputSchema), BoundKeyword) {
		return s.InputSchema
	}
	var schema map[string]any
	if err := json.Unmarshal(s.InputSchema, &schema); err != nil {
		return s.InputSchema
	}
	props, _ := schema["properties"].(map[string]any)
	var removed []string
	for name, p := range props {
		if pm, ok := p.(map[string]any); ok {
			if _, bound := pm[BoundKeyword]; bound {
				delete(props, name)
				removed = append(removed, name)
			}
		}
	}
	if req, ok := schema["required"].([]any); ok {
		req = slices.DeleteFunc(req, func(v any) bool { s, _ := v.(string); return slices.Contains(removed, s) })
		if len(req) == 0 {
			delete(schema, "required")
		} else {
			schema["required"] = req
		}
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return s.InputSchema
	}
	out, err := CanonicalJSON(b)
	if err != nil {
		return s.InputSchema
	}
	return out
}
