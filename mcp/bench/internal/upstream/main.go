// Command upstream is the benchmark's upstream server as a process of its own (for
// BenchmarkServeOverheadProcesses, see ../../doc.go): a go-sdk MCP server with the one
// read tool of rig_test.go, lookup ({"key": string} in, a small structured result out,
// no I/O), served over Streamable HTTP at /mcp on --addr. Once it listens it prints
// "listening ADDR" (the address it got, so --addr may ask for port 0) on stdout. It
// stops on SIGINT or SIGTERM.
//
// The tool is a copy of rig_test.go's (the test package cannot be imported): the two
// must answer alike, "value-of-" + key.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type lookupIn struct {
	Key string `json:"key" jsonschema:"the key to look up"`
}

type lookupOut struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Length int    `json:"length"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen on ADDR (Streamable HTTP at /mcp)")
	flag.Parse()
	up := mcp.NewServer(&mcp.Implementation{Name: "bench-upstream", Version: "v0"}, nil)
	mcp.AddTool(up, &mcp.Tool{
		Name: "lookup", Description: "Look a key up (no I/O).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, func(_ context.Context, _ *mcp.CallToolRequest, in lookupIn) (*mcp.CallToolResult, lookupOut, error) {
		return nil, lookupOut{Key: in.Key, Value: "value-of-" + in.Key, Length: len(in.Key)}, nil
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	fmt.Printf("listening %s\n", ln.Addr())
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		os.Exit(1)
	}
}
