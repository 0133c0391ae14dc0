// Command toolrun hosts toolgen's pipeline with the builtin tools: it serves the
// registry over MCP (stdio or Streamable HTTP) and gives the operator one call, the
// recovery pass, the UNCERTAIN review queue, approvals, the audit log and the catalog.
// See `toolrun help`. A module serving its own tools builds the same program with its
// tools (package host/hostcli; `toolgen host` writes the main).
package main

import (
	"github.com/toolgen/toolgen/host"
	"github.com/toolgen/toolgen/host/hostcli"
)

func main() {
	hostcli.Main(hostcli.Config{Name: "toolrun", Builtins: host.AllBuiltins})
}
