package specdiff

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/spec"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/rules.md from spec.CheckRules and Rules")

// rulesDoc is docs/rules.md: the check rules and the diff rules, generated from the
// tables so that it can never say something the code does not.
func rulesDoc() string {
	var b strings.Builder
	b.WriteString(`# toolgen rules

<!-- Generated from spec.CheckRules and specdiff.Rules by TestRulesDoc; do not edit.
     Regenerate: go test ./spec/specdiff -run TestRulesDoc -update -->

Every finding of ` + "`toolgen check`" + `, ` + "`toolgen generate`" + ` and ` + "`toolgen diff`" + ` names a
stable rule ID. IDs never change once released: CI configurations, ` + "`acknowledge`" + ` entries
and this page name them.

## Check rules

A check rule's ID is CATEGORY.check: the category is the requirement of DESIGN.md the check
enforces (SPEC-1 ... SPEC-8, WF-1, WF-2, POL-2, DEV-2, ID-1, UI-1) or a structural group
(yaml, schema, acknowledge, builtin). WF-1 and WF-2 are one check each and keep their bare
IDs. Every check finding is an error. Each rule a spec can fire has
` + "`testscripts/testdata/script/check_rule_<id>.txtar`" + `: a tree that fires it, with the exact finding, and the
same tree fixed, which passes.

| Rule | Category | Fires when | Testscript |
|---|---|---|---|
`)
	for _, r := range spec.CheckRules {
		script := "`" + spec.CheckRuleScript(r.ID) + "`"
		if r.Internal != "" {
			script = "none: " + r.Internal
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.ID, r.Category(), strings.ReplaceAll(r.Summary, "|", "\\|"), script)
	}
	b.WriteString(`
## Diff rules

A diff rule's severity says how much the change matters: ` + "`weakens`" + ` safety, ` + "`breaking`" + ` for
callers, or ` + "`info`" + `. What fires each rule, and how acknowledgements work, is in
` + "`spec/specdiff/doc.go`" + `; each has ` + "`testscripts/testdata/script/diff_rule_<rule>.txtar`" + ` with a previous and a
current tree and the exact output.

| Rule | Severity | About | Testscript |
|---|---|---|---|
`)
	for _, r := range Rules {
		fmt.Fprintf(&b, "| `%s` | %s | %s | `diff_rule_%s.txtar` |\n", r.Name, r.Severity, strings.Join(r.Kinds, ", "), strings.ToLower(r.Name))
	}
	return b.String()
}

// TestRulesDoc: docs/rules.md is the rule tables as they are.
func TestRulesDoc(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "rules.md")
	want := rulesDoc()
	if *updateDocs {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is not the rule tables: go test ./spec/specdiff -run TestRulesDoc -update", path)
	}
}
