package spec

import "testing"

func TestScalarEnds(t *testing.T) {
	src := "name: demo.x\n" +
		"risk: hihg # a comment\n" +
		"d: \"a \\\" b\"\n" +
		"s: 'it''s'\n" +
		"u: héllo\n" +
		"block: |\n  text\n" +
		"multi: \"one\n  two\"\n"
	ends := scalarEnds([]byte(src))
	for _, c := range []struct {
		start, end Pos
	}{
		{Pos{1, 1}, Pos{1, 5}},  // the key "name"
		{Pos{1, 7}, Pos{1, 13}}, // demo.x
		{Pos{2, 7}, Pos{2, 11}}, // hihg, the comment left out
		{Pos{3, 4}, Pos{3, 12}}, // "a \" b" with its quotes and escape
		{Pos{4, 4}, Pos{4, 11}}, // 'it''s'
		{Pos{5, 4}, Pos{5, 9}},  // héllo: runes, not bytes
	} {
		if got, ok := ends[c.start]; !ok || got != c.end {
			t.Errorf("end of the scalar at %v: %v (found %v), want %v", c.start, got, ok, c.end)
		}
	}
	for _, start := range []Pos{{6, 8}, {8, 8}} { // the block scalar's | and the two-line string
		if end, ok := ends[start]; ok {
			t.Errorf("the scalar at %v has an end %v; a multi-line scalar has none", start, end)
		}
	}
	if scalarEnds([]byte("a: [unclosed")) != nil {
		t.Error("a text that does not parse maps ends")
	}
}
