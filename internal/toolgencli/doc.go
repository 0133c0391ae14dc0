// Package toolgencli is the toolgen command line: flags, output and exit codes, and
// nothing else. The checks live in spec and the generator in codegen. It is a package
// rather than code in cmd/toolgen so the testscripts run it in-process.
//
// It must never import runtime (generated code does; the generator does not need it),
// mcp or a store driver.
package toolgencli
