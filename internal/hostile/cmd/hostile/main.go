// Command hostile serves the hostile MCP test server (package hostile) over stdio, for
// trying a client against it by hand:
//
//	go run ./internal/hostile/cmd/hostile
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/toolgen/toolgen/internal/hostile"
)

func main() {
	if err := hostile.ServeStdio(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		os.Exit(1)
	}
}
