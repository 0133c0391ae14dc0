// Package toolgen holds the builtin tool specs, embedded, so that toolgen and every host
// know them without a copy in the author's tree (HOST-3): a protocol or a policy
// anywhere may name protocol.dispatch or review.approve.
//
// The specs live in tools/ beside their Go implementations, and go:embed reaches only
// files in the embedding package's directory or below, so the embedding package is
// either tools or one above it. It cannot be tools: that package imports gen, the
// generated code, and toolgen (cmd/toolgen -> spec) must build when gen/ is stale or
// broken, because it is what regenerates gen/. So the embed lives here, in the root
// package of the module, which must import nothing but embed: nothing generated and
// nothing that depends on generated code. spec.Builtins parses and checks these files.
package toolgen

import "embed"

// BuiltinSpecs holds tools/*.yaml of this repository, the builtin tool specs, at their
// paths in the repository (tools/<name>.yaml). Read them through spec.Builtins.
//
//go:embed tools/*.yaml
var BuiltinSpecs embed.FS
