//go:build unix

package tools

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolgen/toolgen/gen"
)

// Issue 14, finding 2: no configuration inside a workspace repository makes a builtin
// run a program. Each case plants a marker program (outside the workspace) where a key
// family of the repository's configuration makes git run it, calls review.merge, and
// requires that the marker was not created. Where plain git can be made to run the
// program with the same repository, the case then does so (sanity), which proves the
// planted configuration was live and that it was the tool that refused it.

// markerProgram writes a shell script outside every workspace that creates marker when
// run; called with the argument "filter" it then copies its input to its output (a
// clean or smudge filter), otherwise it exits 0 at once.
func markerProgram(t *testing.T) (prog, marker string) {
	t.Helper()
	dir := t.TempDir()
	marker = filepath.Join(dir, "ran")
	prog = filepath.Join(dir, "evil.sh")
	script := "#!/bin/sh\ntouch '" + marker + "'\nif [ \"$1\" = filter ]; then exec cat; fi\nexit 0\n"
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return prog, marker
}

func ran(marker string) bool {
	_, err := os.Lstat(marker)
	return err == nil
}

// divergedRepo is a repository whose branch feature and main both changed shared.txt
// (so merging runs a merge driver) and feature added f.txt (so merging checks a file
// out, through a smudge filter).
func divergedRepo(t *testing.T) *gitTest {
	t.Helper()
	g := newGitRepo(t)
	g.commit("shared.txt", "a\nb\nc\nd\ne\n", "shared")
	g.git("switch", "-q", "-c", "feature")
	g.commit("shared.txt", "A\nb\nc\nd\ne\n", "feature edits the top")
	g.commit("f.txt", "feature\n", "feature adds f")
	g.git("switch", "-q", "main")
	g.commit("shared.txt", "a\nb\nc\nd\nE\n", "main edits the bottom")
	return g
}

