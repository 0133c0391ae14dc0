package textsafe

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestField_EscapesWhatMovesTheCursor(t *testing.T) {
	for in, want := range map[string]string{
		"plain-id_1":              "plain-id_1",
		"ana\nFORGED line":        `ana\nFORGED line`,
		"x\r\x1b[2K\x1b[1Aerased": `x\r\x1b[2K\x1b[1Aerased`,
		"tab\there":               `tab\there`,
		"del\x7f c1\u009b":        `del\x7f c1\u009b`,
		"rtl\u202eabc":            `rtl\u202eabc`,
		"zw\u200bsp":              `zw\u200bsp`,
		"ls\u2028ps\u2029":        `ls\u2028ps\u2029`,
		`back\slash`:              `back\\slash`,
		"bad\xffutf8":             `bad\xffutf8`,
		"héllo wörld":             "héllo wörld",
	} {
		if got := Field(in); got != want {
			t.Errorf("Field(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestText_KeepsNewlinesAndTabs(t *testing.T) {
	for in, want := range map[string]string{
		"line 1\nline 2\tcol":    "line 1\nline 2\tcol",
		"a\r\nb":                 `a\r` + "\nb",
		"\x1b]8;;http://x\x07ok": `\x1b]8;;http://x\aok`,
		`C:\path`:                `C:\path`,
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}

// Whatever the input, the output of Field is one line of valid UTF-8 without a
// control or format character.
func FuzzField(f *testing.F) {
	for _, s := range []string{"", "a\nb", "\x1b[31m", "\u202e", "\xff\xfe", `\x1b`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Field(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Field(%q) = %q: not UTF-8", s, out)
		}
		for _, r := range out {
			if unsafe(r) {
				t.Fatalf("Field(%q) = %q keeps %U", s, out, r)
			}
		}
		if Text(s) != s && !strings.ContainsAny(out, `\`) {
			t.Fatalf("Text changed %q but Field escaped nothing", s)
		}
	})
}

func TestCheckID(t *testing.T) {
	for _, ok := range []string{"a", "auto-0123abcd", "auth0|5f1c", "ana@example.com", "urn:x:y", strings.Repeat("x", 256)} {
		if err := CheckID(ok, 256); err != nil {
			t.Errorf("CheckID(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a b", "a\nb", "\x1b[2K", "é", "rtl\u202e", strings.Repeat("x", 257)} {
		if err := CheckID(bad, 256); err == nil {
			t.Errorf("CheckID(%q) accepted it", bad)
		} else if strings.ContainsAny(err.Error(), "\n\x1b") {
			t.Errorf("CheckID(%q) error carries the id: %q", bad, err)
		}
	}
}
