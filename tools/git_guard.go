package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/toolgen/toolgen/runtime"
)

// codeUnsafeRepositoryConfig refuses a workspace repository whose own configuration or
// git directory could make git run a program, or read outside the workspace (issue 14,
// finding 2). Nothing was run in the repository when a call fails with it.
const codeUnsafeRepositoryConfig = "unsafe_repository_config"

// The repository guard (SEC-1: no repository config makes a builtin run a program).
//
// Everything in a workspace repository's git directory is workspace content, which a run
// may have written, and git's configuration is a programming language: filters selected
// by attributes (filter.<x>.smudge/clean), merge drivers, diff drivers and textconv,
// core.sshCommand, core.pager, aliases, editors, credential helpers, gpg.program,
// include.path pulling in any file, core.worktree and alternates pointing git at other
// trees and object stores. Neutralising keys one by one with -c (a denylist) failed: any
// key nobody listed ran `id` in the worker. So the guard works the other way round:
//
//   - The git directory is located by the tool, not by git's discovery (the workspace
//     root's .git directory, or a "gitdir: X" file whose X resolves inside the
//     workspace), and every git command is then run with GIT_DIR and GIT_WORK_TREE set
//     to exactly that, so git reads no configuration but the vetted one (discovery could
//     settle on another directory — a parent, or the workspace root read as a bare
//     repository — and git reads a repository's configuration as soon as it finds it).
//     With GIT_DIR set, git skips its safe.directory ownership check (a discovery-time
//     guard against this very attack, which refused a repository owned by another user
//     outright); the allowlist stands in its place, whoever owns the repository.
//   - Before the first git command (before even git rev-parse), the repository's own
//     configuration files ($GIT_DIR/config and $GIT_DIR/config.worktree) are read, and
//     every key in them must be on an allowlist of keys that cannot run a program or
//     name a file; an unknown key is refused (unsafe_repository_config, naming the
//     keys). Includes are not followed: include.path and includeIf are themselves
//     refused.
//   - The configuration is parsed by git itself (git config --file - --no-includes
//     --null --list, reading the bytes the guard read, from standard input, outside any
//     repository: GIT_DIR=/dev/null), not by a parser of our own: a parser that read the
//     file differently from git (quoting, continuation lines, subsections, the
//     deprecated [section.subsection] form) would let a key past the allowlist that git
//     then honours. The command only parses and lists; the operator's own global and
//     system configuration is the operator's, and is trusted.
//   - A git directory with a commondir file, a non-empty objects/info/alternates, a
//     symlink resolving outside the git directory, or a special file (FIFO, socket,
//     device) is refused: each would let git read another repository's objects or
//     config — another tenant's workspace, the store, the operator's files — or block.
//   - Before every later git command the configuration files are compared with what was
//     vetted (and vetted again when they changed), and commondir and alternates are
//     checked again: a merge's Commit runs after its Prepare, possibly after an approval.
//   - Every git command still carries -c overrides for the keys that run programs
//     (gitHardening), as a second line should the first miss something.
//
// What remains: a process writing into the git directory concurrently with a call (not
// through the builtins) could change the configuration between the guard's read and
// git's; the -c overrides still hold then, the allowlist does not. Refusing unknown keys
// also refuses harmless ones nobody listed (a repository set up with git-lfs, say): such a
// repository is merged outside toolrun, or its configuration trimmed.
type repoGuard struct {
	root string // the workspace root, resolved
	dir  string // the git directory, resolved, inside root
	// vetted is the content of each configuration file as last vetted; a file absent
	// then has no entry.
	vetted map[string][]byte
}

// repoConfigFiles are the repository's own configuration files, relative to its git
// directory. config.worktree is read by git only with extensions.worktreeConfig, but is
// vetted whenever it exists, so that setting the extension later changes nothing.
var repoConfigFiles = []string{"config", "config.worktree"}

// maxRepoConfigSize bounds a configuration file the guard reads: git writes a few
// hundred bytes; a larger file is refused rather than read whole.
const maxRepoConfigSize = 1 << 20

// guardRepository locates the git directory of the workspace ws and vets it.
func guardRepository(ctx context.Context, ws workspace) (*repoGuard, error) {
	dir, err := locateGitDir(ws)
	if err != nil {
		return nil, err
	}
	g := &repoGuard{root: ws.root, dir: dir, vetted: map[string][]byte{}}
	if err := g.walk(ctx); err != nil {
		return nil, err
	}
	if err := g.check(ctx); err != nil {
		return nil, err
	}
	return g, nil
}

