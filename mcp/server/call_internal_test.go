package server

import (
	"bytes"
	"encoding/json"
	"maps"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/runtime"
)

// TestModernResult_TheSDKsObjectWithResultType: a result at revision 2026-07-28 is
// the SDK's own object plus resultType "complete", once, at the top level, whatever
// the result holds (nested objects that have a resultType of their own included).
func TestModernResult_TheSDKsObjectWithResultType(t *testing.T) {
	results := map[string]*mcp.CallToolResult{
		"empty": {},
		"success": resultOf(runtime.Outcome{Status: runtime.OutcomeSucceeded, Result: &runtime.ToolResult{
			Content:    []runtime.Item{{Text: `say "resultType":"input_required"`, Trust: runtime.TrustExternalUntrusted}},
			Structured: json.RawMessage(`{"resultType":"nested","n":1}`),
			Trust:      runtime.TrustExternalUntrusted,
		}}, identity{SessionID: "s-1", RunID: "r", Step: 2, CallID: "c"}),
		"error": resultOf(runtime.NewOutcome(runtime.ReasonInternalError, "c"), identity{SessionID: "s-1"}),
	}
	for name, res := range results {
		t.Run(name, func(t *testing.T) {
			plain, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			modern, err := json.Marshal(forRevision(protocolStateless, res))
			if err != nil {
				t.Fatal(err)
			}
			want := topLevel(t, plain)
			if _, ok := want["resultType"]; ok {
				t.Fatalf("the SDK's object has a resultType already: %s", plain)
			}
			want["resultType"] = json.RawMessage(`"complete"`)
			if got := topLevel(t, modern); !maps.EqualFunc(got, want, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
				t.Errorf("got  %s\nwant the SDK's %s with resultType \"complete\"", modern, plain)
			}
		})
	}
}

// topLevel is data's top-level members; it fails on a member named twice.
func topLevel(t *testing.T, data []byte) map[string]json.RawMessage {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", data)
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		key := tok.(string)
		if _, dup := out[key]; dup {
			t.Fatalf("%q twice in %s", key, data)
		}
		out[key] = v
	}
	return out
}

// BenchmarkModernResult is the marshalling of a typical read call's result at
// 2026-07-28, as the SDK's jsonrpc2 layer does it (json.Marshal of the result).
func BenchmarkModernResult(b *testing.B) {
	res := forRevision(protocolStateless, resultOf(runtime.Outcome{Status: runtime.OutcomeSucceeded, Result: &runtime.ToolResult{
		Content:    []runtime.Item{{Text: "value-of-k-123456", Trust: runtime.TrustExternalUntrusted}},
		Structured: json.RawMessage(`{"key":"k-123456","value":"value-of-k-123456","length":17}`),
		Trust:      runtime.TrustExternalUntrusted,
	}}, identity{SessionID: "s-0123456789abcdefghijklmnopqrstuvwxyz01234567", RunID: "default", CallID: "auto-0123456789abcdef"}))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(res); err != nil {
			b.Fatal(err)
		}
	}
}
