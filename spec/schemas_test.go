package spec

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"gopkg.in/yaml.v3"
)

// fileSchemas resolves the embedded file schemas once (the fuzz target uses them
// on every input).
var fileSchemas = sync.OnceValues(func() (map[string]*jsonschema.Resolved, error) {
	out := map[string]*jsonschema.Resolved{}
	for _, kind := range FileKinds {
		b, ok := FileSchema(kind)
		if !ok {
			return nil, fmt.Errorf("no schema for file kind %s", kind)
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("%s schema: %w", kind, err)
		}
		rs, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
		if err != nil {
			return nil, fmt.Errorf("resolve %s schema: %w", kind, err)
		}
		out[kind] = rs
	}
	return out, nil
})

func fileSchema(t testing.TB, kind string) *jsonschema.Resolved {
	t.Helper()
	m, err := fileSchemas()
	if err != nil {
		t.Fatal(err)
	}
	return m[kind]
}

// specYAMLToJSON turns a YAML spec into the JSON value an editor validates: decoded with
// yaml.v3 into any, every mapping made a map[string]any.
func specYAMLToJSON(data []byte) (any, error) {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	return jsonValueOf(v), nil
}

func jsonValueOf(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonValueOf(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = jsonValueOf(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValueOf(e)
		}
		return out
	case time.Time:
		return x.Format(time.RFC3339Nano)
	case []byte:
		return string(x)
	}
	return v
}

// validateSpecYAML validates a YAML spec file of the given kind against its schema.
func validateSpecYAML(t testing.TB, kind string, data []byte) error {
	t.Helper()
	v, err := specYAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("YAML: %w", err)
	}
	return fileSchema(t, kind).Validate(v)
}

// specNameLine finds the name a spec file gives itself, so a document can be loaded
// under the file name the loader expects.
var specNameLine = regexp.MustCompile(`(?m)^(?:name|server_id|device_id):[ \t]*["']?([a-z0-9_.]+)["']?[ \t]*(?:#.*)?\r?$`)

// specRel is the path, relative to the spec root, a document of the given kind is
// loaded from: named after the document's own name when it has a usable one.
func specRel(kind string, data []byte) string {
	name := ""
	if m := specNameLine.FindSubmatch(data); m != nil {
		name = string(m[1])
	}
	switch kind {
	case "tool":
		if CheckName(name) != "" {
			name = "x.y"
		}
		return ToolsDir + "/" + name + ".yaml"
	case "server":
		if !segment.MatchString(name) {
			name = "s"
		}
		return ServersDir + "/" + name + ".yaml"
	case "protocol":
		if !segment.MatchString(name) {
			name = "p"
		}
		return ProtocolsDir + "/" + name + ".yaml"
	case "device":
		if !segment.MatchString(name) {
			name = "d"
		}
		return DevicesDir + "/" + name + ".yaml"
	case "principals":
		return PrincipalsFile
	case "notifications":
		return NotificationsFile
	}
	return PolicyFile
}

// loadSpecFile runs the per-file loader of a kind; ok reports whether it returned a model.
func loadSpecFile(kind, rel string, data []byte) (ok bool, diags Diagnostics) {
	switch kind {
	case "tool":
		m, d := LoadTool(rel, rel, data)
		return m != nil, d
	case "server":
		m, d := LoadServer(rel, rel, data)
		return m != nil, d
	case "protocol":
		m, d := LoadProtocol(rel, rel, data)
		return m != nil, d
	case "policy":
		m, d := LoadPolicy(rel, rel, data)
		return m != nil, d
	case "device":
		m, d := LoadDevice(rel, rel, data)
		return m != nil, d
	case "principals":
		m, d := LoadPrincipals(rel, rel, data)
		return m != nil, d
	case "notifications":
		m, d := LoadNotifications(rel, rel, data)
		return m != nil, d
	}
	panic("unknown kind " + kind)
}

func TestFileSchemaKinds(t *testing.T) {
	for _, kind := range FileKinds {
		b, ok := FileSchema(kind)
		if !ok || len(b) == 0 {
			t.Fatalf("FileSchema(%q) = %d bytes, %v", kind, len(b), ok)
		}
		b[0] = 'x' // the caller's copy
		if again, _ := FileSchema(kind); again[0] != '{' {
			t.Errorf("FileSchema(%q) returned shared bytes", kind)
		}
	}
	for _, bad := range []string{"", "tools", "Tool", "../tool", "tool.schema.json"} {
		if _, ok := FileSchema(bad); ok {
			t.Errorf("FileSchema(%q) succeeded", bad)
		}
	}
}

// TestFileSchemasResolve checks that every schema parses and resolves with
// jsonschema-go, names draft 2020-12, and has the $id, title and descriptions editors show.
func TestFileSchemasResolve(t *testing.T) {
	for _, kind := range FileKinds {
		t.Run(kind, func(t *testing.T) {
			b, _ := FileSchema(kind)
			var s jsonschema.Schema
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true}); err != nil {
				t.Fatal(err)
			}
			if want := "https://json-schema.org/draft/2020-12/schema"; s.Schema != want {
				t.Errorf("$schema = %q, want %q", s.Schema, want)
			}
			if want := "https://toolgen.dev/schema/" + kind + ".schema.json"; s.ID != want {
				t.Errorf("$id = %q, want %q", s.ID, want)
			}
			if s.Title == "" || s.Description == "" {
				t.Errorf("title %q, description %q: both must be set", s.Title, s.Description)
			}
			var raw map[string]any
			if err := json.Unmarshal(b, &raw); err != nil {
				t.Fatal(err)
			}
			for _, p := range undescribed(raw, "") {
				t.Errorf("property %s has no description", p)
			}
		})
	}
}

