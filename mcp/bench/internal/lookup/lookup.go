// Package lookup is the benchmark's upstream MCP server: one read tool, lookup
// ({"key": string} in, a small structured result out, no I/O). The in-process rig
// (../../rig_test.go) and the upstream process (../upstream) serve this same server, so
// both modes measure the same tool. It must never import toolgen's packages: it stands
// for a third party's server.
package lookup

import (
	"context"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// In and Out are the tool's input and output.
type In struct {
	Key string `json:"key" jsonschema:"the key to look up"`
}

type Out struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Length int    `json:"length"`
}

// ValueOf is what lookup answers for key; the checks look for it in results.
func ValueOf(key string) string { return "value-of-" + key }

// NewServer returns the server; execs, when not nil, counts the tool's executions.
func NewServer(execs *atomic.Int64) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "bench-upstream", Version: "v0"}, nil)
	mcp.AddTool(s, &mcp.Tool{
		Name: "lookup", Description: "Look a key up (no I/O).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, func(_ context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		if execs != nil {
			execs.Add(1)
		}
		return nil, Out{Key: in.Key, Value: ValueOf(in.Key), Length: len(in.Key)}, nil
	})
	return s
}
