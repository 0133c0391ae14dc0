package server_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/internal/mcppeers"
	"github.com/toolgen/toolgen/mcp/server"
)

// validateAgainst checks v against the JSON Schema schema (as a client that validates
// structuredContent does). The go-sdk v1.8.0 client does not validate by itself, so
// the test does it with jsonschema-go, the validator the go-sdk uses on its server side.
func validateAgainst(t *testing.T, tool string, schema, v any) {
	t.Helper()
	raw, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s: outputSchema does not decode: %v", tool, err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("%s: outputSchema does not resolve: %v\n%s", tool, err, raw)
	}
	b, _ := json.Marshal(v)
	var inst any
	_ = json.Unmarshal(b, &inst)
	if err := rs.Validate(inst); err != nil {
		t.Fatalf("%s: structuredContent %s does not validate against the advertised outputSchema: %v", tool, b, err)
	}
}

// outputCalls are the calls whose results are checked against the advertised schemas: a
// structured result kept whole, one over its budget (the elided stand-in), builtins,
// and a failure (isError with the six-field outcome, which a client validates too).
var outputCalls = []struct {
	name string
	args map[string]any
}{
	{"demo__read", map[string]any{"n": 4}},
	{"demo__big", map[string]any{}},
	{"workspace__read_text", map[string]any{"path": "notes.txt"}},
	{"workspace__list", map[string]any{}},
	{"demo__fail", map[string]any{}},
}

// TestOutputSchema_Honoured: every advertised outputSchema resolves, and every success
// of a tool that advertises one carries a structuredContent valid against it — the
// tool's value when kept whole, the elided stand-in when it was excerpted.
func TestOutputSchema_Honoured(t *testing.T) {
	for _, transport := range []string{"memory", "http"} {
		t.Run(transport, func(t *testing.T) {
			e := newEnv(t, envConfig{noModes: true})
			if err := os.WriteFile(filepath.Join(e.ws, "notes.txt"), []byte("the plan is simple"), 0o600); err != nil {
				t.Fatal(err)
			}
			var cs *mcp.ClientSession
			if transport == "http" {
				cs = e.connectHTTP(nil)
			} else {
				cs = e.connectMemory("2025-11-25", nil)
			}
			res, err := cs.ListTools(e.ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			schemas := map[string]any{}
			for _, tool := range res.Tools {
				if tool.OutputSchema != nil {
					schemas[tool.Name] = tool.OutputSchema
					validateAgainst(t, tool.Name, tool.OutputSchema, map[string]any{server.ElidedKey: map[string]any{"artifacts": []any{}}})
				}
			}
			for _, want := range []string{"demo__read", "demo__big", "workspace__read_text", "workspace__list", "identity__whoami"} {
				if schemas[want] == nil {
					t.Errorf("%s does not advertise an outputSchema", want)
				}
			}
			for _, c := range outputCalls {
				r := call(t, cs, c.name, c.args, nil)
				if r.IsError != (c.name == "demo__fail") || r.StructuredContent == nil {
					t.Fatalf("%s: %s, want structuredContent", c.name, dump(r))
				}
				validateAgainst(t, c.name, schemas[c.name], r.StructuredContent)
				_, elided := r.StructuredContent.(map[string]any)[server.ElidedKey]
				if elided != (c.name == "demo__big") {
					t.Errorf("%s: structuredContent %s: elided %v", c.name, dump(r.StructuredContent), elided)
				}
			}
		})
	}
}

// tsClientScript lists the tools with the TypeScript SDK's client (which compiles a
// validator, AJV with formats, for every advertised outputSchema) and makes the calls
// of argv[4] (JSON [[name, args], ...]); callTool throws when a success lacks
// structuredContent or it does not validate. It prints the results as JSON.
const tsClientScript = `
const [, , sdk, url, calls] = process.argv;
const { Client } = await import(sdk + "/dist/esm/client/index.js");
const { StreamableHTTPClientTransport } = await import(sdk + "/dist/esm/client/streamableHttp.js");
const client = new Client({ name: "toolgen-ts-check", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const { tools } = await client.listTools();
const out = { advertised: tools.filter((t) => t.outputSchema).map((t) => t.name), results: {} };
for (const [name, args] of JSON.parse(calls)) {
  out.results[name] = await client.callTool({ name, arguments: args });
}
console.log(JSON.stringify(out));
await client.close();
`

// runTSClient runs tsClientScript against url; it fails the test when the client
// throws. Without node the test is skipped; with node but without the SDK it fails.
func runTSClient(t *testing.T, url string, calls any) (advertised []string, results map[string]json.RawMessage) {
	t.Helper()
	node := mcppeers.Node(t)
	sdk := filepath.Join(mcppeers.Root(t), ".tooldeps", "node_modules", "@modelcontextprotocol", "sdk")
	if _, err := os.Stat(filepath.Join(sdk, "package.json")); err != nil {
		t.Fatalf("%s is missing: run `make node-deps`", sdk)
	}
	script := filepath.Join(t.TempDir(), "ts-check.mjs")
	if err := os.WriteFile(script, []byte(tsClientScript), 0o600); err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(calls)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(node, script, "file://"+filepath.ToSlash(sdk), url, string(args))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the TypeScript SDK client failed: %v\n%s", err, stderr.String())
	}
	var out struct {
		Advertised []string                   `json:"advertised"`
		Results    map[string]json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("TypeScript client output %q: %v", stdout.String(), err)
	}
	return out.Advertised, out.Results
}

// TestOutputSchema_TypeScriptClient: the TypeScript SDK client, which validates every
// structuredContent against the advertised outputSchema, lists every tool (its
// validators compile) and accepts every result, the elided one included.
func TestOutputSchema_TypeScriptClient(t *testing.T) {
	e := newEnv(t, envConfig{noModes: true})
	if err := os.WriteFile(filepath.Join(e.ws, "notes.txt"), []byte("the plan is simple"), 0o600); err != nil {
		t.Fatal(err)
	}
	var calls [][]any
	for _, c := range outputCalls {
		calls = append(calls, []any{c.name, c.args})
	}
	advertised, results := runTSClient(t, e.httpURL(), calls)
	for _, want := range []string{"demo__read", "demo__big", "workspace__read_text", "workspace__list"} {
		if !strings.Contains(strings.Join(advertised, " "), want) {
			t.Errorf("the TypeScript client sees no outputSchema for %s (advertised: %v)", want, advertised)
		}
	}
	for _, c := range outputCalls {
		var r struct {
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
		}
		if err := json.Unmarshal(results[c.name], &r); err != nil || r.IsError != (c.name == "demo__fail") || r.StructuredContent == nil {
			t.Fatalf("%s: %s (%v)", c.name, results[c.name], err)
		}
	}
	if !strings.Contains(string(results["demo__big"]), server.ElidedKey) {
		t.Fatalf("demo__big: %s, want the elided stand-in", results["demo__big"])
	}
}
