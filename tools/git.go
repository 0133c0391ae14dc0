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

	"github.com/toolgen/toolgen/runtime"
)

// Failure codes shared by the review tools.
const (
	codeNotGitRepository = "not_a_git_repository"
	codeInvalidBranch    = "invalid_branch"
	codeBranchNotFound   = "branch_not_found"
)

// gitRepo runs git in the workspace: "git -C <root> ...", as a child process with an
// argument vector (no shell), so no argument is ever interpreted twice.
type gitRepo struct {
	ws workspace
}

// gitHardening is passed to every git command. The repository's own configuration is
// workspace content, which a run may have written: hooks and an fsmonitor command
// would run arbitrary programs in the worker, so neither is honoured.
var gitHardening = []string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"}

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
// *gitError; failing to start git at all is an internal error.
func (g gitRepo) run(ctx context.Context, args ...string) (string, error) {
	full := append(append([]string{"-C", g.ws.root}, gitHardening...), args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Env = gitEnv()
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
	return append(env, "GIT_TERMINAL_PROMPT=0", "GIT_EDITOR=true", "LC_ALL=C", "GIT_OPTIONAL_LOCKS=0")
}

// openGitRepo checks that the workspace is inside a git work tree.
func openGitRepo(ctx context.Context, tc *runtime.ExecContext) (gitRepo, error) {
	ws, err := openWorkspace(tc)
	if err != nil {
		return gitRepo{}, err
	}
	if _, err := exec.LookPath("git"); err != nil {
		return gitRepo{}, fmt.Errorf("git is not installed on this worker: %w", err)
	}
	g := gitRepo{ws: ws}
	out, err := g.run(ctx, "rev-parse", "--is-inside-work-tree")
	if exitCode(err) > 0 || err == nil && out != "true" {
		return g, runtime.Failf(codeNotGitRepository, "the workspace is not inside a git work tree")
	}
	if err != nil {
		return g, err
	}
	// The repository must be the workspace's own: git searches upward from the
	// workspace, and a .git file can point anywhere, so a workspace inside another
	// repository, or one holding "gitdir: /elsewhere", would act on a repository the
	// run does not own.
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
