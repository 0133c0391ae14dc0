// Package hostcli is the command line of a host: serve the registry over MCP (stdio or
// Streamable HTTP) and the operator's commands around the pipeline — one call, the
// recovery pass, the UNCERTAIN review queue, approvals, the audit log, the catalog,
// the event stream and the device side of the device channel. Every review goes
// through the host's operator service (HOST-2).
//
// toolrun is [Main] with every builtin. A module serving its own tools gets the same
// commands from a main of a few lines (`toolgen host` writes one):
//
//	func main() {
//		hostcli.Main(hostcli.Config{Name: "acme-host", Tools: tools.All(), Builtins: []string{"protocol.dispatch"}})
//	}
//
// Each command is a file (call.go, recover.go, uncertain.go for uncertain and resolve,
// approvals.go for approvals, approve and deny, audit.go, serve.go, catalog.go,
// device.go, events.go) holding a struct of its flags, bound to its flag set; cli.go
// holds the dispatch, the flags every command takes and the helpers they share. The
// exit codes and the parser of flags interleaved with arguments are the ones toolgen
// uses too (internal/cli).
//
// hostcli must never be imported by a library package: it is a leaf, like a main.
package hostcli
