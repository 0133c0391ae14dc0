package fastschema

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// everyKeyword uses every keyword of the subset at least once.
const everyKeyword = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "title": "t", "description": "d", "x-vendor": 1,
  "additionalProperties": false,
  "required": ["name", "count"],
  "minProperties": 2, "maxProperties": 6,
  "properties": {
    "name":  {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^[a-zé]+$"},
    "count": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
    "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
    "mode":  {"enum": ["fast", "slow", 2, true, null]},
    "tags":  {"type": "array", "items": {"type": "string", "enum": ["a", "b", "ünï"]}, "minItems": 1, "maxItems": 3},
    "meta":  {"type": ["object", "null"], "additionalProperties": {"type": "boolean"}}
  }
}`

func compileBoth(t testing.TB, schema string) (*Validator, *jsonschema.Resolved) {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		t.Fatal(err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := Compile(r.Schema())
	if err != nil {
		t.Fatal(err)
	}
	return v, r
}

// reference is what the pipeline does without the fast path.
func reference(r *jsonschema.Resolved, doc []byte) bool {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return false
	}
	return r.Validate(v) == nil
}

func TestValidAgreesWithJSONSchemaGo(t *testing.T) {
	v, r := compileBoth(t, everyKeyword)
	for _, tc := range []struct {
		doc  string
		fast bool // what Valid must say; when true the reference must agree
	}{
		{`{"name":"abc","count":3}`, true},
		{` { "name" : "é" , "count" : 10 , "ratio" : 0.5 } `, true},
		{`{"name":"abc","count":3.0}`, true}, // 3.0 is an integer
		{`{"name":"abc","count":3e0,"mode":"fast"}`, true},
		{`{"name":"abc","count":3,"mode":2.0}`, true},
		{`{"name":"abc","count":3,"mode":true}`, true},
		{`{"name":"abc","count":3,"mode":null}`, true},
		{`{"name":"abc","count":3,"tags":["a","\u00fcn\u00ef"]}`, true},
		{`{"name":"abc","count":3,"meta":{"x":true,"y":false}}`, true},
		{`{"name":"abc","count":3,"meta":null}`, true},
		{`{"name":"a\u0062c","count":3}`, true},
		{`{"name":"abc"}`, false},                           // required
		{`{"name":"abc","count":0}`, false},                 // minimum
		{`{"name":"abc","count":11}`, false},                // maximum
		{`{"name":"abc","count":3.5}`, false},               // integer
		{`{"name":"abc","count":"3"}`, false},               // type
		{`{"name":"","count":3}`, false},                    // minLength
		{`{"name":"abcdef","count":3}`, false},              // maxLength
		{`{"name":"ABC","count":3}`, false},                 // pattern
		{`{"name":"abc","count":3,"ratio":0}`, false},       // exclusiveMinimum
		{`{"name":"abc","count":3,"ratio":1}`, false},       // exclusiveMaximum
		{`{"name":"abc","count":3,"mode":"medium"}`, false}, // enum
		{`{"name":"abc","count":3,"mode":false}`, false},
		{`{"name":"abc","count":3,"mode":{}}`, false},
		{`{"name":"abc","count":3,"tags":[]}`, false},                // minItems
		{`{"name":"abc","count":3,"tags":["a","a","a","a"]}`, false}, // maxItems
		{`{"name":"abc","count":3,"tags":["c"]}`, false},
		{`{"name":"abc","count":3,"meta":{"x":1}}`, false},
		{`{"name":"abc","count":3,"extra":1}`, false},                                              // additionalProperties false
		{`{"name":"abc","count":3,"name":"abd"}`, false},                                           // duplicate: undecided
		{`{"name":"abc","count":3,"ratio":0.5,"mode":"fast","tags":["a"],"meta":{},"x":1}`, false}, // maxProperties and extra
		{`{"name":"ab\xffc","count":3}`, false},                                                    // invalid UTF-8: undecided
		{`{"name":"\ud800","count":3}`, false},                                                     // lone surrogate: undecided
		{`{"name":"abc","count":1e400}`, false},                                                    // out of range: undecided
		{`{"name":"abc","count":3}x`, false},                                                       // trailing data
		{`{"name":"abc","count":3,}`, false},                                                       // syntax
		{`{"name":"abc","count":03}`, false},                                                       // syntax
		{`{"name":"abc","count":-}`, false},                                                        // syntax
		{`{"name":"abc","count":3`, false},                                                         // truncated
		{`["name"]`, false},                                                                        // type
		{``, false},
	} {
		got := v.Valid([]byte(tc.doc))
		if got != tc.fast {
			t.Errorf("Valid(%s) = %v, want %v", tc.doc, got, tc.fast)
		}
		if got && !reference(r, []byte(tc.doc)) {
			t.Errorf("Valid(%s) = true but jsonschema-go rejects it", tc.doc)
		}
	}
}

func TestCompileRefusesWhatItDoesNotCheck(t *testing.T) {
	for _, schema := range []string{
		`{"$ref": "#/$defs/a", "$defs": {"a": {}}}`,
		`{"allOf": [{}]}`,
		`{"const": 1}`,
		`{"multipleOf": 2}`,
		`{"enum": [{"a": 1}]}`,
		`{"properties": {"a": {"oneOf": [{}]}}}`,
		`{"patternProperties": {"a": {}}}`,
		`{"uniqueItems": true}`,
		`{"prefixItems": [{}]}`,
		`{"not": {"type": "string"}}`,
	} {
		var s jsonschema.Schema
		if err := json.Unmarshal([]byte(schema), &s); err != nil {
			t.Fatal(err)
		}
		if _, err := Compile(&s); !errors.Is(err, ErrUnsupported) {
			t.Errorf("Compile(%s) = %v, want ErrUnsupported", schema, err)
		}
	}
}

func TestFalseAndTrueSchemas(t *testing.T) {
	v, r := compileBoth(t, `{"properties": {"no": false, "yes": true}}`)
	for doc, want := range map[string]bool{`{"yes": [1, {"a": null}]}`: true, `{"no": 1}`: false, `{}`: true, `7`: true} {
		if got := v.Valid([]byte(doc)); got != want || got && !reference(r, []byte(doc)) {
			t.Errorf("Valid(%s) = %v, want %v", doc, got, want)
		}
	}
}

// TestGeneratedSchemas runs the checked-in builtins' schemas: every one compiles
// (the subset covers what toolgen generates).
func TestGeneratedSchemas(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "gen", "catalog.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cat struct {
		Tools []struct {
			Name                      string
			InputSchema, OutputSchema json.RawMessage `json:"-"`
			In                        json.RawMessage `json:"input_schema"`
			Out                       json.RawMessage `json:"output_schema"`
		}
	}
	if err := json.Unmarshal(raw, &cat); err != nil {
		t.Fatal(err)
	}
	if len(cat.Tools) == 0 {
		t.Fatal("no tools in gen/catalog.json")
	}
	for _, tool := range cat.Tools {
		for _, s := range []json.RawMessage{tool.In, tool.Out} {
			if len(s) == 0 || string(s) == "null" {
				continue
			}
			compileBoth(t, string(s))
		}
	}
}

func TestValidDoesNotAllocate(t *testing.T) {
	v, _ := compileBoth(t, everyKeyword)
	doc := []byte(`{"name":"abc","count":3,"ratio":0.25,"mode":"slow","tags":["a","b"],"meta":{"k":true}}`)
	if !v.Valid(doc) {
		t.Fatal("document not valid")
	}
	if n := testing.AllocsPerRun(100, func() { v.Valid(doc) }); n != 0 {
		t.Errorf("Valid allocates %v times per call", n)
	}
}

// FuzzValid: whatever the document, Valid never panics and never accepts what
// jsonschema-go rejects.
func FuzzValid(f *testing.F) {
	v, r := compileBoth(f, everyKeyword)
	for _, seed := range []string{
		`{"name":"abc","count":3}`, `{"name":"é","count":10,"ratio":0.5,"tags":["a"],"meta":{"x":true}}`,
		`{"name":"a\u0062c","count":3.0,"mode":null}`, `[1,2]`, `"x"`, `{"count":1e2,"name":"zz"}`,
		strings.Repeat("[", 70) + strings.Repeat("]", 70),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if v.Valid(doc) && !reference(r, doc) {
			t.Fatalf("Valid(%q) = true but jsonschema-go rejects it", doc)
		}
	})
}

func BenchmarkValid(b *testing.B) {
	v, r := compileBoth(b, everyKeyword)
	doc := []byte(`{"name":"abc","count":3,"ratio":0.25,"mode":"slow","tags":["a","b"],"meta":{"k":true}}`)
	b.Run("fastschema", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v.Valid(doc)
		}
	})
	b.Run("jsonschema-go", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			reference(r, doc)
		}
	})
}

// FuzzValidSchema fuzzes the schema too: for any schema that jsonschema-go resolves and
// Compile accepts, Valid never accepts what jsonschema-go rejects.
func FuzzValidSchema(f *testing.F) {
	f.Add(everyKeyword, `{"name":"abc","count":3}`)
	f.Add(`{"type":"array","items":{"type":"integer","minimum":-1}}`, `[0,1,-1.0]`)
	f.Add(`{"enum":["a",1,null,false]}`, `1.0`)
	f.Add(`{"type":["string","number"],"maxLength":2,"maximum":3}`, `"\u00e9\u00e9"`)
	f.Add(`{"required":["a"],"additionalProperties":{"type":"string"}}`, `{"a":"x","b":"y"}`)
	f.Fuzz(func(t *testing.T, schema, doc string) {
		var s jsonschema.Schema
		if json.Unmarshal([]byte(schema), &s) != nil {
			return
		}
		r, err := s.Resolve(nil)
		if err != nil {
			return
		}
		v, err := Compile(r.Schema())
		if err != nil {
			return
		}
		if v.Valid([]byte(doc)) && !reference(r, []byte(doc)) {
			t.Fatalf("schema %s: Valid(%q) = true but jsonschema-go rejects it", schema, doc)
		}
	})
}
