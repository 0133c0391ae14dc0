package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/gen"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/tooltest"
	"github.com/toolgen/toolgen/runtime/tooltest/tooltestsqlite"
)

// pipe runs the builtins end to end through a tooltest.Worker: the real registry,
// pipeline and SQLite store, one workspace, a caller holding every builtin scope with
// user-labelled arguments, every call in one run. Nobody approves: a held call ends
// unavailable/approval_pending at once, its row PENDING (tooltest.LeaveHeld).
type pipe struct {
	t *testing.T
	w *tooltest.Worker
}

var builtinCaller = runtime.Principal{ID: "alice", Tenant: "acme",
	Scopes: []string{"workspace.read", "workspace.write", "review.merge", "review.approve"}}

func newPipe(t *testing.T, ws string) *pipe {
	t.Helper()
	all := Builtins()
	w := tooltest.NewWorker(t, all[0], tooltest.WorkerOptions{Database: tooltestsqlite.TempFile(t), Tools: all[1:], Principal: builtinCaller, Workspace: ws})
	return &pipe{t: t, w: w}
}

// call makes the call callID of tool with args, and reads its row back.
func (p *pipe) call(tool, callID, args string) tooltest.Result {
	p.t.Helper()
	return p.w.Call(context.Background(), args, tooltest.ToolNamed(tool), tooltest.CallID(callID), tooltest.LeaveHeld())
}

func (p *pipe) exec(tool, callID, args string) runtime.Outcome {
	p.t.Helper()
	return p.call(tool, callID, args).Outcome
}

// row is the invocation a call recorded; a call that recorded none fails the test.
func row(t *testing.T, r tooltest.Result) *store.Invocation {
	t.Helper()
	if r.Row == nil {
		t.Fatalf("%s %s: no row recorded", r.Call.Tool, r.Call.CallID)
	}
	return r.Row
}

// succeeded requires success and decodes the structured result into out (if not nil).
func succeeded(t *testing.T, o runtime.Outcome, out any) {
	t.Helper()
	if o.Status != runtime.OutcomeSucceeded || o.Result == nil {
		detail := ""
		if o.ExternalDetail != nil {
			detail = o.ExternalDetail.Text
		}
		t.Fatalf("outcome %s/%s %s, want success", o.Status, o.ReasonCode, detail)
	}
	if out != nil {
		if err := json.Unmarshal(o.Result.Structured, out); err != nil {
			t.Fatalf("decode %s: %v", o.Result.Structured, err)
		}
	}
}

// failedWith requires the tool's own failure with code. The pipeline keeps a tool's
// failure only as "code: message" in external_detail (RT-7).
func failedWith(t *testing.T, o runtime.Outcome, code string) {
	t.Helper()
	if o.Status != runtime.OutcomeFailed || o.ReasonCode != runtime.ReasonToolFailure || o.ExternalDetail == nil {
		t.Fatalf("outcome %s/%s, want failed/tool_failure with %s", o.Status, o.ReasonCode, code)
	}
	if !strings.Contains(o.ExternalDetail.Text, code+": ") {
		t.Fatalf("external_detail %q, want the failure %s", o.ExternalDetail.Text, code)
	}
}

