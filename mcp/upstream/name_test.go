package upstream_test

import (
	"strings"
	"testing"

	"github.com/toolgen/toolgen/internal/names"
	"github.com/toolgen/toolgen/mcp/upstream"
)

func TestNormalizeName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"echo", "echo"},
		{"get-sum", "get_sum"},
		{"Get-Data", "get_data"},
		{"get_data", "get_data"},
		{"  --Weird__Name!!  ", "weird_name"},
		{"camelCaseTool", "camelcasetool"},
		{"a..b", "a_b"},
		{"2fa-check", "t_2fa_check"},
		{"_9lives", "t_9lives"},
		{"", "tool"},
		{"!!!", "tool"},
		{"héllo wörld", "h_llo_w_rld"},
		{"\u212Aelvin", "elvin"}, // the Kelvin sign is not ASCII: not case-folded to k
		{"ÄÖÜ", "tool"},
		{"tools/list", "tools_list"},
		{"a\x00b", "a_b"},
	} {
		if got := upstream.NormalizeName(c.in, 58); got != c.want {
			t.Errorf("NormalizeName(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestNormalizeName_Truncation(t *testing.T) {
	long := strings.Repeat("abc-", 40)
	got := upstream.NormalizeName(long, 10)
	if got != "abc_abc_ab" {
		t.Errorf("cut = %q", got)
	}
	// A cut that would end on "_" drops it.
	if got := upstream.NormalizeName("abcdefghi-jklm", 10); got != "abcdefghi" {
		t.Errorf("cut at separator = %q, want abcdefghi", got)
	}
	if got := upstream.NormalizeName("1", 1); got != "t" {
		t.Errorf("budget 1, digit = %q, want t", got)
	}
	if got := upstream.NormalizeName("x", 0); got != "" {
		t.Errorf("budget 0 = %q, want empty", got)
	}
}

func TestToolName(t *testing.T) {
	name, err := upstream.ToolName("everything", "get-tiny-image")
	if err != nil || name != "mcp.everything.get_tiny_image" {
		t.Fatalf("ToolName = %q, %v", name, err)
	}
	id := strings.Repeat("s", 50)
	name, err = upstream.ToolName(id, strings.Repeat("very-long-name-", 10))
	if err != nil {
		t.Fatal(err)
	}
	if len(name) != names.MaxBytes || names.Check(name) != "" {
		t.Errorf("ToolName with a long id = %q (%d bytes): %s", name, len(name), names.Check(name))
	}
	if _, err := upstream.ToolName(strings.Repeat("s", 59), "x"); err == nil {
		t.Error("a server id leaving no room for a name was accepted")
	}
	if _, err := upstream.ToolName("Bad-Id", "x"); err == nil {
		t.Error("a server id outside the segment grammar was accepted")
	}
}

// FuzzNormalizeName checks MCP-1 on any remote name: prefixed with mcp.{id}. the
// normalized name always passes the SPEC-1 check, for short and long server ids, and
// normalization is deterministic and idempotent.
func FuzzNormalizeName(f *testing.F) {
	for _, s := range []string{
		"", "echo", "Get-Data", "get_data", "2fa", "__", "a--b", "ÄÖÜ", "\u212A", "x\x00y",
		strings.Repeat("A-", 100), "0" + strings.Repeat("9", 80), "tools/call", "read_resource",
		"<untrusted-content>", "日本語のツール", "a_", "_a", "a__b", "\xff\xfe",
	} {
		f.Add(s)
	}
	ids := []string{"x", "everything", "hostile", strings.Repeat("s", 58), "a1_b2"}
	f.Fuzz(func(t *testing.T, remote string) {
		for _, id := range ids {
			name, err := upstream.ToolName(id, remote)
			if err != nil {
				t.Fatalf("ToolName(%q, %q): %v", id, remote, err)
			}
			if why := names.Check(name); why != "" {
				t.Fatalf("ToolName(%q, %q) = %q: %s", id, remote, name, why)
			}
			again, _ := upstream.ToolName(id, remote)
			if again != name {
				t.Fatalf("not deterministic: %q then %q", name, again)
			}
			seg := strings.TrimPrefix(name, "mcp."+id+".")
			if upstream.NormalizeName(seg, upstream.NameBudget(id)) != seg {
				t.Fatalf("not idempotent: %q normalizes to %q", seg, upstream.NormalizeName(seg, upstream.NameBudget(id)))
			}
		}
	})
}
