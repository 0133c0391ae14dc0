package spec

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

const schemaTestTool = `name: workspace.write_text
version: 1
description: Write UTF-8 text to a file in the run's workspace.
side_effect: write
idempotency: conditionally_idempotent
idempotent_when: "args.mode == 'overwrite'"
risk: medium
required_scopes: [workspace.write]
timeout: 30s
approval_when: "args.path.startsWith('.git/')"
args:
  path: {type: string, description: Path relative to the workspace root, min_length: 1, max_length: 4096, pattern: "^[^/]"}
  text: {type: string, max_length: 10485760}
  mode: {type: string, enum: [create, overwrite, append], default: create}
  level: {type: integer, enum: [1, 2, 3], default: 2}
  ratio: {type: number, min: 0, max: 1.5, default: 1}
  tags: {type: array, items: {type: string, max_length: 8}, max_items: 3, default: [a, b]}
  opts:
    type: object
    required: false
    properties:
      dry_run: {type: boolean, default: false}
      depth: {type: integer, min: 1, max: 10}
result:
  bytes_written: {type: integer, description: Bytes written.}
  sha256: {type: string}
  warnings:
    type: array
    required: false
    items:
      type: object
      properties:
        code: {type: string, enum: [big, slow]}
        line: {type: integer}
`

func loadSchemaTestTool(t *testing.T, src string) *Tool {
	t.Helper()
	name, _, _ := strings.Cut(strings.TrimPrefix(src, "name: "), "\n")
	rel := "tools/" + name + ".yaml"
	tool, diags := LoadTool(rel, rel, []byte(src))
	if len(diags) > 0 {
		t.Fatalf("diagnostics:\n%v", diags)
	}
	return tool
}

func resolveSchema(t *testing.T, b []byte) *jsonschema.Resolved {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("unmarshal schema: %v\n%s", err, b)
	}
	rs, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		t.Fatalf("resolve schema: %v\n%s", err, b)
	}
	return rs
}

func TestInputSchemaValidates(t *testing.T) {
	tool := loadSchemaTestTool(t, schemaTestTool)
	rs := resolveSchema(t, tool.InputSchema())
	cases := []struct {
		args string
		ok   bool
	}{
		{`{"path":"a.txt","text":"hi"}`, true},
		{`{"path":"a.txt","text":"hi","mode":"append","level":3,"ratio":0.5,"tags":["x"],"opts":{"dry_run":true,"depth":3}}`, true},
		{`{"path":"a.txt","text":"hi","opts":{"depth":10}}`, true},
		{`{"path":"a.txt","text":"hi","opts":{}}`, false}, // depth is required
		{`{"path":"a.txt"}`, false},                                      // text is required
		{`{"path":"a.txt","text":"hi","mode":"delete"}`, false},          // not in the enum
		{`{"path":"a.txt","text":"hi","level":4}`, false},                // not in the enum
		{`{"path":"a.txt","text":"hi","level":2.5}`, false},              // not an integer
		{`{"path":"a.txt","text":"hi","ratio":2}`, false},                // above maximum
		{`{"path":"a.txt","text":"hi","ratio":-1}`, false},               // below minimum
		{`{"path":"","text":"hi"}`, false},                               // below minLength
		{`{"path":"/etc/passwd","text":"hi"}`, false},                    // pattern
		{`{"path":"a.txt","text":"hi","tags":["a","b","c","d"]}`, false}, // maxItems
		{`{"path":"a.txt","text":"hi","tags":["123456789"]}`, false},     // items maxLength
		{`{"path":"a.txt","text":"hi","extra":1}`, false},                // additionalProperties
		{`{"path":"a.txt","text":"hi","opts":{"depth":0}}`, false},       // nested minimum
		{`{"path":"a.txt","text":"hi","opts":{"x":1}}`, false},           // nested additionalProperties
		{`{"path":"a.txt","text":"hi","opts":{"dry_run":"yes"}}`, false}, // nested type
		{`[]`, false},
	}
	for _, c := range cases {
		var inst any
		if err := json.Unmarshal([]byte(c.args), &inst); err != nil {
			t.Fatal(err)
		}
		err := rs.Validate(inst)
		if (err == nil) != c.ok {
			t.Errorf("Validate(%s) = %v, want ok=%v", c.args, err, c.ok)
		}
	}
}

