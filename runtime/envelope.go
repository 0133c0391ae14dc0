package runtime

import (
	"html"
	"regexp"
	"strings"
)

const (
	envelopeTag   = "untrusted-content"
	envelopeClose = "</" + envelopeTag + ">"
)

// markerTail follows "<" (or its escaped form) in a marker-like sequence.
const markerTail = `(?i:[\s\p{Cf}]*/?[\s\p{Cf}]*untrusted[-_\s\p{Cf}]*content)`

var (
	// markerRE matches a raw marker ("<" + tail) or an escaped one ("&" + k×"amp;" +
	// "lt;" + tail): what neutralize escapes.
	markerRE = regexp.MustCompile(`(?:<|&((?:amp;)*)lt;)` + markerTail)
	// escapedRE matches the escaped forms Envelope writes.
	escapedRE = regexp.MustCompile(`&((?:amp;)*)lt;(` + markerTail + `)`)
	// openRE matches the opening tag Envelope writes.
	openRE = regexp.MustCompile(`^<untrusted-content trust="([^"]*)"(?: source="([^"]*)")?>\n`)
)

// Enveloped reports whether text labelled t is wrapped in a trust envelope: every label
// below tool, including an unknown one.
func Enveloped(t Trust) bool { return t.Rank() == 0 }

// Envelope wraps text from source in a trust envelope when trust calls for one, and
// returns it unchanged for system, user and tool text. source names where the text came
// from, e.g. a tool name; it may be empty.
//
// The trust envelope (RT-6, RT-7, ADR-0021 decisions 12 and 13) marks text the platform
// did not write and does not vouch for, so that a model reading it can tell data from
// narration. Text labelled external_untrusted (or carrying a label the runtime does not
// know, which ranks the same) is wrapped as:
//
//	<untrusted-content trust="external_untrusted" source="mcp.github.create_issue">
//	...the text, neutralized...
//	</untrusted-content>
//
// Exactly one "\n" follows the opening tag and one precedes the closing tag, whatever the
// text ends with, so the wrapper is a fixed prefix and suffix ([EnvelopeOverhead]). The
// source attribute is omitted when source is empty; its value is HTML-escaped (and tab,
// CR and LF written as numeric references), so it cannot end the tag. The trust
// attribute is always "external_untrusted": the envelope never claims more.
//
// # Neutralization
//
// The enveloped text must not be able to close the envelope, or to open one that looks
// like the platform's. Every marker-like sequence in it is escaped before wrapping. A
// marker is "<", then optional whitespace or invisible format characters (Unicode Cf, e.g.
// a zero-width space), an optional "/", more of the same, then "untrusted", any run of
// "-", "_", whitespace or Cf, and "content" — letters matched case-insensitively (Unicode
// simple folding). Its "<" is written as "&lt;":
//
//	</untrusted-content>   becomes   &lt;/untrusted-content>
//	< UNTRUSTED_content    becomes   &lt; UNTRUSTED_content
//
// The rest of the text is left as it is (no general HTML escaping: a model reads it
// verbatim). To keep the scheme reversible, text that already spells an escaped marker,
// "&" + k×"amp;" + "lt;" + the same tail, gets one more "amp;"; [ParseEnvelope] undoes
// both. Escaping grows the text by 3 or 4 bytes per marker, each at least 17 bytes long.
//
// Neutralization is a defence in depth for one well-defined attack (forging the delimiter);
// it does not claim to catch every lookalike (a fullwidth "＜" is left alone), and the
// label, not the text, is what policy reads.
//
// # Order with excerpts
//
// The pipeline excerpts raw item text first ([Excerpt], [ExcerptResult]) and envelopes
// the excerpt afterwards, so an excerpt can never cut an envelope in half.
func Envelope(trust Trust, source, text string) string {
	if !Enveloped(trust) {
		return text
	}
	body := neutralize(text)
	var b strings.Builder
	b.Grow(len(body) + EnvelopeOverhead(trust, source))
	b.WriteString(openTag(source))
	b.WriteString(body)
	b.WriteString("\n" + envelopeClose)
	return b.String()
}

// EnvelopeOverhead is how many bytes [Envelope] adds around text for this trust and source,
// not counting neutralization (at most 4 bytes per marker-like sequence in the text). It is
// 0 when trust does not call for an envelope.
func EnvelopeOverhead(trust Trust, source string) int {
	if !Enveloped(trust) {
		return 0
	}
	return len(openTag(source)) + len("\n"+envelopeClose)
}

// EnvelopeItem returns it with its text enveloped according to its own trust label.
func EnvelopeItem(it Item, source string) Item {
	it.Text = Envelope(it.Trust, source, it.Text)
	return it
}

// ParseEnvelope reverses [Envelope]: the trust label, source and original text of an
// enveloped string. ok is false when s is not exactly one envelope as Envelope writes it.
func ParseEnvelope(s string) (trust Trust, source, text string, ok bool) {
	m := openRE.FindStringSubmatchIndex(s)
	if m == nil || !strings.HasSuffix(s, "\n"+envelopeClose) || len(s) < m[1]+len("\n"+envelopeClose) {
		return "", "", "", false
	}
	trust = Trust(html.UnescapeString(s[m[2]:m[3]]))
	if m[4] >= 0 {
		source = html.UnescapeString(s[m[4]:m[5]])
	}
	body := s[m[1] : len(s)-len("\n"+envelopeClose)]
	if rawMarker(body) {
		// A marker inside that was not escaped: not something Envelope wrote.
		return "", "", "", false
	}
	return trust, source, unneutralize(body), true
}

// rawMarker reports whether body has a marker that starts with "<".
func rawMarker(body string) bool {
	for _, m := range markerRE.FindAllStringIndex(body, -1) {
		if body[m[0]] == '<' {
			return true
		}
	}
	return false
}

func openTag(source string) string {
	if source == "" {
		return `<` + envelopeTag + ` trust="` + string(TrustExternalUntrusted) + `">` + "\n"
	}
	return `<` + envelopeTag + ` trust="` + string(TrustExternalUntrusted) + `" source="` + escapeAttr(source) + `">` + "\n"
}

var attrEscaper = strings.NewReplacer("\t", "&#9;", "\n", "&#10;", "\r", "&#13;")

func escapeAttr(s string) string { return attrEscaper.Replace(html.EscapeString(s)) }

// neutralize escapes every marker-like sequence in text (see [Envelope]).
func neutralize(text string) string {
	if !strings.Contains(text, "<") && !strings.Contains(text, "&") {
		return text
	}
	return markerRE.ReplaceAllStringFunc(text, func(m string) string {
		if m[0] == '<' {
			return "&lt;" + m[1:]
		}
		return "&amp;" + m[1:] // "&" + k×"amp;" + ... -> one more "amp;"
	})
}

// unneutralize is the inverse of neutralize.
func unneutralize(body string) string {
	if !strings.Contains(body, "&") {
		return body
	}
	return escapedRE.ReplaceAllStringFunc(body, func(m string) string {
		if strings.HasPrefix(m, "&lt;") {
			return "<" + m[len("&lt;"):]
		}
		return "&" + m[len("&amp;"):]
	})
}