func snapshot(t *testing.T, dir string) tooltest.State {
	t.Helper()
	s, err := tooltest.WorkspaceState(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPipeline_WorkspaceIsConfinedToItsRoot(t *testing.T) {
	base := t.TempDir()
	ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	writeFile(t, outside, "secret.txt", "outside\n")
	writeFile(t, ws, "inside.txt", "inside\n")
	symlink(t, outside, ws, "link")
	symlink(t, filepath.Join(outside, "secret.txt"), ws, "filelink")
	before := snapshot(t, outside)
	p := newPipe(t, ws)

	refusedWrites := []struct{ args, code string }{
		{`{"path": "../outside/evil.txt", "text": "x"}`, codeInvalidPath},
		{`{"path": "../outside/secret.txt", "text": "x", "mode": "overwrite"}`, codeInvalidPath},
		{`{"path": "a/../../outside/evil.txt", "text": "x", "mode": "append"}`, codeInvalidPath},
		{`{"path": "link/evil.txt", "text": "x"}`, codeOutsideWorkspace},
		{`{"path": "link/new/dir/evil.txt", "text": "x", "mode": "overwrite"}`, codeOutsideWorkspace},
		{`{"path": "link/secret.txt", "text": "x", "mode": "overwrite"}`, codeOutsideWorkspace},
		{`{"path": "filelink", "text": "x", "mode": "append"}`, codeOutsideWorkspace},
		{`{"path": "` + filepath.Join(outside, "abs.txt") + `", "text": "x"}`, codeOutsideWorkspace},
	}
	for i, w := range refusedWrites {
		callID := "w" + string(rune('0'+i))
		r := p.call("workspace.write_text", callID, w.args)
		failedWith(t, r.Outcome, w.code)
		// Refused in Prepare: the row shows the effect was never started.
		if inv := row(t, r); inv.EffectSentAt != nil {
			t.Errorf("%s: a refused write recorded a watermark", w.args)
		}
	}
	failedWith(t, p.exec("workspace.read_text", "r1", `{"path": "link/secret.txt"}`), codeOutsideWorkspace)
	failedWith(t, p.exec("workspace.read_text", "r2", `{"path": "filelink"}`), codeOutsideWorkspace)
	failedWith(t, p.exec("workspace.read_text", "r3", `{"path": "../outside/secret.txt"}`), codeInvalidPath)
	failedWith(t, p.exec("workspace.list", "l1", `{"path": "link"}`), codeOutsideWorkspace)
	failedWith(t, p.exec("workspace.list", "l2", `{"path": ".."}`), codeInvalidPath)

	if d := snapshot(t, outside).Diff(before); len(d) > 0 {
		t.Fatalf("outside the workspace: %s", strings.Join(d, "; "))
	}
	if _, err := os.Lstat(filepath.Join(base, "evil.txt")); !os.IsNotExist(err) {
		t.Fatalf("a file appeared beside the workspace: %v", err)
	}
	// Inside, the same tools work, and a listing shows the symlinks without following them.
	var list gen.WorkspaceListResult
	succeeded(t, p.exec("workspace.list", "l3", `{"path": ".", "recursive": true}`), &list)
	var got []string
	for _, e := range list.Entries {
		got = append(got, e.Path+":"+string(e.Type))
	}
	if want := "filelink:symlink inside.txt:file link:symlink"; strings.Join(got, " ") != want {
		t.Errorf("list = %v, want %s", got, want)
	}
}

func TestPipeline_WriteTextCreateThenOverwrite(t *testing.T) {
	ws := t.TempDir()
	p := newPipe(t, ws)
	var res gen.WorkspaceWriteTextResult
	r := p.call("workspace.write_text", "c1", `{"path": "docs/plan.md", "text": "v1\n"}`)
	succeeded(t, r.Outcome, &res)
	if res.BytesWritten != 3 || readFile(t, ws, "docs/plan.md") != "v1\n" {
		t.Fatalf("create: %+v, content %q", res, readFile(t, ws, "docs/plan.md"))
	}
	if inv := row(t, r); inv.EffectSentAt == nil || inv.Status != store.StatusSucceeded {
		t.Errorf("create row: status %s, effect_sent_at %v; want SUCCEEDED with a watermark", inv.Status, inv.EffectSentAt)
	}
	// A second create of the same path (a new call) is refused before the watermark.
	args := `{"path": "docs/plan.md", "text": "v2\n", "mode": "create"}`
	r = p.call("workspace.write_text", "c2", args)
	failedWith(t, r.Outcome, codeAlreadyExists)
	if inv := row(t, r); inv.EffectSentAt != nil {
		t.Error("a refused create recorded a watermark")
	}
	overwrite := p.call("workspace.write_text", "c3", `{"path": "docs/plan.md", "text": "v2\n", "mode": "overwrite"}`)
	succeeded(t, overwrite.Outcome, &res)
	var read gen.WorkspaceReadTextResult
	succeeded(t, p.exec("workspace.read_text", "c4", `{"path": "docs/plan.md"}`), &read)
	if read.Text != "v2\n" || read.Sha256 != res.Sha256 {
		t.Fatalf("read back %q (%s), want v2 (%s)", read.Text, read.Sha256, res.Sha256)
	}
	// The overwrite's idempotent_when held, and the row recorded it for recovery (RT-4).
	if inv := row(t, overwrite); inv.IdempotentWhen == nil || !*inv.IdempotentWhen {
		t.Errorf("overwrite row: idempotent_when %v, want true", inv.IdempotentWhen)
	}
}

func TestPipeline_ReplayedCallIsNotExecutedTwice(t *testing.T) {
	ws := t.TempDir()
	p := newPipe(t, ws)
	args := `{"path": "log.txt", "text": "line\n", "mode": "append"}`
	first := p.exec("workspace.write_text", "a1", args)
	succeeded(t, first, nil)
	// The same call (same run, step and call id) again, keys reordered, other whitespace.
	again := p.exec("workspace.write_text", "a1", "{ \"mode\":\"append\",\n \"text\":\"line\\n\", \"path\":\"log.txt\" }")
	succeeded(t, again, nil)
	if first.Replayed || !again.Replayed {
		t.Errorf("Replayed = %v then %v, want false then true", first.Replayed, again.Replayed)
	}
	if string(again.Result.Structured) != string(first.Result.Structured) {
		t.Errorf("replay returned %s, want the recorded %s", again.Result.Structured, first.Result.Structured)
	}
	if got := readFile(t, ws, "log.txt"); got != "line\n" {
		t.Fatalf("log.txt = %q: the replayed append ran again", got)
	}
	// A new call id is a new call: it appends.
	succeeded(t, p.exec("workspace.write_text", "a2", args), nil)
	if got := readFile(t, ws, "log.txt"); got != "line\nline\n" {
		t.Fatalf("log.txt = %q after a second call", got)
	}
	// A read is recorded once and replayed too, even after the file changed.
	r1 := p.exec("workspace.read_text", "r1", `{"path": "log.txt"}`)
	writeFile(t, ws, "log.txt", "changed\n")
	r2 := p.exec("workspace.read_text", "r1", `{"path":"log.txt"}`)
	if !r2.Replayed || string(r2.Result.Structured) != string(r1.Result.Structured) {
		t.Errorf("read replay: replayed %v, %s; want the recorded %s", r2.Replayed, r2.Result.Structured, r1.Result.Structured)
	}
}

func TestPipeline_ReviewMergeMergesABranch(t *testing.T) {
	g := newGitRepo(t)
	g.git("switch", "-q", "-c", "feature/login")
	tip := g.commit("login.go", "package login\n", "add login")
	g.git("switch", "-q", "main")
	g.commit("main.txt", "m\n", "main moves on")
	head := g.git("rev-parse", "HEAD")
	p := newPipe(t, g.dir)

	args := `{"branch": "feature/login"}`
	var res gen.ReviewMergeResult
	merged := p.call("review.merge", "m1", args)
	succeeded(t, merged.Outcome, &res)
	if res.MergedCommit != tip || res.Into != "main" || res.MergeCommit != g.git("rev-parse", "HEAD") {
		t.Fatalf("result %+v; HEAD %s", res, g.git("rev-parse", "HEAD"))
	}
	if parents := strings.Fields(g.git("rev-list", "--parents", "-n1", "HEAD")); len(parents) != 3 || parents[1] != head || parents[2] != tip {
		t.Fatalf("merge commit parents %v, want %s %s", parents[1:], head, tip)
	}
	if readFile(t, g.dir, "login.go") != "package login\n" {
		t.Fatal("the branch's file is not in the work tree")
	}
	if inv := row(t, merged); inv.EffectSentAt == nil {
		t.Error("merged without a recorded watermark")
	}
	// The same call again: the recorded outcome, no second merge.
	again := p.exec("review.merge", "m1", `{ "branch" : "feature/login" }`)
	if !again.Replayed || g.git("rev-parse", "HEAD") != res.MergeCommit {
		t.Fatalf("replay: replayed %v, HEAD %s; want the recorded merge %s", again.Replayed, g.git("rev-parse", "HEAD"), res.MergeCommit)
	}
	// A new call for the same branch finds nothing left to merge.
	failedWith(t, p.exec("review.merge", "m2", args), codeAlreadyMerged)
}

func TestPipeline_WriteUnderDotGitIsHeldForApproval(t *testing.T) {
	ws := t.TempDir()
	p := newPipe(t, ws)
	o := p.exec("workspace.write_text", "g1", `{"path": ".git/hooks/pre-commit", "text": "#!/bin/sh\n"}`)
	if o.Status != runtime.OutcomeUnavailable || o.ReasonCode != runtime.ReasonApprovalPending {
		t.Fatalf("outcome %s/%s, want unavailable/approval_pending", o.Status, o.ReasonCode)
	}
	notExist(t, ws, ".git")
}

// The workspace is a plain directory inside another repository: git's discovery walks
// up out of the workspace, so review.merge must refuse rather than merge up there.
func TestPipeline_ReviewMergeIgnoresARepositoryAboveTheWorkspace(t *testing.T) {
	g := newGitRepo(t)
	g.git("switch", "-q", "-c", "feature")
	g.commit("f.txt", "f\n", "f")
	g.git("switch", "-q", "main")
	head := g.git("rev-parse", "HEAD")
	ws := filepath.Join(g.dir, "workspaces", "run1")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	p := newPipe(t, ws)
	failedWith(t, p.exec("review.merge", "m1", `{"branch": "feature"}`), codeNotGitRepository)
	if now := g.git("rev-parse", "HEAD"); now != head {
		t.Fatalf("the repository above the workspace was merged into: HEAD %s, was %s", now, head)
	}
}

// A .git file is workspace content; written through workspace.write_text (path ".git"
// is not under ".git/", so approval_when does not hold it), it can point git at a
// repository outside the workspace.
func TestPipeline_ReviewMergeIgnoresAGitfileLeadingOutside(t *testing.T) {
	g := newGitRepo(t) // outside the workspace
	g.git("switch", "-q", "-c", "feature")
	g.commit("f.txt", "f\n", "f")
	g.git("switch", "-q", "main")
	head := g.git("rev-parse", "HEAD")
	ws := t.TempDir()
	p := newPipe(t, ws)
	// Writing ".git" itself is now held for approval (approval_when); plant the file
	// as an approved write would leave it.
	if err := os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: "+filepath.Join(g.dir, ".git")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The tracked files, as they are in that repository, so its work tree looks clean.
	succeeded(t, p.exec("workspace.write_text", "w2", `{"path": "README.md", "text": "hello\n"}`), nil)
	o := p.exec("review.merge", "m1", `{"branch": "feature"}`)
	if now := g.git("rev-parse", "HEAD"); now != head {
		t.Fatalf("review.merge merged in the repository outside the workspace (outcome %s/%s): HEAD %s, was %s",
			o.Status, o.ReasonCode, now, head)
	}
	if o.Status == runtime.OutcomeSucceeded {
		t.Fatalf("review.merge succeeded through a .git file leading outside the workspace")
	}
}

// approval_when sees the path as the caller wrote it: every other spelling of a path
// under .git/ is refused by the tool (only clean paths are accepted), so none reaches
// .git/ without the approval the clean spelling needs.
func TestPipeline_EverySpellingOfDotGitIsHeldOrRefused(t *testing.T) {
	ws := t.TempDir()
	p := newPipe(t, ws)
	for i, path := range []string{"./.git/config", ".//.git/info/exclude"} {
		o := p.exec("workspace.write_text", "g"+string(rune('0'+i)), `{"path": "`+path+`", "text": "[core]\n"}`)
		failedWith(t, o, codeInvalidPath)
	}
	notExist(t, ws, ".git")
}

// The pipeline resolves workspace paths before anything judges them (SEC-1): a symlink
// inside the workspace is followed, the row records the resolved path, and the tool
// acts on it.
func TestPipeline_SymlinkInsideTheWorkspaceIsResolvedBeforeTheChecks(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, ws, "real/a.txt", "old")
	symlink(t, "real", ws, "alias")
	p := newPipe(t, ws)

	var read gen.WorkspaceReadTextResult
	succeeded(t, p.exec("workspace.read_text", "r1", `{"path": "alias/a.txt"}`), &read)
	if read.Text != "old" {
		t.Fatalf("read %q", read.Text)
	}
	r := p.call("workspace.write_text", "w1", `{"path": "alias/a.txt", "text": "new", "mode": "overwrite"}`)
	succeeded(t, r.Outcome, nil)
	if got := readFile(t, ws, "real/a.txt"); got != "new" {
		t.Fatalf("target holds %q", got)
	}
	if args := string(row(t, r).Args); !strings.Contains(args, `"path":"real/a.txt"`) {
		t.Fatalf("the row records %s, want the resolved path", args)
	}
}

// Issue 14, finding 2: with scratch -> .git, a write to scratch/config was judged as
// "scratch/config" by approval_when and wrote .git/config with no approval. Resolved,
// it is .git/config to every check, and held like .git itself.
func TestAttack14_02_SymlinkToGitIsHeldLikeGit(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, ws, ".git/config", "[core]\n")
	symlink(t, ".git", ws, "scratch")
	p := newPipe(t, ws)
	for i, path := range []string{"scratch/config", "scratch/hooks/post-merge", "scratch"} {
		o := p.exec("workspace.write_text", "git"+string(rune('0'+i)), `{"path": "`+path+`", "text": "x", "mode": "overwrite"}`)
		if o.Status != runtime.OutcomeUnavailable || o.ReasonCode != runtime.ReasonApprovalPending {
			t.Errorf("write to %s: outcome %s/%s, want held for approval", path, o.Status, o.ReasonCode)
		}
	}
	if got := readFile(t, ws, ".git/config"); got != "[core]\n" {
		t.Fatalf(".git/config was written: %q", got)
	}
}
