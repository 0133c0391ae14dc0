package server

import (
	"encoding/json"
	"testing"
)

// Input schemas are advertised as objects or left out; none can make the SDK panic,
// since this package never calls Server.AddTool (doc.go).
func TestObjectSchema(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		skipped  bool
	}{
		{"", `{"type":"object"}`, false},
		{`{"type":"object","properties":{"a":{"type":"integer","maximum":12345678901234567890}}}`, `{"type":"object","properties":{"a":{"type":"integer","maximum":12345678901234567890}}}`, false},
		{`{"properties":{"a":{"type":"string"}}}`, `{"properties":{"a":{"type":"string"}},"type":"object"}`, false},
		{`{"type":["object","null"]}`, `{"type":"object"}`, false},
		{`{"type":"array"}`, "", true},
		{`{"type":["string","null"]}`, "", true},
		{`{"type":null}`, "", true},
		{`{"type":7}`, "", true},
		{`[]`, "", true},
		{`"object"`, "", true},
		{`null`, "", true},
		{`{"type":`, "", true},
	} {
		got, why := objectSchema(json.RawMessage(tc.in))
		if tc.skipped != (why != "") {
			t.Errorf("%s: why %q, want skipped %v", tc.in, why, tc.skipped)
			continue
		}
		if !tc.skipped && string(got) != tc.want {
			t.Errorf("%s: %s, want %s", tc.in, got, tc.want)
		}
	}
}

// MetaStep accepts integers as numbers or digit strings, nothing else.
func TestMetaStep(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want int
		ok   bool
	}{
		{float64(3), 3, true}, {"3", 3, true}, {"0", 0, true}, {json.Number("12"), 12, true}, {2147483647.0, 2147483647, true},
		{"", 0, false}, {"+3", 0, false}, {"3.0", 0, false}, {" 3", 0, false}, {-1.0, 0, false}, {2.5, 0, false},
		{2147483648.0, 0, false}, {"99999999999", 0, false}, {true, 0, false}, {nil, 0, false}, {map[string]any{}, 0, false},
	} {
		got, err := metaStep(map[string]any{MetaStep: tc.v})
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("step %#v: %d, %v; want %d, ok %v", tc.v, got, err, tc.want, tc.ok)
		}
	}
	if got, err := metaStep(nil); got != 0 || err != nil {
		t.Errorf("absent step: %d, %v", got, err)
	}
}
