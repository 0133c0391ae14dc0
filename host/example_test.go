package host_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/host"
)

// A host end to end: built from a spec root and the tools it serves (here builtins; an
// author passes gen.NewX(impl) values in Tools), served over Streamable HTTP, called
// by an MCP client, a write held for approval and approved through the operator
// service by another principal, then the agent's retry runs it.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, _ := os.MkdirTemp("", "host-example")
	defer os.RemoveAll(dir)
	specs, workspaces := filepath.Join(dir, "spec"), filepath.Join(dir, "workspaces")
	os.Mkdir(specs, 0o755)
	os.Mkdir(workspaces, 0o755)

	h, err := host.New(ctx, host.Config{
		Dir:      specs, // the spec root: tools/, protocols/, policy.yaml, ...
		Builtins: []string{"workspace.list", "workspace.write_text"},
		// Each tenant's agents work in a directory of their own, outside the spec root.
		Workspace:    filepath.Join(workspaces, host.WorkspaceTenant),
		ApprovalHold: 100 * time.Millisecond, // how long a held call waits before answering approval_pending
	})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go h.Serve(ctx, ln) // or h.ListenAndServe(ctx, addr), or h.ServeStdio(ctx, os.Stdin, os.Stdout)

	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + ln.Addr().String() + host.MCPPath}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range tools.Tools {
		fmt.Println("tool:", t.Name)
	}

	// An agent's write of medium risk is held for a person (POL-1).
	write := &mcp.CallToolParams{Name: "workspace__write_text", Arguments: map[string]any{"path": "hello.txt", "text": "hello"}}
	res, err := cs.CallTool(ctx, write)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first call:", res.Content[0].(*mcp.TextContent).Text[:16])
	// The go-sdk client speaks MCP 2026-07-28, which has no sessions: the host handed
	// back the session it opened for the call; the retry names it, so it is the same
	// call (a client at 2025-11-25 is in its Mcp-Session-Id anyway).
	write.Meta = mcp.Meta{"io.toolgen/session_id": res.Meta["io.toolgen/session_id"]}

	// A reviewer approves it through the operator service.
	bob, err := h.Principal("bob")
	if err != nil {
		log.Fatal(err)
	}
	held, err := h.Operator().Approvals(ctx, bob)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := h.Operator().Approve(ctx, bob, held[0].ID, "looks right"); err != nil {
		log.Fatal(err)
	}

	// The agent's retry of the same call finds the approval and runs it, once.
	res, err = cs.CallTool(ctx, write)
	if err != nil {
		log.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(h.WorkspaceFor(host.DefaultTenant, ""), "hello.txt"))
	fmt.Printf("retry: error=%v, hello.txt=%q\n", res.IsError, data)
	// Output:
	// tool: workspace__list
	// tool: workspace__write_text
	// first call: approval_pending
	// retry: error=false, hello.txt="hello"
}
