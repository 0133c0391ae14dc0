package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolgen/toolgen/gen"
	"github.com/toolgen/toolgen/runtime"
)

// Failure codes of review.merge besides the shared git ones.
const (
	codeDetachedHead    = "detached_head"
	codeNoCommits       = "no_commits"
	codeSameBranch      = "same_branch"
	codeMergeInProgress = "merge_in_progress"
	codeDirtyWorktree   = "dirty_worktree"
	codeAlreadyMerged   = "already_merged"
	codeHeadMoved       = "head_moved"
	codeMergeConflict   = "merge_conflict"
	codeMergeFailed     = "merge_failed"
)

// reviewMerge implements review.merge. It is non_idempotent (a second merge of a branch
// that moved on makes a second merge commit), so it is split: Prepare checks the
// repository and computes exactly which commit will be merged into which; Commit, run
// only after the watermark is recorded, runs git merge.
type reviewMerge struct{}

// mergePlan is what Prepare decided; building it leaves no mark.
type mergePlan struct {
	git     gitRepo
	branch  string
	into    string // the current branch
	head    string // its commit when the plan was made
	tip     string // the branch's commit: what is merged, even if the branch moves on
	message string
}

func (reviewMerge) Prepare(ctx context.Context, tc *runtime.ExecContext, args gen.ReviewMergeArgs) (mergePlan, error) {
	var plan mergePlan
	g, err := openGitRepo(ctx, tc)
	if err != nil {
		return plan, err
	}
	into, err := g.run(ctx, "symbolic-ref", "--quiet", "--short", "HEAD")
	if exitCode(err) > 0 {
		return plan, runtime.Failf(codeDetachedHead, "HEAD is detached; check out the branch to merge into first")
	} else if err != nil {
		return plan, err
	}
	head, err := g.run(ctx, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if exitCode(err) > 0 {
		return plan, runtime.Failf(codeNoCommits, "branch %s has no commits yet", into)
	} else if err != nil {
		return plan, err
	}
	tip, err := g.branchTip(ctx, args.Branch)
	if err != nil {
		return plan, err
	}
	if args.Branch == into {
		return plan, runtime.Failf(codeSameBranch, "%s is the current branch; a branch cannot be merged into itself", into)
	}
	if _, err := g.run(ctx, "rev-parse", "--verify", "--quiet", "MERGE_HEAD"); err == nil {
		return plan, runtime.Failf(codeMergeInProgress, "a merge is already in progress in the workspace")
	} else if exitCode(err) < 0 {
		return plan, err
	}
	// Untracked files do not block a merge (git itself refuses one that would overwrite
	// them); changes to tracked files do, because the merge commit would not include them.
	dirty, err := g.run(ctx, "status", "--porcelain=v1", "--untracked-files=no")
	if err != nil {
		return plan, err
	}
	if dirty != "" {
		return plan, runtime.Failf(codeDirtyWorktree, "the working tree has uncommitted changes; commit or discard them first:\n%s", dirty)
	}
	switch _, err := g.run(ctx, "merge-base", "--is-ancestor", tip, head); {
	case err == nil:
		return plan, runtime.Failf(codeAlreadyMerged, "%s (%s) is already merged into %s: nothing to merge", args.Branch, tip, into)
	case exitCode(err) != 1: // 1 means "not an ancestor", the case worth merging
		return plan, err
	}
	msg := args.Message
	if strings.TrimSpace(msg) == "" {
		msg = fmt.Sprintf("Merge branch '%s' into %s", args.Branch, into)
	}
	return mergePlan{git: g, branch: args.Branch, into: into, head: head, tip: tip, message: msg}, nil
}

func (reviewMerge) Commit(ctx context.Context, tc *runtime.ExecContext, plan mergePlan) (gen.ReviewMergeResult, error) {
	var res gen.ReviewMergeResult
	g := plan.git
	// Merge onto exactly the commit Prepare looked at: if HEAD moved meanwhile, the plan
	// no longer describes what would happen.
	head, err := g.run(ctx, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if err != nil && exitCode(err) < 0 {
		return res, err
	}
	into, _ := g.run(ctx, "symbolic-ref", "--quiet", "--short", "HEAD")
	if head != plan.head || into != plan.into {
		return res, runtime.Failf(codeHeadMoved, "%s moved since the merge was prepared; nothing was merged", plan.into)
	}
	// The planned commit is merged rather than the branch name, so a push to the branch
	// after Prepare cannot slip unreviewed commits into the merge.
	_, err = g.run(ctx, "merge", "--no-ff", "--no-edit", "-m", plan.message, plan.tip)
	if err != nil {
		if exitCode(err) < 0 {
			return res, err
		}
		return res, abortFailedMerge(ctx, g, plan, err)
	}
	merged, err := g.run(ctx, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return res, fmt.Errorf("read the merge commit: %w", err)
	}
	res.MergeCommit = merged
	res.MergedCommit = plan.tip
	res.Into = plan.into
	return res, nil
}

// abortFailedMerge handles a git merge that exited non-zero. A conflict leaves the
// repository mid-merge (MERGE_HEAD set): it is aborted, so the workspace is back where it
// was, and reported with the conflicting files. Any other failure left nothing behind.
func abortFailedMerge(ctx context.Context, g gitRepo, plan mergePlan, mergeErr error) error {
	if _, err := g.run(ctx, "rev-parse", "--verify", "--quiet", "MERGE_HEAD"); err != nil {
		return runtime.Failf(codeMergeFailed, "merging %s into %s failed; nothing was merged: %v", plan.branch, plan.into, mergeErr)
	}
	files, err := g.run(ctx, "diff", "--name-only", "--diff-filter=U")
	if err != nil {
		return err
	}
	if _, err := g.run(ctx, "merge", "--abort"); err != nil {
		return fmt.Errorf("abort the conflicting merge of %s (the workspace is left mid-merge): %w", plan.branch, err)
	}
	return runtime.Failf(codeMergeConflict, "merging %s into %s conflicts in: %s; the merge was aborted and nothing changed",
		plan.branch, plan.into, strings.Join(strings.Fields(files), ", "))
}
