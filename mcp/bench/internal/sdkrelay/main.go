// Command sdkrelay is the benchmark's floor for a Go gateway (issue 20, ../../doc.go): the
// least a gateway built on the go-sdk does, and nothing toolgen adds. It connects one
// go-sdk client session to the upstream (over Streamable HTTP with --upstream-url, or
// over stdio by running the command after --), lists its tools, and serves them over
// Streamable HTTP at /mcp with the SDK's defaults (in-memory sessions), each call
// forwarded as it came and its result returned as it came back: no store, no policy,
// no validation, no identity. toolrun's CPU per call minus the relay's is what the
// pipeline and the host cost; the relay's CPU per call over the upstream's is the ratio
// no gateway on the go-sdk's two hops gets below. Once it listens it prints
// "listening ADDR" on stdout (package serve, as the upstream does); it stops on SIGINT
// or SIGTERM. Like package lookup it must never import toolgen's packages, only the
// go-sdk and the benchmark's serve: it stands for what anyone would write.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/mcp/bench/internal/serve"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen on ADDR (Streamable HTTP at /mcp)")
	upstreamURL := flag.String("upstream-url", "", "the upstream's Streamable HTTP endpoint (else the command after --, over stdio)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *upstreamURL, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "sdkrelay:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addr, upstreamURL string, command []string) error {
	var transport mcp.Transport
	switch {
	case upstreamURL != "":
		// http.DefaultTransport's settings but for its two idle connections per host,
		// as toolrun's client of an operator's server (mcp/upstream): with two, a call
		// that starts while the last one's SSE response is still being closed dials a
		// connection of its own and the pool then drops one (12 µs of the relay's CPU
		// per call at one caller, BENCHMARKS.md), which no floor should pay.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		transport = &mcp.StreamableClientTransport{Endpoint: upstreamURL, HTTPClient: &http.Client{Transport: tr}}
	case len(command) > 0:
		cmd := exec.Command(command[0], command[1:]...)
		cmd.Stderr = os.Stderr
		transport = &mcp.CommandTransport{Command: cmd}
	default:
		return errors.New("no upstream: give --upstream-url or a command after --")
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "bench-relay", Version: "v0"}, nil)
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return fmt.Errorf("connect to the upstream: %w", err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("list the upstream's tools: %w", err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench-relay", Version: "v0"}, nil)
	for _, t := range tools.Tools {
		name := t.Name
		srv.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: req.Params.Arguments})
		})
	}
	return serve.MCP(ctx, addr, srv)
}