func TestOutputSchemaValidates(t *testing.T) {
	tool := loadSchemaTestTool(t, schemaTestTool)
	rs := resolveSchema(t, tool.OutputSchema())
	for _, c := range []struct {
		res string
		ok  bool
	}{
		{`{"bytes_written":3,"sha256":"ab"}`, true},
		{`{"bytes_written":3,"sha256":"ab","warnings":[{"code":"big","line":1}]}`, true},
		{`{"bytes_written":3}`, false},
		{`{"bytes_written":3,"sha256":"ab","warnings":[{"code":"huge","line":1}]}`, false},
		{`{"bytes_written":3,"sha256":"ab","warnings":[{"code":"big"}]}`, false},
	} {
		var inst any
		if err := json.Unmarshal([]byte(c.res), &inst); err != nil {
			t.Fatal(err)
		}
		if err := rs.Validate(inst); (err == nil) != c.ok {
			t.Errorf("Validate(%s) = %v, want ok=%v", c.res, err, c.ok)
		}
	}
}

func TestInputSchemaShape(t *testing.T) {
	tool := loadSchemaTestTool(t, schemaTestTool)
	got := string(tool.InputSchema())
	for _, want := range []string{
		`{"$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,"properties":{`,
		`"required":["path","text"],"type":"object"}`,
		`"level":{"default":2,"enum":[1,2,3],"type":"integer"}`,
		`"ratio":{"default":1,"maximum":1.5,"minimum":0,"type":"number"}`,
		`"tags":{"default":["a","b"],"items":{"maxLength":8,"type":"string"},"maxItems":3,"type":"array"}`,
		`"opts":{"additionalProperties":false,"properties":{"depth":{"maximum":10,"minimum":1,"type":"integer"},"dry_run":{"default":false,"type":"boolean"}},"required":["depth"],"type":"object"}`,
		`"path":{"description":"Path relative to the workspace root","maxLength":4096,"minLength":1,"pattern":"^[^/]","type":"string"}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("input schema lacks %s\n got %s", want, got)
		}
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(got)); err != nil || compact.String() != got {
		t.Errorf("input schema is not compact JSON (%v): %s", err, got)
	}
}

func TestSchemaNoArgs(t *testing.T) {
	tool := loadSchemaTestTool(t, `name: clock.now
version: 1
description: The current time.
side_effect: none
risk: low
result:
  now: {type: string}
`)
	want := `{"$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,"properties":{},"type":"object"}`
	if got := string(tool.InputSchema()); got != want {
		t.Errorf("InputSchema() = %s, want %s", got, want)
	}
	rs := resolveSchema(t, tool.InputSchema())
	if err := rs.Validate(map[string]any{}); err != nil {
		t.Errorf("empty args rejected: %v", err)
	}
	if err := rs.Validate(map[string]any{"x": 1.0}); err == nil {
		t.Errorf("unknown arg accepted")
	}
}

func TestSchemaDeterministic(t *testing.T) {
	a := loadSchemaTestTool(t, schemaTestTool)
	for range 20 {
		b := loadSchemaTestTool(t, schemaTestTool)
		if !bytes.Equal(a.InputSchema(), b.InputSchema()) || !bytes.Equal(a.OutputSchema(), b.OutputSchema()) {
			t.Fatal("schemas differ between two loads of the same spec")
		}
		if a.SchemaSHA256() != b.SchemaSHA256() {
			t.Fatal("SchemaSHA256 differs between two loads of the same spec")
		}
	}
	in, out, sha := a.Schemas()
	if !bytes.Equal(in, a.InputSchema()) || !bytes.Equal(out, a.OutputSchema()) || sha != a.SchemaSHA256() {
		t.Error("Schemas() disagrees with InputSchema/OutputSchema/SchemaSHA256")
	}
	if len(sha) != 64 {
		t.Errorf("SchemaSHA256() = %q, want 64 hex digits", sha)
	}
}

// A changed description or classification is drift, not only a changed schema (MCP-7).
func TestSchemaSHA256Drift(t *testing.T) {
	base := loadSchemaTestTool(t, schemaTestTool).SchemaSHA256()
	for _, c := range []struct{ old, new string }{
		{"description: Write UTF-8 text", "description: Write ASCII text"},
		{"risk: medium", "risk: high"},
		{"version: 1", "version: 2"},
		{"required_scopes: [workspace.write]", "required_scopes: [workspace.write, workspace.admin]"},
		{`approval_when: "args.path.startsWith('.git/')"`, `approval_when: "args.path.startsWith('.github/')"`},
		{"timeout: 30s", "timeout: 31s"},
		{"description: Bytes written.", "description: Bytes written!"},
		{"default: create", "default: append"},
	} {
		src := strings.Replace(schemaTestTool, c.old, c.new, 1)
		if src == schemaTestTool {
			t.Fatalf("test case %q does not apply", c.old)
		}
		if loadSchemaTestTool(t, src).SchemaSHA256() == base {
			t.Errorf("changing %q to %q does not change SchemaSHA256", c.old, c.new)
		}
	}
	// Formatting of the YAML is not drift.
	src := strings.Replace(schemaTestTool, "risk: medium", "risk:   medium   # comment", 1)
	if got := loadSchemaTestTool(t, src).SchemaSHA256(); got != base {
		t.Errorf("reformatting the YAML changed SchemaSHA256")
	}
}

func TestCanonicalJSON(t *testing.T) {
	for _, c := range []struct {
		in   any
		want string
	}{
		{map[string]any{"b": 1, "a": []any{true, nil, "x<y>&"}}, `{"a":[true,null,"x<y>&"],"b":1}`},
		{json.RawMessage(` { "z" : 1.0, "a" : {"d": 1e2, "c": -0} } `), `{"a":{"c":0,"d":100},"z":1}`},
		{json.RawMessage(`{"big":12345678901234567890123,"f":0.000001,"g":1e-7,"h":1.5e300}`), `{"big":1.2345678901234567890123e+22,"f":0.000001,"g":1e-7,"h":1.5e+300}`}, // RFC 8785 notation, every digit kept
		{struct {
			B string `json:"b"`
			A int    `json:"a"`
		}{"é\u2028", 2}, "{\"a\":2,\"b\":\"é\u2028\"}"}, // RFC 8785 escapes neither U+2028 nor U+2029
		{"plain", `"plain"`},
		{[]byte("hi"), `"aGk="`},
	} {
		got, err := CanonicalJSON(c.in)
		if err != nil {
			t.Errorf("CanonicalJSON(%v): %v", c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("CanonicalJSON(%v) = %s, want %s", c.in, got, c.want)
		}
	}
	for _, bad := range []any{json.RawMessage(`{`), json.RawMessage(`1 2`), json.RawMessage(`1e999`)} {
		if _, err := CanonicalJSON(bad); err == nil {
			t.Errorf("CanonicalJSON(%s) succeeded", bad)
		}
	}
}

// The schemas are built and encoded in one pass; they must be exactly what
// CanonicalJSON makes of them.
func TestMustCanonicalIsCanonical(t *testing.T) {
	src := strings.Replace(schemaTestTool, "ratio: {type: number, min: 0, max: 1.5, default: 1}",
		"ratio: {type: number, min: -0.0, max: 1e300, default: -0.0}", 1)
	tool := loadSchemaTestTool(t, src)
	for _, b := range [][]byte{tool.InputSchema(), tool.OutputSchema()} {
		c, err := CanonicalJSON(json.RawMessage(b))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, c) {
			t.Errorf("schema is not canonical:\n got  %s\n want %s", b, c)
		}
	}
	if !strings.Contains(string(tool.InputSchema()), `"ratio":{"default":0,"maximum":1e+300,"minimum":0,"type":"number"}`) {
		t.Errorf("numbers not normalised: %s", tool.InputSchema())
	}
}
