//go:build unix

package testscripts

// Issue 14, findings 1 (binary files), 2 (repository configuration) and 13 (FIFOs),
// attacked through a real `toolrun call`: the command TestMain (testscript.Main) puts on
// $PATH, on its embedded SQLite store, with the builtins. The spec root and the
// workspace are separate directories ($tmp/spec and $tmp/ws), as they must be (finding
// 1: the workspace is never the spec root).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sec14toolsDirs makes $tmp/spec (an empty spec root: the builtins need none) and
// $tmp/ws, and returns them.
func sec14toolsDirs(t *testing.T) (spec, ws string) {
	t.Helper()
	tmp := t.TempDir()
	spec, ws = filepath.Join(tmp, "spec"), filepath.Join(tmp, "ws")
	for _, d := range []string{spec, ws} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return spec, ws
}

// sec14toolsRun runs one toolrun command on spec and ws to completion and returns its
// standard output and exit code. It is bounded only by the go test timeout, which is
// what catches a call that never returns (finding 13).
func sec14toolsRun(t *testing.T, spec, ws string, args ...string) (string, int) {
	t.Helper()
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		// Kill the child a little before go test gives up, so it is not left behind.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-10*time.Second))
		defer cancel()
	}
	full := append([]string{args[0], "--dir", spec, "--workspace", ws}, args[1:]...)
	cmd := exec.CommandContext(ctx, "toolrun", full...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ctx.Err() == nil:
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("toolrun %s: %v\n%s", strings.Join(full, " "), err, errb.String())
	}
	return out.String(), code
}

// sec14toolsOutcome is the six-field outcome `toolrun call --json` prints.
type sec14toolsOutcome struct {
	Status         string `json:"status"`
	ReasonCode     string `json:"reason_code"`
	ExternalDetail *struct {
		Text string `json:"text"`
	} `json:"external_detail"`
}

// sec14toolsCall makes a call through `toolrun call --json`. A call held for approval
// (review.merge is high risk) is approved by the operator, as a reviewer who trusts the
// innocuous-looking merge would, and made again: the outcome returned is the call's own.
func sec14toolsCall(t *testing.T, spec, ws, tool, args string) sec14toolsOutcome {
	t.Helper()
	call := func() sec14toolsOutcome {
		out, _ := sec14toolsRun(t, spec, ws, "call", "--json", "--hold", "50ms", tool, args)
		var o sec14toolsOutcome
		if err := json.Unmarshal([]byte(out), &o); err != nil {
			t.Fatalf("toolrun call %s: %v\n%s", tool, err, out)
		}
		return o
	}
	o := call()
	if o.Status != "unavailable" || o.ReasonCode != "approval_pending" {
		return o
	}
	out, code := sec14toolsRun(t, spec, ws, "approvals", "--json")
	var pending []struct {
		ID   int64  `json:"id"`
		Tool string `json:"tool"`
	}
	if err := json.Unmarshal([]byte(out), &pending); code != 0 || err != nil {
		t.Fatalf("toolrun approvals: exit %d, %v\n%s", code, err, out)
	}
	for _, p := range pending {
		if p.Tool == tool {
			if out, code := sec14toolsRun(t, spec, ws, "approve", strconv.FormatInt(p.ID, 10), "--reason", "looks harmless"); code != 0 {
				t.Fatalf("toolrun approve %d: exit %d\n%s", p.ID, code, out)
			}
		}
	}
	return call()
}

// sec14toolsFailed requires the tool's own failure with code.
func sec14toolsFailed(t *testing.T, o sec14toolsOutcome, code string) {
	t.Helper()
	if o.Status != "failed" || o.ReasonCode != "tool_failure" || o.ExternalDetail == nil || !strings.Contains(o.ExternalDetail.Text, code+": ") {
		t.Fatalf("outcome %+v, want failed/tool_failure with %s", o, code)
	}
}

