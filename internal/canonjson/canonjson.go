// Package canonjson is the one canonical JSON of toolgen (RFC 8785, see below): the
// bytes every hash and key is computed over — the idempotency key and the breaker's
// arguments hash (RT-5), a tool's definition hash (schema_sha256) whether toolgen or
// the MCP adapter computes it, the derived call ids. One encoder, so that the same
// value always hashes the same wherever it is hashed.
//
// It imports the standard library only; every other package of toolgen may import it.
package canonjson

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// Canonical JSON (RT-5): the bytes the idempotency key and the breaker's args hash are
// computed over. Two documents give the same bytes exactly when they mean the same
// JSON value, whatever their key order, whitespace, escapes or number spelling.
//
// The encoding is RFC 8785 (JSON Canonicalization Scheme) with one deliberate
// difference in numbers:
//
//   - Objects: members sorted by their (unescaped) names compared as UTF-16 code
//     units, as RFC 8785 section 3.2.3 says, so that implementations in other
//     languages produce the same order. For names without characters above U+FFFF
//     this is the same as sorting their UTF-8 bytes. A name that appears twice in one
//     object is an error (RFC 8785 requires I-JSON, which forbids duplicates; and a
//     duplicate would be read differently by different decoders).
//   - No whitespace between tokens.
//   - Strings: the characters themselves, except " and \ (escaped as \" and \\),
//     U+0008, U+0009, U+000A, U+000C and U+000D (\b, \t, \n, \f, \r) and the other
//     control characters below U+0020 (\u00XX, lower-case hex), as RFC 8785 section
//     3.2.2.2 says. "/" and U+2028/U+2029 are not escaped. Input escapes are decoded
//     first, so "\u0041" and "A" are the same string. Invalid UTF-8 and lone UTF-16
//     surrogates (\ud800 not followed by a low surrogate) are errors, never replaced:
//     replacing would make two different inputs collide.
//   - Numbers: the exact decimal value of the literal, printed in the notation of
//     ECMAScript's Number.prototype.toString (the notation RFC 8785 uses): no
//     exponent for values in [1e-6, 1e21), "e+N"/"e-N" otherwise, no trailing zeros
//     in the fraction, -0 as 0. So 1, 1.0, 1e0, 10e-1 and 0.1e1 all give 1, and
//     100000000000000000000000 and 1e23 both give 1e+23.
//     Unlike RFC 8785 the value is never rounded to a float64: the digits of the
//     literal are kept, so integers beyond 2^53 keep their exact digits
//     (9007199254740993 stays 9007199254740993) and two numbers give the same bytes
//     if and only if they are the same decimal number. For every number an
//     encoder produces from a float64 (Go's encoding/json, JavaScript's
//     JSON.stringify and every other shortest-round-trip encoder), whose digits are
//     already the shortest ones, this is exactly RFC 8785's output.
//     A number whose magnitude exceeds the largest float64 is an error (I-JSON, and
//     no JSON decoder of a tool could read it); so is one whose decimal exponent is
//     below -[canonicalMinExponent] (a bound against absurd inputs, far below any
//     float64).
//   - Nesting deeper than [MaxDepth] arrays and objects is an error.
//   - Exactly one JSON value, optionally surrounded by JSON whitespace.
//
// The canonical output of a canonical document is itself (canonicalization is
// idempotent), and it is always valid JSON.

// MaxDepth bounds the nesting of arrays and objects CanonicalJSON accepts.
const MaxDepth = 128

// canonicalMinExponent bounds how small a non-zero number may be: its decimal exponent
// (in d.ddd×10^x form) must be at least -canonicalMinExponent.
const canonicalMinExponent = 99999

// errCanonical is wrapped by every CanonicalJSON error.
var errCanonical = errors.New("canonical JSON")

// Canonical returns the canonical form of the JSON document raw (see the rules
// above). It allocates only the result.
func Canonical(raw []byte) ([]byte, error) {
	return Append(make([]byte, 0, len(raw)), raw)
}

