package tools

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/toolgen/toolgen/gen"
)

var approve = gen.NewReviewApprove(reviewApprove{})

func TestApprove_RecordsTheApproval(t *testing.T) {
	g := newGitRepo(t)
	g.git("switch", "-q", "-c", "feature/login")
	tip := g.commit("login.go", "package login\n", "add login")
	c := newCall(t, g.dir)
	var res gen.ReviewApproveResult
	c.ok(t, approve, jsonArgs(t, map[string]any{"branch": "feature/login", "commit": tip, "comment": "tests pass"}), &res)
	want := gen.ReviewApproveResult{Record: ".toolgen/approvals/feature~login.json", Branch: "feature/login", Commit: tip, ApprovedBy: "alice"}
	if res != want {
		t.Fatalf("got %+v, want %+v", res, want)
	}
	var rec approvalRecord
	if err := json.Unmarshal([]byte(readFile(t, g.dir, res.Record)), &rec); err != nil {
		t.Fatal(err)
	}
	if rec != (approvalRecord{Branch: "feature/login", Commit: tip, ApprovedBy: "alice", Tenant: "acme", Comment: "tests pass"}) {
		t.Fatalf("record %+v", rec)
	}
}

func TestApprove_SameApprovalTwiceIsOneApproval(t *testing.T) {
	g := newGitRepo(t)
	g.git("switch", "-q", "-c", "fix")
	tip := g.commit("fix.txt", "fixed\n", "fix")
	args := jsonArgs(t, map[string]any{"branch": "fix", "commit": tip})
	var first, second gen.ReviewApproveResult
	newCall(t, g.dir).ok(t, approve, args, &first)
	path := filepath.Join(g.dir, filepath.FromSlash(first.Record))
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	content := readFile(t, g.dir, first.Record)

	newCall(t, g.dir).ok(t, approve, args, &second)
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if first != second || readFile(t, g.dir, second.Record) != content {
		t.Fatalf("a repeated approval differs: %+v vs %+v", first, second)
	}
	if !os.SameFile(before, after) {
		t.Fatal("a repeated approval rewrote the record")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("approvals directory holds %d files, want 1", len(entries))
	}
}

func TestApprove_Refusals(t *testing.T) {
	g := newGitRepo(t)
	old := g.git("rev-parse", "HEAD")
	g.git("switch", "-q", "-c", "topic")
	g.commit("t.txt", "t\n", "topic")
	c := newCall(t, g.dir)
	for _, tc := range []struct{ name, branch, commit, code string }{
		{"moved on", "topic", old, "stale_commit"},
		{"unknown commit", "topic", "0123456789abcdef0123456789abcdef01234567", "commit_not_found"},
		{"unknown branch", "nope", old, "branch_not_found"},
		{"option as branch", "-D", old, "invalid_branch"},
		{"bad ref", "a..b", old, "invalid_branch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.fails(t, approve, jsonArgs(t, map[string]any{"branch": tc.branch, "commit": tc.commit}), tc.code)
		})
	}
	notExist(t, g.dir, ".toolgen")
}

func TestApprove_NotARepository(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not on PATH")
	}
	dir := t.TempDir()
	newCall(t, dir).fails(t, approve, jsonArgs(t, map[string]any{"branch": "main", "commit": "0123456789abcdef0123456789abcdef01234567"}), "not_a_git_repository")
}
