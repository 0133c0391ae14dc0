package fastschema

import (
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Valid reports whether data is one JSON document that certainly satisfies the
// schema. False means invalid or undecided: the caller asks the reference validator.
// Valid does not allocate unless a string has escapes.
func (v *Validator) Valid(data []byte) bool {
	s := scan{data: data}
	s.skipSpace()
	if !s.value(v.root, 0) {
		return false
	}
	s.skipSpace()
	return s.pos == len(s.data)
}

type scan struct {
	data []byte
	pos  int
	buf  []byte // unescaped strings, made on the first escape
}

func (s *scan) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// value consumes one value at s.pos and checks it against n.
func (s *scan) value(n *node, depth int) bool {
	if n.never || s.pos >= len(s.data) || depth > MaxDepth {
		return false
	}
	switch c := s.data[s.pos]; {
	case c == '{':
		return n.allows(tObject) && s.object(n, depth)
	case c == '[':
		return n.allows(tArray) && s.array(n, depth)
	case c == '"':
		str, ok := s.str()
		return ok && n.allows(tString) && n.checkString(str)
	case c == 't':
		return s.literal("true") && n.allows(tBool) && n.inEnum(scalar{kind: tBool, b: true})
	case c == 'f':
		return s.literal("false") && n.allows(tBool) && n.inEnum(scalar{kind: tBool})
	case c == 'n':
		return s.literal("null") && n.allows(tNull) && n.inEnum(scalar{kind: tNull})
	case c == '-' || c >= '0' && c <= '9':
		f, ok := s.number()
		if !ok {
			return false
		}
		t := tNumber
		if _, frac := math.Modf(f); frac == 0 {
			t = tInteger
		}
		return n.allows(t) && n.checkNumber(f)
	}
	return false
}

func (n *node) allows(t uint8) bool { return n.types == 0 || n.types&t != 0 }

func (n *node) inEnum(v scalar) bool {
	if !n.hasEnum {
		return true
	}
	for _, e := range n.enum {
		if e.kind == v.kind && e.b == v.b && e.f == v.f && e.s == v.s {
			return true
		}
	}
	return false
}

func (n *node) checkNumber(f float64) bool {
	if n.hasMin && f < n.min || n.hasMax && f > n.max ||
		n.hasExMin && f <= n.exMin || n.hasExMax && f >= n.exMax {
		return false
	}
	if !n.hasEnum {
		return true
	}
	for _, e := range n.enum {
		if e.kind == tNumber && e.f == f {
			return true
		}
	}
	return false
}

func (n *node) checkString(b []byte) bool {
	if n.minLen >= 0 || n.maxLen >= 0 {
		c := utf8.RuneCount(b)
		if n.minLen >= 0 && c < n.minLen || n.maxLen >= 0 && c > n.maxLen {
			return false
		}
	}
	if n.pattern != nil && !n.pattern.Match(b) {
		return false
	}
	if !n.hasEnum {
		return true
	}
	for _, e := range n.enum {
		if e.kind == tString && e.s == string(b) {
			return true
		}
	}
	return false
}

func (s *scan) literal(lit string) bool {
	if len(s.data)-s.pos < len(lit) || string(s.data[s.pos:s.pos+len(lit)]) != lit {
		return false
	}
	s.pos += len(lit)
	return true
}

func (s *scan) object(n *node, depth int) bool {
	s.pos++ // {
	var seen uint64
	count := 0
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return n.objectDone(seen, 0)
	}
	for {
		s.skipSpace()
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return false
		}
		key, ok := s.str()
		if !ok {
			return false
		}
		s.skipSpace()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return false
		}
		s.pos++
		s.skipSpace()
		count++
		child := n.additional
		if n.checksObjects {
			if i, ok := n.index[string(key)]; ok {
				if seen&(1<<i) != 0 {
					return false // a duplicate: decoders disagree on which one counts
				}
				seen |= 1 << i
				if n.props[i].declared {
					child = n.props[i].schema
				}
			}
		}
		if child == nil {
			child = anyNode
		}
		if !s.value(child, depth+1) {
			return false
		}
		s.skipSpace()
		if s.pos >= len(s.data) {
			return false
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return n.objectDone(seen, count)
		default:
			return false
		}
	}
}