// sec14toolsGit runs git in dir.
func sec14toolsGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestAttack14_02_RepositoryConfigRunsNoProgram: whoever can write into the workspace
// plants, in the repository's own configuration, a smudge/clean filter selected by
// .git/info/attributes and a merge driver, both naming a program outside the workspace.
// An innocuous-looking review.merge is approved and run by toolrun: it must fail
// unsafe_repository_config and the program must not have run. Plain git, given the same
// repository, runs it: the configuration planted was live.
func TestAttack14_02_RepositoryConfigRunsNoProgram(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not on PATH")
	}
	spec, ws := sec14toolsDirs(t)
	tmp := filepath.Dir(spec)
	marker := filepath.Join(tmp, "marker")
	prog := filepath.Join(tmp, "evil.sh")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\nid > '"+marker+"'\nif [ \"$1\" = filter ]; then exec cat; fi\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(rel, content string) {
		p := filepath.Join(ws, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(rel, content, msg string) {
		write(rel, content)
		sec14toolsGit(t, ws, "add", rel)
		sec14toolsGit(t, ws, "commit", "-q", "-m", msg)
	}
	sec14toolsGit(t, ws, "init", "-q", "-b", "main")
	sec14toolsGit(t, ws, "config", "user.name", "Dev")
	sec14toolsGit(t, ws, "config", "user.email", "dev@example.com")
	commit("shared.txt", "a\nb\nc\nd\ne\n", "initial")
	sec14toolsGit(t, ws, "switch", "-q", "-c", "feature/docs")
	commit("shared.txt", "A\nb\nc\nd\ne\n", "docs: top")
	commit("docs.txt", "docs\n", "docs: add")
	sec14toolsGit(t, ws, "switch", "-q", "main")
	commit("shared.txt", "a\nb\nc\nd\nE\n", "main: bottom")
	head := sec14toolsGit(t, ws, "rev-parse", "HEAD")

	// The attack: nothing in the work tree changes, nothing is committed.
	write(".git/info/attributes", "* filter=evil merge=evil\n")
	sec14toolsGit(t, ws, "config", "filter.evil.smudge", prog+" filter")
	sec14toolsGit(t, ws, "config", "filter.evil.clean", prog+" filter")
	sec14toolsGit(t, ws, "config", "merge.evil.driver", prog+" %O %A %B")

	o := sec14toolsCall(t, spec, ws, "review.merge", `{"branch":"feature/docs"}`)
	sec14toolsFailed(t, o, "unsafe_repository_config")
	for _, key := range []string{"filter.evil.smudge", "filter.evil.clean", "merge.evil.driver"} {
		if !strings.Contains(o.ExternalDetail.Text, key) {
			t.Errorf("the refusal does not name %s: %s", key, o.ExternalDetail.Text)
		}
	}
	if _, err := os.Lstat(marker); !errors.Is(err, os.ErrNotExist) {
		out, _ := os.ReadFile(marker)
		t.Fatalf("review.merge ran the repository's program: %s", out)
	}
	if now := sec14toolsGit(t, ws, "rev-parse", "HEAD"); now != head {
		t.Fatalf("HEAD moved to %s", now)
	}

	// The same repository, merged by plain git: the planted program runs.
	sec14toolsGit(t, ws, "merge", "-q", "--no-edit", "feature/docs")
	if _, err := os.Lstat(marker); err != nil {
		t.Fatalf("sanity: plain git did not run the planted program either: %v", err)
	}
}

// TestAttack14_13_FIFONeverBlocks: a named pipe in the workspace, read with
// workspace.read_text. Opening it would block until a writer appears, forever: the call
// must return failed/not_regular_file at once. (A regression hangs the test until the go
// test timeout.)
func TestAttack14_13_FIFONeverBlocks(t *testing.T) {
	spec, ws := sec14toolsDirs(t)
	if err := syscall.Mkfifo(filepath.Join(ws, "notes.txt"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	o := sec14toolsCall(t, spec, ws, "workspace.read_text", `{"path":"notes.txt"}`)
	sec14toolsFailed(t, o, "not_regular_file")
}

// TestAttack14_01_BinaryFileRefusedWhole: a database in the workspace (a real SQLite
// store's file, and a SQLite-like file whose first 100 KiB are text) is read with
// small windows that hold only text. Each window used to be checked alone; the file is
// now refused as a whole, not_text, whatever the window.
func TestAttack14_01_BinaryFileRefusedWhole(t *testing.T) {
	spec, ws := sec14toolsDirs(t)
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("plain text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A text file reads (and creates the store under the spec root).
	if o := sec14toolsCall(t, spec, ws, "workspace.read_text", `{"path":"notes.txt"}`); o.Status != "succeeded" {
		t.Fatalf("reading a text file: %+v", o)
	}

	// A SQLite-like file: a text prefix, then binary pages holding a held call's
	// arguments.
	like := strings.Repeat("CREATE TABLE invocations (args TEXT, outcome TEXT);\n", 100<<10/52+1) +
		"\x00\x00\x00\x0d\x01" + `{"path":"other-tenant/secret.txt"}` + "\x00\x00"
	if err := os.WriteFile(filepath.Join(ws, "app.db"), []byte(like), 0o644); err != nil {
		t.Fatal(err)
	}
	sec14toolsFailed(t, sec14toolsCall(t, spec, ws, "workspace.read_text", `{"path":"app.db","offset":0,"max_bytes":10}`), "not_text")
	sec14toolsFailed(t, sec14toolsCall(t, spec, ws, "workspace.read_text", `{"path":"app.db","offset":52,"max_bytes":52}`), "not_text")

	// A real store, copied where a workspace tool can reach it: its header, "SQLite
	// format 3" before the first NUL byte, is a window of text.
	db, err := os.ReadFile(filepath.Join(spec, ".toolrun", "toolrun.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "toolrun.db"), db, 0o644); err != nil {
		t.Fatal(err)
	}
	sec14toolsFailed(t, sec14toolsCall(t, spec, ws, "workspace.read_text", `{"path":"toolrun.db","offset":0,"max_bytes":10}`), "not_text")
}