func TestMerge_RepositoryConfigRunsNoProgram(t *testing.T) {
	for _, tc := range []struct {
		name string
		// plant sets the attack up in the repository, with prog the marker program.
		plant func(g *gitTest, prog string)
		// sanity runs plain git so that it runs prog, when that is possible.
		sanity func(g *gitTest)
	}{
		{
			name: "filter selected by info/attributes",
			plant: func(g *gitTest, prog string) {
				writeFile(g.t, g.dir, ".git/info/attributes", "* filter=evil\n")
				g.git("config", "filter.evil.smudge", prog+" filter")
				g.git("config", "filter.evil.clean", prog+" filter")
			},
			sanity: plainMerge,
		},
		{
			name: "filter selected by .gitattributes",
			plant: func(g *gitTest, prog string) {
				g.git("switch", "-q", "feature")
				g.commit(".gitattributes", "*.txt filter=evil\n", "attributes")
				g.git("switch", "-q", "main")
				g.git("config", "filter.evil.smudge", prog+" filter")
				g.git("config", "filter.evil.required", "true")
			},
			sanity: plainMerge,
		},
		{
			name: "merge driver",
			plant: func(g *gitTest, prog string) {
				writeFile(g.t, g.dir, ".git/info/attributes", "* merge=evil\n")
				g.git("config", "merge.evil.driver", prog+" %O %A %B")
			},
			sanity: plainMerge,
		},
		{
			name: "diff textconv",
			plant: func(g *gitTest, prog string) {
				writeFile(g.t, g.dir, ".git/info/attributes", "* diff=evil\n")
				g.git("config", "diff.evil.textconv", prog)
			},
			sanity: plainDiff,
		},
		{
			name: "diff command",
			plant: func(g *gitTest, prog string) {
				writeFile(g.t, g.dir, ".git/info/attributes", "* diff=evil\n")
				g.git("config", "diff.evil.command", prog)
			},
			sanity: plainDiff,
		},
		{
			name:   "diff.external",
			plant:  func(g *gitTest, prog string) { g.git("config", "diff.external", prog) },
			sanity: plainDiff,
		},
		{
			name: "core.sshCommand",
			plant: func(g *gitTest, prog string) {
				g.git("config", "core.sshCommand", prog)
				g.git("config", "remote.origin.url", "ssh://git.invalid/repo.git")
			},
			sanity: func(g *gitTest) { g.gitMayFail("ls-remote", "origin") },
		},
		{
			// A pager runs only on a terminal; the refusal is what is checked.
			name:  "core.pager",
			plant: func(g *gitTest, prog string) { g.git("config", "core.pager", prog) },
		},
		{
			name:  "pager.<command>",
			plant: func(g *gitTest, prog string) { g.git("config", "pager.merge", prog) },
		},
		{
			name: "include.path defining a filter",
			plant: func(g *gitTest, prog string) {
				inc := filepath.Join(g.t.TempDir(), "evil.cfg")
				if err := os.WriteFile(inc, []byte("[filter \"evil\"]\n\tsmudge = "+prog+" filter\n"), 0o644); err != nil {
					g.t.Fatal(err)
				}
				writeFile(g.t, g.dir, ".git/info/attributes", "* filter=evil\n")
				g.git("config", "include.path", inc)
			},
			sanity: plainMerge,
		},
		{
			name: "includeIf",
			plant: func(g *gitTest, prog string) {
				inc := filepath.Join(g.t.TempDir(), "evil.cfg")
				if err := os.WriteFile(inc, []byte("[core]\n\tfsmonitor = "+prog+"\n"), 0o644); err != nil {
					g.t.Fatal(err)
				}
				g.git("config", "includeIf.gitdir:/.path", inc)
			},
			sanity: func(g *gitTest) { g.git("status") },
		},
		{
			name:   "alias",
			plant:  func(g *gitTest, prog string) { g.git("config", "alias.evil", "!"+prog) },
			sanity: func(g *gitTest) { g.git("evil") },
		},
		{
			name:   "core.fsmonitor",
			plant:  func(g *gitTest, prog string) { g.git("config", "core.fsmonitor", prog) },
			sanity: func(g *gitTest) { g.git("status") },
		},
		{
			name: "core.hooksPath",
			plant: func(g *gitTest, prog string) {
				hooks := g.t.TempDir()
				if err := os.Symlink(prog, filepath.Join(hooks, "post-merge")); err != nil {
					g.t.Fatal(err)
				}
				g.git("config", "core.hooksPath", hooks)
			},
			sanity: plainMerge,
		},
		{
			name: "gpg.program with commit.gpgSign",
			plant: func(g *gitTest, prog string) {
				g.git("config", "gpg.program", prog)
				g.git("config", "commit.gpgSign", "true")
			},
			sanity: func(g *gitTest) { g.gitMayFail("commit", "--allow-empty", "-q", "-m", "signed") },
		},
		{
			name:  "commit.gpgSign alone",
			plant: func(g *gitTest, prog string) { g.git("config", "commit.gpgSign", "true") },
		},
		{
			name:  "gpg.<format>.program",
			plant: func(g *gitTest, prog string) { g.git("config", "gpg.ssh.program", prog) },
		},
		{
			name: "remote uploadpack",
			plant: func(g *gitTest, prog string) {
				g.git("config", "remote.origin.url", g.dir)
				g.git("config", "remote.origin.uploadpack", prog)
			},
			sanity: func(g *gitTest) { g.gitMayFail("fetch", "-q", "origin") },
		},
		{
			name:  "remote receivepack",
			plant: func(g *gitTest, prog string) { g.git("config", "remote.origin.receivepack", prog) },
		},
		{
			name:  "core.editor",
			plant: func(g *gitTest, prog string) { g.git("config", "core.editor", prog) },
		},
		{
			name:  "sequence.editor",
			plant: func(g *gitTest, prog string) { g.git("config", "sequence.editor", prog) },
		},
		{
			name:  "core.askPass",
			plant: func(g *gitTest, prog string) { g.git("config", "core.askPass", prog) },
		},
		{
			name:  "credential.helper",
			plant: func(g *gitTest, prog string) { g.git("config", "credential.helper", "!"+prog) },
		},
		{
			name:  "core.gitProxy",
			plant: func(g *gitTest, prog string) { g.git("config", "core.gitProxy", prog) },
		},
		{
			name:  "uploadpack.packObjectsHook",
			plant: func(g *gitTest, prog string) { g.git("config", "uploadpack.packObjectsHook", prog) },
		},
		{
			name:  "submodule update command",
			plant: func(g *gitTest, prog string) { g.git("config", "submodule.sub.update", "!"+prog) },
		},
		{
			name:  "core.worktree",
			plant: func(g *gitTest, prog string) { g.git("config", "core.worktree", filepath.Dir(prog)) },
		},
		{
			name: "branch merge options",
			plant: func(g *gitTest, prog string) {
				g.git("config", "branch.main.mergeOptions", "--strategy=evil")
			},
		},
		{
			name: "worktree config",
			plant: func(g *gitTest, prog string) {
				g.git("config", "extensions.worktreeConfig", "true")
				g.git("config", "--worktree", "core.fsmonitor", prog)
			},
			sanity: func(g *gitTest) { g.git("status") },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := divergedRepo(t)
			head := g.git("rev-parse", "HEAD")
			prog, marker := markerProgram(t)
			tc.plant(g, prog)
			c := newCall(t, g.dir)
			f := c.fails(t, merge, `{"branch": "feature"}`, codeUnsafeRepositoryConfig)
			if ran(marker) {
				t.Fatal("review.merge ran the program the repository's configuration named")
			}
			if c.marked {
				t.Error("a refused merge recorded a watermark")
			}
			if now := g.git("rev-parse", "HEAD"); now != head {
				t.Fatalf("HEAD moved to %s", now)
			}
			t.Logf("refused: %s", f.Message)
			// review.approve runs git in the same repository: refused as well.
			tip := g.git("rev-parse", "feature")
			newCall(t, g.dir).fails(t, approve, jsonArgs(t, map[string]any{"branch": "feature", "commit": tip}), codeUnsafeRepositoryConfig)
			if ran(marker) {
				t.Fatal("review.approve ran the program the repository's configuration named")
			}
			if tc.sanity != nil {
				tc.sanity(g)
				if !ran(marker) {
					t.Fatal("sanity: plain git did not run the program either; the case attacks nothing")
				}
			}
		})
	}
}

