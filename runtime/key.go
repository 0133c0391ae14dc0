package runtime

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// KeyVersion is the version tag hashed first into every key; bump it only with a migration story.
const KeyVersion = "toolgen.idempotency.v1"

// argsHashVersion is the tag hashed first into every [ArgsHash]. It differs from
// [KeyVersion], so an args hash can never equal an idempotency key.
const argsHashVersion = "toolgen.argshash.v1"

// KeyInput is everything the idempotency key is made of (RT-5, ADR-0021 decision 10).
// The attempt number is deliberately absent: a retry reuses the key, so an external
// service's own idempotency mechanism deduplicates it.
type KeyInput struct {
	Tenant, RunID string
	Step          int
	CallID, Tool  string
	ToolVersion   int
	// CanonicalArgs is the output of [CanonicalJSON] for the call's arguments.
	CanonicalArgs []byte
}

// IdempotencyKey returns the call's idempotency key (RT-5): the lower-case hex SHA-256
// of the encoding
//
//	field(KeyVersion) field(Tenant) field(RunID) int(Step) field(CallID) field(Tool)
//	int(ToolVersion) field(CanonicalArgs)
//
// where field(b) is len(b) as an 8-byte big-endian unsigned integer followed by b,
// and int(i) is field of the 8 bytes of int64(i), big-endian two's complement. The
// length prefixes make the encoding injective: ("ab", "c") and ("a", "bc") differ.
// Changing this encoding changes every key, and a key already recorded would no
// longer dedupe its call: that needs a new KeyVersion and a migration.
func IdempotencyKey(in KeyInput) string {
	n := 8*8 + 8*2 + len(KeyVersion) + len(in.Tenant) + len(in.RunID) + len(in.CallID) + len(in.Tool) + len(in.CanonicalArgs)
	var stack [512]byte
	buf := stack[:0]
	if n > len(stack) {
		buf = make([]byte, 0, n)
	}
	buf = keyField(buf, KeyVersion)
	buf = keyField(buf, in.Tenant)
	buf = keyField(buf, in.RunID)
	buf = keyInt(buf, in.Step)
	buf = keyField(buf, in.CallID)
	buf = keyField(buf, in.Tool)
	buf = keyInt(buf, in.ToolVersion)
	buf = keyField(buf, in.CanonicalArgs)
	return keySum(buf)
}

// ArgsHash returns the breaker's identity of a call within a run (RT-8): the lower-case
// hex SHA-256 of field("toolgen.argshash.v1") field(tool) field(canonicalArgs), with
// field as in [IdempotencyKey]. Two calls are identical when they name the same tool
// with the same canonical arguments, whatever their step, call id or tool version.
func ArgsHash(tool string, canonicalArgs []byte) string {
	n := 8*3 + len(argsHashVersion) + len(tool) + len(canonicalArgs)
	var stack [512]byte
	buf := stack[:0]
	if n > len(stack) {
		buf = make([]byte, 0, n)
	}
	buf = keyField(buf, argsHashVersion)
	buf = keyField(buf, tool)
	buf = keyField(buf, canonicalArgs)
	return keySum(buf)
}

func keyField[T string | []byte](buf []byte, s T) []byte {
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(s)))
	return append(buf, s...)
}

func keyInt(buf []byte, i int) []byte {
	buf = binary.BigEndian.AppendUint64(buf, 8)
	return binary.BigEndian.AppendUint64(buf, uint64(int64(i)))
}

func keySum(buf []byte) string {
	sum := sha256.Sum256(buf)
	var h [sha256.Size * 2]byte
	hex.Encode(h[:], sum[:])
	return string(h[:])
}