// Append appends the canonical form of raw to dst and returns the
// extended buffer. On error dst is returned unchanged in length.
func Append(dst, raw []byte) ([]byte, error) {
	c := canonPool.Get().(*canonicalizer)
	c.in, c.pos, c.out = raw, 0, dst
	start := len(dst)
	err := c.document()
	out := c.out
	c.reset()
	canonPool.Put(c)
	if err != nil {
		return out[:start], err
	}
	return out, nil
}

var canonPool = sync.Pool{New: func() any { return new(canonicalizer) }}

// canonicalizer is one pass over a document. Its scratch buffers are kept in a pool,
// so a call allocates nothing but the output's growth.
type canonicalizer struct {
	in  []byte
	pos int
	out []byte

	members []canonMember // a stack: every open object's members, innermost last
	keys    []byte        // the unescaped member names of members, concatenated
	scratch []byte        // the members of an object being reordered
	digits  []byte        // the significant digits of the number being read
}

// canonMember is one object member already written to out.
type canonMember struct {
	keyOff, keyEnd int // its unescaped name, in keys
	start, end     int // `"name":value`, in out
}

func (c *canonicalizer) reset() {
	c.in, c.out = nil, nil
	// Keep the scratch space unless one huge document grew it.
	if cap(c.members) > 4096 {
		c.members = nil
	}
	if cap(c.keys) > 64<<10 {
		c.keys = nil
	}
	if cap(c.scratch) > 64<<10 {
		c.scratch = nil
	}
	c.members, c.keys, c.scratch, c.digits = c.members[:0], c.keys[:0], c.scratch[:0], c.digits[:0]
}

func (c *canonicalizer) errorf(format string, a ...any) error {
	return fmt.Errorf("%w: offset %d: %s", errCanonical, c.pos, fmt.Sprintf(format, a...))
}

func (c *canonicalizer) document() error {
	c.skipSpace()
	if c.pos >= len(c.in) {
		return c.errorf("no JSON value")
	}
	if err := c.value(0); err != nil {
		return err
	}
	c.skipSpace()
	if c.pos < len(c.in) {
		return c.errorf("unexpected %q after the JSON value", c.in[c.pos])
	}
	return nil
}

func (c *canonicalizer) skipSpace() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *canonicalizer) value(depth int) error {
	if c.pos >= len(c.in) {
		return c.errorf("unexpected end of input")
	}
	switch b := c.in[c.pos]; {
	case b == '{':
		if depth >= MaxDepth {
			return c.errorf("nesting deeper than %d", MaxDepth)
		}
		return c.object(depth + 1)
	case b == '[':
		if depth >= MaxDepth {
			return c.errorf("nesting deeper than %d", MaxDepth)
		}
		return c.array(depth + 1)
	case b == '"':
		c.out = append(c.out, '"')
		if err := c.str(false); err != nil {
			return err
		}
		c.out = append(c.out, '"')
		return nil
	case b == '-' || b >= '0' && b <= '9':
		return c.number()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	default:
		return c.errorf("unexpected %q", b)
	}
}

func (c *canonicalizer) literal(lit string) error {
	if len(c.in)-c.pos < len(lit) || string(c.in[c.pos:c.pos+len(lit)]) != lit {
		return c.errorf("invalid literal (expected %s)", lit)
	}
	c.pos += len(lit)
	c.out = append(c.out, lit...)
	return nil
}

func (c *canonicalizer) array(depth int) error {
	c.pos++ // [
	c.out = append(c.out, '[')
	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		c.out = append(c.out, ']')
		return nil
	}
	for {
		c.skipSpace()
		if err := c.value(depth); err != nil {
			return err
		}
		c.skipSpace()
		if c.pos >= len(c.in) {
			return c.errorf("unexpected end of input in an array")
		}
		switch c.in[c.pos] {
		case ',':
			c.pos++
			c.out = append(c.out, ',')
		case ']':
			c.pos++
			c.out = append(c.out, ']')
			return nil
		default:
			return c.errorf("unexpected %q in an array", c.in[c.pos])
		}
	}
}