func (n *node) objectDone(seen uint64, count int) bool {
	if n.hasEnum || seen&n.requiredMask != n.requiredMask {
		return false // enum values are scalars; an object never equals one
	}
	return (n.minProps < 0 || count >= n.minProps) && (n.maxProps < 0 || count <= n.maxProps)
}

func (s *scan) array(n *node, depth int) bool {
	s.pos++ // [
	if n.hasEnum {
		return false
	}
	items := n.items
	if items == nil {
		items = anyNode
	}
	count := 0
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return n.arrayDone(0)
	}
	for {
		s.skipSpace()
		if !s.value(items, depth+1) {
			return false
		}
		count++
		s.skipSpace()
		if s.pos >= len(s.data) {
			return false
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return n.arrayDone(count)
		default:
			return false
		}
	}
}

func (n *node) arrayDone(count int) bool {
	return (n.minItems < 0 || count >= n.minItems) && (n.maxItems < 0 || count <= n.maxItems)
}

// str consumes a string and returns its contents: a slice of the input when it has
// no escapes, else the unescaped bytes in s.buf (valid until the next call). Invalid
// UTF-8, control characters and lone surrogates are refused (decoders replace them,
// which the reference validator would then see).
func (s *scan) str() ([]byte, bool) {
	s.pos++ // "
	start := s.pos
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return s.data[start : s.pos-1], true
		case c == '\\':
			s.buf = append(s.buf[:0], s.data[start:s.pos]...)
			return s.escaped()
		case c < 0x20:
			return nil, false
		case c < utf8.RuneSelf:
			s.pos++
		default:
			r, size := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && size == 1 {
				return nil, false
			}
			s.pos += size
		}
	}
	return nil, false
}

func (s *scan) escaped() ([]byte, bool) {
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return s.buf, true
		case c == '\\':
			if s.pos+1 >= len(s.data) {
				return nil, false
			}
			e := s.data[s.pos+1]
			s.pos += 2
			switch e {
			case '"', '\\', '/':
				s.buf = append(s.buf, e)
			case 'b':
				s.buf = append(s.buf, '\b')
			case 'f':
				s.buf = append(s.buf, '\f')
			case 'n':
				s.buf = append(s.buf, '\n')
			case 'r':
				s.buf = append(s.buf, '\r')
			case 't':
				s.buf = append(s.buf, '\t')
			case 'u':
				r, ok := s.hex4()
				if !ok {
					return nil, false
				}
				if utf16.IsSurrogate(r) {
					if !s.literal(`\u`) {
						return nil, false
					}
					lo, ok := s.hex4()
					if !ok {
						return nil, false
					}
					if r = utf16.DecodeRune(r, lo); r == utf8.RuneError {
						return nil, false
					}
				}
				s.buf = utf8.AppendRune(s.buf, r)
			default:
				return nil, false
			}
		case c < 0x20:
			return nil, false
		case c < utf8.RuneSelf:
			s.buf = append(s.buf, c)
			s.pos++
		default:
			r, size := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && size == 1 {
				return nil, false
			}
			s.buf = append(s.buf, s.data[s.pos:s.pos+size]...)
			s.pos += size
		}
	}
	return nil, false
}

func (s *scan) hex4() (rune, bool) {
	if len(s.data)-s.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s.data[s.pos : s.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	s.pos += 4
	return r, true
}

// number consumes a number of JSON's grammar and parses it as encoding/json does.
func (s *scan) number() (float64, bool) {
	start := s.pos
	if s.data[s.pos] == '-' {
		s.pos++
	}
	if s.pos >= len(s.data) {
		return 0, false
	}
	switch c := s.data[s.pos]; {
	case c == '0':
		s.pos++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return 0, false
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if !s.digits() {
			return 0, false
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if !s.digits() {
			return 0, false
		}
	}
	lit := s.data[start:s.pos]
	// The string does not outlive the call; ParseFloat does not retain it.
	f, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(lit), len(lit)), 64)
	return f, err == nil
}

func (s *scan) digits() bool {
	start := s.pos
	for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
		s.pos++
	}
	return s.pos > start
}
