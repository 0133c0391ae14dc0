// Command upstream is the benchmark's upstream server as a process of its own (for
// BenchmarkServeOverheadProcesses and BenchmarkGatewayStdio, see ../../doc.go): the
// server of package lookup, served over Streamable HTTP at /mcp on --addr or, with
// --stdio, over its standard input and output (newline-delimited JSON-RPC). Over HTTP,
// once it listens it prints "listening ADDR" (the address it got, so --addr may ask for
// port 0) on stdout. Over stdio it prints nothing (stdout is the protocol's) and stops
// when its input ends. Either way it stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/mcp/bench/internal/lookup"
	"github.com/toolgen/toolgen/mcp/bench/internal/serve"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen on ADDR (Streamable HTTP at /mcp)")
	stdio := flag.Bool("stdio", false, "serve over stdin/stdout instead of HTTP (--addr is ignored)")
	flag.Parse()
	up := lookup.NewServer(nil)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *stdio {
		// Run returns when the client closes the connection (stdin's EOF) or on a signal.
		if err := up.Run(ctx, &mcp.StdioTransport{}); err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "upstream:", err)
			os.Exit(1)
		}
		return
	}
	if err := serve.MCP(ctx, *addr, up); err != nil {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		os.Exit(1)
	}
}
