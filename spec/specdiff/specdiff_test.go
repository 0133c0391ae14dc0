package specdiff

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/toolgen/toolgen/spec"
)

func tree(t *testing.T, files map[string]string) *spec.Tree {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, data := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	tr, _, err := spec.LoadFS(fsys, "")
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

const writeTool = `name: notes.write
version: 1
description: Write a note.
side_effect: write
idempotency: non_idempotent
risk: high
required_scopes: [notes.write, notes.admin]
output_trust: tool
approval_when: "args.path.startsWith('secret/')"
args:
  path: {type: string}
  mode: {type: string, enum: [create, append], default: create}
`

// lines renders findings as "rule cur prev" for comparison.
func lines(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		s := fmt.Sprintf("%s %s %s", f.Severity, f.Rule, f.Subject)
		if f.Cur != nil {
			s += " cur=" + f.Cur.String()
		}
		if f.Prev != nil {
			s += " prev=" + f.Prev.String()
		}
		out = append(out, s)
	}
	return out
}

func TestReformatOnly(t *testing.T) {
	prev := tree(t, map[string]string{"tools/notes.write.yaml": writeTool})
	cur := tree(t, map[string]string{"tools/notes.write.yaml": `# a comment
args:
  mode:
    default: "create"
    enum: ["create", 'append']
    type: string
  path: {type: "string"}
name: "notes.write"
approval_when: >-
  args.path.startsWith('secret/')
version: 1
required_scopes:
  - notes.write
  - notes.admin
description: 'Write a note.'
risk: high
idempotency: non_idempotent
side_effect: write
`})
	if got := Compare(prev, cur); len(got) != 0 {
		t.Errorf("reformatting produced findings:\n%s", strings.Join(lines(got), "\n"))
	}
}

func TestToolSafety(t *testing.T) {
	prev := tree(t, map[string]string{"tools/notes.write.yaml": writeTool})
	cur := tree(t, map[string]string{"tools/notes.write.yaml": `name: notes.write
version: 1
description: Write a note.
side_effect: read
idempotency: idempotent
risk: low
required_scopes: [notes.write]
output_trust: user
parallel_safe: true
args:
  path: {type: string}
  mode: {type: string, enum: [create, append], default: create}
`})
	got := lines(Compare(prev, cur))
	want := []string{
		"weakens APPROVAL_WHEN_REMOVED notes.write cur=tools/notes.write.yaml:1:7 prev=tools/notes.write.yaml:9:16",
		"breaking VERSION_NOT_BUMPED notes.write cur=tools/notes.write.yaml:2:10 prev=tools/notes.write.yaml:2:10",
		"weakens SIDE_EFFECT_LOWERED notes.write cur=tools/notes.write.yaml:4:14 prev=tools/notes.write.yaml:4:14",
		"weakens IDEMPOTENCY_LOOSENED notes.write cur=tools/notes.write.yaml:5:14 prev=tools/notes.write.yaml:5:14",
		"weakens RISK_LOWERED notes.write cur=tools/notes.write.yaml:6:7 prev=tools/notes.write.yaml:6:7",
		"weakens SCOPE_REMOVED notes.write cur=tools/notes.write.yaml:7:18 prev=tools/notes.write.yaml:7:32",
		"weakens OUTPUT_TRUST_RAISED notes.write cur=tools/notes.write.yaml:8:15 prev=tools/notes.write.yaml:8:15",
		"weakens PARALLEL_SAFE_ENABLED notes.write cur=tools/notes.write.yaml:9:16 prev=tools/notes.write.yaml:1:7",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestBreaking(t *testing.T) {
	prev := tree(t, map[string]string{
		"tools/notes.write.yaml": writeTool,
		"tools/notes.gone.yaml":  "name: notes.gone\nversion: 1\ndescription: Gone.\nside_effect: none\nrisk: low\n",
	})
	cur := tree(t, map[string]string{"tools/notes.write.yaml": strings.Replace(strings.Replace(writeTool,
		"  path: {type: string}\n", "  path: {type: integer}\n  owner: {type: string}\n", 1),
		"enum: [create, append]", "enum: [create]", 1)})
	got := lines(Compare(prev, cur))
	want := []string{
		"breaking TOOL_REMOVED notes.gone prev=tools/notes.gone.yaml:1:7",
		"breaking VERSION_NOT_BUMPED notes.write cur=tools/notes.write.yaml:2:10 prev=tools/notes.write.yaml:2:10",
		"breaking ARG_TYPE_CHANGED notes.write cur=tools/notes.write.yaml:11:16 prev=tools/notes.write.yaml:11:16",
		"breaking ARG_NEWLY_REQUIRED notes.write cur=tools/notes.write.yaml:12:3",
		"breaking ENUM_VALUE_REMOVED notes.write cur=tools/notes.write.yaml:13:30 prev=tools/notes.write.yaml:12:39",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestVersionBumpAndInfo(t *testing.T) {
	prev := tree(t, map[string]string{"tools/notes.write.yaml": writeTool})
	cur := tree(t, map[string]string{
		"tools/notes.write.yaml": strings.Replace(strings.Replace(writeTool, "version: 1", "version: 2", 1),
			"Write a note.", "Write one note.", 1),
		"tools/notes.read.yaml": "name: notes.read\nversion: 1\ndescription: Read.\nside_effect: none\nrisk: low\n",
	})
	got := lines(Compare(prev, cur))
	want := []string{
		"info TOOL_ADDED notes.read cur=tools/notes.read.yaml:1:7",
		"info TOOL_CHANGED notes.write cur=tools/notes.write.yaml:1:7 prev=tools/notes.write.yaml:1:7",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDeterministic(t *testing.T) {
	prev := tree(t, map[string]string{"tools/notes.write.yaml": writeTool})
	cur := tree(t, map[string]string{})
	a, b := Compare(prev, cur), Compare(prev, cur)
	if !slices.Equal(lines(a), lines(b)) {
		t.Error("Compare is not deterministic")
	}
	if got := Compare(nil, nil); len(got) != 0 {
		t.Errorf("Compare(nil, nil) = %v", got)
	}
}
