package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// These helpers are what generated wrappers call; they keep the generated files short
// and the behaviour in one reviewed place.

// DecodeArgs decodes a call's JSON arguments into the generated Args struct, which the
// caller has pre-filled with the spec's defaults. Unknown fields are rejected: the
// pipeline validates against the schema first, so one here is a wiring error.
func DecodeArgs(raw json.RawMessage, into any) error {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return fmt.Errorf("decode arguments: %w", err)
	}
	return nil
}

// StructuredResult wraps a successful typed result: the JSON goes to Structured and, as
// one text item labelled with the spec's output trust, to Content.
func StructuredResult(spec *ToolSpec, result any) (ToolResult, error) {
	b, err := json.Marshal(result)
	if err != nil {
		return ToolResult{}, fmt.Errorf("%s: encode result: %w", spec.Name, err)
	}
	return ToolResult{
		OK:         true,
		Structured: b,
		Content:    []Item{{Type: "text", Text: string(b), MIMEType: "application/json", Trust: spec.OutputTrust}},
	}, nil
}

// FailureResult turns an implementation's error into the wrapper's return values: a
// *ToolFailure becomes a ToolResult with OK false, anything else stays an error.
func FailureResult(err error) (ToolResult, error) {
	var f *ToolFailure
	if errors.As(err, &f) {
		return ToolResult{OK: false, Failure: f}, nil
	}
	return ToolResult{}, err
}
