package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/runtime"
)

// The advertised output schema wraps the declared one with the elided stand-in, keeps
// its local references resolvable, drops its format assertions, and is withheld when
// nesting would change what the schema means.
func TestAdvertisedOutputSchema(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		suspends     bool
		want         string // the declared part (anyOf[0]) and hoisted keys; "" = not advertised
		hoisted      string
	}{
		{name: "plain", schema: `{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`,
			want: `{"properties":{"ok":{"type":"boolean"}},"required":["ok"],"type":"object"}`},
		{name: "defs hoisted", schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"string","format":"date-time"}}}`,
			want:    `{"properties":{"a":{"$ref":"#/$defs/a"}},"type":"object"}`,
			hoisted: `"$defs":{"a":{"type":"string"}},"$schema":"https://json-schema.org/draft/2020-12/schema"`},
		{name: "draft-07 definitions", schema: `{"type":"object","properties":{"a":{"$ref":"#/definitions/a"}},"definitions":{"a":{"type":"integer","maximum":12345678901234567890}}}`,
			want: `{"properties":{"a":{"$ref":"#/definitions/a"}},"type":"object"}`, hoisted: `"definitions":{"a":{"maximum":12345678901234567890,"type":"integer"}}`},
		{name: "a property named format stays", schema: `{"type":"object","properties":{"format":{"type":"string","format":"email"}}}`,
			want: `{"properties":{"format":{"type":"string"}},"type":"object"}`},
		{name: "array", schema: `{"type":"array"}`},
		{name: "no type", schema: `{"properties":{"a":{}}}`},
		{name: "id", schema: `{"$id":"https://x.example/s","type":"object"}`},
		{name: "root reference", schema: `{"type":"object","properties":{"next":{"$ref":"#"}}}`},
		{name: "pointer into the schema", schema: `{"type":"object","properties":{"a":{"type":"string"},"b":{"$ref":"#/properties/a"}}}`},
		{name: "nested id", schema: `{"type":"object","properties":{"a":{"$id":"a","type":"string"}}}`},
		{name: "suspending", schema: `{"type":"object"}`, suspends: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := advertisedOutputSchema(&runtime.ToolSpec{OutputSchema: json.RawMessage(tc.schema), Suspends: tc.suspends})
			if tc.want == "" {
				if got != nil || why == "" {
					t.Fatalf("advertised %s (why %q), want none", got, why)
				}
				return
			}
			var w struct {
				Type  string            `json:"type"`
				AnyOf []json.RawMessage `json:"anyOf"`
			}
			if err := json.Unmarshal(got, &w); err != nil || w.Type != "object" || len(w.AnyOf) != 3 {
				t.Fatalf("advertised %s (%v)", got, err)
			}
			if string(w.AnyOf[0]) != tc.want {
				t.Errorf("declared part %s, want %s", w.AnyOf[0], tc.want)
			}
			if string(w.AnyOf[1]) != compact(t, elidedSchema) || string(w.AnyOf[2]) != compact(t, outcomeSchema) {
				t.Errorf("parts %s and %s, want the elided stand-in and the outcome shape", w.AnyOf[1], w.AnyOf[2])
			}
			if tc.hoisted != "" && !strings.Contains(string(got), tc.hoisted) {
				t.Errorf("advertised %s lacks %s at the top", got, tc.hoisted)
			}
		})
	}
}

func compact(t *testing.T, schema string) string {
	var v any
	if err := json.Unmarshal([]byte(schema), &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
