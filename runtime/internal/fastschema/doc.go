// Package fastschema proves, without allocating, that a JSON document satisfies a JSON
// Schema of the subset toolgen generates, so that the pipeline's two validations per
// call (arguments at step 2, the structured result at step 12) do not cost ~60
// allocations each through a reflective validator.
//
// It is a fast path, never the judge: [Validator.Valid] reports true only when the
// document is certainly valid under github.com/google/jsonschema-go's semantics (the
// reference the pipeline uses), and false when it is invalid OR when it cannot tell
// (duplicate keys, invalid UTF-8, a number out of float64 range, nesting deeper than
// [MaxDepth]). On false the caller runs jsonschema-go, which decides and explains. So a
// disagreement can only cost time, except in one direction — fastschema accepting what
// jsonschema-go rejects — which the differential tests and FuzzValid check.
//
// [Compile] accepts the keywords toolgen's generated schemas use and a little more:
// type (one or a list), enum of scalars, minimum, maximum, exclusiveMinimum,
// exclusiveMaximum, minLength, maxLength, pattern, items (one schema), minItems,
// maxItems, properties, required, additionalProperties (a schema or false),
// minProperties, maxProperties, and the annotations ($schema, $comment, title,
// description, default, examples, deprecated, readOnly, writeOnly, format, unknown
// keywords) that no validator checks. Any other keyword ($ref, allOf, const,
// multipleOf, ...) makes Compile return [ErrUnsupported]: the caller then uses
// jsonschema-go alone, as an upstream MCP server's arbitrary schema requires.
//
// fastschema must never import the runtime package or anything that persists: it is a
// pure function of a schema and bytes.
package fastschema
