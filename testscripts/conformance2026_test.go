package testscripts

// The official conformance suite's revision 2026-07-28 (@modelcontextprotocol/conformance
// 0.2.0-alpha.12, pinned in .tooldeps as conformance-2026, on Node 22) against
// `toolrun serve --http` with the builtins only: every server scenario it lists for
// 2026-07-28, and every scenario of the Tasks extension (tasks-*). Each scenario's
// outcome must be the one conformance-2026.md gives, the table must list exactly the
// suite's scenarios, and a scenario that needs no specific tool must pass with no
// warning. `make conformance` runs it with TestConformance.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgen/toolgen/internal/mcppeers"
)

// conf2026Row is one scenario of conformance-2026.md.
type conf2026Row struct {
	needs, toolrun string
}

// conf2026Table reads conformance-2026.md: a Markdown table with the columns
// scenario, needs, toolrun, why.
func conf2026Table(t *testing.T) map[string]conf2026Row {
	t.Helper()
	data, err := os.ReadFile("conformance-2026.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]conf2026Row{}
	var header []string
	for n, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "|") {
			header = nil
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		for i := range cells {
			cells[i] = strings.Trim(strings.TrimSpace(cells[i]), "`")
		}
		switch {
		case header == nil && cells[0] == "scenario":
			header = cells
			if want := []string{"scenario", "needs", "toolrun", "why"}; !slices.Equal(header, want) {
				t.Fatalf("conformance-2026.md:%d: columns %q, want %q", n+1, header, want)
			}
			continue
		case header == nil || strings.HasPrefix(cells[0], "---"):
			continue
		}
		if len(cells) != len(header) || cells[3] == "" {
			t.Fatalf("conformance-2026.md:%d: %d cells (want %d, the why not empty)", n+1, len(cells), len(header))
		}
		out, err := confParseOutcome(cells[2])
		if err != nil {
			t.Fatalf("conformance-2026.md:%d: %v", n+1, err)
		}
		r := conf2026Row{needs: cells[1], toolrun: out}
		if r.needs == "—" || r.needs == "-" {
			r.needs = ""
		}
		if _, dup := rows[cells[0]]; dup {
			t.Fatalf("conformance-2026.md:%d: %s listed twice", n+1, cells[0])
		}
		rows[cells[0]] = r
	}
	if len(rows) == 0 {
		t.Fatal("conformance-2026.md: no table")
	}
	return rows
}

// conf2026Scenarios lists the suite's server scenarios for 2026-07-28 and those of the
// Tasks extension.
func conf2026Scenarios(t *testing.T, node, cli string) (revision, tasks []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), confWait)
	defer cancel()
	list := func(args ...string) []string {
		out, err := exec.CommandContext(ctx, node, append([]string{cli, "list", "--server"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("conformance list: %v\n%s", err, out)
		}
		var names []string
		for _, m := range regexp.MustCompile(`(?m)^\s+- (\S+) \[`).FindAllStringSubmatch(string(out), -1) {
			names = append(names, m[1])
		}
		return names
	}
	revision = list("--spec-version", "2026-07-28")
	for _, s := range list() {
		if strings.HasPrefix(s, "tasks-") {
			tasks = append(tasks, s)
		}
	}
	if len(revision) == 0 || len(tasks) == 0 {
		t.Fatalf("conformance list: %d scenarios for 2026-07-28, %d tasks scenarios", len(revision), len(tasks))
	}
	return revision, tasks
}

// conf2026Run runs the suite with args against url and returns each scenario's result.
func conf2026Run(t *testing.T, node, cli, url string, args ...string) map[string]confResult {
	t.Helper()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), confWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{cli, "server", "--url", url, "-o", out}, args...)...)
	cmd.Dir = out
	log, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("conformance server %v: %v\n%s", args, err, log)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]confResult{}
	for _, e := range entries {
		m := confResultDir.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		results[m[1]] = confReadResult(t, filepath.Join(out, e.Name(), "checks.json"))
	}
	if len(results) == 0 {
		t.Fatalf("conformance server %v wrote no results:\n%s", args, log)
	}
	return results
}

func TestConformance2026(t *testing.T) {
	node, _ := mcppeers.Conformance(t)
	cli := filepath.Join(mcppeers.Root(t), ".tooldeps", "node_modules", "conformance-2026", "dist", "index.js")
	if _, err := os.Stat(cli); err != nil {
		t.Fatalf("%s is missing: run `make node-deps`", cli)
	}
	table := conf2026Table(t)
	revision, tasks := conf2026Scenarios(t, node, cli)
	all := append(slices.Clone(revision), tasks...)
	for _, s := range all {
		if _, ok := table[s]; !ok {
			t.Errorf("conformance-2026.md has no row for the suite's scenario %s", s)
		}
	}
	for s, r := range table {
		if !slices.Contains(all, s) {
			t.Errorf("conformance-2026.md has a row for %s, which the suite does not list", s)
		}
		if r.needs == "" && r.toolrun != "pass" {
			t.Errorf("conformance-2026.md: %s needs nothing specific, so it must pass (no failure, no warning)", s)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	start := time.Now()
	url := confToolrun(t, t.TempDir(), "--no-servers")
	results := conf2026Run(t, node, cli, url, "--suite", "all", "--spec-version", "2026-07-28")
	for _, s := range tasks {
		for name, r := range conf2026Run(t, node, cli, url, "--scenario", s) {
			results[name] = r
		}
	}
	t.Logf("the suite against toolrun: %s", time.Since(start).Round(time.Millisecond))
	for _, s := range all {
		r, ok := results[s]
		if !ok {
			t.Errorf("%s: the suite wrote no result", s)
			continue
		}
		t.Logf("%-48s %s", s, r.outcome)
		if want := table[s].toolrun; r.outcome != want {
			var why []string
			for _, c := range r.checks {
				if c.Status != "SUCCESS" && c.Status != "INFO" {
					why = append(why, fmt.Sprintf("  %s %s: %s", c.Status, c.ID, c.ErrorMessage))
				}
			}
			t.Errorf("%s: outcome %q, conformance-2026.md says %q: fix the cause, or the table's cell (and its why)\n%s",
				s, r.outcome, want, strings.Join(why, "\n"))
		}
	}
}
