package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/toolgen/toolgen/gen"
	"github.com/toolgen/toolgen/runtime"
)

// Failure codes of review.approve besides the shared git ones.
const (
	codeCommitNotFound = "commit_not_found"
	codeStaleCommit    = "stale_commit" // the branch moved on since the commit was reviewed
)

// approvalsDir holds one record per approved branch, relative to the workspace root.
const approvalsDir = ".toolgen/approvals"

// reviewApprove implements review.approve. It is idempotent: the record holds nothing
// that differs between two calls approving the same commit (no timestamp; the time is
// on the invocation row), so a repeated call rewrites nothing.
type reviewApprove struct{}

// approvalRecord is the file written for an approval. Field order is the JSON order.
type approvalRecord struct {
	Branch     string `json:"branch"`
	Commit     string `json:"commit"`
	ApprovedBy string `json:"approved_by"`
	Tenant     string `json:"tenant,omitempty"`
	Comment    string `json:"comment,omitempty"`
}

// approvalRecordPath names the record of a branch. "/" becomes "~", which git forbids in
// ref names, so the mapping is one to one and the name stays one path component.
func approvalRecordPath(branch string) string {
	return path.Join(approvalsDir, strings.ReplaceAll(branch, "/", "~")+".json")
}

func (reviewApprove) Run(ctx context.Context, tc *runtime.ExecContext, args gen.ReviewApproveArgs) (gen.ReviewApproveResult, error) {
	var res gen.ReviewApproveResult
	g, err := openGitRepo(ctx, tc)
	if err != nil {
		return res, err
	}
	tip, err := g.branchTip(ctx, args.Branch)
	if err != nil {
		return res, err
	}
	if tip != args.Commit {
		if _, err := g.run(ctx, "cat-file", "-e", args.Commit+"^{commit}"); exitCode(err) > 0 {
			return res, runtime.Failf(codeCommitNotFound, "there is no commit %s in the repository", args.Commit)
		} else if err != nil {
			return res, err
		}
		return res, runtime.Failf(codeStaleCommit, "branch %s is at %s, not %s: review the newer commits and approve the tip", args.Branch, tip, args.Commit)
	}

	id := tc.Identity()
	rec := approvalRecord{Branch: args.Branch, Commit: args.Commit, ApprovedBy: id.Principal, Tenant: id.Tenant, Comment: args.Comment}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return res, fmt.Errorf("encode approval: %w", err)
	}
	data = append(data, '\n')

	r, err := g.ws.openRoot()
	if err != nil {
		return res, err
	}
	defer r.Close()
	recPath := approvalRecordPath(args.Branch)
	rel := filepath.FromSlash(recPath)
	cur, err := readRecord(ctx, r, rel, recPath, int64(len(data)))
	switch {
	case err == nil && bytes.Equal(cur, data):
		// Already approved, identically: nothing to write.
	case err == nil || errors.Is(err, fs.ErrNotExist):
		if err := atomicWrite(r, rel, nil, data, 0o644, false); err != nil {
			return res, fmt.Errorf("write approval record: %w", err)
		}
	default:
		return res, err
	}
	res.Record = recPath
	res.Branch = args.Branch
	res.Commit = args.Commit
	res.ApprovedBy = id.Principal
	return res, nil
}

// readRecord reads the current approval record rel under r, to compare it with want
// bytes: at most want+1 bytes are read (a longer file differs anyway, and is not read
// whole), and a FIFO, device or directory standing at the record's path is refused
// before it is opened (not_regular_file, is_directory), so the call cannot block in
// open(2) past its deadline (issue 14, finding 13).
func readRecord(ctx context.Context, r *os.Root, rel, shown string, want int64) ([]byte, error) {
	f, _, err := openRegular(r, rel, shown)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cur, err := io.ReadAll(io.LimitReader(readerCtx{ctx, f}, want+1))
	if err != nil {
		return nil, fmt.Errorf("read approval record: %w", err)
	}
	return cur, nil
}
