package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/mcp/server"
	"github.com/toolgen/toolgen/runtime"
)

func listNames(t *testing.T, cs *mcp.ClientSession, meta mcp.Meta) []string {
	t.Helper()
	var out []string
	cursor := ""
	for {
		res, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{Cursor: cursor, Meta: meta})
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range res.Tools {
			out = append(out, tool.Name)
		}
		if res.NextCursor == "" {
			return out
		}
		cursor = res.NextCursor
	}
}

// tools/list shows wire names (SPEC-1), only the active mode's tools (WF-3), over every
// transport and protocol version.
func TestList_WireNamesFilteredByMode(t *testing.T) {
	transports(t, func(t *testing.T, e *env, connect func(*progressLog) *mcp.ClientSession) {
		cs := connect(nil)
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tool := range res.Tools {
			got = append(got, tool.Name)
			schema, _ := tool.InputSchema.(map[string]any)
			if schema["type"] != "object" {
				t.Errorf("%s: input schema type %v, want object", tool.Name, schema["type"])
			}
			if tool.Meta[server.MetaName] == nil {
				t.Errorf("%s: _meta lacks %s", tool.Name, server.MetaName)
			}
		}
		want := []string{"demo__big", "demo__deploy", "demo__fail", "demo__noschema", "demo__read", "demo__send",
			"demo__untrusted", "workspace__list", "workspace__read_text"}
		if !slices.Equal(got, want) {
			t.Fatalf("tools/list = %v, want %v", got, want)
		}
		if res.Meta[server.MetaMode] != "build" {
			t.Errorf("list _meta mode = %v, want build", res.Meta[server.MetaMode])
		}
	})
}

// Without a mode resolver the whole pinned catalog is listed.
func TestList_NoProtocolListsCatalog(t *testing.T) {
	e := newEnv(t, envConfig{noModes: true})
	cs := e.connectMemory("", nil)
	got := listNames(t, cs, nil)
	for _, name := range []string{"demo__other", "review__merge", "conversation__ask_user", "workspace__write_text"} {
		if !slices.Contains(got, name) {
			t.Errorf("tools/list %v lacks %s", got, name)
		}
	}
	if n := len(catalog(t, e, "any")); len(got) != n {
		t.Errorf("tools/list has %d tools, the catalog %d", len(got), n)
	}
}

// Pages are in wire order and together are the whole list.
func TestList_Pagination(t *testing.T) {
	e := newEnv(t, envConfig{noModes: true, opts: func(o *server.Options) { o.PageSize = 2 }})
	cs := e.connectMemory("2025-11-25", nil)
	got := listNames(t, cs, nil)
	if n := len(catalog(t, e, "x")); !slices.IsSorted(got) || len(got) != n {
		t.Fatalf("paged list %v: sorted %v, %d of %d", got, slices.IsSorted(got), len(got), n)
	}
	_, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{Cursor: "!!not base64!!"})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("bad cursor: %v, want invalid params", err)
	}
}

// Schemas: a schema without a type is listed as an object; object output schemas are
// advertised, wrapped so that an excerpted result's stand-in conforms too (output.go).
func TestList_Schemas(t *testing.T) {
	e := newEnv(t, envConfig{})
	cs := e.connectMemory("", nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		byName[tool.Name] = tool
	}
	ns := byName["demo__noschema"].InputSchema.(map[string]any)
	if ns["type"] != "object" || ns["properties"] == nil {
		t.Errorf("demo__noschema schema = %v, want its properties with type object", ns)
	}
	for _, name := range []string{"demo__read", "demo__big"} {
		out, _ := byName[name].OutputSchema.(map[string]any)
		if any, _ := out["anyOf"].([]any); out["type"] != "object" || len(any) != 3 {
			t.Errorf("%s outputSchema %v, want the object wrapper of the declared schema, the elided stand-in and the outcome shape", name, out)
		}
	}
	if ns := byName["demo__noschema"]; ns.OutputSchema != nil || ns.Meta[server.MetaOutputSchema] != nil {
		t.Errorf("demo__noschema declares no output schema: outputSchema %v, _meta %v", ns.OutputSchema, ns.Meta[server.MetaOutputSchema])
	}
	ws := byName["workspace__list"]
	if !ws.Annotations.ReadOnlyHint || !ws.Annotations.IdempotentHint {
		t.Errorf("workspace__list annotations %+v, want read-only and idempotent", ws.Annotations)
	}
	if byName["demo__send"].Annotations.ReadOnlyHint {
		t.Error("demo__send (write) is annotated read-only")
	}
}

// A mode resolver failure is a clear JSON-RPC error, not an empty or full list.
func TestList_ModeErrorIsReported(t *testing.T) {
	e := newEnv(t, envConfig{modes: &fakeModes{err: errors.New("store down")}})
	cs := e.connectMemory("", nil)
	_, err := cs.ListTools(context.Background(), nil)
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError {
		t.Fatalf("tools/list with a failing resolver: %v, want an internal error", err)
	}
}

// A panic below a request (here a buggy resolver, reached by tools/list and by the
// pipeline's step 6) is an internal JSON-RPC error; the server keeps serving.
func TestServer_PanicIsInternalError(t *testing.T) {
	modes := &fakeModes{panic: true}
	e := newEnv(t, envConfig{modes: modes})
	cs := e.connectMemory("", nil)
	_, err := cs.ListTools(context.Background(), nil)
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError {
		t.Fatalf("tools/list: %v, want an internal error", err)
	}
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "demo__read", Arguments: map[string]any{}})
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError {
		t.Fatalf("tools/call: %v, want an internal error", err)
	}
	if err := cs.Ping(context.Background(), nil); err != nil {
		t.Fatalf("ping after the panics: %v", err)
	}
}

// _meta io.toolgen/session_id names the session tools/list pins and filters for.
func TestList_MetaSessionIsPinned(t *testing.T) {
	e := newEnv(t, envConfig{})
	cs := e.connectMemory("", nil)
	listNames(t, cs, mcp.Meta{server.MetaSessionID: "named-session"})
	if len(catalog(t, e, "named-session")) == 0 {
		t.Fatal("the named session has no pinned catalog")
	}
	res, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{Meta: mcp.Meta{server.MetaSessionID: "named-session"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Meta[server.MetaSessionID] != "named-session" {
		t.Errorf("list _meta session = %v", res.Meta[server.MetaSessionID])
	}
	_, err = cs.ListTools(context.Background(), &mcp.ListToolsParams{Meta: mcp.Meta{server.MetaSessionID: 42}})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("numeric session id: %v, want invalid params", err)
	}
	b, _ := json.Marshal(je)
	t.Logf("error: %s", b)
}

// catalog is the pinned catalog of alice's tenant's session (pinning it).
func catalog(t *testing.T, e *env, session string) []*runtime.ToolSpec {
	t.Helper()
	tools, err := e.reg.Tools(context.Background(), runtime.SessionKey{Tenant: alice.Tenant, ID: session})
	if err != nil {
		t.Fatal(err)
	}
	return tools
}
