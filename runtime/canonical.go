package runtime

import "github.com/toolgen/toolgen/internal/canonjson"

// CanonicalMaxDepth bounds the nesting of arrays and objects CanonicalJSON accepts.
const CanonicalMaxDepth = canonjson.MaxDepth

// CanonicalJSON returns the canonical form of the JSON document raw (RT-5): RFC 8785,
// keeping the exact digits of numbers — the rules are internal/canonjson's, the one
// canonical JSON of toolgen, which the idempotency key, the breaker's arguments hash
// and every definition hash are computed over. It allocates only the result.
func CanonicalJSON(raw []byte) ([]byte, error) { return canonjson.Canonical(raw) }

// AppendCanonicalJSON appends the canonical form of raw to dst and returns the
// extended buffer. On error dst is returned unchanged in length.
func AppendCanonicalJSON(dst, raw []byte) ([]byte, error) { return canonjson.Append(dst, raw) }