// locateGitDir returns the resolved git directory of the workspace: its root's .git
// directory, and nothing else. A .git file ("gitdir: X", as git writes for submodules
// and linked work trees) or a .git symlink would move the git directory — its config,
// its hooks — to a path that workspace.write_text's approval_when, which holds writes
// under .git/, does not cover: a write to ".repo/config" would need no approval. The
// builtins work on a plain repository, so either is refused (not_a_git_repository);
// the workspace is the top of its own work tree, or not a repository at all.
func locateGitDir(ws workspace) (string, error) {
	dotGit := filepath.Join(ws.root, ".git")
	fi, err := os.Lstat(dotGit)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", runtime.Failf(codeNotGitRepository, "the workspace is not the top of a git work tree (its root holds no .git)")
	case err != nil:
		return "", fmt.Errorf("stat .git: %w", err)
	case !fi.IsDir():
		return "", runtime.Failf(codeNotGitRepository, "the workspace's .git is not a directory (a gitdir file or a symlink moves the git directory out of .git/, where approvals cannot see it): the workspace tools work on a plain repository")
	}
	return dotGit, nil
}

// walk refuses a git directory holding a symlink that resolves outside it, or a file
// that is neither regular, a directory nor a symlink. It runs once per call, before the
// first git command; git never writes either.
func (g *repoGuard) walk(ctx context.Context) error {
	return filepath.WalkDir(g.dir, func(path string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			return fmt.Errorf("read the git directory: %w", err)
		}
		rel, _ := filepath.Rel(g.dir, path)
		switch t := d.Type(); {
		case t.IsDir(), t.IsRegular():
			return nil
		case t&fs.ModeSymlink != 0:
			real, err := filepath.EvalSymlinks(path)
			if err == nil {
				if r, rerr := filepath.Rel(g.dir, real); rerr == nil && filepath.IsLocal(r) {
					return nil
				}
			}
			return runtime.Failf(codeUnsafeRepositoryConfig, "the git directory's %q is a symlink leading out of the git directory", filepath.ToSlash(rel))
		default:
			return runtime.Failf(codeUnsafeRepositoryConfig, "the git directory's %q is not a regular file (a device, socket or named pipe)", filepath.ToSlash(rel))
		}
	})
}

