// Package serve is how the benchmark's own server processes (../upstream, ../sdkrelay)
// serve MCP over HTTP: one go-sdk server at /mcp with the SDK's defaults, the line
// "listening ADDR" once it listens (the rig waits for it), a graceful stop when the
// context ends. Like them it must never import toolgen's packages: they stand for what
// a third party runs.
package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP serves s over Streamable HTTP at /mcp on addr (port 0 picks one) until ctx ends,
// and prints "listening ADDR", the address it got, on stdout once it listens.
func MCP(ctx context.Context, addr string, s *mcp.Server) error {
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	fmt.Printf("listening %s\n", ln.Addr())
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
