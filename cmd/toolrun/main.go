// Command toolrun hosts toolgen's pipeline: it serves the registry over MCP (stdio or
// Streamable HTTP) and gives the operator one call, the recovery sweep, the UNCERTAIN
// review queue, approvals, the audit log and the catalog. See `toolrun help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolgen/toolgen/internal/toolruncli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := toolruncli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