func (c *canonicalizer) object(depth int) error {
	c.pos++ // {
	c.out = append(c.out, '{')
	objStart := len(c.out)
	base := len(c.members)
	keysBase := len(c.keys)
	defer func() {
		c.members = c.members[:base]
		c.keys = c.keys[:keysBase]
	}()
	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
		c.out = append(c.out, '}')
		return nil
	}
	sorted := true
	for {
		c.skipSpace()
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			return c.errorf("expected a member name")
		}
		if len(c.members) > base {
			c.out = append(c.out, ',')
		}
		m := canonMember{start: len(c.out), keyOff: len(c.keys)}
		c.out = append(c.out, '"')
		if err := c.str(true); err != nil {
			return err
		}
		c.out = append(c.out, '"', ':')
		m.keyEnd = len(c.keys)
		if len(c.members) > base {
			prev := &c.members[len(c.members)-1]
			switch compareUTF16(c.keys[prev.keyOff:prev.keyEnd], c.keys[m.keyOff:m.keyEnd]) {
			case 0:
				return c.errorf("duplicate member name %q", c.keys[m.keyOff:m.keyEnd])
			case 1:
				sorted = false
			}
		}
		c.skipSpace()
		if c.pos >= len(c.in) || c.in[c.pos] != ':' {
			return c.errorf("expected ':' after a member name")
		}
		c.pos++
		c.skipSpace()
		if err := c.value(depth); err != nil {
			return err
		}
		m.end = len(c.out)
		c.members = append(c.members, m)
		c.skipSpace()
		if c.pos >= len(c.in) {
			return c.errorf("unexpected end of input in an object")
		}
		if c.in[c.pos] == ',' {
			c.pos++
			continue
		}
		if c.in[c.pos] != '}' {
			return c.errorf("unexpected %q in an object", c.in[c.pos])
		}
		c.pos++
		break
	}
	if !sorted {
		if err := c.reorder(objStart, c.members[base:]); err != nil {
			return err
		}
	}
	c.out = append(c.out, '}')
	return nil
}

// reorder rewrites the members of the object whose body starts at objStart in out in
// sorted order, and rejects duplicate names.
func (c *canonicalizer) reorder(objStart int, ms []canonMember) error {
	keys := c.keys
	cmp := func(a, b canonMember) int { return compareUTF16(keys[a.keyOff:a.keyEnd], keys[b.keyOff:b.keyEnd]) }
	if len(ms) <= 16 {
		for i := 1; i < len(ms); i++ {
			for j := i; j > 0 && cmp(ms[j-1], ms[j]) > 0; j-- {
				ms[j-1], ms[j] = ms[j], ms[j-1]
			}
		}
	} else {
		slices.SortFunc(ms, cmp)
	}
	for i := 1; i < len(ms); i++ {
		if cmp(ms[i-1], ms[i]) == 0 {
			return c.errorf("duplicate member name %q", keys[ms[i].keyOff:ms[i].keyEnd])
		}
	}
	c.scratch = append(c.scratch[:0], c.out[objStart:]...)
	c.out = c.out[:objStart]
	for i, m := range ms {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, c.scratch[m.start-objStart:m.end-objStart]...)
	}
	return nil
}

// compareUTF16 compares two valid UTF-8 strings by their UTF-16 code units
// (RFC 8785 section 3.2.3). It differs from a byte comparison only when the first
// differing characters are one above U+FFFF and one in U+E000..U+FFFF.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		switch {
		case len(a) < len(b):
			return -1
		case len(a) > len(b):
			return 1
		}
		return 0
	}
	if a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf {
		if a[i] < b[i] {
			return -1
		}
		return 1
	}
	// The strings share a[:i], so a rune that starts there starts in both.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	ua, ub := utf16Lead(ra), utf16Lead(rb)
	if ua == ub { // two runes above U+FFFF with the same high surrogate
		ua, ub = ra, rb
	}
	if ua < ub {
		return -1
	}
	return 1
}

// utf16Lead is the first UTF-16 code unit of r.
func utf16Lead(r rune) rune {
	if r < 0x10000 {
		return r
	}
	hi, _ := utf16.EncodeRune(r)
	return hi
}

