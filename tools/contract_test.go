package tools

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/tooltest"
	"github.com/toolgen/toolgen/runtime/tooltest/tooltestsqlite"
)

// builtin returns the registered builtin called name, exactly as the registry gets it
// (the generated wrapper around the implementation).
func builtin(t *testing.T, name string) runtime.Tool {
	t.Helper()
	for _, tool := range Builtins() {
		if tool.Spec().Name == name {
			return tool
		}
	}
	t.Fatalf("no builtin %s", name)
	return nil
}

// put writes a file in the workspace for a case's Setup.
func put(t tooltest.TB, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatalf("setup: %v", err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatalf("setup: %v", err)
	}
}

// gitIn runs git in dir for a case's Setup. Dates and identity are fixed, so the same
// Setup builds the same commits (the same SHAs) in every fresh workspace.
func gitIn(t tooltest.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(gitEnv(),
		"GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("setup: git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitRepoIn makes dir a repository on main with one commit, a branch feature/x one
// commit ahead of it, and main moved on by one more commit; it returns feature/x's tip.
func gitRepoIn(t tooltest.TB, dir string) string {
	t.Helper()
	gitIn(t, dir, "init", "-q", "-b", "main")
	gitIn(t, dir, "config", "user.name", "Test")
	gitIn(t, dir, "config", "user.email", "test@example.com")
	gitIn(t, dir, "config", "commit.gpgsign", "false")
	commitIn := func(rel, content, msg string) string {
		put(t, dir, rel, content)
		gitIn(t, dir, "add", rel)
		gitIn(t, dir, "commit", "-q", "-m", msg)
		return gitIn(t, dir, "rev-parse", "HEAD")
	}
	commitIn("README.md", "hello\n", "initial")
	gitIn(t, dir, "switch", "-q", "-c", "feature/x")
	tip := commitIn("x.txt", "x\n", "add x")
	gitIn(t, dir, "switch", "-q", "main")
	commitIn("main.txt", "m\n", "main moves on")
	return tip
}

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not on PATH")
	}
}

// withOutside is a Setup that also makes a directory outside the workspace, with a
// symlink "escape" to it inside the workspace, and an Observe that snapshots both: a
// refused escape must leave nothing on either side.
type withOutside struct{ dir string }

func (w *withOutside) setup(t tooltest.TB, env *tooltest.Env) {
	w.dir = t.TempDir()
	put(t, w.dir, "secret.txt", "outside\n")
	if err := os.Symlink(w.dir, filepath.Join(env.Workspace, "escape")); err != nil {
		t.Fatalf("setup: symlink: %v", err)
	}
}

func (w *withOutside) observe(t tooltest.TB, env *tooltest.Env) tooltest.State {
	ws, err := tooltest.WorkspaceState(env.Workspace)
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	out, err := tooltest.WorkspaceState(w.dir)
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	st := maps.Clone(ws)
	for k, v := range out {
		st["outside:"+strings.TrimPrefix(k, "workspace:")] = v
	}
	return st
}

