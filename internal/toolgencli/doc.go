// Package toolgencli is the toolgen command line: flags, output and exit codes, and
// nothing else. The checks live in spec and the generator in codegen. It is a package
// rather than code in cmd/toolgen so the testscripts run it in-process.
//
// A file per command (check.go, generate.go, diff.go, host.go, schema.go), each with a
// struct of its flags bound to its flag.FlagSet; cli.go holds the dispatch, version and
// the helpers they share. The exit codes and the interleaved flag parser are
// internal/cli's, shared with host/hostcli.
//
// It must never import runtime (generated code does; the generator does not need it),
// mcp or a store driver.
package toolgencli
