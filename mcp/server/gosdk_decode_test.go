package server_test

import (
	"runtime"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGoSDKDecodesInPlace holds the one change toolgen carries to the go-sdk
// (third_party/go-sdk/PATCHES.md): decoding a message parses its bytes in place instead
// of copying them into a fresh 32 KiB buffer first. Unpatched, the go-sdk allocates
// at least 32 KiB per decode — a tools/call crosses several on each of toolrun's two
// hops, and that garbage was a quarter of its CPU (BENCHMARKS.md, issue 20). The
// figure is bytes allocated, which does not depend on the machine's speed or load.
func TestGoSDKDecodesInPlace(t *testing.T) {
	req := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"mcp__bench__lookup","arguments":{"key":"k-1"},"_meta":{"progressToken":3}}}`)
	res := []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"value of k-1"}],"structuredContent":{"value":"value of k-1"}}}`)
	const rounds = 200
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range rounds {
		if _, err := jsonrpc.DecodeMessage(req); err != nil {
			t.Fatal(err)
		}
		msg, err := jsonrpc.DecodeMessage(res)
		if err != nil {
			t.Fatal(err)
		}
		var out mcp.CallToolResult
		if err := out.UnmarshalJSON(msg.(*jsonrpc.Response).Result); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	// Three decodes at least (two messages and the result, whose content items are
	// decoded once more): unpatched that is 96 KiB or more per round.
	perRound := (after.TotalAlloc - before.TotalAlloc) / rounds
	if perRound >= 32<<10 {
		t.Fatalf("decoding a tools/call request and its result allocates %d bytes: the go-sdk copies each message into a 32 KiB buffer again (is the replace of go-sdk in go.mod gone?)", perRound)
	}
	t.Logf("%d bytes allocated per request, response and result decoded", perRound)
}
