package runtime

import "testing"

func TestStructuredResult_NilRequiredSlicesBecomeEmptyArrays(t *testing.T) {
	type item struct {
		Tags []string `json:"tags"`
	}
	type result struct {
		Entries  []item   `json:"entries"`
		Optional []string `json:"optional,omitempty"`
		Nested   item     `json:"nested"`
	}
	spec := &ToolSpec{Name: "x.y", OutputTrust: TrustTool}
	got, err := StructuredResult(spec, result{Entries: []item{{}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"entries":[{"tags":[]}],"nested":{"tags":[]}}`
	if string(got.Structured) != want {
		t.Fatalf("Structured = %s, want %s", got.Structured, want)
	}
	if len(got.Content) != 1 || got.Content[0].Text != want || got.Content[0].Trust != TrustTool {
		t.Fatalf("Content = %+v", got.Content)
	}
}
