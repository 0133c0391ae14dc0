package tools

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/gen"
)

var merge = gen.NewReviewMerge[mergePlan](reviewMerge{})

func TestMerge_MakesAMergeCommit(t *testing.T) {
	g := newGitRepo(t)
	g.git("switch", "-q", "-c", "feature/x")
	tip := g.commit("x.txt", "x\n", "add x")
	g.git("switch", "-q", "main")
	g.commit("main.txt", "m\n", "main moves on") // so that a fast-forward was possible only without --no-ff
	head := g.git("rev-parse", "HEAD")

	c := newCall(t, g.dir)
	c.onMark = func() error {
		if now := g.git("rev-parse", "HEAD"); now != head {
			t.Errorf("HEAD moved before the watermark: %s", now)
		}
		return nil
	}
	var res gen.ReviewMergeResult
	c.ok(t, merge, `{"branch": "feature/x"}`, &res)
	if !c.marked {
		t.Fatal("merged without a watermark")
	}
	if res.MergedCommit != tip || res.Into != "main" || res.MergeCommit != g.git("rev-parse", "HEAD") {
		t.Fatalf("got %+v", res)
	}
	parents := strings.Fields(g.git("rev-list", "--parents", "-n1", "HEAD"))
	if len(parents) != 3 || parents[1] != head || parents[2] != tip {
		t.Fatalf("merge commit parents %v, want %s and %s", parents[1:], head, tip)
	}
	if msg := g.git("log", "-1", "--format=%s"); msg != "Merge branch 'feature/x' into main" {
		t.Fatalf("message %q", msg)
	}
	if readFile(t, g.dir, "x.txt") != "x\n" {
		t.Fatal("the branch's file is not in the work tree")
	}
}

func TestMerge_NoFastForwardEvenWhenPossible(t *testing.T) {
	g := newGitRepo(t)
	head := g.git("rev-parse", "HEAD")
	g.git("switch", "-q", "-c", "ff")
	g.commit("ff.txt", "ff\n", "ff")
	g.git("switch", "-q", "main")
	var res gen.ReviewMergeResult
	newCall(t, g.dir).ok(t, merge, `{"branch": "ff", "message": "Land ff"}`, &res)
	if parents := strings.Fields(g.git("rev-list", "--parents", "-n1", "HEAD")); len(parents) != 3 || parents[1] != head {
		t.Fatalf("want a merge commit on %s, got parents %v", head, parents)
	}
	if msg := g.git("log", "-1", "--format=%s"); msg != "Land ff" {
		t.Fatalf("message %q", msg)
	}
}

func TestMerge_FailedWatermarkMergesNothing(t *testing.T) {
	g := newGitRepo(t)
	g.git("switch", "-q", "-c", "feature")
	g.commit("f.txt", "f\n", "f")
	g.git("switch", "-q", "main")
	head := g.git("rev-parse", "HEAD")
	c := newCall(t, g.dir)
	c.onMark = func() error { return errors.New("store unavailable") }
	if _, err := merge.Execute(t.Context(), c.tc, []byte(`{"branch": "feature"}`)); err == nil {
		t.Fatal("a failed watermark must fail the call")
	}
	if now := g.git("rev-parse", "HEAD"); now != head {
		t.Fatalf("HEAD moved to %s although the watermark failed", now)
	}
	notExist(t, g.dir, "f.txt")
}

func TestMerge_ConflictIsAbortedAndReported(t *testing.T) {
	g := newGitRepo(t)
	g.git("switch", "-q", "-c", "theirs")
	g.commit("README.md", "theirs\n", "theirs")
	g.git("switch", "-q", "main")
	head := g.commit("README.md", "ours\n", "ours")

	c := newCall(t, g.dir)
	f := c.fails(t, merge, `{"branch": "theirs"}`, "merge_conflict")
	if !strings.Contains(f.Message, "README.md") {
		t.Errorf("message does not name the conflicting file: %s", f.Message)
	}
	if !c.marked {
		t.Error("git merge ran without a watermark")
	}
	if now := g.git("rev-parse", "HEAD"); now != head {
		t.Fatalf("HEAD moved to %s", now)
	}
	if st := g.git("status", "--porcelain"); st != "" {
		t.Fatalf("work tree not restored after the conflict:\n%s", st)
	}
	if readFile(t, g.dir, "README.md") != "ours\n" {
		t.Fatal("README.md not restored")
	}
}

func TestMerge_RefusedBeforeTheWatermark(t *testing.T) {
	g := newGitRepo(t)
	g.git("switch", "-q", "-c", "done")
	g.commit("d.txt", "d\n", "d")
	g.git("switch", "-q", "main")
	g.git("merge", "-q", "--no-ff", "--no-edit", "done")
	g.git("switch", "-q", "-c", "todo")
	g.commit("t.txt", "t\n", "t")
	g.git("switch", "-q", "main")

	for _, tc := range []struct{ name, args, code string }{
		{"already merged", `{"branch": "done"}`, "already_merged"},
		{"unknown branch", `{"branch": "nope"}`, "branch_not_found"},
		{"itself", `{"branch": "main"}`, "same_branch"},
		{"option as branch", `{"branch": "--abort"}`, "invalid_branch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCall(t, g.dir)
			c.fails(t, merge, tc.args, tc.code)
			if c.marked {
				t.Error("a refused merge recorded a watermark")
			}
		})
	}

	t.Run("dirty work tree", func(t *testing.T) {
		writeFile(t, g.dir, "README.md", "edited\n")
		defer g.git("checkout", "--", "README.md")
		c := newCall(t, g.dir)
		c.fails(t, merge, `{"branch": "todo"}`, "dirty_worktree")
		if c.marked {
			t.Error("a refused merge recorded a watermark")
		}
	})

	t.Run("untracked files do not block", func(t *testing.T) {
		writeFile(t, g.dir, ".toolgen/approvals/todo.json", "{}\n")
		var res gen.ReviewMergeResult
		newCall(t, g.dir).ok(t, merge, `{"branch": "todo"}`, &res)
	})

	t.Run("detached head", func(t *testing.T) {
		g.git("switch", "-q", "--detach", "HEAD")
		newCall(t, g.dir).fails(t, merge, `{"branch": "todo"}`, "detached_head")
	})
}
