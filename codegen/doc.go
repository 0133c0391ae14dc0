// Package codegen turns a checked spec tree into Go source and the catalog (GEN-1..4):
// one file per tool (typed Args and Result, enum types, the input and output JSON
// Schema, the runtime.ToolSpec value and the adapter from the author's implementation
// to runtime.Tool), one registry file and catalog.json. Its central job is GEN-2: for
// a tool that is not idempotent the author writes Prepare and Commit, and the
// generated adapter records the effect watermark between them, so a tool cannot skip
// it and still compile.
//
// Output is built with github.com/dave/jennifer, gofmt'd, and deterministic: tools are
// visited in the tree's sorted order and fields in declaration order, never by ranging
// over a map. [Sync] writes a file only when its bytes change and removes the files of
// deleted specs, so `go generate` leaves mtimes alone and `toolgen generate -check`
// can name stale files.
//
// codegen depends on spec and the standard library (plus jennifer) only. It must never
// import runtime: it emits runtime's import path as text, so generating code does not
// link the pipeline, and a broken runtime cannot stop the generator that would fix
// it. Nor may it import mcp or a store package (runtime/store and its drivers).
package codegen
