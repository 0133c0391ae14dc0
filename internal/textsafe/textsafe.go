// Package textsafe holds the two rules that keep what a caller sends from reaching a
// reviewer's terminal as anything but text (SEC-2, SEC-3): ids are checked at the edge
// against one printable, bounded alphabet ([CheckID]), and every human (non-JSON)
// output passes through one escaping function ([Field] for a value on a line, [Text]
// for a block of text such as a tool's content).
//
// Why both: validation keeps new ids clean, but rows recorded before it, text from
// tools and remote systems, and audit details still carry whatever they carry; a
// newline in a table cell forges a row, a carriage return or an ANSI escape rewrites
// or erases the ones above it, and a bidirectional override reorders what a person
// reads. Escaping at the output is what makes the audit view trustworthy whatever is
// stored.
//
// It imports nothing of this module.
package textsafe

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// IDAlphabet says in words what [CheckID] accepts, for error messages and docs.
const IDAlphabet = "printable ASCII without spaces (! to ~)"

// CheckID reports why s is not an id: it must be 1 to maxBytes bytes of printable
// ASCII without spaces (0x21 to 0x7E). Control characters, spaces, and every
// non-ASCII character (bidirectional overrides, zero-width and look-alike letters
// among them) are refused: an id is a handle, not prose, and it is printed in tables
// where a space would shift a column. The error names the first offending byte's
// offset, never the id itself (it may be an escape sequence).
func CheckID(s string, maxBytes int) error {
	if s == "" {
		return fmt.Errorf("is empty")
	}
	if len(s) > maxBytes {
		return fmt.Errorf("is %d bytes long; at most %d", len(s), maxBytes)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("has byte 0x%02x at offset %d; an id is %s", c, i, IDAlphabet)
		}
	}
	return nil
}

// Field escapes s for one value on one line of human output (a table cell, a
// key=value pair, a name in a message): every control character (newline and tab
// included), DEL, C1 control, Unicode format character (bidirectional controls,
// zero-width characters), line and paragraph separator, and invalid UTF-8 byte is
// written as a Go escape (\n, \x1b, \u202e, ...), and a backslash as \\, so an
// escaped sequence can never be mistaken for one the value spelled out itself.
// Printable text, non-ASCII letters included, is unchanged.
func Field(s string) string { return escape(s, false) }

// Text escapes a block of text (a tool's content, a remote system's detail, an error
// message) for human output: as Field, except that newlines and tabs are kept, and
// backslashes too (text is shown as the tool wrote it). A carriage return, which
// would rewrite the line a reviewer is reading, is escaped.
func Text(s string) string { return escape(s, true) }

func escape(s string, block bool) string {
	if clean(s, block) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case block && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\\' && !block:
			b.WriteString(`\\`)
		case unsafe(r):
			b.WriteString(strings.Trim(strconv.QuoteRuneToASCII(r), "'"))
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// clean reports whether s needs no escaping (the common case: no allocation).
func clean(s string, block bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			// Non-ASCII: decide rune by rune.
			for _, r := range s[i:] {
				if r == utf8.RuneError || unsafe(r) {
					return false
				}
			}
			return utf8.ValidString(s[i:])
		}
		if c == '\\' && !block || (c < 0x20 || c == 0x7f) && !(block && (c == '\n' || c == '\t')) {
			return false
		}
	}
	return true
}

// unsafe reports whether r may change how a terminal shows the text around it.
func unsafe(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}
