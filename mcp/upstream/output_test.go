package upstream_test

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/internal/mcppeers"
	mcpserver "github.com/toolgen/toolgen/mcp/server"
	"github.com/toolgen/toolgen/mcp/upstream"
	"github.com/toolgen/toolgen/model"
)

// An upstream tool's own outputSchema through the gateway (issue 15, point 8):
// server-everything's get-structured-content declares one. The gateway advertises it
// (wrapped with the elided stand-in) and every success conforms: the server's value,
// passed through unchanged and validated by the pipeline, or — over the output budget,
// here a second connection of the same server with a tiny budget — the stand-in.

// validSchema checks v against schema with jsonschema-go (the go-sdk v1.8.0 client does
// not validate structuredContent itself).
func validSchema(t *testing.T, tool string, schema, v any) {
	t.Helper()
	raw, _ := json.Marshal(schema)
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s: outputSchema %s: %v", tool, raw, err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("%s: outputSchema %s does not resolve: %v", tool, raw, err)
	}
	b, _ := json.Marshal(v)
	var inst any
	_ = json.Unmarshal(b, &inst)
	if err := rs.Validate(inst); err != nil {
		t.Fatalf("%s: structuredContent %s does not validate against %s: %v", tool, b, raw, err)
	}
}

// tsCheck is the TypeScript SDK client: it lists the tools (compiling an AJV validator,
// formats included, for every outputSchema) and calls argv[4]'s tools; callTool throws
// when a success lacks structuredContent or it does not validate.
const tsCheck = `
const [, , sdk, url, calls] = process.argv;
const { Client } = await import(sdk + "/dist/esm/client/index.js");
const { StreamableHTTPClientTransport } = await import(sdk + "/dist/esm/client/streamableHttp.js");
const client = new Client({ name: "toolgen-ts-check", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
await client.listTools();
const out = [];
for (const [name, args] of JSON.parse(calls)) out.push(await client.callTool({ name, arguments: args }));
console.log(JSON.stringify(out));
await client.close();
`

func TestEverything_OutputSchemaHonoured(t *testing.T) {
	node, entry := mcppeers.Everything(t)
	e := newEnv(t)
	for _, id := range []string{"everything", "everything_small"} {
		s := everythingServer()
		s.ServerID, s.File = id, "servers/"+id+".yaml"
		s.Stdio = &model.StdioTransport{Command: node, Args: []string{entry, "stdio"}}
		opts := upstream.Options{Server: s, Registry: e.reg, Store: e.store, Logger: testLogger(t), RefreshDebounce: 20 * time.Millisecond}
		if id == "everything_small" {
			opts.OutputMaxBytes = 64 // its result is excerpted: the structured value goes to an artifact
		}
		u, err := upstream.Connect(e.ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { u.Close() })
	}
	gw := gateway(t, e)
	hs := httptest.NewServer(gw.HTTPHandler())
	t.Cleanup(hs.Close)
	url := hs.URL + mcpserver.Endpoint
	tools := []string{"mcp__everything__get_structured_content", "mcp__everything_small__get_structured_content"}
	args := map[string]any{"location": "Chicago"}

	// The go-sdk client, checked with jsonschema-go.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "downstream", Version: "v0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}).
		Connect(e.ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListTools(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]any{}
	for _, tool := range list.Tools {
		schemas[tool.Name] = tool.OutputSchema
	}
	for i, name := range tools {
		if schemas[name] == nil {
			t.Fatalf("%s advertises no outputSchema", name)
		}
		res, err := cs.CallTool(e.ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError || res.StructuredContent == nil {
			t.Fatalf("%s: %v %s", name, err, dumpJSON(res))
		}
		validSchema(t, name, schemas[name], res.StructuredContent)
		sc := res.StructuredContent.(map[string]any)
		if i == 0 && (sc["conditions"] != "Light rain / drizzle" || sc["humidity"] != float64(82)) {
			t.Fatalf("%s: structuredContent %s, want the server's value unchanged", name, dumpJSON(sc))
		}
		if _, elided := sc[mcpserver.ElidedKey]; elided != (i == 1) {
			t.Fatalf("%s: structuredContent %s", name, dumpJSON(sc))
		}
	}

	// A call the server refuses (an unknown city) is isError with the six-field outcome,
	// which conforms too (a client validates structuredContent of errors as well).
	bad := map[string]any{"location": "Paris"}
	res, err := cs.CallTool(e.ctx, &mcp.CallToolParams{Name: tools[0], Arguments: bad})
	if err != nil || !res.IsError {
		t.Fatalf("unknown city: %v %s", err, dumpJSON(res))
	}
	validSchema(t, tools[0], schemas[tools[0]], res.StructuredContent)

	// The TypeScript SDK client, which validates by itself.
	nodeBin := mcppeers.Node(t)
	sdk := filepath.Join(mcppeers.Root(t), ".tooldeps", "node_modules", "@modelcontextprotocol", "sdk")
	if _, err := os.Stat(filepath.Join(sdk, "package.json")); err != nil {
		t.Fatalf("%s is missing: run `make node-deps`", sdk)
	}
	script := filepath.Join(t.TempDir(), "ts-check.mjs")
	if err := os.WriteFile(script, []byte(tsCheck), 0o600); err != nil {
		t.Fatal(err)
	}
	calls, _ := json.Marshal([][]any{{tools[0], args}, {tools[1], args}, {"mcp__everything__get_structured_content", bad}})
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(nodeBin, script, "file://"+filepath.ToSlash(sdk), url, string(calls))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the TypeScript SDK client failed: %v\n%s", err, stderr.String())
	}
	var out []struct {
		IsError           bool           `json:"isError"`
		StructuredContent map[string]any `json:"structuredContent"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("output %q: %v", stdout.String(), err)
	}
	if len(out) != 3 {
		t.Fatalf("TypeScript client: %s", stdout.String())
	}
	for i, r := range out {
		if r.IsError != (i == 2) || r.StructuredContent == nil {
			t.Fatalf("TypeScript client, call %d: %+v", i, r)
		}
	}
}
