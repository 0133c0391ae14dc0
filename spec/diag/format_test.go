package diag

import (
	"strings"
	"testing"
)

func TestWrite_TextWithSnippet_CaretUnderColumn(t *testing.T) {
	src := "name: demo.x\nrisk: hihg\n\tkey: v\n"
	as := []Annotation{
		{Path: "tools/demo.x.yaml", Pos: Pos{2, 7}, Rule: "schema.value-not-allowed", Severity: Error, Message: `risk must be one of low, medium, high, critical, found "hihg"`},
		{Path: "tools/demo.x.yaml", Pos: Pos{3, 2}, End: Pos{3, 5}, Rule: "schema.unknown-key", Severity: Error, Message: `unknown key "key"`},
		{Path: "tools/demo.x.yaml", Pos: Pos{9, 1}, Rule: "yaml.syntax", Severity: Error, Message: "past the end: no snippet"},
	}
	var b strings.Builder
	err := Write(&b, Text, as, Report{Source: func(Annotation) ([]byte, bool) { return []byte(src), true }})
	if err != nil {
		t.Fatal(err)
	}
	want := `tools/demo.x.yaml:2:7: risk must be one of low, medium, high, critical, found "hihg" [schema.value-not-allowed]
 | risk: hihg
 | ......^
tools/demo.x.yaml:3:2: unknown key "key" [schema.unknown-key]
 | 	key: v
 | 	^~~
tools/demo.x.yaml:9:1: past the end: no snippet [yaml.syntax]
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestWrite_SnippetEscapesControlCharacters(t *testing.T) {
	var b strings.Builder
	a := Annotation{Path: "x.yaml", Pos: Pos{1, 3}, Rule: "r", Message: "m"}
	Write(&b, Text, []Annotation{a}, Report{Source: func(Annotation) ([]byte, bool) { return []byte("a\x1b[2Jb: c\n"), true }})
	if strings.Contains(b.String(), "\x1b") {
		t.Errorf("escape character printed: %q", b.String())
	}
}

func TestWrite_GitHub_OneEscapingForCheckAndDiff(t *testing.T) {
	cur := &Location{File: "cur/a,b.yaml", Line: 6, Col: 7}
	prev := &Location{File: "prev/a,b.yaml", Line: 6, Col: 7}
	as := []Annotation{
		{Path: "tools/a,b.yaml", Pos: Pos{1, 7}, Rule: "SPEC-1.file-name", Severity: Error, Message: "100% wrong\nreally"},
		{Path: cur.File, Pos: Pos{6, 7}, Rule: "RISK_LOWERED", Severity: Weakens, Message: "risk lowered", Current: cur, Previous: prev},
		{Path: cur.File, Pos: Pos{6, 7}, Rule: "RISK_LOWERED", Severity: Weakens, Message: "risk lowered", Current: cur, Previous: prev, Acknowledged: true},
		{Path: cur.File, Pos: Pos{2, 1}, Rule: "ARG_REMOVED", Severity: Breaking, Message: "gone", Current: cur},
		{Path: cur.File, Pos: Pos{2, 1}, Rule: "TOOL_ADDED", Severity: Info, Message: "new", Current: cur},
	}
	var b strings.Builder
	if err := Write(&b, GitHub, as, Report{}); err != nil {
		t.Fatal(err)
	}
	want := `::error file=tools/a%2Cb.yaml,line=1,col=7,title=SPEC-1.file-name::100%25 wrong%0Areally
::warning file=cur/a%2Cb.yaml,line=6,col=7,title=weakens RISK_LOWERED::risk lowered (previously prev/a,b.yaml:6:7)
::notice file=cur/a%2Cb.yaml,line=6,col=7,title=weakens RISK_LOWERED (acknowledged)::risk lowered (previously prev/a,b.yaml:6:7)
::error file=cur/a%2Cb.yaml,line=2,col=1,title=breaking ARG_REMOVED::gone
::notice file=cur/a%2Cb.yaml,line=2,col=1,title=info TOOL_ADDED::new
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestWrite_JSON_EmptyIsAList(t *testing.T) {
	var b strings.Builder
	if err := Write(&b, JSON, nil, Report{}); err != nil {
		t.Fatal(err)
	}
	if b.String() != "[]\n" {
		t.Errorf("got %q", b.String())
	}
}

func TestWrite_MarkdownCheck_OneTable(t *testing.T) {
	var b strings.Builder
	as := []Annotation{{Path: "tools/x.yaml", Pos: Pos{2, 7}, Rule: "SPEC-4.enum-duplicate", Severity: Error, Message: "a | b"}}
	if err := Write(&b, Markdown, as, Report{Command: "check", Summary: "1 problem"}); err != nil {
		t.Fatal(err)
	}
	want := "### toolgen check: 1 problem\n\n| Where | Rule | Problem |\n|---|---|---|\n| `tools/x.yaml:2:7` | `SPEC-4.enum-duplicate` | a \\| b |\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestSet_Sorted_DeduplicatesAndOrders(t *testing.T) {
	a := Annotation{Path: "b.yaml", Pos: Pos{2, 1}, Rule: "r", Message: "m"}
	b := Annotation{Path: "a.yaml", Rule: "r", Message: "whole file"}
	got := Set{a, b, a}.Sorted()
	if len(got) != 2 || got[0].Path != "a.yaml" || got[0].Pos != (Pos{1, 1}) || got[1] != a {
		t.Errorf("Sorted = %+v", got)
	}
}
