// Package scaffold works out and writes the files `toolgen host` leaves in a module
// once: cmd/NAME/main.go, a host program of a few lines over host/hostcli, and, when
// the tools package has no All function yet, tools/all.go listing the module's tools
// adapted by their generated constructors. Unlike codegen's output these files are the
// author's afterwards: toolgen never rewrites them (unless told to with -force), and
// they say so instead of "DO NOT EDIT".
//
// To write them it reads the module without building it: go.mod for the module path,
// the //go:generate lines for the package that runs `toolgen generate` on the spec root
// (the tools package) and where its output goes (the gen package), and the tools
// package's own source, parsed with go/parser and never type-checked, for the type
// implementing each spec (a Run method for an idempotent tool, Prepare for the others,
// with its plan type). Plan types are copied as the author wrote them, with their
// imports, so the files are built as text and gofmt'd rather than through jennifer.
//
// scaffold depends on spec, codegen's constants and the standard library. Like the
// rest of toolgen it must never import runtime, host or gen: it names their import
// paths as text, so that the generator builds when the code it serves does not.
package scaffold
