package tools

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/runtime"
)

func TestBuiltins_OnePerSpecSortedByName(t *testing.T) {
	specs, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want, got []string
	for _, s := range specs {
		if strings.HasPrefix(s, "sandbox.") {
			continue // an adapter builtin: package sandbox implements it, host registers it
		}
		want = append(want, strings.TrimSuffix(s, ".yaml"))
	}
	for _, tool := range Builtins() {
		sp := tool.Spec()
		got = append(got, sp.Name)
		if sp.Source != "tools/"+sp.Name+".yaml" {
			t.Errorf("%s: source %q", sp.Name, sp.Source)
		}
	}
	if !slices.IsSorted(got) {
		t.Errorf("Builtins not sorted: %v", got)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("Builtins() = %v, want one per spec %v", got, want)
	}
}

func TestBuiltins_SpecsStartWithTheSchemaHeader(t *testing.T) {
	specs, _ := filepath.Glob("*.yaml")
	for _, s := range specs {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), "# yaml-language-server: $schema=../spec/schemas/tool.schema.json\n") {
			t.Errorf("%s does not start with the yaml-language-server schema line", s)
		}
	}
}

func TestBuiltins_ApprovalToolsConferApproval(t *testing.T) {
	for _, tool := range Builtins() {
		sp := tool.Spec()
		want := strings.HasPrefix(sp.Name, "review.")
		if sp.ConfersApproval != want {
			t.Errorf("%s: confers_approval %v", sp.Name, sp.ConfersApproval)
		}
		if sp.Kind == runtime.KindControl && sp.SideEffect != runtime.SideEffectNone {
			t.Errorf("%s: a control tool with side effect %s", sp.Name, sp.SideEffect)
		}
	}
}