func TestContract_WorkspaceWriteText(t *testing.T) {
	existing := func(t tooltest.TB, env *tooltest.Env) { put(t, env.Workspace, "notes/a.txt", "old\n") }
	escape := &withOutside{}
	tooltest.Run(t, tooltestsqlite.TempFile, builtin(t, "workspace.write_text"),
		tooltest.Case{Name: "create", Args: `{"path": "notes/a.txt", "text": "hello\n"}`},
		tooltest.Case{Name: "create explicit", Args: `{"path": "a.txt", "text": "hello\n", "mode": "create"}`},
		tooltest.Case{Name: "create over existing", Args: `{"path": "notes/a.txt", "text": "new\n", "mode": "create"}`,
			Setup: existing, WantFailure: codeAlreadyExists},
		tooltest.Case{Name: "overwrite", Args: `{"path": "notes/a.txt", "text": "new\n", "mode": "overwrite"}`, Setup: existing},
		tooltest.Case{Name: "overwrite new file", Args: `{"path": "b/c.txt", "text": "new\n", "mode": "overwrite"}`},
		tooltest.Case{Name: "append", Args: `{"path": "notes/a.txt", "text": "more\n", "mode": "append"}`, Setup: existing},
		tooltest.Case{Name: "append new file", Args: `{"path": "log.txt", "text": "first\n", "mode": "append"}`},
		tooltest.Case{Name: "dotdot", Args: `{"path": "../evil.txt", "text": "x", "mode": "overwrite"}`,
			Setup: escape.setup, Observe: escape.observe, WantFailure: codeInvalidPath},
		tooltest.Case{Name: "symlink escape", Args: `{"path": "escape/secret.txt", "text": "x", "mode": "overwrite"}`,
			Setup: escape.setup, Observe: escape.observe, WantFailure: codeOutsideWorkspace},
		tooltest.Case{Name: "symlink escape new file", Args: `{"path": "escape/new/file.txt", "text": "x"}`,
			Setup: escape.setup, Observe: escape.observe, WantFailure: codeOutsideWorkspace},
	)
}

func TestContract_WorkspaceReadText(t *testing.T) {
	escape := &withOutside{}
	tooltest.Run(t, tooltestsqlite.TempFile, builtin(t, "workspace.read_text"),
		tooltest.Case{Name: "read", Args: `{"path": "src/main.go", "max_bytes": 8}`,
			Setup: func(t tooltest.TB, env *tooltest.Env) { put(t, env.Workspace, "src/main.go", "package main\n") }},
		tooltest.Case{Name: "missing", Args: `{"path": "nope.txt"}`, WantFailure: codeNotFound},
		tooltest.Case{Name: "symlink escape", Args: `{"path": "escape/secret.txt"}`,
			Setup: escape.setup, Observe: escape.observe, WantFailure: codeOutsideWorkspace},
	)
}

func TestContract_WorkspaceList(t *testing.T) {
	tooltest.Run(t, tooltestsqlite.TempFile, builtin(t, "workspace.list"),
		tooltest.Case{Name: "recursive", Args: `{"path": ".", "recursive": true, "max_entries": 2}`,
			Setup: func(t tooltest.TB, env *tooltest.Env) {
				put(t, env.Workspace, "a.txt", "a")
				put(t, env.Workspace, "d/b.txt", "b")
			}},
		tooltest.Case{Name: "not a directory", Args: `{"path": "a.txt"}`, WantFailure: codeNotDirectory,
			Setup: func(t tooltest.TB, env *tooltest.Env) { put(t, env.Workspace, "a.txt", "a") }},
	)
}

func TestContract_ReviewMerge(t *testing.T) {
	needGit(t)
	repo := func(t tooltest.TB, env *tooltest.Env) { gitRepoIn(t, env.Workspace) }
	tooltest.Run(t, tooltestsqlite.TempFile, builtin(t, "review.merge"),
		tooltest.Case{Name: "merge", Args: `{"branch": "feature/x", "message": "Land x"}`, Setup: repo},
		tooltest.Case{Name: "conflict", Args: `{"branch": "feature/x"}`, WantFailure: codeMergeConflict,
			Setup: func(t tooltest.TB, env *tooltest.Env) {
				gitRepoIn(t, env.Workspace)
				put(t, env.Workspace, "x.txt", "main's x\n")
				gitIn(t, env.Workspace, "add", "x.txt")
				gitIn(t, env.Workspace, "commit", "-q", "-m", "conflicting x")
			}},
		tooltest.Case{Name: "same branch", Args: `{"branch": "main"}`, WantFailure: codeSameBranch, Setup: repo},
		tooltest.Case{Name: "unknown branch", Args: `{"branch": "nope"}`, WantFailure: codeBranchNotFound, Setup: repo},
		tooltest.Case{Name: "not a repository", Args: `{"branch": "feature/x"}`, WantFailure: codeNotGitRepository},
	)
}

