package specdiff

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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
		if f.Current != nil {
			s += " cur=" + f.Current.String()
		}
		if f.Previous != nil {
			s += " prev=" + f.Previous.String()
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
		"weakens SCOPE_REMOVED notes.write cur=tools/notes.write.yaml:7:1 prev=tools/notes.write.yaml:7:32",
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
		"breaking ARG_NEWLY_REQUIRED notes.write cur=tools/notes.write.yaml:12:3 prev=tools/notes.write.yaml:10:1",
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

// TestRuleTableMatchesDoc keeps the table of the package documentation and Rules in
// step: the same names, in the same order, with the same severities and subjects.
func TestRuleTableMatchesDoc(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^//\t([A-Z][A-Z_]+)\s+(weakens|breaking|info)\s+(\S+)\s`)
	var got, want []string
	for _, m := range row.FindAllStringSubmatch(string(src), -1) {
		got = append(got, m[1]+" "+m[2]+" "+m[3])
	}
	abbrev := map[string]string{"tool/server/device": "tool/s/d", "server/device": "srv/dev"}
	for _, r := range Rules {
		kinds := strings.Join(r.Kinds, "/")
		if a, ok := abbrev[kinds]; ok {
			kinds = a
		}
		want = append(want, r.Name+" "+string(r.Severity)+" "+kinds)
	}
	if !slices.Equal(got, want) {
		t.Errorf("doc.go table:\n%s\nRules:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRulesUsedAreInTable: every rule Compare can report is in the table (add takes its
// severity from there).
func TestRulesUsedAreInTable(t *testing.T) {
	src, err := os.ReadFile("specdiff.go")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, m := range regexp.MustCompile(`d\.add\(\s*"([A-Z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		used[m[1]] = true
		if _, ok := LookupRule(m[1]); !ok {
			t.Errorf("specdiff.go reports %s, which is not in Rules", m[1])
		}
	}
	for _, r := range Rules {
		if !used[r.Name] {
			t.Errorf("rule %s is in the table but never reported", r.Name)
		}
	}
}

// TestEveryRuleHasTestscript: as buf keeps testdata_previous/<rule> beside
// testdata/<rule>, every rule has testscripts/testdata/script/diff_rule_<rule>.txtar with a previous and
// a current tree and the exact output.
func TestEveryRuleHasTestscript(t *testing.T) {
	for _, r := range Rules {
		name := filepath.Join("..", "..", "testscripts", "testdata", "script", "diff_rule_"+strings.ToLower(r.Name)+".txtar")
		data, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("rule %s: %v", r.Name, err)
			continue
		}
		finding := "[" + strings.ToUpper(string(r.Severity)) + " " + r.Name + "] "
		for _, want := range []string{"-- prev/", "-- cur/", "cmp stdout want.txt", finding} {
			if !strings.Contains(string(data), want) {
				t.Errorf("%s does not contain %q", name, want)
			}
		}
	}
}

// TestAcknowledgeSchemaExamples: the tool JSON Schema offers editors exactly the rule
// names a tool can acknowledge. They are examples, not an enum: the schema accepts what
// the loader accepts (SPEC-9), and the loader cannot know the names (this package
// imports it, not the other way round).
func TestAcknowledgeSchemaExamples(t *testing.T) {
	b, ok := spec.FileSchema("tool")
	if !ok {
		t.Fatal("no tool schema")
	}
	var s struct {
		Properties struct {
			Acknowledge struct {
				Items struct {
					Examples []string `json:"examples"`
				} `json:"items"`
			} `json:"acknowledge"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if got, want := s.Properties.Acknowledge.Items.Examples, AcknowledgeableRules(); !slices.Equal(got, want) {
		t.Errorf("tool.schema.json acknowledge examples:\n%v\nAcknowledgeableRules:\n%v", got, want)
	}
}

const riskTool = `name: notes.write
version: %d
description: Write a note.
side_effect: write
idempotency: non_idempotent
risk: %s
acknowledge: [%s]
`

func riskTree(t *testing.T, version int, risk, ack string) *spec.Tree {
	return tree(t, map[string]string{
		"tools/notes.write.yaml": fmt.Sprintf(riskTool, version, risk, ack),
		"tools/notes.other.yaml": "name: notes.other\nversion: 1\ndescription: Other.\nside_effect: read\nidempotency: idempotent\nrisk: " + risk + "\n",
	})
}

// ackLines is lines with " acknowledged" after each acknowledged finding.
func ackLines(fs []Finding) []string {
	out := lines(fs)
	for i, f := range fs {
		if f.Acknowledged {
			out[i] += " acknowledged"
		}
	}
	return out
}

func TestAcknowledge(t *testing.T) {
	for _, c := range []struct {
		name       string
		prev, cur  *spec.Tree
		want       []string
		wantNoFail bool
	}{{
		name: "new entry acknowledges its rule on its tool only",
		prev: riskTree(t, 1, "high", ""),
		cur:  riskTree(t, 1, "low", "RISK_LOWERED"),
		want: []string{
			"weakens RISK_LOWERED notes.other cur=tools/notes.other.yaml:6:7 prev=tools/notes.other.yaml:6:7",
			"weakens RISK_LOWERED notes.write cur=tools/notes.write.yaml:6:7 prev=tools/notes.write.yaml:6:7 acknowledged",
		},
	}, {
		name: "carried entry, same version, nothing fires: silent",
		prev: riskTree(t, 1, "low", "RISK_LOWERED"),
		cur:  riskTree(t, 1, "low", "RISK_LOWERED"),
	}, {
		name: "carried entry, version bumped: stale",
		prev: riskTree(t, 1, "low", "RISK_LOWERED"),
		cur:  riskTree(t, 2, "low", "RISK_LOWERED"),
		want: []string{
			"info TOOL_CHANGED notes.write cur=tools/notes.write.yaml:2:10 prev=tools/notes.write.yaml:2:10",
			"info ACKNOWLEDGEMENT_STALE notes.write cur=tools/notes.write.yaml:7:15 prev=tools/notes.write.yaml:7:15",
		},
	}, {
		name: "carried entry does not sign off the rule firing again",
		prev: riskTree(t, 1, "high", "RISK_LOWERED"),
		cur:  riskTree(t, 1, "medium", "RISK_LOWERED"),
		want: []string{
			"weakens RISK_LOWERED notes.other cur=tools/notes.other.yaml:6:7 prev=tools/notes.other.yaml:6:7",
			"weakens RISK_LOWERED notes.write cur=tools/notes.write.yaml:6:7 prev=tools/notes.write.yaml:6:7",
			"info ACKNOWLEDGEMENT_STALE notes.write cur=tools/notes.write.yaml:7:15 prev=tools/notes.write.yaml:7:15",
		},
	}, {
		name: "an entry for another rule acknowledges nothing",
		prev: riskTree(t, 1, "high", ""),
		cur:  riskTree(t, 1, "low", "SCOPE_REMOVED"),
		want: []string{
			"weakens RISK_LOWERED notes.other cur=tools/notes.other.yaml:6:7 prev=tools/notes.other.yaml:6:7",
			"weakens RISK_LOWERED notes.write cur=tools/notes.write.yaml:6:7 prev=tools/notes.write.yaml:6:7",
		},
	}, {
		name: "adding or removing an entry alone is no finding",
		prev: riskTree(t, 1, "high", "SCOPE_REMOVED"),
		cur:  riskTree(t, 1, "high", "RISK_LOWERED"),
	}} {
		t.Run(c.name, func(t *testing.T) {
			got := ackLines(Compare(c.prev, c.cur))
			if !slices.Equal(got, c.want) {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

func TestCheckAcknowledgements(t *testing.T) {
	tr := tree(t, map[string]string{"tools/notes.write.yaml": fmt.Sprintf(riskTool, 1, "low",
		"RISK_LOWERED, RISK_LOWRED, MODE_TOOL_ADDED, TOOL_CHANGED, TOOL_REMOVED, NO_SUCH_THING")})
	tr.Root = "cur"
	var got []string
	for _, d := range CheckAcknowledgements(tr) {
		got = append(got, d.String())
	}
	want := []string{
		`cur/tools/notes.write.yaml:7:29: acknowledge names unknown rule "RISK_LOWRED"; did you mean RISK_LOWERED? [acknowledge.unknown-rule]`,
		`cur/tools/notes.write.yaml:7:42: acknowledge cannot name MODE_TOOL_ADDED: its findings are about a protocol, and a tool acknowledges only findings about itself [acknowledge.unknown-rule]`,
		`cur/tools/notes.write.yaml:7:59: acknowledge cannot name TOOL_CHANGED: an info finding never fails, so there is nothing to acknowledge [acknowledge.unknown-rule]`,
		`cur/tools/notes.write.yaml:7:73: acknowledge cannot name TOOL_REMOVED: a removed tool has no spec left to carry it [acknowledge.unknown-rule]`,
		`cur/tools/notes.write.yaml:7:87: acknowledge names unknown rule "NO_SUCH_THING"; the rules a tool can acknowledge are ` + strings.Join(AcknowledgeableRules(), ", ") + ` [acknowledge.unknown-rule]`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if d := CheckAcknowledgements(nil); d != nil {
		t.Errorf("CheckAcknowledgements(nil) = %v", d)
	}
}
