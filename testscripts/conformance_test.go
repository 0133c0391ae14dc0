package testscripts

// The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in
// .tooldeps, on the Node 22 pinned beside it) against real processes: `toolrun serve
// --http` with the builtins only, the suite's own reference server alone (the control),
// and toolrun as a gateway in front of that reference server. Every server scenario the
// suite lists for 2025-11-25 (the revision toolrun negotiates) runs, the pending ones
// too (--suite all); each scenario's outcome — the ids of its checks that end FAILURE
// or WARNING — must be the one conformance.md gives, and a scenario that needs no
// specific tool, resource or prompt must pass with no warning, directly and through
// the gateway. `make conformance` runs this test alone.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/host/hostcli"
	"github.com/toolgen/toolgen/internal/freeport"
	"github.com/toolgen/toolgen/internal/mcppeers"
)

// confSpecVersion is the revision the scenarios are chosen for: the one toolrun
// negotiates with the suite's client.
const confSpecVersion = "2025-11-25"

// confWait bounds every wait of the conformance test (a failure guard, never an
// assertion about time): a process that does not start, a suite that does not end;
// confGrace bounds a process's exit after SIGTERM, before SIGKILL.
const (
	confWait  = 5 * time.Minute
	confGrace = 30 * time.Second
)

// confTargets are the columns of conformance.md with an outcome, in table order.
var confTargets = []string{"toolrun", "reference", "gateway"}

// confRow is one scenario of conformance.md.
type confRow struct {
	scenario string
	needs    string            // what the scenario needs; "" for nothing specific
	expect   map[string]string // target -> outcome (confOutcome's form)
}

// confTable reads conformance.md: a Markdown table whose header's first cell is
// "scenario", with the columns scenario, needs, toolrun, reference, gateway, why.
func confTable(t *testing.T) map[string]confRow {
	t.Helper()
	data, err := os.ReadFile("conformance.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]confRow{}
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
			want := []string{"scenario", "needs", "toolrun", "reference", "gateway", "why"}
			if !slices.Equal(header, want) {
				t.Fatalf("conformance.md:%d: columns %q, want %q", n+1, header, want)
			}
			continue
		case header == nil || strings.HasPrefix(cells[0], "---"):
			continue
		}
		if len(cells) != len(header) {
			t.Fatalf("conformance.md:%d: %d cells, want %d", n+1, len(cells), len(header))
		}
		r := confRow{scenario: cells[0], needs: cells[1], expect: map[string]string{}}
		if r.needs == "—" || r.needs == "-" {
			r.needs = ""
		}
		for i, target := range confTargets {
			out, err := confParseOutcome(cells[2+i])
			if err != nil {
				t.Fatalf("conformance.md:%d: %s: %v", n+1, target, err)
			}
			r.expect[target] = out
		}
		if cells[5] == "" {
			t.Fatalf("conformance.md:%d: %s: the why is empty", n+1, r.scenario)
		}
		if _, dup := rows[r.scenario]; dup {
			t.Fatalf("conformance.md:%d: %s listed twice", n+1, r.scenario)
		}
		rows[r.scenario] = r
	}
	if len(rows) == 0 {
		t.Fatal("conformance.md: no table")
	}
	return rows
}

// confOutcome is a scenario's outcome in the table's form: "pass" when no check ended
// FAILURE or WARNING, else "fail: ID, ID; warn: ID" (ids sorted, each part present
// only when it has ids; any other status than SUCCESS and INFO counts as the lower-case
// status, e.g. "skipped: ID").
func confOutcome(byStatus map[string][]string) string {
	var parts []string
	statuses := make([]string, 0, len(byStatus))
	for s := range byStatus {
		statuses = append(statuses, s)
	}
	sort.Slice(statuses, func(i, j int) bool {
		return confStatusRank(statuses[i]) < confStatusRank(statuses[j]) || confStatusRank(statuses[i]) == confStatusRank(statuses[j]) && statuses[i] < statuses[j]
	})
	for _, s := range statuses {
		ids := slices.Clone(byStatus[s])
		sort.Strings(ids)
		ids = slices.Compact(ids)
		parts = append(parts, s+": "+strings.Join(ids, ", "))
	}
	if len(parts) == 0 {
		return "pass"
	}
	return strings.Join(parts, "; ")
}