const canonHexDigits = "0123456789abcdef"

// str reads a string whose opening quote is at c.pos and writes its canonical
// escaped content (without quotes) to out; with key, it also appends the unescaped
// content to c.keys.
func (c *canonicalizer) str(key bool) error {
	c.pos++ // "
	in := c.in
	for {
		// Copy the run of characters that need no work.
		start := c.pos
		for c.pos < len(in) {
			b := in[c.pos]
			if b < 0x20 || b == '"' || b == '\\' || b >= utf8.RuneSelf {
				break
			}
			c.pos++
		}
		if c.pos > start {
			c.out = append(c.out, in[start:c.pos]...)
			if key {
				c.keys = append(c.keys, in[start:c.pos]...)
			}
		}
		if c.pos >= len(in) {
			return c.errorf("unterminated string")
		}
		b := in[c.pos]
		switch {
		case b == '"':
			c.pos++
			return nil
		case b < 0x20:
			return c.errorf("control character %#02x in a string", b)
		case b >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(in[c.pos:])
			if r == utf8.RuneError && size <= 1 {
				return c.errorf("invalid UTF-8 in a string")
			}
			c.out = append(c.out, in[c.pos:c.pos+size]...)
			if key {
				c.keys = append(c.keys, in[c.pos:c.pos+size]...)
			}
			c.pos += size
		default: // backslash
			r, err := c.escape()
			if err != nil {
				return err
			}
			c.writeRune(r)
			if key {
				c.keys = utf8.AppendRune(c.keys, r)
			}
		}
	}
}

// escape decodes the escape sequence at c.pos.
func (c *canonicalizer) escape() (rune, error) {
	in := c.in
	if c.pos+1 >= len(in) {
		return 0, c.errorf("unterminated escape")
	}
	e := in[c.pos+1]
	c.pos += 2
	switch e {
	case '"', '\\', '/':
		return rune(e), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r, ok := canonHex4(in, c.pos)
		if !ok {
			return 0, c.errorf("invalid \\u escape")
		}
		c.pos += 4
		if !utf16.IsSurrogate(r) {
			return r, nil
		}
		if r < 0xdc00 && c.pos+6 <= len(in) && in[c.pos] == '\\' && in[c.pos+1] == 'u' {
			if lo, ok := canonHex4(in, c.pos+2); ok && lo >= 0xdc00 && lo <= 0xdfff {
				c.pos += 6
				return utf16.DecodeRune(r, lo), nil
			}
		}
		return 0, c.errorf("lone UTF-16 surrogate \\u%04x", r)
	}
	return 0, c.errorf("invalid escape \\%c", e)
}

