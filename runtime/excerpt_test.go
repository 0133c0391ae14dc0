package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

var fullMarkerRE = regexp.MustCompile(`\n\[\.\.\. (\d+) bytes elided; full output in artifact \.\.\.\]\n`)

// checkExcerpt asserts Excerpt's contract for one input and budget.
func checkExcerpt(t *testing.T, text string, budget int) {
	t.Helper()
	out, elided := Excerpt(text, budget)
	if len(text) <= max(budget, 0) {
		if out != text || elided {
			t.Fatalf("Excerpt(%q, %d) = %q, %v; want the text, false", text, budget, out, elided)
		}
		return
	}
	if !elided {
		t.Fatalf("Excerpt(%q, %d): elided = false for a text over budget", text, budget)
	}
	if len(out) > max(budget, 0) {
		t.Fatalf("Excerpt(%q, %d) = %q: %d bytes, over budget", text, budget, out, len(out))
	}
	if utf8.ValidString(text) && !utf8.ValidString(out) {
		t.Fatalf("Excerpt(%q, %d) = %q: not valid UTF-8", text, budget, out)
	}
	if !isExcerptOf(out, text) {
		t.Fatalf("Excerpt(%q, %d) = %q: not head + marker + tail of the input", text, budget, out)
	}
}

// isExcerptOf reports whether out is a prefix of text, a marker, and a suffix of text, with
// the marker's count (when it has one) equal to the bytes left out.
func isExcerptOf(out, text string) bool {
	for _, m := range fullMarkerRE.FindAllStringSubmatchIndex(out, -1) {
		head, tail := out[:m[0]], out[m[1]:]
		n, _ := strconv.Atoi(out[m[2]:m[3]])
		if strings.HasPrefix(text, head) && strings.HasSuffix(text, tail) && n == len(text)-len(head)-len(tail) && n > 0 {
			return true
		}
	}
	for i := 0; ; {
		j := strings.Index(out[i:], excerptShortMarker)
		if j < 0 {
			break
		}
		head, tail := out[:i+j], out[i+j+len(excerptShortMarker):]
		if strings.HasPrefix(text, head) && strings.HasSuffix(text, tail) && len(head)+len(tail) < len(text) {
			return true
		}
		i += j + 1
	}
	return strings.HasPrefix(text, out) && len(out) < len(text)
}

func TestExcerpt_FitsUnchanged(t *testing.T) {
	for _, s := range []string{"", "a", "hello world"} {
		if out, elided := Excerpt(s, len(s)); out != s || elided {
			t.Errorf("Excerpt(%q) = %q, %v", s, out, elided)
		}
	}
}

func TestExcerpt_KeepsHeadAndTailAroundMarker(t *testing.T) {
	text := strings.Repeat("a", 1000) + strings.Repeat("z", 1000)
	out, elided := Excerpt(text, 200)
	if !elided || len(out) > 200 {
		t.Fatalf("Excerpt = %d bytes, elided %v", len(out), elided)
	}
	m := fullMarkerRE.FindStringSubmatchIndex(out)
	if m == nil {
		t.Fatalf("no marker in %q", out)
	}
	head, tail := out[:m[0]], out[m[1]:]
	if strings.Trim(head, "a") != "" || strings.Trim(tail, "z") != "" || len(head) == 0 || len(tail) == 0 {
		t.Fatalf("head %q, tail %q", head, tail)
	}
	if d := len(tail) - len(head); d < 0 || d > 1 {
		t.Fatalf("head %d bytes, tail %d: want a 50/50 split", len(head), len(tail))
	}
	if n, _ := strconv.Atoi(out[m[2]:m[3]]); n != len(text)-len(head)-len(tail) {
		t.Fatalf("marker says %d bytes elided, %d were", n, len(text)-len(head)-len(tail))
	}
}

func TestExcerpt_NeverSplitsARune(t *testing.T) {
	texts := []string{
		strings.Repeat("é", 300),
		strings.Repeat("日本語", 200),
		strings.Repeat("🙂x", 150),
		"a" + strings.Repeat("🙂", 100) + "b",
	}
	for _, text := range texts {
		for max := 0; max <= len(text)+1; max++ {
			checkExcerpt(t, text, max)
		}
	}
}