// plainMerge merges feature with plain git, as a worker without the guard would.
func plainMerge(g *gitTest) { g.gitMayFail("merge", "--no-edit", "feature") }

func plainDiff(g *gitTest) { g.git("diff", "main", "feature") }

// gitMayFail runs git in the repository, whatever its exit status.
func (g *gitTest) gitMayFail(args ...string) {
	cmd := exec.Command("git", append([]string{"-C", g.dir}, args...)...)
	cmd.Env = gitEnv()
	cmd.CombinedOutput()
}

// Hooks need no configuration: .git/hooks is where git looks by default. The merge
// goes ahead, and no hook runs.
func TestMerge_HooksInTheGitDirectoryDoNotRun(t *testing.T) {
	g := divergedRepo(t)
	prog, marker := markerProgram(t)
	script, err := os.ReadFile(prog)
	if err != nil {
		t.Fatal(err)
	}
	for _, hook := range []string{"pre-merge-commit", "prepare-commit-msg", "commit-msg", "post-commit", "post-merge", "post-checkout", "reference-transaction"} {
		if err := os.WriteFile(filepath.Join(g.dir, ".git", "hooks", hook), script, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var res gen.ReviewMergeResult
	newCall(t, g.dir).ok(t, merge, `{"branch": "feature"}`, &res)
	if ran(marker) {
		t.Fatal("review.merge ran a hook of the repository")
	}
	g.git("commit", "--allow-empty", "-q", "-m", "sanity")
	if !ran(marker) {
		t.Fatal("sanity: plain git ran no hook either")
	}
}

// A git directory must be the repository's own: one that borrows another repository's
// objects (alternates), refs and config (commondir), or reaches out through a symlink,
// would let a merge read another tenant's repository.
func TestMerge_GitDirectoryReachingOutIsRefused(t *testing.T) {
	other := divergedRepo(t) // another tenant's repository
	for _, tc := range []struct {
		name  string
		plant func(g *gitTest)
	}{
		{"alternates", func(g *gitTest) {
			writeFile(g.t, g.dir, ".git/objects/info/alternates", filepath.Join(other.dir, ".git", "objects")+"\n")
		}},
		{"commondir", func(g *gitTest) {
			writeFile(g.t, g.dir, ".git/commondir", filepath.Join(other.dir, ".git")+"\n")
		}},
		{"objects symlink leading out", func(g *gitTest) {
			pack := filepath.Join(g.dir, ".git", "objects", "pack")
			if err := os.RemoveAll(pack); err != nil {
				g.t.Fatal(err)
			}
			symlink(g.t, filepath.Join(other.dir, ".git", "objects", "pack"), g.dir, ".git/objects/pack")
		}},
		{"config symlink leading out", func(g *gitTest) {
			cfg := filepath.Join(g.dir, ".git", "config")
			if err := os.Rename(cfg, filepath.Join(g.dir, "config.moved")); err != nil {
				g.t.Fatal(err)
			}
			symlink(g.t, filepath.Join(g.dir, "config.moved"), g.dir, ".git/config")
		}},
		{"config is a FIFO", func(g *gitTest) {
			cfg := filepath.Join(g.dir, ".git", "config")
			if err := os.Remove(cfg); err != nil {
				g.t.Fatal(err)
			}
			if err := syscall.Mkfifo(cfg, 0o644); err != nil {
				g.t.Skipf("mkfifo: %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := divergedRepo(t)
			tc.plant(g)
			c := newCall(t, g.dir)
			c.fails(t, merge, `{"branch": "feature"}`, codeUnsafeRepositoryConfig)
			if c.marked {
				t.Error("a refused merge recorded a watermark")
			}
		})
	}
}

// The git directory is located by the tool, never discovered by git: with an empty .git
// the workspace root, laid out as a bare repository with a hostile config, is not read
// as one.
func TestMerge_GitDirectoryIsNeverDiscovered(t *testing.T) {
	g := divergedRepo(t)
	prog, marker := markerProgram(t)
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The workspace root itself as a bare repository: HEAD, objects, refs, config.
	cmd := exec.Command("cp", "-R", filepath.Join(g.dir, ".git")+"/.", ws)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(ws, "config"), []byte("[core]\n\tfsmonitor = "+prog+"\n\tbare = false\n[alias]\n\tx = !"+prog+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	newCall(t, ws).fails(t, merge, `{"branch": "feature"}`, codeNotGitRepository)
	if ran(marker) {
		t.Fatal("review.merge ran a program of a repository git discovered")
	}
}

// A .git file naming a git directory elsewhere in the workspace is refused: the git
// directory would be .repo/, where workspace.write_text's approval_when (on .git/)
// does not hold a write to its config or hooks.
func TestMerge_GitfileIsRefused(t *testing.T) {
	g := divergedRepo(t)
	if err := os.Rename(filepath.Join(g.dir, ".git"), filepath.Join(g.dir, ".repo")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, g.dir, ".git", "gitdir: .repo\n")
	newCall(t, g.dir).fails(t, merge, `{"branch": "feature"}`, codeNotGitRepository)
	if b, _ := os.ReadFile(filepath.Join(g.dir, "f.txt")); string(b) == "feature\n" {
		t.Fatal("merged through a gitfile")
	}
}

// An ordinary clone's configuration is on the allowlist: it merges.
func TestMerge_OrdinaryConfigMerges(t *testing.T) {
	g := divergedRepo(t)
	for _, kv := range [][2]string{
		{"remote.origin.url", "https://git.example.com/team/repo.git"},
		{"remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"},
		{"branch.main.remote", "origin"},
		{"branch.main.merge", "refs/heads/main"},
		{"branch.feature/x.description", "a branch"},
		{"init.defaultBranch", "main"},
		{"merge.conflictStyle", "diff3"},
		{"color.ui", "auto"},
		{"color.diff.meta", "yellow bold"},
		{"pull.rebase", "false"},
		{"core.autocrlf", "false"},
		{"gc.reflogExpire", "90.days"},
	} {
		g.git("config", kv[0], kv[1])
	}
	var res gen.ReviewMergeResult
	newCall(t, g.dir).ok(t, merge, `{"branch": "feature"}`, &res)
	if readFile(t, g.dir, "shared.txt") != "A\nb\nc\nd\nE\n" {
		t.Fatalf("merged content %q", readFile(t, g.dir, "shared.txt"))
	}
}

// The configuration is vetted again before every git command: a key planted after the
// merge was prepared (while it waited for its approval, say) stops it before git merge.
func TestMerge_ConfigChangedAfterPrepareIsRefused(t *testing.T) {
	g := divergedRepo(t)
	head := g.git("rev-parse", "HEAD")
	prog, marker := markerProgram(t)
	c := newCall(t, g.dir)
	c.onMark = func() error {
		writeFile(t, g.dir, ".git/info/attributes", "* merge=evil\n")
		g.git("config", "merge.evil.driver", prog+" %O %A %B")
		return nil
	}
	c.fails(t, merge, `{"branch": "feature"}`, codeUnsafeRepositoryConfig)
	if ran(marker) {
		t.Fatal("review.merge ran a merge driver planted after Prepare")
	}
	if now := g.git("rev-parse", "HEAD"); now != head {
		t.Fatalf("HEAD moved to %s", now)
	}
}

// The -c overrides are the second line: each beats the repository's own value, and git
// 2.39 accepts each.
func TestGitHardening_BeatsTheRepositoryConfig(t *testing.T) {
	g := newGitRepo(t)
	for i := 1; i < len(gitHardening); i += 2 {
		key, want, _ := strings.Cut(gitHardening[i], "=")
		g.git("config", key, "/evil/program")
		cmd := gitCommand(t.Context(), "-C", g.dir, "config", "--get", key)
		cmd.Env = gitEnv()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if got := strings.TrimSuffix(string(out), "\n"); got != want {
			t.Errorf("%s = %q under gitHardening, want %q", key, got, want)
		}
	}
}

func TestSafeConfigKey(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		key   string
		value *string
		safe  bool
	}{
		{"core.bare", str("false"), true},
		{"core.symlinks", nil, true},
		{"user.name", str("x"), true},
		{"branch.feature.x.remote", str("origin"), true},
		{"branch.main.mergeoptions", str("-s evil"), false},
		{"remote.origin.url", str("x"), true},
		{"remote.origin.uploadpack", str("x"), false},
		{"remote.origin.vcs", str("x"), false},
		{"color.diff.meta", str("red"), true},
		{"gc.auto", str("0"), true},
		{"commit.gpgsign", str("false"), true},
		{"commit.gpgsign", str("true"), false},
		{"commit.gpgsign", nil, false},
		{"core.hookspath", str("x"), false},
		{"core.x.bare", str("false"), false},    // a subsection where none belongs
		{"user.name.x", str("false"), false},    // likewise
		{"filter.lfs.smudge", str("x"), false},  // unknown: refused
		{"merge.evil.driver", str("x"), false},  // a driver
		{"merge.evil.name", str("x"), false},    // no driver subsection at all
		{"pull.twohead", str("x"), false},       // a strategy is a program
		{"includeif.gitdir:/.path", nil, false}, // includes are refused
		{"extensions.partialclone", str("x"), false},
		{"nodot", nil, false},
		{"core.", nil, false},
	} {
		if got := safeConfigKey(tc.key, tc.value); got != tc.safe {
			t.Errorf("safeConfigKey(%q) = %v, want %v", tc.key, got, tc.safe)
		}
	}
}