func canonHex4(in []byte, at int) (rune, bool) {
	if at+4 > len(in) {
		return 0, false
	}
	var r rune
	for _, b := range in[at : at+4] {
		switch {
		case b >= '0' && b <= '9':
			r = r<<4 | rune(b-'0')
		case b >= 'a' && b <= 'f':
			r = r<<4 | rune(b-'a'+10)
		case b >= 'A' && b <= 'F':
			r = r<<4 | rune(b-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// writeRune writes r to out as RFC 8785 escapes it.
func (c *canonicalizer) writeRune(r rune) {
	switch r {
	case '"':
		c.out = append(c.out, '\\', '"')
	case '\\':
		c.out = append(c.out, '\\', '\\')
	case '\b':
		c.out = append(c.out, '\\', 'b')
	case '\f':
		c.out = append(c.out, '\\', 'f')
	case '\n':
		c.out = append(c.out, '\\', 'n')
	case '\r':
		c.out = append(c.out, '\\', 'r')
	case '\t':
		c.out = append(c.out, '\\', 't')
	default:
		if r < 0x20 {
			c.out = append(c.out, '\\', 'u', '0', '0', canonHexDigits[r>>4], canonHexDigits[r&0xf])
			return
		}
		c.out = utf8.AppendRune(c.out, r)
	}
}

// number reads a number and writes its canonical form.
func (c *canonicalizer) number() error {
	in := c.in
	start := c.pos
	neg := false
	if in[c.pos] == '-' {
		neg = true
		c.pos++
	}
	// Integer part.
	intStart := c.pos
	if c.pos >= len(in) || in[c.pos] < '0' || in[c.pos] > '9' {
		return c.errorf("invalid number")
	}
	if in[c.pos] == '0' {
		c.pos++
	} else {
		for c.pos < len(in) && in[c.pos] >= '0' && in[c.pos] <= '9' {
			c.pos++
		}
	}
	intEnd := c.pos
	// Fraction.
	fracStart, fracEnd := c.pos, c.pos
	if c.pos < len(in) && in[c.pos] == '.' {
		c.pos++
		fracStart = c.pos
		for c.pos < len(in) && in[c.pos] >= '0' && in[c.pos] <= '9' {
			c.pos++
		}
		fracEnd = c.pos
		if fracEnd == fracStart {
			return c.errorf("invalid number: no digits after '.'")
		}
	}
	// Exponent, kept within bounds while it is read: beyond them the number is
	// rejected below (or is zero) whatever the exact value.
	exp := 0
	if c.pos < len(in) && (in[c.pos] == 'e' || in[c.pos] == 'E') {
		c.pos++
		expNeg := false
		if c.pos < len(in) && (in[c.pos] == '+' || in[c.pos] == '-') {
			expNeg = in[c.pos] == '-'
			c.pos++
		}
		expStart := c.pos
		for c.pos < len(in) && in[c.pos] >= '0' && in[c.pos] <= '9' {
			if exp < 1<<40 {
				exp = exp*10 + int(in[c.pos]-'0')
			}
			c.pos++
		}
		if c.pos == expStart {
			return c.errorf("invalid number: no digits in the exponent")
		}
		if expNeg {
			exp = -exp
		}
	}
	end := c.pos

	// Significant digits: integer and fraction digits without leading and trailing
	// zeros; the value is 0.d1d2...dk × 10^n (ECMAScript's n).
	buf := append(c.digits[:0], in[intStart:intEnd]...)
	buf = append(buf, in[fracStart:fracEnd]...)
	c.digits = buf
	lead := 0
	for lead < len(buf) && buf[lead] == '0' {
		lead++
	}
	d := buf[lead:]
	for len(d) > 0 && d[len(d)-1] == '0' {
		d = d[:len(d)-1]
	}
	if len(d) == 0 {
		c.out = append(c.out, '0') // 0, -0, 0.0e5 ...
		return nil
	}
	n := (intEnd - intStart) - lead + exp // digits before the point, after the shift
	switch {
	case n-1 > 308:
		return c.errorf("number %s is too large", in[start:end])
	case n-1 == 308:
		if f, err := strconv.ParseFloat(string(in[start:end]), 64); err != nil || f > 1.7976931348623157e308 || f < -1.7976931348623157e308 {
			return c.errorf("number %s is too large", in[start:end])
		}
	case n-1 < -canonicalMinExponent:
		return c.errorf("number %s is too small", in[start:end])
	}
	if neg {
		c.out = append(c.out, '-')
	}
	k := len(d)
	switch {
	case k <= n && n <= 21:
		c.out = append(c.out, d...)
		for i := k; i < n; i++ {
			c.out = append(c.out, '0')
		}
	case 0 < n && n <= 21:
		c.out = append(c.out, d[:n]...)
		c.out = append(c.out, '.')
		c.out = append(c.out, d[n:]...)
	case -6 < n && n <= 0:
		c.out = append(c.out, '0', '.')
		for i := n; i < 0; i++ {
			c.out = append(c.out, '0')
		}
		c.out = append(c.out, d...)
	default:
		c.out = append(c.out, d[0])
		if k > 1 {
			c.out = append(c.out, '.')
			c.out = append(c.out, d[1:]...)
		}
		c.out = append(c.out, 'e')
		if n-1 >= 0 {
			c.out = append(c.out, '+')
		}
		c.out = strconv.AppendInt(c.out, int64(n-1), 10)
	}
	return nil
}
