package tools

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/runtime"
)

// testCall is one call of a tool through its generated wrapper, as the pipeline makes it.
type testCall struct {
	dir string
	// marked is set when the watermark is recorded; onMark, when set, runs first (inside
	// MarkEffectSent) and its error fails the watermark.
	marked bool
	onMark func() error
	tc     *runtime.ExecContext
}

// newCall returns a call context for the workspace dir (empty: no workspace).
func newCall(t *testing.T, dir string) *testCall {
	t.Helper()
	c := &testCall{dir: dir}
	c.tc = runtime.NewExecContext(runtime.ExecContextConfig{
		Identity:  runtime.Identity{Tenant: "acme", Principal: "alice", RunID: "run-1", Step: 1, CallID: "call-1"},
		Workspace: dir,
		MarkEffectSent: func(ctx context.Context) error {
			if c.onMark != nil {
				if err := c.onMark(); err != nil {
					return err
				}
			}
			c.marked = true
			return nil
		},
	})
	return c
}

// exec runs tool with the JSON arguments args and returns its result; an internal error
// fails the test.
func (c *testCall) exec(t *testing.T, tool runtime.Tool, args string) runtime.ToolResult {
	t.Helper()
	res, err := tool.Execute(context.Background(), c.tc, json.RawMessage(args))
	if err != nil {
		t.Fatalf("%s(%s): internal error: %v", tool.Spec().Name, args, err)
	}
	return res
}

// ok runs the call, requires success and decodes the structured result into out.
func (c *testCall) ok(t *testing.T, tool runtime.Tool, args string, out any) {
	t.Helper()
	res := c.exec(t, tool, args)
	if !res.OK || res.Failure != nil {
		t.Fatalf("%s(%s): want success, got failure %v", tool.Spec().Name, args, res.Failure)
	}
	if err := json.Unmarshal(res.Structured, out); err != nil {
		t.Fatalf("%s: decode result %s: %v", tool.Spec().Name, res.Structured, err)
	}
}

// fails runs the call and requires a ToolFailure with code; it returns the failure.
func (c *testCall) fails(t *testing.T, tool runtime.Tool, args, code string) *runtime.ToolFailure {
	t.Helper()
	res := c.exec(t, tool, args)
	if res.OK || res.Failure == nil {
		t.Fatalf("%s(%s): want failure %s, got success %s", tool.Spec().Name, args, code, res.Structured)
	}
	if res.Failure.Code != code {
		t.Fatalf("%s(%s): want failure %s, got %s: %s", tool.Spec().Name, args, code, res.Failure.Code, res.Failure.Message)
	}
	return res.Failure
}

// jsonArgs encodes a map of arguments.
func jsonArgs(t *testing.T, args map[string]any) string {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// writeFile writes a file under dir, creating its parents.
func writeFile(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func notExist(t *testing.T, dir, rel string) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(rel))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s: want it not to exist, got %v", rel, err)
	}
}

// symlink makes link (relative to dir) point at target, or skips where that is impossible.
func symlink(t *testing.T, target, dir, link string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(link))); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
}

// gitTest is a git repository in a temporary workspace.
type gitTest struct {
	t   *testing.T
	dir string
}

// newGitRepo creates a repository on branch main with one commit, or skips the test
// when git is not installed.
func newGitRepo(t *testing.T) *gitTest {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not on PATH")
	}
	g := &gitTest{t: t, dir: t.TempDir()}
	g.git("init", "-q", "-b", "main")
	// The tools run git with the repository's own configuration: the identity for the
	// merge commit comes from here, and signing must not need a key.
	g.git("config", "user.name", "Test")
	g.git("config", "user.email", "test@example.com")
	g.git("config", "commit.gpgsign", "false")
	g.commit("README.md", "hello\n", "initial")
	return g
}

// git runs a git command in the repository and returns its trimmed output.
func (g *gitTest) git(args ...string) string {
	g.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", g.dir}, args...)...)
	cmd.Env = gitEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		g.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes a file and commits it on the current branch; it returns the commit.
func (g *gitTest) commit(rel, content, msg string) string {
	g.t.Helper()
	writeFile(g.t, g.dir, rel, content)
	g.git("add", rel)
	g.git("commit", "-q", "-m", msg)
	return g.git("rev-parse", "HEAD")
}
