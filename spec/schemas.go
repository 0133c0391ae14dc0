package spec

import (
	"embed"
	"slices"
)

// The JSON Schemas of the spec file kinds (SPEC-9), for editors: a spec file that
// starts with `# yaml-language-server: $schema=<path to spec/schemas/tool.schema.json>`
// is validated and completed as it is typed. They describe the shape the loader accepts
// (keys, types, enums, name grammar, the per-file conditional rules of SPEC-3, SPEC-4,
// SPEC-7 and POL-2); what needs more than one file or a CEL compiler is left to
// `toolgen check`. schemas_test.go keeps them in step with the loader.
//
//go:embed schemas/*.json
var schemaFiles embed.FS

// FileKinds are the spec file kinds that have a JSON Schema, in the order `toolgen
// schema` lists them.
var FileKinds = []string{"tool", "server", "protocol", "policy", "device", "principals", "notifications"}

// FileSchema returns the JSON Schema (draft 2020-12) of a spec file kind, one of
// [FileKinds], as a fresh copy the caller may keep or change.
func FileSchema(kind string) ([]byte, bool) {
	if !slices.Contains(FileKinds, kind) {
		return nil, false
	}
	b, err := schemaFiles.ReadFile("schemas/" + kind + ".schema.json")
	if err != nil {
		return nil, false
	}
	return b, true
}
