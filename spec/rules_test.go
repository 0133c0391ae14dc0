package spec

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// ruleIDPattern is the grammar of a check rule ID: a category (a requirement ID or a
// structural group), a dot and a lower-case check name; WF-1 and WF-2 are bare.
var ruleIDPattern = regexp.MustCompile(`^((SPEC|ID|UI|DEV|POL)-[0-9]+|yaml|schema|acknowledge|builtin)\.[a-z0-9]+(-[a-z0-9]+)*$|^WF-[12]$`)

func TestCheckRules_IDsAreWellFormedAndUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range CheckRules {
		if !ruleIDPattern.MatchString(r.ID) {
			t.Errorf("rule ID %q does not match %s", r.ID, ruleIDPattern)
		}
		if seen[r.ID] {
			t.Errorf("rule %s is in the table twice", r.ID)
		}
		seen[r.ID] = true
		if r.Summary == "" {
			t.Errorf("rule %s has no summary", r.ID)
		}
	}
}

// checkRulesFired scans the package's source (and specdiff's, which fires
// acknowledge.unknown-rule for check) for the rule IDs it reports: literal IDs, and
// the IDs a helper builds from the requirement its caller passes (req+".suffix").
func checkRulesFired(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("specdiff", "rules.go"))
	literal := regexp.MustCompile(`"((?:(?:SPEC|ID|UI|DEV|POL)-[0-9]+|yaml|schema|acknowledge|builtin)\.[a-z0-9-]+|WF-[12])"`)
	funcDecl := regexp.MustCompile(`^func (?:\([^)]*\) )?([A-Za-z]+)\(`)
	suffix := regexp.MustCompile(`req\+"(\.[a-z0-9-]+)"`)
	req := regexp.MustCompile(`"((?:SPEC|ID|UI|DEV|POL)-[0-9]+|schema)"`)
	fired := map[string]bool{}
	suffixes := map[string][]string{} // function -> the suffixes it adds to req
	var src []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, string(b))
		fn := ""
		for _, line := range strings.Split(string(b), "\n") {
			if m := funcDecl.FindStringSubmatch(line); m != nil {
				fn = m[1]
			}
			if strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue
			}
			for _, m := range literal.FindAllStringSubmatch(line, -1) {
				fired[m[1]] = true
			}
			for _, m := range suffix.FindAllStringSubmatch(line, -1) {
				suffixes[fn] = append(suffixes[fn], m[1])
			}
		}
	}
	for fn, sfx := range suffixes {
		call := regexp.MustCompile(`\b` + fn + `\(([^\n]*)`)
		for _, s := range src {
			for _, m := range call.FindAllStringSubmatch(s, -1) {
				r := req.FindStringSubmatch(m[1])
				if r == nil {
					continue
				}
				for _, x := range sfx {
					fired[r[1]+x] = true
				}
			}
		}
	}
	// ruleFor picks the requirement of an unknown tool reference by where it is.
	fired["SPEC-8.unknown-tool"], fired["POL-2.unknown-tool"] = true, true
	return fired
}

// TestCheckRulesFiredAreInTable: every rule the checks can report is in CheckRules,
// and every row of CheckRules is reported somewhere.
func TestCheckRulesFiredAreInTable(t *testing.T) {
	fired := checkRulesFired(t)
	for id := range fired {
		if _, ok := LookupCheckRule(id); !ok {
			t.Errorf("the checks report %s, which is not in CheckRules", id)
		}
	}
	for _, r := range CheckRules {
		if !fired[r.ID] {
			t.Errorf("rule %s is in CheckRules but never reported", r.ID)
		}
	}
}

// TestEveryCheckRuleHasTestscript: as TestEveryRuleHasTestscript does for the diff
// rules, every check rule a spec can fire has testscripts/testdata/script/check_rule_<id>.txtar that
// runs toolgen check on a tree that fires it (the exact finding in the expected
// output) and on the fixed tree, which passes.
func TestEveryCheckRuleHasTestscript(t *testing.T) {
	for _, r := range CheckRules {
		name := filepath.Join("..", "testscripts", "testdata", "script", CheckRuleScript(r.ID))
		data, err := os.ReadFile(name)
		if r.Internal != "" {
			if err == nil {
				t.Errorf("rule %s is marked internal (%s) but has %s: drop the mark", r.ID, r.Internal, name)
			}
			continue
		}
		if err != nil {
			t.Errorf("rule %s: %v", r.ID, err)
			continue
		}
		for _, want := range []string{"! exec toolgen check bad", "exec toolgen check good", "[" + r.ID + "]"} {
			if !strings.Contains(string(data), want) {
				t.Errorf("%s does not contain %q", name, want)
			}
		}
	}
}
