package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReasonsGen_IsUpToDate fails when runtime/reasons_gen.go is not what the generator
// makes of runtime/reasons.yaml: run `go generate ./runtime`.
func TestReasonsGen_IsUpToDate(t *testing.T) {
	src, err := os.ReadFile("../../reasons.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Render(src, "reasons.yaml")
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("../../reasons_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Fatal("runtime/reasons_gen.go is stale: run `go generate ./runtime`")
	}
}

const okEntry = `
  - code: unknown_tool
    status: denied
    retryable: false
    message: The requested tool is not in this session's tool catalog.
`

func TestParse_Accepts(t *testing.T) {
	rs, err := Parse([]byte("reasons:" + okEntry))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Code != "unknown_tool" || rs[0].Status != "denied" || *rs[0].Retryable {
		t.Fatalf("Parse = %+v", rs)
	}
}

func TestParse_RefusesBadTables(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"empty", "", "empty"},
		{"no reasons", "reasons: []\n", "no reasons"},
		{"unknown top-level key", "reasons:" + okEntry + "extra: 1\n", "field extra not found"},
		{"unknown entry key", "reasons:" + okEntry + "    doc: why\n", "field doc not found"},
		{"duplicate code", "reasons:" + okEntry + okEntry, "duplicate code"},
		{"duplicate key in entry", "reasons:" + okEntry + "    status: failed\n", "already defined"},
		{"two documents", "reasons:" + okEntry + "---\nreasons: []\n", "more than one YAML document"},
		{"missing retryable", "reasons:\n  - {code: a_b, status: denied, message: A b.}\n", "retryable is missing"},
		{"missing code", "reasons:\n  - {status: denied, retryable: false, message: A b.}\n", "code is missing"},
		{"bad code", "reasons:\n  - {code: Bad-Code, status: denied, retryable: false, message: A b.}\n", "lower snake case"},
		{"unknown status", "reasons:\n  - {code: a_b, status: succeeded, retryable: false, message: A b.}\n", `status "succeeded"`},
		{"uncertain retryable", "reasons:\n  - {code: a_b, status: uncertain, retryable: true, message: A b.}\n", "never retryable"},
		{"placeholder %", "reasons:\n  - {code: a_b, status: denied, retryable: false, message: 'Tool %s failed.'}\n", "nothing is interpolated"},
		{"placeholder {}", "reasons:\n  - {code: a_b, status: denied, retryable: false, message: 'Tool {name} failed.'}\n", "nothing is interpolated"},
		{"empty message", "reasons:\n  - {code: a_b, status: denied, retryable: false, message: ''}\n", "message is missing"},
		{"no period", "reasons:\n  - {code: a_b, status: denied, retryable: false, message: A b}\n", "ending with a period"},
		{"newline", "reasons:\n  - {code: a_b, status: denied, retryable: false, message: \"A\\nb.\"}\n", "control character"},
		{"ident collision", "reasons:\n  - {code: a_b1, status: denied, retryable: false, message: A b.}\n  - {code: a_b_1, status: denied, retryable: false, message: A b.}\n", "both become the Go constant ReasonAB1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestRender_IsDeterministicAndIndependentOfTableOrder(t *testing.T) {
	a := "reasons:" + okEntry + "  - {code: tool_error, status: failed, retryable: false, message: The tool failed.}\n"
	b := "reasons:\n  - {code: tool_error, status: failed, retryable: false, message: The tool failed.}\n" + okEntry
	ra, err := Render([]byte(a), "reasons.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ra2, _ := Render([]byte(a), "reasons.yaml")
	rb, err := Render([]byte(b), "reasons.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ra, ra2) || !bytes.Equal(ra, rb) {
		t.Fatalf("outputs differ:\n%s\n---\n%s", ra, rb)
	}
	if !bytes.HasPrefix(ra, []byte(Header+"\n")) {
		t.Fatalf("output does not start with the header:\n%s", ra)
	}
	for _, want := range []string{
		"ReasonUnknownTool ReasonCode = \"unknown_tool\"",
		"// The requested tool is not in this session's tool catalog.\n",
		"ReasonToolError:",
	} {
		if !bytes.Contains(ra, []byte(want)) {
			t.Errorf("output lacks %q:\n%s", want, ra)
		}
	}
}

func TestRun_CheckReportsStaleFile(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "reasons.yaml"), filepath.Join(dir, "reasons_gen.go")
	if err := os.WriteFile(in, []byte("reasons:"+okEntry), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if rc := run(in, out, true, &stderr); rc != 1 {
		t.Fatalf("-check with no output file: rc = %d, want 1 (%s)", rc, &stderr)
	}
	if rc := run(in, out, false, &stderr); rc != 0 {
		t.Fatalf("generate: rc = %d (%s)", rc, &stderr)
	}
	if rc := run(in, out, true, &stderr); rc != 0 {
		t.Fatalf("-check after generate: rc = %d, want 0 (%s)", rc, &stderr)
	}
	if err := os.WriteFile(in, []byte("reasons:"+strings.Replace(okEntry, "catalog.", "catalog now.", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if rc := run(in, out, true, &stderr); rc != 1 || !strings.Contains(stderr.String(), "stale") {
		t.Fatalf("-check after a table edit: rc = %d, stderr %q; want 1 and a stale message", rc, &stderr)
	}
}