func TestContract_ReviewApprove(t *testing.T) {
	needGit(t)
	// The Setup is deterministic, so the tip it builds in a scratch directory is the
	// tip every fresh workspace gets.
	tip := gitRepoIn(t, t.TempDir())
	repo := func(t tooltest.TB, env *tooltest.Env) {
		if got := gitRepoIn(t, env.Workspace); got != tip {
			t.Fatalf("setup: the repository is not deterministic: tip %s, want %s", got, tip)
		}
	}
	tooltest.Run(t, tooltestsqlite.TempFile, builtin(t, "review.approve"),
		tooltest.Case{Name: "approve tip", Args: `{"branch": "feature/x", "commit": "` + tip + `", "comment": "looks good"}`, Setup: repo},
		tooltest.Case{Name: "stale commit", Args: `{"branch": "main", "commit": "` + tip + `"}`, WantFailure: codeStaleCommit, Setup: repo},
	)
}

func TestContract_ProtocolDispatch(t *testing.T) {
	tooltest.Run(t, tooltestsqlite.TempFile, builtin(t, "protocol.dispatch"),
		tooltest.Case{Name: "dispatch", Args: `{"mode": "implement", "reason": "the plan is written"}`},
		tooltest.Case{Name: "blank reason", Args: `{"mode": "implement", "reason": "   "}`, WantFailure: "missing_reason"},
	)
}

// conversation.ask_user suspends the run (RT-11): the suite checks that it changes
// nothing, that repeating the suspended call does not ask again (call_suspended), and
// that once resumed the call replays the user's answer without running.
func TestContract_ConversationAskUser(t *testing.T) {
	tooltest.Run(t, tooltestsqlite.TempFile, builtin(t, "conversation.ask_user"),
		tooltest.Case{Name: "ask", Args: `{"question": "Which database?", "choices": ["sqlite", "postgres"]}`,
			ResumeAnswer: `{"answer": "sqlite"}`},
		tooltest.Case{Name: "duplicate choices", Args: `{"question": "Pick", "choices": ["a", "a"]}`, WantFailure: "duplicate_choice"},
	)
}

// identity.whoami binds all its arguments (SPEC-4): the model supplies none.
func TestContract_IdentityWhoami(t *testing.T) {
	tooltest.Run(t, tooltestsqlite.TempFile, builtin(t, "identity.whoami"),
		tooltest.Case{Name: "whoami", Args: `{}`},
	)
}

// Every builtin has a contract test above.
func TestContract_EveryBuiltinIsCovered(t *testing.T) {
	covered := map[string]bool{
		"workspace.write_text": true, "workspace.read_text": true, "workspace.list": true, "identity.whoami": true,
		"review.merge": true, "review.approve": true, "protocol.dispatch": true, "conversation.ask_user": true,
	}
	for _, tool := range Builtins() {
		if !covered[tool.Spec().Name] {
			t.Errorf("builtin %s has no contract test (tooltest.Run) in contract_test.go", tool.Spec().Name)
		}
	}
}

// A tracked file whose stat data changed but whose content did not (a tool rewrote it
// with the same text, a checkout touched it): git status, run by review.merge's Prepare
// to find uncommitted changes, would refresh .git/index, a change in the workspace
// before the watermark. GIT_OPTIONAL_LOCKS=0 in gitEnv stops it; without it this test
// fails (the contract suite sees the index change before the watermark).
func TestContract_ReviewMerge_TouchedFile(t *testing.T) {
	needGit(t)
	tooltest.Run(t, tooltestsqlite.TempFile, builtin(t, "review.merge"),
		tooltest.Case{Name: "merge after touch", Args: `{"branch": "feature/x"}`,
			Setup: func(t tooltest.TB, env *tooltest.Env) {
				gitRepoIn(t, env.Workspace)
				later := time.Now().Add(time.Hour)
				if err := os.Chtimes(filepath.Join(env.Workspace, "README.md"), later, later); err != nil {
					t.Fatalf("setup: %v", err)
				}
			}},
	)
}