// check refuses a git directory that shares another's objects or configuration, and vets
// its configuration files unless they are still what was vetted last. It runs before
// every git command.
func (g *repoGuard) check(ctx context.Context) error {
	// commondir makes this git directory a linked work tree's: refs, objects and config
	// would come from the directory it names.
	if _, err := os.Lstat(filepath.Join(g.dir, "commondir")); err == nil {
		return runtime.Failf(codeUnsafeRepositoryConfig, "the git directory has a commondir file: it borrows another repository's objects and configuration")
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("stat commondir: %w", err)
	}
	r, err := os.OpenRoot(g.dir)
	if err != nil {
		return fmt.Errorf("open the git directory: %w", err)
	}
	defer r.Close()
	// Alternates let a merge read another repository's objects (another tenant's).
	alt, err := readGitDirFile(ctx, r, filepath.Join("objects", "info", "alternates"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case len(bytes.TrimSpace(alt)) > 0:
		return runtime.Failf(codeUnsafeRepositoryConfig, "the git directory lists alternates (objects/info/alternates): it reads objects of another repository")
	}
	for _, name := range repoConfigFiles {
		data, err := readGitDirFile(ctx, r, name)
		present := err == nil
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		prev, vetted := g.vetted[name]
		if present == vetted && bytes.Equal(data, prev) {
			continue
		}
		delete(g.vetted, name)
		if present {
			if err := vetConfig(ctx, name, data); err != nil {
				return err
			}
			g.vetted[name] = data
		}
	}
	return nil
}

// readGitDirFile reads a small file of the git directory: a regular file of at most
// maxRepoConfigSize bytes, inside the git directory (r confines symlinks), never
// blocking on a FIFO.
func readGitDirFile(ctx context.Context, r *os.Root, name string) ([]byte, error) {
	shown := filepath.ToSlash(name)
	f, _, err := openRegular(r, name, shown)
	if err != nil {
		var tf *runtime.ToolFailure
		if errors.As(err, &tf) {
			return nil, runtime.Failf(codeUnsafeRepositoryConfig, "the git directory's %s is not a regular file", shown)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		// A symlink leading out of the git directory, say.
		return nil, runtime.Failf(codeUnsafeRepositoryConfig, "the git directory's %s cannot be read inside the git directory", shown)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(readerCtx{ctx, f}, maxRepoConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", shown, err)
	}
	if len(data) > maxRepoConfigSize {
		return nil, runtime.Failf(codeUnsafeRepositoryConfig, "the git directory's %s is larger than %d bytes", shown, maxRepoConfigSize)
	}
	return data, nil
}

// vetConfig lists the keys of the configuration file content data with git itself and
// refuses any key not on the allowlist.
func vetConfig(ctx context.Context, name string, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	cmd := gitCommand(ctx, "config", "--file", "-", "--no-includes", "--null", "--list")
	// Outside any repository: this git reads data and nothing else of the workspace's.
	cmd.Dir = os.TempDir()
	cmd.Env = append(gitEnv(), "GIT_DIR="+os.DevNull)
	cmd.Stdin = bytes.NewReader(data)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ctx.Err() == nil {
		// Git itself would refuse to run with it.
		return runtime.Failf(codeUnsafeRepositoryConfig, "the git directory's %s is not valid git configuration: %s", name, strings.TrimSpace(stderr.String()))
	}
	if err != nil {
		return fmt.Errorf("list the keys of %s: %w", name, err)
	}
	var refused []string
	for _, entry := range strings.Split(stdout.String(), "\x00") {
		if entry == "" {
			continue
		}
		key, value, hasValue := strings.Cut(entry, "\n")
		var v *string
		if hasValue {
			v = &value
		}
		if !safeConfigKey(key, v) && !slices.Contains(refused, key) {
			refused = append(refused, key)
		}
	}
	if len(refused) == 0 {
		return nil
	}
	slices.Sort(refused)
	shown := refused
	const maxShown = 10
	if len(shown) > maxShown {
		shown = shown[:maxShown]
	}
	// A subsection is any text the attacker chose: each key is quoted (no control
	// character reaches a terminal) and cut, so the message stays small.
	const maxKeyShown = 100
	quoted := make([]string, len(shown))
	for i, k := range shown {
		if len(k) > maxKeyShown {
			k = k[:maxKeyShown] + "..."
		}
		quoted[i] = fmt.Sprintf("%q", k)
	}
	more := ""
	if len(refused) > maxShown {
		more = fmt.Sprintf(" and %d more", len(refused)-maxShown)
	}
	return runtime.Failf(codeUnsafeRepositoryConfig,
		"the repository's %s sets keys a builtin does not run git with (they could run a program or name a file): %s%s; remove them, or work on this repository outside toolrun",
		name, strings.Join(quoted, ", "), more)
}

// The allowlist: keys that can neither run a program nor name a file or another
// repository. Keys are as git lists them: section and name lower-cased, a subsection as
// written.
var (
	// safeKeys are keys without a subsection.
	safeKeys = keySet(
		"core.repositoryformatversion", "core.filemode", "core.bare", "core.logallrefupdates",
		"core.ignorecase", "core.precomposeunicode", "core.symlinks", "core.autocrlf", "core.eol",
		"core.safecrlf", "core.quotepath", "core.checkstat", "core.trustctime", "core.abbrev",
		"core.commentchar", "core.whitespace", "core.compression", "core.loosecompression",
		"core.untrackedcache", "core.warnambiguousrefs",
		"user.name", "user.email", "author.name", "author.email", "committer.name", "committer.email",
		"init.defaultbranch",
		"merge.conflictstyle", "merge.ff", "merge.log", "merge.renames", "merge.renamelimit",
		"merge.stat", "merge.directoryrenames", "merge.verbosity",
		"diff.renames", "diff.renamelimit", "diff.algorithm", "diff.mnemonicprefix", "diff.noprefix",
		"diff.indentheuristic",
		// Not pull.twohead or pull.octopus: they name merge strategies, which are programs.
		"pull.rebase", "pull.ff",
		"extensions.objectformat", "extensions.worktreeconfig",
	)
	// safeSubsectionKeys are keys of any subsection of a section: branch.<name>.remote.
	safeSubsectionKeys = map[string]map[string]bool{
		// Not branch.<name>.mergeoptions: options for git merge, a strategy included.
		"branch": keySet("remote", "pushremote", "merge", "rebase", "description"),
		// Not remote.<name>.uploadpack, receivepack, vcs (a remote helper) or proxy.
		// The URLs are only data: the builtins never fetch or push, and protocol.allow
		// is never (gitHardening).
		"remote": keySet("url", "pushurl", "fetch", "push", "tagopt", "prune", "prunetags", "mirror", "skipdefaultupdate", "skipfetchall"),
	}
	// safeSections are sections every key of which is safe, with or without a subsection.
	safeSections = keySet("gc", "color", "advice", "i18n", "log", "status", "fetch")
)

func keySet(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// safeConfigKey reports whether key (with value, nil for a key written without "=") is
// on the allowlist.
func safeConfigKey(key string, value *string) bool {
	first, last := strings.IndexByte(key, '.'), strings.LastIndexByte(key, '.')
	if first <= 0 || last == len(key)-1 {
		return false
	}
	section, name := strings.ToLower(key[:first]), strings.ToLower(key[last+1:])
	switch {
	case safeSections[section]:
		return true
	case first == last:
		if section == "commit" && name == "gpgsign" {
			// Only off: signing runs gpg.program (gitHardening forces it off as well).
			return value != nil && isFalse(*value)
		}
		return safeKeys[section+"."+name]
	default:
		return safeSubsectionKeys[section][name]
	}
}

// isFalse reports whether a git boolean value is false.
func isFalse(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "false", "no", "off", "0":
		return true
	}
	return false
}
