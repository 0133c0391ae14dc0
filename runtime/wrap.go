package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
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
//
// A nil slice in a field that is not omitempty is encoded as [] rather than null: the
// generated output schema requires an array there, and a nil slice is how Go spells
// "no items".
func StructuredResult(spec *ToolSpec, result any) (ToolResult, error) {
	b, err := json.Marshal(withEmptySlices(result))
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

// withEmptySlices returns v with every nil slice that encoding/json would write as null
// (a field without omitempty/omitzero, at any depth) replaced by an empty slice. v is
// copied first, so the caller's value is not modified at the top level.
func withEmptySlices(v any) any {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || rv.Kind() != reflect.Struct {
		return v
	}
	cp := reflect.New(rv.Type()).Elem()
	cp.Set(rv)
	fillNilSlices(cp)
	return cp.Interface()
}

func fillNilSlices(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			fv := v.Field(i)
			tag := f.Tag.Get("json")
			if fv.Kind() == reflect.Slice && fv.IsNil() {
				if !strings.Contains(tag, ",omitempty") && !strings.Contains(tag, ",omitzero") && tag != "-" {
					fv.Set(reflect.MakeSlice(fv.Type(), 0, 0))
				}
				continue
			}
			fillNilSlices(fv)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			fillNilSlices(v.Index(i))
		}
	}
}
