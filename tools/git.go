package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toolgen/toolgen/runtime"
)

// Failure codes shared by the review tools.
const (
	codeNotGitRepository = "not_a_git_repository"
	codeInvalidBranch    = "invalid_branch"
	codeBranchNotFound   = "branch_not_found"
)

// gitRepo runs git in the workspace: "git -C <root> ...", as a child process with an
// argument vector (no shell), so no argument is ever interpreted twice, on the git
// directory the guard located and vetted (GIT_DIR, GIT_WORK_TREE: no discovery).
type gitRepo struct {
	ws    workspace
	guard *repoGuard
}

// gitHardening is passed to every git command. The repository's own configuration is
// workspace content, which a run may have written; the guard (repoGuard) refuses any
// key that is not on its allowlist before git runs, and these overrides are the second
// line behind it: each key that would run a program, prompt or reach the network gets
// an inert value (command-line -c beats every configuration file; each is accepted by
// git 2.39). diff.external is emptied rather than left alone: a patch-producing git diff
// then fails loudly ("cannot run"), so callers pass --no-ext-diff or ask for names only.
// gc.auto and maintenance.auto keep git merge from starting a background gc that would
// outlive the call.
var gitHardening = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "core.sshCommand=",
	"-c", "core.pager=cat",
	"-c", "core.editor=true",
	"-c", "sequence.editor=true",
	"-c", "core.askPass=",
	"-c", "credential.helper=",
	"-c", "diff.external=",
	"-c", "commit.gpgSign=false",
	"-c", "protocol.allow=never",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
}

// gitWaitDelay bounds how long a git command's output pipes are drained once git has
// exited or been killed at the deadline: a child git left behind holding them cannot
// keep the call waiting.
const gitWaitDelay = 2 * time.Second

// gitCommand returns a git command with the hardening flags, bound to ctx: at the
// deadline git and everything it started is killed (killProcessGroup), and
// gitWaitDelay later the call returns whatever the children do. The caller sets Dir,
// Env and the standard streams.
func gitCommand(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "git", append(slices.Clone(gitHardening), args...)...)
	cmd.WaitDelay = gitWaitDelay
	killProcessGroup(cmd)
	return cmd
}

// gitEnvDrop are environment variables that would point git at another repository
// than the workspace's.
var gitEnvDrop = []string{
	"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
	"GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_PREFIX", "GIT_CEILING_DIRECTORIES",
}

// gitError is a git command that ran and exited non-zero.
type gitError struct {
	args   []string
	code   int
	stderr string
}

func (e *gitError) Error() string {
	return fmt.Sprintf("git %s: exit %d: %s", strings.Join(e.args, " "), e.code, e.stderr)
}

// exitCode returns the exit code of a failed git command, or -1 for any other error.
func exitCode(err error) int {
	var ge *gitError
	if errors.As(err, &ge) {
		return ge.code
	}
	return -1
}

// run runs git with args and returns its trimmed standard output. A non-zero exit is a
// *gitError; failing to start git at all is an internal error. The guard checks the
// repository again first: its configuration may have changed since the last command.
func (g gitRepo) run(ctx context.Context, args ...string) (string, error) {
	if err := g.guard.check(ctx); err != nil {
		return "", err
	}
	cmd := gitCommand(ctx, append([]string{"-C", g.ws.root}, args...)...)
	cmd.Env = append(gitEnv(), "GIT_DIR="+g.guard.dir, "GIT_WORK_TREE="+g.ws.root)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ctx.Err() == nil {
		return strings.TrimSpace(stdout.String()), &gitError{args: args, code: ee.ExitCode(), stderr: strings.TrimSpace(stderr.String())}
	}
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(stdout.String()), nil
}

func gitEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(gitEnvDrop, name) {
			env = append(env, kv)
		}
	}
	// Never wait for a password or an editor, and keep messages parseable.
	// GIT_OPTIONAL_LOCKS=0: read-only commands such as git status must not refresh
	// .git/index, or Prepare would leave a mark before the watermark.
	// GIT_PAGER=cat: no pager, whatever the configuration says.
	return append(env, "GIT_TERMINAL_PROMPT=0", "GIT_EDITOR=true", "GIT_PAGER=cat", "LC_ALL=C", "GIT_OPTIONAL_LOCKS=0")
}

// openGitRepo checks that the workspace is the top of its own git work tree, and that
// the repository's configuration and git directory pass the guard (unsafe_repository_config
// otherwise), before any git command runs in it.
func openGitRepo(ctx context.Context, tc *runtime.ExecContext) (gitRepo, error) {
	ws, err := openWorkspace(tc)
	if err != nil {
		return gitRepo{}, err
	}
	if _, err := exec.LookPath("git"); err != nil {
		return gitRepo{}, fmt.Errorf("git is not installed on this worker: %w", err)
	}
	guard, err := guardRepository(ctx, ws)
	if err != nil {
		return gitRepo{}, err
	}
	g := gitRepo{ws: ws, guard: guard}
	out, err := g.run(ctx, "rev-parse", "--is-inside-work-tree")
	if exitCode(err) > 0 || err == nil && out != "true" {
		return g, runtime.Failf(codeNotGitRepository, "the workspace is not inside a git work tree")
	}
	if err != nil {
		return g, err
	}
	// The repository must be the workspace's own. The guard located its git directory
	// inside the workspace and git runs on exactly that; what git reports is checked
	// all the same.
	root, err := filepath.EvalSymlinks(ws.root)
	if err != nil {
		return g, err
	}
	top, err := g.run(ctx, "rev-parse", "--show-toplevel")
	if err != nil {
		return g, err
	}
	gitDir, err := g.run(ctx, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return g, err
	}
	if !sameOrInside(root, top, true) || !sameOrInside(root, gitDir, false) {
		return g, runtime.Failf(codeNotGitRepository, "the workspace's git repository is not the workspace's own (its top level or git directory is outside the workspace)")
	}
	return g, nil
}

// sameOrInside reports whether path (resolved) is root itself, or, unless exact, a
// path inside root.
func sameOrInside(root, path string, exact bool) bool {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false
	}
	if exact {
		return real == root
	}
	rel, err := filepath.Rel(root, real)
	return err == nil && filepath.IsLocal(rel)
}

// branchTip checks the grammar of a local branch name and returns the commit it points
// at. The check also refuses a name git would read as an option.
func (g gitRepo) branchTip(ctx context.Context, branch string) (string, error) {
	if strings.HasPrefix(branch, "-") {
		return "", runtime.Failf(codeInvalidBranch, "%q is not a valid branch name", branch)
	}
	if _, err := g.run(ctx, "check-ref-format", "--branch", branch); err != nil {
		if exitCode(err) > 0 {
			return "", runtime.Failf(codeInvalidBranch, "%q is not a valid branch name", branch)
		}
		return "", err
	}
	tip, err := g.run(ctx, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch+"^{commit}")
	if exitCode(err) > 0 {
		return "", runtime.Failf(codeBranchNotFound, "there is no local branch %q", branch)
	}
	return tip, err
}