func TestExcerpt_TinyBudgets(t *testing.T) {
	text := strings.Repeat("0123456789", 20)
	if out, elided := Excerpt(text, 0); out != "" || !elided {
		t.Fatalf("budget 0: %q, %v", out, elided)
	}
	if out, _ := Excerpt(text, -5); out != "" {
		t.Fatalf("negative budget: %q", out)
	}
	if out, _ := Excerpt(text, 5); out != "01234" {
		t.Fatalf("budget below the short marker: %q, want a head alone", out)
	}
	if out, _ := Excerpt(text, 11); out != "01\n[...]\n89" {
		t.Fatalf("budget between the markers: %q", out)
	}
}

func FuzzExcerpt(f *testing.F) {
	f.Add("hello, world", 5)
	f.Add(strings.Repeat("日本語", 50), 64)
	f.Add(strings.Repeat("x", 500), 80)
	f.Add("\xff\xfe\xfd abc \x80", 3)
	f.Add("", 0)
	f.Add("", -5)
	f.Add(strings.Repeat("\xe6\x97\xa5\x80\x80\x80\x80", 20), 30)
	f.Add("\xf0\x9f\x98"+strings.Repeat("\xf0\x9f\x98\x80", 40), 45)
	f.Add(strings.Repeat("a\u0301", 60), 50)
	f.Add("\n[... 3 bytes elided; full output in artifact ...]\n"+strings.Repeat("b", 80), 60)
	f.Add(strings.Repeat("\n[...]\n", 30), 20)
	f.Fuzz(func(t *testing.T, text string, max int) {
		if max > 1<<20 || max < -10 {
			return
		}
		checkExcerpt(t, text, max)
		// Never a cut inside a UTF-8 sequence, whether or not the rest is valid.
		if out, elided := Excerpt(text, max); elided {
			checkExcerptCuts(t, text, out)
		}
	})
}

// recordingWriter keeps what it is asked to write.
type recordingWriter struct {
	writes []recorded
	err    error
}

type recorded struct {
	mediaType string
	data      []byte
}

func (w *recordingWriter) WriteArtifact(_ context.Context, mediaType string, r io.Reader) (ArtifactRef, error) {
	if w.err != nil {
		return ArtifactRef{}, w.err
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return ArtifactRef{}, err
	}
	w.writes = append(w.writes, recorded{mediaType, b})
	sum := sha256.Sum256(b)
	h := hex.EncodeToString(sum[:])
	return ArtifactRef{URI: ArtifactURIPrefix + h, SHA256: h, Size: int64(len(b)), MediaType: mediaType}, nil
}

func inlineBytes(r ToolResult) int {
	n := len(r.Structured)
	for _, it := range r.Content {
		n += len(it.Text)
	}
	return n
}

