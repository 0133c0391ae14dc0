// Package spec is toolgen's build-time model of a spec tree and every check on it: it
// loads tools/*.yaml, servers/*.yaml, devices/*.yaml, protocols/*.yaml, policy.yaml,
// principals.yaml and notifications.yaml from a file system, keeps the source position
// of every key and value, and reports every problem of the whole tree at once.
//
// [LoadFS] returns the [Tree] and its [Diagnostics]: findings in the one annotation
// model of package spec/diag, each at its path:line:col with a stable rule ID of
// [CheckRules] (SPEC-4.enum-duplicate, schema.unknown-key, ...), listed in
// docs/rules.md, each with a testscript that fires it and one that does not. CEL
// expressions (idempotent_when, approval_when, policy rules) are type-checked here
// against the declared arguments, with the library and limits of internal/cellang, and
// their errors are placed at the expression's own line and column in the YAML file.
// The JSON Schemas of the file kinds (SPEC-9) ship in schemas/.
//
// spec is the input of codegen (toolgen generate) and specdiff (toolgen diff). It
// imports only the standard library, the embedded builtin specs, spec/diag and the
// small internal leaves canonjson, cellang and names: never codegen, the runtime, a
// store, mcp or the CLI. Run-time packages are to take their own model from the host,
// not this one (issue 17, point 4).
package spec