func confStatusRank(s string) int {
	switch s {
	case "fail":
		return 0
	case "warn":
		return 1
	}
	return 2
}

// confParseOutcome reads an outcome cell and returns it in confOutcome's form.
func confParseOutcome(cell string) (string, error) {
	if cell == "pass" {
		return cell, nil
	}
	by := map[string][]string{}
	for _, part := range strings.Split(cell, ";") {
		status, ids, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok || strings.TrimSpace(ids) == "" {
			return "", fmt.Errorf("outcome %q: want pass or \"fail: ID, ...; warn: ID, ...\"", cell)
		}
		for _, id := range strings.Split(ids, ",") {
			by[strings.TrimSpace(status)] = append(by[strings.TrimSpace(status)], strings.Trim(strings.TrimSpace(id), "`"))
		}
	}
	return confOutcome(by), nil
}

// confCheck is one check of a scenario's checks.json.
type confCheck struct {
	ID           string          `json:"id"`
	Status       string          `json:"status"`
	Description  string          `json:"description"`
	ErrorMessage string          `json:"errorMessage"`
	Details      json.RawMessage `json:"details"`
}

// confResult is what the suite wrote for one scenario.
type confResult struct {
	checks  []confCheck
	outcome string
}

// confResultDir is the directory the suite writes a server scenario's results to:
// server-<scenario>-<ISO time with - for : and .>.
var confResultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$`)

// confRun runs every server scenario of confSpecVersion against url and returns each
// scenario's result.
func confRun(t *testing.T, node, cli, url string) map[string]confResult {
	t.Helper()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), confWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, cli, "server", "--url", url, "--suite", "all", "--spec-version", confSpecVersion, "-o", out)
	cmd.Dir = out
	start := time.Now()
	log, err := cmd.CombinedOutput()
	// The suite exits 1 when a scenario failed: the checks say which.
	var exit *exec.ExitError
	if ctx.Err() != nil || (err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1)) {
		t.Fatalf("conformance server --url %s: %v\n%s", url, err, log)
	}
	t.Logf("conformance server --url %s: %s", url, time.Since(start).Round(time.Millisecond))
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
		r := confReadResult(t, filepath.Join(out, e.Name(), "checks.json"))
		if _, dup := results[m[1]]; dup {
			t.Fatalf("two results for %s in %s", m[1], out)
		}
		results[m[1]] = r
	}
	if len(results) == 0 {
		t.Fatalf("conformance server --url %s wrote no results:\n%s", url, log)
	}
	return results
}

// confReadResult reads a scenario's checks.json and its outcome.
func confReadResult(t *testing.T, path string) confResult {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r confResult
	if err := json.Unmarshal(data, &r.checks); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	by := map[string][]string{}
	for _, c := range r.checks {
		switch c.Status {
		case "SUCCESS", "INFO":
		case "FAILURE":
			by["fail"] = append(by["fail"], c.ID)
		case "WARNING":
			by["warn"] = append(by["warn"], c.ID)
		default:
			by[strings.ToLower(c.Status)] = append(by[strings.ToLower(c.Status)], c.ID)
		}
	}
	r.outcome = confOutcome(by)
	return r
}

// confCompare fails the test for every scenario whose outcome against target is not
// the table's, naming the checks that failed or warned and the table cell to write.
func confCompare(t *testing.T, target string, scenarios []string, table map[string]confRow, results map[string]confResult) {
	t.Helper()
	for _, s := range scenarios {
		r, ok := results[s]
		if !ok {
			t.Errorf("%s: %s: the suite wrote no result", target, s)
			continue
		}
		want := table[s].expect[target]
		t.Logf("%-32s %s", s, r.outcome)
		if r.outcome == want {
			continue
		}
		var why []string
		for _, c := range r.checks {
			if c.Status != "SUCCESS" && c.Status != "INFO" {
				why = append(why, fmt.Sprintf("  %s %s: %s", c.Status, c.ID, c.ErrorMessage))
			}
		}
		t.Errorf("%s: %s: outcome %q, conformance.md says %q: fix the cause, or the table's %s cell (and its why)\n%s",
			target, s, r.outcome, want, target, strings.Join(why, "\n"))
	}
	for s := range results {
		if !slices.Contains(scenarios, s) {
			t.Errorf("%s: the suite ran %s, which `conformance list` did not list", target, s)
		}
	}
}

// confScenarios lists the suite's server scenarios for confSpecVersion and checks that
// the table has exactly those rows, and that a row needing nothing specific expects a
// pass, with no warning, of toolrun and of the gateway.
func confScenarios(t *testing.T, node, cli string, table map[string]confRow) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), confWait)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, cli, "list", "--server", "--spec-version", confSpecVersion).CombinedOutput()
	if err != nil {
		t.Fatalf("conformance list: %v\n%s", err, out)
	}
	var scenarios []string
	for _, m := range regexp.MustCompile(`(?m)^\s+- (\S+) \[`).FindAllStringSubmatch(string(out), -1) {
		scenarios = append(scenarios, m[1])
	}
	if len(scenarios) == 0 {
		t.Fatalf("conformance list lists no server scenario:\n%s", out)
	}
	for _, s := range scenarios {
		if _, ok := table[s]; !ok {
			t.Errorf("conformance.md has no row for the suite's scenario %s", s)
		}
	}
	for s, r := range table {
		if !slices.Contains(scenarios, s) {
			t.Errorf("conformance.md has a row for %s, which the suite does not list", s)
		}
		if r.needs == "" && (r.expect["toolrun"] != "pass" || r.expect["gateway"] != "pass") {
			t.Errorf("conformance.md: %s needs nothing specific, so it must pass (no failure, no warning) against toolrun and through the gateway", s)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return scenarios
}

// confProc is a process the test started, in its own process group (the reference
// server's esbuild service goes with it), stopped (SIGTERM, then SIGKILL) when the test
// that started it ends.
type confProc struct {
	cmd   *exec.Cmd
	out   *syncBuf      // everything it wrote, stdout and stderr
	ready chan []string // the submatches of the first line matching the ready pattern
	done  chan struct{} // closed once it exited and its output was read
}

// confStart starts cmd; its ready channel receives the submatches of the first line
// of its output that matches ready.
func confStart(t *testing.T, cmd *exec.Cmd, ready *regexp.Regexp) *confProc {
	t.Helper()
	p := &confProc{cmd: cmd, out: &syncBuf{}, ready: make(chan []string, 1), done: make(chan struct{})}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		cmd.Wait()
		w.Close()
	}()
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintln(p.out, sc.Text())
			if m := ready.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case p.ready <- m:
				default:
				}
			}
		}
		io.Copy(p.out, r)
	}()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(confGrace):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", strings.Join(cmd.Args, " "), p.out.String())
		}
	})
	return p
}

// wait returns the ready line's submatches, failing the test if the process exits
// first.
func (p *confProc) wait(t *testing.T) []string {
	t.Helper()
	select {
	case m := <-p.ready:
		return m
	case <-p.done:
		t.Fatalf("%s exited before it was ready:\n%s", strings.Join(p.cmd.Args, " "), p.out.String())
	case <-time.After(confWait):
		t.Fatalf("%s not ready:\n%s", strings.Join(p.cmd.Args, " "), p.out.String())
	}
	return nil
}

// listening waits until p's process listens on port (mcppeers.WaitListening), after
// its ready line: the port was picked free before p started, and if another process
// took it since, p fails to bind it, possibly after printing that line.
func (p *confProc) listening(t *testing.T, port int) {
	t.Helper()
	if err := mcppeers.WaitListening(p.cmd.Process.Pid, port, p.done, confWait); err != nil {
		t.Fatalf("%s: %v:\n%s", strings.Join(p.cmd.Args, " "), err, p.out.String())
	}
}

// confServing matches toolrun serve's line naming where it serves, which
// hostcli.ServingAddr reads.
var confServing = regexp.MustCompile(`serving MCP on .*`)

// confToolrun starts `toolrun serve --http` on a free loopback port with spec root
// dir and returns its MCP URL.
func confToolrun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	argv := append([]string{"serve", "--http", "127.0.0.1:0", "--dir", dir}, args...)
	cmd := exec.Command("toolrun", argv...)
	// Its store is DIR/.toolrun/toolrun.db and it serves no workspace, whatever the
	// environment says.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TOOLRUN_DB=") && !strings.HasPrefix(kv, "TOOLRUN_WORKSPACE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	line := confStart(t, cmd, confServing).wait(t)[0]
	addr, ok := hostcli.ServingAddr(line)
	if !ok {
		t.Fatalf("toolrun serve's serving line names no address: %s", line)
	}
	return mcpURL(addr)
}

// mcpURL is the MCP endpoint of the toolrun serve listening at addr.
func mcpURL(addr string) string { return "http://" + addr + "/mcp" }

func TestConformance(t *testing.T) {
	node, cli := mcppeers.Conformance(t)
	refNode, refDir := mcppeers.ConformanceServer(t)
	table := confTable(t)
	scenarios := confScenarios(t, node, cli, table)
	start := time.Now()
	defer func() { t.Logf("TestConformance: %s", time.Since(start).Round(time.Millisecond)) }()

	// The reference server starts (tsx compiles it) while the suite runs against toolrun.
	// It must be told its port (it prints the one it was given, not the one it got).
	n, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(n)
	ref := exec.Command(refNode, "--import", "tsx", "everything-server.ts")
	ref.Dir = refDir
	ref.Env = append(os.Environ(), "PORT="+port)
	refProc := confStart(t, ref, regexp.MustCompile(`^MCP Conformance Test Server running on`))

	// toolrun with the builtins only: no spec file, no upstream server.
	t.Run("toolrun", func(t *testing.T) {
		url := confToolrun(t, t.TempDir(), "--no-servers")
		confCompare(t, "toolrun", scenarios, table, confRun(t, node, cli, url))
	})

	refProc.wait(t)
	refProc.listening(t, n)
	refURL := "http://127.0.0.1:" + port + "/mcp"
	t.Run("reference", func(t *testing.T) {
		confCompare(t, "reference", scenarios, table, confRun(t, node, cli, refURL))
	})

	// toolrun in front of the reference server: an operator's HTTP upstream classified
	// read/low/idempotent, so that no call is held for an approval.
	t.Run("gateway", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "servers"), 0o755); err != nil {
			t.Fatal(err)
		}
		server := fmt.Sprintf(`server_id: conf
description: the conformance suite's reference server
configured_by: operator
transport:
  http:
    url: %s
classification:
  side_effect: read
  risk: low
  idempotency: idempotent
  required_scopes: [mcp.conf]
resources: expose
prompts: expose
`, refURL)
		if err := os.WriteFile(filepath.Join(dir, "servers", "conf.yaml"), []byte(server), 0o644); err != nil {
			t.Fatal(err)
		}
		url := confToolrun(t, dir)
		confGatewayReaches(t, url)
		confCompare(t, "gateway", scenarios, table, confRun(t, node, cli, url))
	})
}

// confGatewayReaches proves that the gateway serves the reference server's tools, so
// that the scenarios that fail through it fail for the table's reasons, not because
// the upstream is missing: test_simple_text, renamed mcp__conf__test_simple_text,
// answers the reference text (inside toolgen's trust envelope).
func confGatewayReaches(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), confWait)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "conformance-test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: confSpecVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__conf__test_simple_text", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if text := i15Text(res); res.IsError || !strings.Contains(text, "This is a simple text response for testing.") || !strings.Contains(text, "untrusted-content") {
		t.Fatalf("mcp__conf__test_simple_text through the gateway: isError %v, %q", res.IsError, text)
	}
}
