// Package canonjsontest holds what the tests of canonical JSON share: a corpus of
// documents, a respelling of a document that means the same value (other member
// order, whitespace, escapes, number spellings) and an exact comparison of values. The
// tests of internal/canonjson and the idempotency-key fuzzer of runtime use it.
//
// It is for tests only: production code must never import it (TestArchitecture).
package canonjsontest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Corpus: documents that are pairwise different unless they are listed in the
// same group of TestCanonicalJSONCorpus. It seeds the fuzzer.
var Corpus = []string{
	`null`, `true`, `false`, `0`, `-0`, `1`, `-1`, `1.0`, `1e0`, `10e-1`, `2`, `0.1`, `0.10`, `1e-1`,
	`0.30000000000000001`, `0.3`, `9007199254740992`, `9007199254740993`, `9007199254740993.0`,
	`1e21`, `1000000000000000000000`, `1e400`, `1e308`, `1e-400`,
	`""`, `"a"`, `"\u0061"`, `"A"`, `"\u00e9"`, `"é"`, "\"e\u0301\"", `"\ud83d\ude00"`, `"😀"`, `"\/"`, `"/"`,
	`"1"`, `"true"`, `"null"`, `"\u0000"`, `"\n"`, `"\\n"`,
	`[]`, `{}`, `[null]`, `[[]]`, `[{}]`, `{"":null}`, `[1,2]`, `[2,1]`, `[1,[2]]`, `[[1],2]`,
	`{"a":1}`, `{"a":1.0}`, `{"a":"1"}`, `{"A":1}`, `{"a":1,"b":2}`, `{"b":2,"a":1}`, `{"a":2,"b":1}`,
	`{"a":{"b":1}}`, `{"a.b":1}`, `{"a":[1]}`, `{"ab":1}`, `{"a":1,"b":null}`,
	`{"a":1,"a":1}`, "{\"\xff\":1}", `0e010000000000000000000`, `-0.000e-99999999999999999999`, `1e-99999`,
	` { "path" : "src/main.go", "max_bytes" : 65536.0, "tags": ["x", "y"], "opts": {"z": true, "a": null} } `,
	`{"path":"src/main.go","max_bytes":65536,"tags":["x","y"],"opts":{"a":null,"z":true}}`,
	`{"path":"src/main.go","max_bytes":65536,"tags":["y","x"],"opts":{"a":null,"z":true}}`,
}

func DecodeExact(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// SemanticEqual compares two JSON documents as values: numbers as exact decimals.
func SemanticEqual(t *testing.T, a, b []byte) bool {
	return valueEqual(DecodeExact(t, a), DecodeExact(t, b))
}

func valueEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !valueEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !valueEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		return ok && decimalKey(string(x)) == decimalKey(string(y))
	default:
		return a == b
	}
}

// decimalKey is the exact value of a JSON number as sign, significant digits and
// the exponent of the last digit (any size): equal keys, equal values.
func decimalKey(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, exp, _ := strings.Cut(strings.ToLower(s), "e")
	e := new(big.Int)
	if exp != "" {
		e.SetString(strings.TrimPrefix(exp, "+"), 10)
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	e.Sub(e, big.NewInt(int64(len(frac))))
	for strings.HasSuffix(digits, "0") {
		digits = digits[:len(digits)-1]
		e.Add(e, big.NewInt(1))
	}
	if digits == "" {
		return "0"
	}
	sign := "+"
	if neg {
		sign = "-"
	}
	return sign + digits + "e" + e.String()
}

// respell writes the document src again with its object members shuffled, random
// whitespace, random \u escapes and each number spelled another way.
func Respell(t *testing.T, rng *rand.Rand, src []byte) []byte {
	var b bytes.Buffer
	ws := func() {
		for range rng.Intn(3) {
			b.WriteByte(" \t\r\n"[rng.Intn(4)])
		}
	}
	str := func(s string) {
		b.WriteByte('"')
		for _, r := range s {
			switch {
			case r == '"' || r == '\\' || r < 0x20 || rng.Intn(4) == 0:
				if r >= 0x10000 {
					r -= 0x10000
					fmt.Fprintf(&b, `\u%04X\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
				} else if r == '/' && rng.Intn(2) == 0 {
					b.WriteString(`\/`)
				} else {
					fmt.Fprintf(&b, `\u%04x`, r)
				}
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte('"')
	}
	var val func(v any)
	val = func(v any) {
		ws()
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			b.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					b.WriteByte(',')
				}
				ws()
				str(k)
				ws()
				b.WriteByte(':')
				val(x[k])
			}
			ws()
			b.WriteByte('}')
		case []any:
			b.WriteByte('[')
			for i, e := range x {
				if i > 0 {
					b.WriteByte(',')
				}
				val(e)
			}
			ws()
			b.WriteByte(']')
		case string:
			str(x)
		case json.Number:
			b.WriteString(respellNumber(rng, string(x)))
		default:
			b.WriteString(MustMarshal(t, x))
		}
		ws()
	}
	val(DecodeExact(t, src))
	return b.Bytes()
}

// respellNumber writes the same decimal value differently.
func respellNumber(rng *rand.Rand, s string) string {
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	if !hasExp {
		exp = "0"
	}
	switch rng.Intn(3) {
	case 0:
		if !strings.Contains(mant, ".") {
			mant += ".0"
		} else {
			mant += "0"
		}
		return mant + "E" + exp
	case 1:
		// Multiply an integer mantissa by ten and compensate in the exponent.
		e, err := strconv.Atoi(exp)
		if err != nil || strings.Contains(mant, ".") || strings.TrimPrefix(mant, "-") == "0" {
			return s
		}
		return mant + "0e" + strconv.Itoa(e-1)
	}
	return s
}

const BenchArgs = `{"path": "src/internal/handlers/user_profile.go", "max_bytes": 65536, "offset": 0,
 "options": {"follow_symlinks": false, "encoding": "utf-8", "ranges": [[0, 100], [200, 300.5]]},
 "tags": ["review", "release/1.2", "caf\u00e9"], "note": "line one\nline \"two\""}`

// MustMarshal is v's JSON, or the end of the test.
func MustMarshal(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
