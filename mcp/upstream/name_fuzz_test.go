package upstream_test

import (
	"strings"
	"testing"

	"github.com/toolgen/toolgen/internal/names"
	"github.com/toolgen/toolgen/mcp/upstream"
)

// segmentOK is SPEC-1's segment grammar, [a-z][a-z0-9]*(_[a-z0-9]+)*, written out byte
// by byte: FuzzNormalizeNameGrammar checks against it rather than against
// names.Segment, so a mistake in that regular expression cannot hide one here.
func segmentOK(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' || s[len(s)-1] == '_' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '_':
			if s[i-1] == '_' {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// referenceNormalize is MCP-1 as DESIGN.md words it, written the slow way: lower-case
// (ASCII only), every run of characters outside [a-z0-9] becomes one "_", trimmed,
// prefixed when it starts with a digit, truncated to the budget (and trimmed again),
// "tool" when nothing is left.
func referenceNormalize(remote string, budget int) string {
	if budget < 1 {
		return ""
	}
	lower := []byte(remote)
	for i, c := range lower {
		if 'A' <= c && c <= 'Z' {
			lower[i] = c + 'a' - 'A'
		}
	}
	var runs []string
	cur := ""
	for _, c := range lower {
		if 'a' <= c && c <= 'z' || '0' <= c && c <= '9' {
			cur += string(rune(c))
			continue
		}
		if cur != "" {
			runs = append(runs, cur)
			cur = ""
		}
	}
	if cur != "" {
		runs = append(runs, cur)
	}
	s := strings.Join(runs, "_")
	if s == "" {
		s = "tool"
	} else if '0' <= s[0] && s[0] <= '9' {
		s = "t_" + s
	}
	if len(s) > budget {
		s = s[:budget]
	}
	return strings.TrimRight(s, "_")
}

// FuzzNormalizeNameGrammar checks MCP-1 for any remote name and any budget: the
// normalized segment satisfies SPEC-1's grammar (checked independently of
// internal/names), fits the budget, is what the rule of DESIGN.md gives, and is the
// same on every call; the full name mcp.{id}.{segment} is at most 64 bytes, has three
// valid segments, and its wire name (dots as "__") maps back to it.
//
//	go test -run XXX -fuzz FuzzNormalizeNameGrammar -fuzztime 60s ./mcp/upstream/
func FuzzNormalizeNameGrammar(f *testing.F) {
	for _, s := range []string{
		"", "echo", "Get-Data", "2fa", "__", "a--b", "ÄÖÜ", "\u212A", "x\x00y", "a_", "_a", "a__b", "\xff\xfe",
		strings.Repeat("A-", 100), "0" + strings.Repeat("9", 80), "tools/call", "日本語のツール",
		"abcdefghi-jklm", "a.b.c", "mcp__x__y", "ﬁle", "İstanbul", "ǅ", "a\u0301b",
	} {
		f.Add(s, 58)
		f.Add(s, 1)
	}
	f.Add("abc-def", 4)
	f.Add("9", 2)
	f.Add("x", 0)
	f.Add("x", -3)
	f.Fuzz(func(t *testing.T, remote string, budget int) {
		if budget > 1<<16 {
			budget = 1 << 16
		}
		seg := upstream.NormalizeName(remote, budget)
		if again := upstream.NormalizeName(remote, budget); again != seg {
			t.Fatalf("NormalizeName(%q, %d) is not deterministic: %q then %q", remote, budget, seg, again)
		}
		if want := referenceNormalize(remote, budget); seg != want {
			t.Fatalf("NormalizeName(%q, %d) = %q, want %q", remote, budget, seg, want)
		}
		if budget < 1 {
			if seg != "" {
				t.Fatalf("NormalizeName(%q, %d) = %q, want empty", remote, budget, seg)
			}
			return
		}
		if len(seg) > budget || !segmentOK(seg) {
			t.Fatalf("NormalizeName(%q, %d) = %q: not a SPEC-1 segment of at most %d bytes", remote, budget, seg, budget)
		}
		for _, id := range []string{"x", "everything", "a1_b2", strings.Repeat("s", 58)} {
			name, err := upstream.ToolName(id, remote)
			if err != nil {
				t.Fatalf("ToolName(%q, %q): %v", id, remote, err)
			}
			parts := strings.Split(name, ".")
			if len(name) > names.MaxBytes || len(parts) != 3 || parts[0] != "mcp" || parts[1] != id || !segmentOK(parts[2]) {
				t.Fatalf("ToolName(%q, %q) = %q: not mcp.%s.<segment> within %d bytes", id, remote, name, id, names.MaxBytes)
			}
			if parts[2] != referenceNormalize(remote, upstream.NameBudget(id)) {
				t.Fatalf("ToolName(%q, %q) = %q, want the segment %q", id, remote, name, referenceNormalize(remote, upstream.NameBudget(id)))
			}
			if wire := names.Wire(name); names.FromWire(wire) != name || strings.Contains(wire, ".") {
				t.Fatalf("wire name %q of %q does not map back", wire, name)
			}
		}
	})
}