// undescribed lists the properties of s (and of its $defs, property schemas, items and
// additionalProperties) without a description. Conditional subschemas (if/then/else,
// allOf, anyOf, oneOf, not) only restate properties, so they are not walked.
func undescribed(s map[string]any, at string) []string {
	var out []string
	if props, ok := s["properties"].(map[string]any); ok {
		for name, p := range props {
			ps, ok := p.(map[string]any)
			if !ok {
				continue
			}
			if d, _ := ps["description"].(string); d == "" {
				out = append(out, at+"/properties/"+name)
			}
			out = append(out, undescribed(ps, at+"/properties/"+name)...)
		}
	}
	for _, key := range []string{"$defs", "items", "additionalProperties"} {
		switch x := s[key].(type) {
		case map[string]any:
			if key != "$defs" {
				out = append(out, undescribed(x, at+"/"+key)...)
				continue
			}
			for name, d := range x {
				if ds, ok := d.(map[string]any); ok {
					out = append(out, undescribed(ds, at+"/$defs/"+name)...)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestFileSchemasMatchLoader keeps the schemas' keys and enums in step with the loader's.
func TestFileSchemasMatchLoader(t *testing.T) {
	raw := map[string]map[string]any{}
	for _, kind := range FileKinds {
		b, _ := FileSchema(kind)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		raw[kind] = m
	}
	get := func(kind string, ptr ...string) map[string]any {
		m := raw[kind]
		for _, p := range ptr {
			next, ok := m[p].(map[string]any)
			if !ok {
				t.Fatalf("%s schema has no %s", kind, strings.Join(ptr, "/"))
			}
			m = next
		}
		return m
	}
	keys := func(m map[string]any) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	sameKeys := func(what string, props map[string]any, want []string) {
		t.Helper()
		want = slices.Sorted(slices.Values(want))
		if got := keys(props); !slices.Equal(got, want) {
			t.Errorf("%s: schema properties %v, loader keys %v", what, got, want)
		}
	}
	sameKeys("tool", get("tool", "properties"), toolKeys)
	sameKeys("tool field", get("tool", "$defs", "field", "properties"), fieldKeys)
	sameKeys("server", get("server", "properties"), serverKeys)
	sameKeys("protocol", get("protocol", "properties"), protocolKeys)
	sameKeys("policy", get("policy", "properties"), policyKeys)
	sameKeys("policy rule", get("policy", "$defs", "rule", "properties"), ruleKeys)
	sameKeys("device", get("device", "properties"), deviceKeys)
	sameKeys("principals", get("principals", "properties"), principalsKeys)
	sameKeys("principals token", get("principals", "$defs", "token", "properties"), tokenKeys)
	sameKeys("principals local", get("principals", "$defs", "local", "properties"), localKeys)
	sameKeys("principals issuer", get("principals", "$defs", "issuer", "properties"), issuerKeys)
	sameKeys("principals issuer console", get("principals", "$defs", "issuer", "properties", "console", "properties"), consoleKeys)
	sameKeys("notifications", get("notifications", "properties"), notificationsKeys)
	sameKeys("notifications webhook", get("notifications", "$defs", "webhook", "properties"), webhookKeys)

	enum := func(s map[string]any) []string {
		var out []string
		for _, v := range s["enum"].([]any) {
			out = append(out, v.(string))
		}
		return out
	}
	sameEnum := func(what string, s map[string]any, want []string) {
		t.Helper()
		if got := enum(s); !slices.Equal(got, want) {
			t.Errorf("%s: schema enum %v, loader %v", what, got, want)
		}
	}
	tp := get("tool", "properties")
	sameEnum("tool kind", tp["kind"].(map[string]any), Kinds)
	sameEnum("tool side_effect", tp["side_effect"].(map[string]any), SideEffects)
	sameEnum("tool idempotency", tp["idempotency"].(map[string]any), Idempotencies)
	sameEnum("tool risk", tp["risk"].(map[string]any), Risks)
	sameEnum("tool output_trust", tp["output_trust"].(map[string]any), Trusts)
	sameEnum("field type", get("tool", "$defs", "field", "properties", "type"), FieldTypes)
	cp := get("server", "properties", "classification", "properties")
	sameEnum("server side_effect", cp["side_effect"].(map[string]any), SideEffects)
	sameEnum("server idempotency", cp["idempotency"].(map[string]any), Idempotencies)
	sameEnum("server risk", cp["risk"].(map[string]any), Risks)
	dp := get("device", "properties", "classification", "properties")
	sameEnum("device side_effect", dp["side_effect"].(map[string]any), SideEffects)
	sameEnum("device idempotency", dp["idempotency"].(map[string]any), Idempotencies)
	sameEnum("device risk", dp["risk"].(map[string]any), Risks)

	if got := get("tool", "properties", "name")["maxLength"]; got != float64(MaxNameBytes) {
		t.Errorf("tool name maxLength = %v, want %d", got, MaxNameBytes)
	}
	patterns := map[string]string{
		"server_id":         get("server", "properties", "server_id")["pattern"].(string),
		"device_id":         get("device", "properties", "device_id")["pattern"].(string),
		"device token":      get("device", "properties", "token_sha256")["pattern"].(string),
		"protocol name":     get("protocol", "properties", "name")["pattern"].(string),
		"field names":       get("tool", "$defs", "fields", "propertyNames")["pattern"].(string),
		"mode names":        get("protocol", "properties", "modes", "propertyNames")["pattern"].(string),
		"policy rule name":  get("policy", "$defs", "rule", "properties", "name")["pattern"].(string),
		"tool scopes":       get("tool", "properties", "required_scopes", "items")["pattern"].(string),
		"egress allow host": get("policy", "properties", "egress", "properties", "allow", "items")["pattern"].(string),
		"acknowledge":       get("tool", "properties", "acknowledge", "items")["pattern"].(string),
	}
	wantPatterns := map[string]string{
		"server_id": segment.String(), "device_id": segment.String(), "device token": tokenSHA256.String(), "protocol name": segment.String(), "field names": segment.String(),
		"mode names": segment.String(), "policy rule name": ruleName.String(),
		"tool scopes": scopePattern.String(), "egress allow host": hostPattern.String(),
		"acknowledge": ackPattern.String(),
	}
	for what, got := range patterns {
		if got != wantPatterns[what] {
			t.Errorf("%s: schema pattern %q, loader %q", what, got, wantPatterns[what])
		}
	}
}

// schemaCase is one spec document and whether it is valid. loaderOnly marks an error
// the schema cannot express (it needs a computation or another file): the schema
// accepts the document and the loader rejects it.
type schemaCase struct {
	kind, name string
	valid      bool
	loaderOnly bool
	doc        string
}

const fullTool = `# yaml-language-server: $schema=../spec/schemas/tool.schema.json
name: workspace.write_text
version: 1
kind: action
description: Write UTF-8 text to a file in the run's workspace.
side_effect: write
idempotency: conditionally_idempotent
idempotent_when: "args.mode == 'overwrite'"
risk: medium
required_scopes: [workspace.write, "workspace:admin"]
output_trust: tool
confers_approval: false
parallel_safe: false
timeout: 1m30s
approval_when: |
  args.path.startsWith('.git/')
args:
  path: {type: string, description: Path relative to the workspace root, max_length: 4096, pattern: "^[^/]"}
  text: {type: string, min_length: 0, max_length: 10485760}
  mode: {type: string, enum: [create, overwrite, append], default: create}
  level: {type: integer, enum: [1, 2, 3], default: 2}
  ratio: {type: number, min: 0, max: 1.5, default: 0.5}
  force: {type: boolean, default: false, description: Overwrite even a read-only file.}
  tags:
    type: array
    required: false
    min_items: 0
    max_items: 8
    items: {type: string, max_length: 32}
    default: [a, b]
  meta:
    type: object
    required: false
    properties:
      owner: {type: string}
      labels:
        type: array
        items:
          type: object
          properties:
            key: {type: string}
            value: {type: string, default: ""}
result:
  bytes_written: {type: integer, min: 0}
  sha256: {type: string}
output:
  max_bytes: 65536
`

const validServer = `server_id: everything
description: MCP reference server.
configured_by: operator
transport:
  stdio:
    command: npx
    args: [-y, "@modelcontextprotocol/server-everything"]
    env: {NODE_ENV: production}
classification:
  side_effect: read
  risk: low
  idempotency: idempotent
  required_scopes: [mcp.everything]
resources: expose
prompts: hide
`

// deviceHash is a made-up SHA-256 digest in the form token_sha256 wants.
const deviceHash = "f4e1e1a5b0d1d4c2c3a0a5b5e4f1c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3"

const validDevice = `device_id: laptop_ana
description: Ana's laptop, serving her local notes server.
tenant: acme
token_sha256: ` + deviceHash + `
classification:
  side_effect: read
  risk: low
  idempotency: idempotent
  required_scopes: [device.laptop_ana]
allow_tools: [search_notes, read_note]
`

const validPrincipals = `resource: https://platform.example.com/mcp
authorization_servers: [https://login.example.com]
tokens:
  - id: ci-bot
    tenant: acme
    scopes: [notes.read, notes.write]
    token_sha256: ` + deviceHash + `
local:
  - id: ana@example.com
    tenant: acme
    scopes: [review.approve]
issuers:
  - name: login
    issuer: https://login.example.com
    audience: toolgen
    jwks_url: https://login.example.com/.well-known/jwks.json
    tenants: [acme, beta]
    claims: {id: sub, tenant: org, scopes: scp}
    algorithms: [RS256, EdDSA]
  - name: beta-idp
    issuer: https://idp.beta.example.com
    audience: toolgen
    key_file: keys/beta.pem
    tenant: beta
`

const validNotifications = `# yaml-language-server: $schema=spec/schemas/notifications.schema.json
console_url: https://toolgen.example.com
webhooks:
  - name: reviewers
    description: The review team's receiver.
    url: https://hooks.example.com/toolgen
    secret_env: TOOLGEN_WEBHOOK_KEY
    events: [held, uncertain]
    tenants: [acme]
    max_attempts: 6
    timeout: 5s
  - name: chat
    format: slack
    url_env: SLACK_WEBHOOK_URL
    events: [held]
`

const validProtocol = `name: plan_review
description: Plan, then review.
initial_mode: plan
modes:
  plan:
    description: Write the plan.
    tools: [workspace.read_text, mcp.everything.*, mcp.everything.echo]
  review:
    tools: [review.approve, review.merge]
exclusive_tools: [workspace.write_text]
`

const validPolicy = `egress:
  allow: ["mcp.example.com", "*.tools.example.org"]
rules:
  - name: merge-needs-second-reviewer
    tools: [review.merge]
    approve_when: "args.branch.startsWith('release/')"
  - name: no_untrusted_writes
    description: No writes on untrusted input.
    deny_when: "side_effect == 'write' && trust == 'external_untrusted'"
  - name: scratch
    tools: [workspace.write_text, mcp.everything.*]
    allow_when: >-
      args.path.startsWith('scratch/')
`

// minimalTool is a valid tool spec; the cases below append to it or change it.
const minimalTool = `name: demo.tool
version: 1
description: A demo.
risk: low
`

func schemaCases() []schemaCase {
	tool := func(name string, valid bool, doc string) schemaCase {
		return schemaCase{kind: "tool", name: name, valid: valid, doc: doc}
	}
	replace := func(doc, old, new string) string {
		if !strings.Contains(doc, old) {
			panic("schema case: no " + old)
		}
		return strings.Replace(doc, old, new, 1)
	}
	read := minimalTool + "side_effect: read\nidempotency: idempotent\n"
	cases := []schemaCase{
		tool("full valid tool", true, fullTool),
		tool("minimal none tool", true, minimalTool+"side_effect: none\n"),
		tool("none tool that says idempotent", true, minimalTool+"side_effect: none\nidempotency: idempotent\n"),
		tool("control tool", true, minimalTool+"side_effect: none\nkind: control\nsuspends: true\n"),
		tool("parallel-safe conditionally idempotent read", true, minimalTool+"side_effect: read\nparallel_safe: true\nidempotency: conditionally_idempotent\nidempotent_when: args.x > 1\nargs:\n  x: {type: integer}\n"),
		tool("three-segment name", true, replace(read, "demo.tool", "demo.sub.tool")),
		tool("empty args", true, read+"args: {}\n"),
		tool("acknowledged rules", true, read+"acknowledge: [RISK_LOWERED, VERSION_NOT_BUMPED]\n"),
		tool("acknowledge a lower-case name", false, read+"acknowledge: [risk_lowered]\n"),
		tool("acknowledge a rule twice", false, read+"acknowledge: [RISK_LOWERED, RISK_LOWERED]\n"),
		tool("acknowledge not a list", false, read+"acknowledge: RISK_LOWERED\n"),
		tool("unknown key", false, read+"colour: red\n"),
		tool("misspelt key", false, replace(read, "risk:", "rsik:")),
		tool("bad risk", false, replace(read, "risk: low", "risk: extreme")),
		tool("bad side_effect", false, minimalTool+"side_effect: delete\n"),
		tool("bad kind", false, read+"kind: query\n"),
		tool("bad output_trust", false, read+"output_trust: trusted\n"),
		tool("name with three dots", false, replace(read, "demo.tool", "demo.a.b.tool")),
		tool("one-segment name", false, replace(read, "demo.tool", "demotool")),
		tool("name with double underscore", false, replace(read, "demo.tool", "demo.my__tool")),
		tool("upper-case name", false, replace(read, "demo.tool", "Demo.tool")),
		tool("name over 64 bytes", false, replace(read, "demo.tool", "demo."+strings.Repeat("x", 60))),
		tool("reserved domain", false, replace(read, "demo.tool", "mcp.tool")),
		tool("missing name", false, replace(read, "name: demo.tool\n", "")),
		tool("missing version", false, replace(read, "version: 1\n", "")),
		tool("version zero", false, replace(read, "version: 1", "version: 0")),
		tool("version as text", false, replace(read, "version: 1", `version: "1"`)),
		tool("blank description", false, replace(read, "A demo.", `"  "`)),
		tool("missing risk", false, replace(read, "risk: low\n", "")),
		tool("missing side_effect", false, minimalTool),
		tool("write without idempotency", false, minimalTool+"side_effect: write\n"),
		tool("conditionally_idempotent without idempotent_when", false, minimalTool+"side_effect: write\nidempotency: conditionally_idempotent\n"),
		tool("idempotent_when with idempotent", false, read+"idempotent_when: args.x == 1\n"),
		tool("idempotent_when without idempotency", false, minimalTool+"side_effect: none\nidempotent_when: args.x == 1\n"),
		tool("none but non_idempotent", false, minimalTool+"side_effect: none\nidempotency: non_idempotent\n"),
		tool("blank idempotent_when", false, minimalTool+"side_effect: write\nidempotency: conditionally_idempotent\nidempotent_when: ' '\n"),
		tool("parallel-safe write", false, minimalTool+"side_effect: write\nidempotency: idempotent\nparallel_safe: true\n"),
		tool("parallel_safe as text", false, read+"parallel_safe: yes\n"),
		tool("control without suspends", false, minimalTool+"side_effect: none\nkind: control\n"),
		tool("action with suspends", false, read+"suspends: false\n"),
		tool("duplicate scope", false, read+"required_scopes: [a.b, a.b]\n"),
		tool("bad scope", false, read+"required_scopes: [A.B]\n"),
		tool("bad timeout", false, read+"timeout: 30 seconds\n"),
		tool("timeout without unit", false, read+"timeout: \"30\"\n"),
		tool("small output.max_bytes", false, read+"output: {max_bytes: 10}\n"),
		tool("unknown output key", false, read+"output: {max_lines: 10}\n"),
		tool("args a list", false, read+"args: [a, b]\n"),
		tool("field name not snake case", false, read+"args:\n  filePath: {type: string}\n"),
		tool("field without type", false, read+"args:\n  x: {description: no type}\n"),
		tool("field with unknown type", false, read+"args:\n  x: {type: str}\n"),
		tool("unknown field key", false, read+"args:\n  x: {type: string, format: email}\n"),
		tool("min on a string", false, read+"args:\n  x: {type: string, min: 1}\n"),
		tool("max_length on an integer", false, read+"args:\n  x: {type: integer, max_length: 1}\n"),
		tool("pattern on a number", false, read+"args:\n  x: {type: number, pattern: x}\n"),
		tool("min_items on a string", false, read+"args:\n  x: {type: string, min_items: 1}\n"),
		tool("negative max_length", false, read+"args:\n  x: {type: string, max_length: -1}\n"),
		tool("array without items", false, read+"args:\n  x: {type: array}\n"),
		tool("items on a string", false, read+"args:\n  x: {type: string, items: {type: string}}\n"),
		tool("object without properties", false, read+"args:\n  x: {type: object}\n"),
		tool("object with no properties", false, read+"args:\n  x: {type: object, properties: {}}\n"),
		tool("properties on an array", false, read+"args:\n  x: {type: array, items: {type: string}, properties: {a: {type: string}}}\n"),
		tool("enum on a boolean", false, read+"args:\n  x: {type: boolean, enum: [true]}\n"),
		tool("empty enum", false, read+"args:\n  x: {type: string, enum: []}\n"),
		tool("integer in a string enum", false, read+"args:\n  x: {type: string, enum: [a, 1]}\n"),
		tool("duplicate enum value", false, read+"args:\n  x: {type: string, enum: [a, a]}\n"),
		tool("string default of an integer", false, read+"args:\n  x: {type: integer, default: one}\n"),
		tool("integer default of a string", false, read+"args:\n  x: {type: string, default: 1}\n"),
		tool("required with a default", false, read+"args:\n  x: {type: string, default: a, required: true}\n"),
		tool("required as text", false, read+"args:\n  x: {type: string, required: \"no\"}\n"),
		tool("bad nested field", false, read+"args:\n  x:\n    type: array\n    items:\n      type: object\n      properties:\n        y: {type: string, colour: red}\n"),
		tool("bound argument", true, read+"args:\n  owner: {type: string, bound: principal.id}\n  text: {type: string}\n"),
		tool("bound to a claim", true, read+"args:\n  email: {type: string, bound: principal.claims.email}\n"),
		tool("bound integer", false, read+"args:\n  owner: {type: integer, bound: principal.id}\n"),
		tool("bound with a default", false, read+"args:\n  owner: {type: string, bound: principal.id, default: x}\n"),
		tool("bound and required", false, read+"args:\n  owner: {type: string, bound: session.id, required: true}\n"),
		tool("unknown bound source", false, read+"args:\n  owner: {type: string, bound: principal.password}\n"),
		{kind: "tool", name: "nested bound", loaderOnly: true, doc: read + "args:\n  o:\n    type: object\n    properties:\n      who: {type: string, bound: principal.id}\n"},
		{kind: "tool", name: "max below min", loaderOnly: true, doc: read + "args:\n  x: {type: integer, min: 5, max: 1}\n"},
		{kind: "tool", name: "default outside enum", loaderOnly: true, doc: read + "args:\n  x: {type: string, enum: [a, b], default: c}\n"},
		{kind: "tool", name: "timeout over a day", loaderOnly: true, doc: read + "timeout: 25h\n"},
		{kind: "tool", name: "invalid pattern", loaderOnly: true, doc: read + "args:\n  x: {type: string, pattern: \"(\"}\n"},

		{kind: "server", name: "valid server", valid: true, doc: validServer},
		{kind: "server", name: "valid tenant server", valid: true, doc: "server_id: tickets\nconfigured_by: tenant\ntenant: acme\ntransport:\n  http: {url: \"https://mcp.example.com/mcp\"}\nclassification: {side_effect: write, required_scopes: [tickets.write]}\n"},
		{kind: "server", name: "unclassified server", valid: true, doc: "server_id: bare\nconfigured_by: operator\ntransport: {http: {url: \"http://localhost:8080/mcp\"}}\n"},
		{kind: "server", name: "server with both transports", doc: "server_id: both\nconfigured_by: operator\ntransport:\n  http: {url: \"https://x.example.com\"}\n  stdio: {command: x}\n"},
		{kind: "server", name: "server without a transport", doc: "server_id: none\nconfigured_by: operator\ntransport: {}\n"},
		{kind: "server", name: "server missing transport", doc: "server_id: none\nconfigured_by: operator\n"},
		{kind: "server", name: "tenant stdio", doc: "server_id: local\nconfigured_by: tenant\ntenant: acme\ntransport: {stdio: {command: x}}\n"},
		{kind: "server", name: "tenant server without its tenant", doc: "server_id: tickets\nconfigured_by: tenant\ntransport:\n  http: {url: \"https://mcp.example.com/mcp\"}\n"},
		{kind: "server", name: "operator server with a tenant", doc: "server_id: docs\nconfigured_by: operator\ntenant: acme\ntransport:\n  http: {url: \"https://mcp.example.com/mcp\"}\n"},
		{kind: "server", name: "tenant plain http", doc: "server_id: plain\nconfigured_by: tenant\ntenant: acme\ntransport: {http: {url: \"http://mcp.example.com\"}}\n"},
		{kind: "server", name: "ftp url", doc: "server_id: ftp\nconfigured_by: operator\ntransport: {http: {url: \"ftp://mcp.example.com\"}}\n"},
		{kind: "server", name: "url without host", doc: "server_id: nohost\nconfigured_by: operator\ntransport: {http: {url: \"https:///mcp\"}}\n"},
		{kind: "server", name: "stdio without command", doc: "server_id: nocmd\nconfigured_by: operator\ntransport: {stdio: {args: [x]}}\n"},
		{kind: "server", name: "env value not a string", doc: "server_id: env\nconfigured_by: operator\ntransport: {stdio: {command: x, env: {DEBUG: 1}}}\n"},
		{kind: "server", name: "bad configured_by", doc: "server_id: who\nconfigured_by: admin\ntransport: {stdio: {command: x}}\n"},
		{kind: "server", name: "server_id with a dot", doc: "server_id: my.server\nconfigured_by: operator\ntransport: {stdio: {command: x}}\n"},
		{kind: "server", name: "unknown classification key", doc: "server_id: cls\nconfigured_by: operator\ntransport: {stdio: {command: x}}\nclassification: {trust: high}\n"},
		{kind: "server", name: "reserved scope", doc: "server_id: cls\nconfigured_by: operator\ntransport: {stdio: {command: x}}\nclassification: {required_scopes: [toolgen.unclassified]}\n"},
		{kind: "server", name: "none but non_idempotent", doc: "server_id: cls\nconfigured_by: operator\ntransport: {stdio: {command: x}}\nclassification: {side_effect: none, idempotency: non_idempotent}\n"},
		{kind: "server", name: "bad resources", doc: "server_id: res\nconfigured_by: operator\ntransport: {stdio: {command: x}}\nresources: show\n"},

		{kind: "device", name: "valid device", valid: true, doc: validDevice},
		{kind: "device", name: "unclassified device", valid: true, doc: "device_id: lab\ntenant: acme\ntoken_sha256: " + deviceHash + "\n"},
		{kind: "device", name: "device allowing nothing", valid: true, doc: "device_id: lab\ntenant: acme\ntoken_sha256: " + deviceHash + "\nallow_tools: []\n"},
		{kind: "device", name: "device with its token", doc: "device_id: lab\ntenant: acme\ntoken_sha256: " + deviceHash + "\ntoken: s3cret\n"},
		{kind: "device", name: "device without a token hash", doc: "device_id: lab\ntenant: acme\n"},
		{kind: "device", name: "upper-case token hash", doc: "device_id: lab\ntenant: acme\ntoken_sha256: " + strings.ToUpper(deviceHash) + "\n"},
		{kind: "device", name: "short token hash", doc: "device_id: lab\ntenant: acme\ntoken_sha256: abc\n"},
		{kind: "device", name: "device_id with a dot", doc: "device_id: my.laptop\ntenant: acme\ntoken_sha256: " + deviceHash + "\n"},
		{kind: "device", name: "empty allowed tool", doc: "device_id: lab\ntenant: acme\ntoken_sha256: " + deviceHash + "\nallow_tools: [\"\"]\n"},
		{kind: "device", name: "allowed tool twice", doc: "device_id: lab\ntenant: acme\ntoken_sha256: " + deviceHash + "\nallow_tools: [echo, echo]\n"},
		{kind: "device", name: "device none but non_idempotent", doc: "device_id: lab\ntenant: acme\ntoken_sha256: " + deviceHash + "\nclassification: {side_effect: none, idempotency: non_idempotent}\n"},
		{kind: "device", name: "device with a transport", doc: "device_id: lab\ntenant: acme\ntoken_sha256: " + deviceHash + "\ntransport: {stdio: {command: x}}\n"},
		{kind: "device", name: "device without a tenant", doc: "device_id: lab\ntoken_sha256: " + deviceHash + "\n"},
		{kind: "device", name: "device with a bad tenant", doc: "device_id: lab\ntenant: Acme Corp\ntoken_sha256: " + deviceHash + "\n"},

		{kind: "principals", name: "valid principals", valid: true, doc: validPrincipals},
		{kind: "principals", name: "empty principals", valid: true, doc: "{}\n"},
		{kind: "principals", name: "a token in clear", doc: "tokens:\n  - {id: bot, tenant: acme, token: s3cret}\n"},
		{kind: "principals", name: "token without a digest", doc: "tokens:\n  - {id: bot, tenant: acme}\n"},
		{kind: "principals", name: "token without a tenant", doc: "tokens:\n  - {id: bot, token_sha256: " + deviceHash + "}\n"},
		{kind: "principals", name: "bad tenant", doc: "local:\n  - {id: ana, tenant: Acme Corp}\n"},
		{kind: "principals", name: "unclassified scope granted", doc: "local:\n  - {id: ana, tenant: acme, scopes: [toolgen.unclassified]}\n"},
		{kind: "principals", name: "issuer with both key sources", doc: "issuers:\n  - {name: login, tenant: acme, issuer: \"https://login.example.com\", audience: a, jwks_url: \"https://login.example.com/k\", key_file: k.pem}\n"},
		{kind: "principals", name: "issuer without a key source", doc: "issuers:\n  - {name: login, tenant: acme, issuer: \"https://login.example.com\", audience: a}\n"},
		{kind: "principals", name: "HMAC algorithm", doc: "issuers:\n  - {name: login, tenant: acme, issuer: \"https://login.example.com\", audience: a, key_file: k.pem, algorithms: [HS256]}\n"},
		{kind: "principals", name: "none algorithm", doc: "issuers:\n  - {name: login, tenant: acme, issuer: \"https://login.example.com\", audience: a, key_file: k.pem, algorithms: [none]}\n"},
		{kind: "principals", name: "issuer without an audience", doc: "issuers:\n  - {name: login, tenant: acme, issuer: \"https://login.example.com\", key_file: k.pem}\n"},
		{kind: "principals", name: "issuer without a name", doc: "issuers:\n  - {issuer: \"https://login.example.com\", audience: a, key_file: k.pem, tenant: acme}\n"},
		{kind: "principals", name: "issuer name with a slash", doc: "issuers:\n  - {name: a/b, issuer: \"https://login.example.com\", audience: a, key_file: k.pem, tenant: acme}\n"},
		{kind: "principals", name: "issuer bound to no tenant", doc: "issuers:\n  - {name: login, issuer: \"https://login.example.com\", audience: a, key_file: k.pem}\n"},
		{kind: "principals", name: "issuer with tenant and tenants", doc: "issuers:\n  - {name: login, issuer: \"https://login.example.com\", audience: a, key_file: k.pem, tenant: acme, tenants: [acme]}\n"},
		{kind: "principals", name: "issuer with no tenants", doc: "issuers:\n  - {name: login, issuer: \"https://login.example.com\", audience: a, key_file: k.pem, tenants: []}\n"},
		{kind: "principals", name: "issuer with a bad tenant", doc: "issuers:\n  - {name: login, issuer: \"https://login.example.com\", audience: a, key_file: k.pem, tenant: Acme Corp}\n"},
		{kind: "principals", name: "issuer with a tenant listed twice", doc: "issuers:\n  - {name: login, issuer: \"https://login.example.com\", audience: a, key_file: k.pem, tenants: [acme, acme]}\n"},
		{kind: "principals", name: "tenant claim of a one-tenant issuer", loaderOnly: true, doc: "issuers:\n  - {name: login, issuer: \"https://login.example.com\", audience: a, key_file: k.pem, tenant: acme, claims: {tenant: org}}\n"},
		{kind: "principals", name: "issuer name twice", loaderOnly: true, doc: "issuers:\n  - {name: login, issuer: \"https://a.example.com\", audience: a, key_file: k.pem, tenant: acme}\n  - {name: login, issuer: \"https://b.example.com\", audience: a, key_file: k.pem, tenant: beta}\n"},
		{kind: "principals", name: "issuer twice", loaderOnly: true, doc: "issuers:\n  - {name: a, issuer: \"https://a.example.com\", audience: a, key_file: k.pem, tenant: acme}\n  - {name: b, issuer: \"https://a.example.com\", audience: a, key_file: k.pem, tenant: beta}\n"},
		{kind: "principals", name: "console sign-in, public client", valid: true, doc: "issuers:\n  - {name: login, tenant: acme, issuer: \"https://login.example.com\", audience: a, key_file: k.pem, console: {client_id: toolgen-console}}\n"},
		{kind: "principals", name: "console sign-in, confidential client", valid: true, doc: "issuers:\n  - name: login\n    tenant: acme\n    issuer: \"https://login.example.com\"\n    audience: a\n    key_file: k.pem\n    console:\n      client_id: toolgen-console\n      client_secret_env: CONSOLE_SECRET\n      scopes: [openid, profile]\n      redirect_url: \"https://toolgen.example.com/console/auth/callback\"\n"},
		{kind: "principals", name: "console without a client id", doc: "issuers:\n  - {name: login, tenant: acme, issuer: \"https://login.example.com\", audience: a, key_file: k.pem, console: {scopes: [openid]}}\n"},
		{kind: "principals", name: "console secret in the file", doc: "issuers:\n  - {name: login, tenant: acme, issuer: \"https://login.example.com\", audience: a, key_file: k.pem, console: {client_id: c, client_secret: s3cret}}\n"},
		{kind: "principals", name: "console secret env not a variable", doc: "issuers:\n  - {name: login, tenant: acme, issuer: \"https://login.example.com\", audience: a, key_file: k.pem, console: {client_id: c, client_secret_env: \"s3cret value\"}}\n"},
		{kind: "principals", name: "console redirect elsewhere", doc: "issuers:\n  - {name: login, tenant: acme, issuer: \"https://login.example.com\", audience: a, key_file: k.pem, console: {client_id: c, redirect_url: \"https://evil.example.com/steal\"}}\n"},
		{kind: "principals", name: "console redirect over plain http", loaderOnly: true, doc: "issuers:\n  - {name: login, tenant: acme, issuer: \"https://login.example.com\", audience: a, key_file: k.pem, console: {client_id: c, redirect_url: \"http://toolgen.example.com/console/auth/callback\"}}\n"},
		{kind: "principals", name: "unknown claim key", doc: "issuers:\n  - {name: login, tenant: acme, issuer: \"https://login.example.com\", audience: a, key_file: k.pem, claims: {email: email}}\n"},

		{kind: "notifications", name: "valid notifications", valid: true, doc: validNotifications},
		{kind: "notifications", name: "empty notifications", valid: true, doc: "{}\n"},
		{kind: "notifications", name: "slack without a secret", valid: true, doc: "webhooks:\n  - {name: chat, format: slack, url_env: SLACK_URL}\n"},
		{kind: "notifications", name: "json without a secret", doc: "webhooks:\n  - {name: ops, url: \"https://hooks.example.com/t\"}\n"},
		{kind: "notifications", name: "url and url_env", doc: "webhooks:\n  - {name: ops, url: \"https://hooks.example.com/t\", url_env: HOOK, secret_env: HOOK_KEY}\n"},
		{kind: "notifications", name: "no url", doc: "webhooks:\n  - {name: ops, secret_env: HOOK_KEY}\n"},
		{kind: "notifications", name: "plain http url", loaderOnly: true, doc: "webhooks:\n  - {name: ops, url: \"http://hooks.example.com/t\", secret_env: HOOK_KEY}\n"},
		{kind: "notifications", name: "secret in the file", doc: "webhooks:\n  - {name: ops, url: \"https://hooks.example.com/t\", secret: s3cret}\n"},
		{kind: "notifications", name: "unknown format", doc: "webhooks:\n  - {name: ops, url: \"https://hooks.example.com/t\", secret_env: K, format: teams}\n"},
		{kind: "notifications", name: "unknown event", doc: "webhooks:\n  - {name: ops, url: \"https://hooks.example.com/t\", secret_env: K, events: [settled]}\n"},
		{kind: "notifications", name: "no events", doc: "webhooks:\n  - {name: ops, url: \"https://hooks.example.com/t\", secret_env: K, events: []}\n"},
		{kind: "notifications", name: "too many attempts", doc: "webhooks:\n  - {name: ops, url: \"https://hooks.example.com/t\", secret_env: K, max_attempts: 50}\n"},
		{kind: "notifications", name: "bad webhook name", doc: "webhooks:\n  - {name: Ops Team, url: \"https://hooks.example.com/t\", secret_env: K}\n"},
		{kind: "notifications", name: "console url with a path", doc: "console_url: \"https://toolgen.example.com/console\"\n"},
		{kind: "notifications", name: "webhook twice", loaderOnly: true, doc: "webhooks:\n  - {name: ops, url: \"https://a.example.com/t\", secret_env: K}\n  - {name: ops, url: \"https://b.example.com/t\", secret_env: K}\n"},
		{kind: "notifications", name: "timeout too long", loaderOnly: true, doc: "webhooks:\n  - {name: ops, url: \"https://hooks.example.com/t\", secret_env: K, timeout: 5m}\n"},

		{kind: "protocol", name: "valid protocol", valid: true, doc: validProtocol},
		{kind: "protocol", name: "protocol missing modes", doc: "name: p\ninitial_mode: a\n"},
		{kind: "protocol", name: "protocol with no modes", doc: "name: p\ninitial_mode: a\nmodes: {}\n"},
		{kind: "protocol", name: "mode without tools", doc: "name: p\ninitial_mode: a\nmodes: {a: {description: x}}\n"},
		{kind: "protocol", name: "bad mode name", doc: "name: p\ninitial_mode: Plan\nmodes: {Plan: {tools: [a.b]}}\n"},
		{kind: "protocol", name: "tool listed twice", doc: "name: p\ninitial_mode: a\nmodes: {a: {tools: [a.b, a.b]}}\n"},
		{kind: "protocol", name: "unknown mode key", doc: "name: p\ninitial_mode: a\nmodes: {a: {tools: [a.b], exclusive: true}}\n"},
		{kind: "protocol", name: "bad protocol name", doc: "name: Plan-Review\ninitial_mode: a\nmodes: {a: {tools: [a.b]}}\n"},
		{kind: "protocol", name: "exclusive tool twice", doc: "name: p\ninitial_mode: a\nmodes: {a: {tools: [a.b]}}\nexclusive_tools: [a.b, a.b]\n"},
		{kind: "protocol", name: "initial mode not a mode", loaderOnly: true, doc: "name: p\ninitial_mode: b\nmodes: {a: {tools: [a.b]}}\n"},

		{kind: "policy", name: "valid policy", valid: true, doc: validPolicy},
		{kind: "policy", name: "empty policy", valid: true, doc: "{}\n"},
		{kind: "policy", name: "rule with two conditions", doc: "rules:\n  - name: r\n    approve_when: 'true'\n    deny_when: 'false'\n"},
		{kind: "policy", name: "rule without a condition", doc: "rules:\n  - name: r\n    tools: [a.b]\n"},
		{kind: "policy", name: "rule without a name", doc: "rules:\n  - deny_when: 'true'\n"},
		{kind: "policy", name: "bad rule name", doc: "rules:\n  - name: Merge Rule\n    deny_when: 'true'\n"},
		{kind: "policy", name: "rule with no tools", doc: "rules:\n  - name: r\n    tools: []\n    deny_when: 'true'\n"},
		{kind: "policy", name: "unknown rule key", doc: "rules:\n  - name: r\n    deny_when: 'true'\n    effect: deny\n"},
		{kind: "policy", name: "unknown policy key", doc: "egress: {allow: [a.com]}\nrule: []\n"},
		{kind: "policy", name: "upper-case host", doc: "egress: {allow: [Example.com]}\n"},
		{kind: "policy", name: "host with a path", doc: "egress: {allow: [\"example.com/mcp\"]}\n"},
		{kind: "policy", name: "rules a mapping", doc: "rules: {name: r}\n"},
		{kind: "policy", name: "blank condition", doc: "rules:\n  - name: r\n    deny_when: ''\n"},
		{kind: "policy", name: "duplicate rule name", loaderOnly: true, doc: "rules:\n  - name: r\n    deny_when: 'true'\n  - name: r\n    approve_when: 'true'\n"},
	}
	return cases
}

// TestFileSchemasAgreeWithLoader validates documents against the schemas and loads them
// with the loader: for every shape-level error the schema can express, both reject.
func TestFileSchemasAgreeWithLoader(t *testing.T) {
	for _, c := range schemaCases() {
		t.Run(c.kind+"/"+c.name, func(t *testing.T) {
			data := []byte(c.doc)
			rel := specRel(c.kind, data)
			_, diags := loadSpecFile(c.kind, rel, data)
			loaderOK := len(diags) == 0
			err := validateSpecYAML(t, c.kind, data)
			schemaOK := err == nil
			wantSchema := c.valid || c.loaderOnly
			if loaderOK != c.valid {
				t.Errorf("loader accepts = %v, want %v; diagnostics:\n%v", loaderOK, c.valid, diagsText(diags))
			}
			if schemaOK != wantSchema {
				t.Errorf("schema accepts = %v, want %v; error: %v", schemaOK, wantSchema, err)
			}
		})
	}
}

func diagsText(ds Diagnostics) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString("\t" + d.String() + "\n")
	}
	return b.String()
}

// TestExampleFilesValidate validates the repository's own spec files against the
// schemas, and checks that a yaml-language-server modeline in one names the right schema.
func TestExampleFilesValidate(t *testing.T) {
	root := ".."
	globs := []struct{ kind, pattern string }{
		{"tool", "tools/*.yaml"},
		{"server", "servers/*.yaml"},
		{"protocol", "protocols/*.yaml"},
		{"policy", "policy.yaml"},
	}
	modeline := regexp.MustCompile(`(?m)^#\s*yaml-language-server:\s*\$schema=(\S+)\s*$`)
	n := 0
	for _, g := range globs {
		files, err := filepath.Glob(filepath.Join(root, g.pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			n++
			rel, _ := filepath.Rel(root, file)
			t.Run(filepath.ToSlash(rel), func(t *testing.T) {
				data, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				if err := validateSpecYAML(t, g.kind, data); err != nil {
					t.Errorf("%s does not validate against the %s schema: %v", rel, g.kind, err)
				}
				if m := modeline.FindSubmatch(data); m != nil {
					got := path.Join(path.Dir(filepath.ToSlash(rel)), string(m[1]))
					if want := "spec/schemas/" + g.kind + ".schema.json"; got != want {
						t.Errorf("%s: modeline names %s, which is %s; want %s", rel, m[1], got, want)
					}
				}
			})
		}
	}
	if n == 0 {
		t.Fatal("no spec file of the repository was checked: the walk above found none")
	}
}
