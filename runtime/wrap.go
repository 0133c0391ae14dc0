package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// These helpers are what generated wrappers call; they keep the generated files short
// and the behaviour in one reviewed place.

// DecodeArgs decodes a call's JSON arguments into the generated Args struct, which the
// caller has pre-filled with the spec's defaults. Unknown fields are rejected: the
// pipeline validates against the schema first, so one here is a wiring error. Only the
// first JSON value of raw is read, as by a json.Decoder.
func DecodeArgs(raw json.RawMessage, into any) error {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		raw = json.RawMessage("{}")
	}
	d := argsDecoders.Get().(*argsDecoder)
	d.src.Reset(raw)
	start := d.dec.InputOffset() // the decoder counts the bytes of all its values
	err := d.dec.Decode(into)
	if err == nil && d.src.Len() == 0 && d.dec.InputOffset()-start == int64(len(raw)) {
		// Only a decoder whose value ended exactly at raw's end is reused: one that
		// failed keeps its error, and one that stopped early keeps raw's rest (even
		// spaces) buffered for its next value.
		d.src.Reset(nil)
		argsDecoders.Put(d)
	}
	if err != nil {
		return fmt.Errorf("decode arguments: %w", err)
	}
	return nil
}

// An argsDecoder is a json.Decoder, set to reject unknown fields, over a reader whose
// bytes DecodeArgs replaces for each call. A decoder reads a stream of values, so one
// that has read a whole value and found nothing after it decodes the next call's
// arguments as a fresh one would; reusing it saves the decoder and its read buffer, most
// of what decoding a tool's few arguments allocates (issue 20, BENCHMARKS.md).
type argsDecoder struct {
	src bytes.Reader
	dec *json.Decoder
}

var argsDecoders = sync.Pool{New: func() any {
	d := new(argsDecoder)
	d.dec = json.NewDecoder(&d.src)
	d.dec.DisallowUnknownFields()
	return d
}}

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
// copied first, so the caller's value is not modified at the top level. A value whose
// type holds no such field is returned as it is, without the copy.
func withEmptySlices(v any) any {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || rv.Kind() != reflect.Struct || !mayHoldNullSlice(rv.Type()) {
		return v
	}
	cp := reflect.New(rv.Type()).Elem()
	cp.Set(rv)
	fillNilSlices(cp)
	return cp.Interface()
}

// nullSliceTypes caches mayHoldNullSlice: a tool's result type is looked at once.
var nullSliceTypes sync.Map // reflect.Type -> bool

// mayHoldNullSlice reports whether a value of t can hold a slice that fillNilSlices
// would fill: a slice field written even when nil, in t or in the structs and slice
// elements fillNilSlices walks into.
func mayHoldNullSlice(t reflect.Type) bool {
	if v, ok := nullSliceTypes.Load(t); ok {
		return v.(bool)
	}
	v := holdsNullSlice(t, map[reflect.Type]bool{})
	nullSliceTypes.Store(t, v)
	return v
}

// holdsNullSlice is mayHoldNullSlice uncached; seen holds the types being looked at, so
// a recursive type ends.
func holdsNullSlice(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if f.Type.Kind() == reflect.Slice && writtenWhenEmpty(f.Tag.Get("json")) {
				return true
			}
			if holdsNullSlice(f.Type, seen) {
				return true
			}
		}
	case reflect.Slice:
		return holdsNullSlice(t.Elem(), seen)
	}
	return false
}

// writtenWhenEmpty reports whether encoding/json writes a field with this json tag when
// its value is empty.
func writtenWhenEmpty(tag string) bool {
	return !strings.Contains(tag, ",omitempty") && !strings.Contains(tag, ",omitzero") && tag != "-"
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
				if writtenWhenEmpty(tag) {
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