func TestExcerptResult_UnderBudgetIsUnchanged(t *testing.T) {
	r := ToolResult{OK: true, Content: []Item{{Type: "text", Text: "small", Trust: TrustTool}}, Structured: []byte(`{"a":1}`)}
	w := &recordingWriter{}
	got, err := ExcerptResult(context.Background(), r, 100, w, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(w.writes) != 0 || got.Content[0].Text != "small" || string(got.Structured) != `{"a":1}` {
		t.Fatalf("got %+v, writes %d", got, len(w.writes))
	}
	if got, _ := ExcerptResult(context.Background(), r, 0, nil, ""); string(got.Structured) != `{"a":1}` {
		t.Fatal("maxBytes 0 must mean no budget")
	}
}

func TestExcerptResult_OverBudgetArtifactsAndExcerpts(t *testing.T) {
	big := strings.Repeat("line of output\n", 1000)
	r := ToolResult{
		OK: true,
		Content: []Item{
			{Type: "text", Text: "short note", Trust: TrustTool},
			{Type: "json", Text: big, MIMEType: "application/json", Trust: TrustExternalUntrusted},
		},
		Structured: []byte(`{"big":true}`),
		Artifacts:  []ArtifactRef{{URI: "artifact:sha256:existing", SHA256: "existing"}},
	}
	w := &recordingWriter{}
	const max = 1024
	got, err := ExcerptResult(context.Background(), r, max, w, "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Structured != nil {
		t.Fatalf("Structured kept inline over budget: %s", got.Structured)
	}
	if n := inlineBytes(got); n > max {
		t.Fatalf("inline output is %d bytes, budget %d", n, max)
	}
	if got.Content[0].Text != "short note" {
		t.Fatalf("the short item was cut: %q", got.Content[0].Text)
	}
	long := got.Content[1]
	if long.Trust != TrustExternalUntrusted || long.Type != "text" || long.MIMEType != "text/plain; charset=utf-8" || !isExcerptOf(long.Text, big) {
		t.Fatalf("long item = %+v", long)
	}
	if len(w.writes) != 2 || len(got.Artifacts) != 3 || got.Artifacts[0].SHA256 != "existing" {
		t.Fatalf("writes %d, artifacts %+v", len(w.writes), got.Artifacts)
	}
	if w.writes[0].mediaType != "application/json" || string(w.writes[0].data) != `{"big":true}` {
		t.Fatalf("structured artifact = %q %q", w.writes[0].mediaType, w.writes[0].data)
	}
	wantContent := fmt.Sprintf(ArtifactItemSeparatorFormat, 1, 2) + "short note\n" + fmt.Sprintf(ArtifactItemSeparatorFormat, 2, 2) + big + "\n"
	if w.writes[1].mediaType != DefaultArtifactMediaType || string(w.writes[1].data) != wantContent {
		t.Fatalf("content artifact = %q, %d bytes", w.writes[1].mediaType, len(w.writes[1].data))
	}
	// The input is not modified.
	if r.Content[1].Text != big || r.Structured == nil || len(r.Artifacts) != 1 {
		t.Fatal("ExcerptResult modified its input")
	}
}

func TestExcerptResult_StructuredOnlyDroppedWhenTextsFit(t *testing.T) {
	spec := &ToolSpec{Name: "x.y", OutputTrust: TrustTool}
	r, err := StructuredResult(spec, map[string]string{"k": strings.Repeat("v", 300)})
	if err != nil {
		t.Fatal(err)
	}
	w := NewFSArtifactWriter(t.TempDir())
	got, err := ExcerptResult(context.Background(), r, 400, w, "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Structured != nil || got.Content[0].Text != r.Content[0].Text {
		t.Fatalf("got %+v", got)
	}
	if len(got.Artifacts) != 1 || got.Artifacts[0].MediaType != "application/json" {
		t.Fatalf("artifacts = %+v", got.Artifacts)
	}
	// Over budget for the text too: the content artifact is the same bytes and media type,
	// so it is the same artifact and one ref.
	got, err = ExcerptResult(context.Background(), r, 200, w, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Artifacts) != 1 || inlineBytes(got) > 200 {
		t.Fatalf("artifacts = %+v, inline %d bytes", got.Artifacts, inlineBytes(got))
	}
	rc, err := w.Open(got.Artifacts[0].URI)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); !bytes.Equal(b, r.Structured) {
		t.Fatalf("artifact = %s", b)
	}
}

func TestExcerptResult_NeedsAWriter(t *testing.T) {
	r := ToolResult{OK: true, Content: []Item{{Text: strings.Repeat("x", 100)}}}
	if _, err := ExcerptResult(context.Background(), r, 10, nil, ""); err == nil {
		t.Fatal("over budget without a writer: no error")
	}
	boom := errors.New("disk full")
	if _, err := ExcerptResult(context.Background(), r, 10, &recordingWriter{err: boom}, ""); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the writer's", err)
	}
}

func TestFairShares(t *testing.T) {
	tests := []struct {
		sizes  []int
		budget int
		want   []int
	}{
		{[]int{10, 1000}, 100, []int{10, 90}},
		{[]int{1000, 10}, 100, []int{90, 10}},
		{[]int{500, 500, 500}, 90, []int{30, 30, 30}},
		{[]int{5, 50, 500}, 100, []int{5, 47, 48}},
		{[]int{}, 100, []int{}},
	}
	for _, tt := range tests {
		got := fairShares(tt.sizes, tt.budget)
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("fairShares(%v, %d) = %v, want %v", tt.sizes, tt.budget, got, tt.want)
		}
	}
}
