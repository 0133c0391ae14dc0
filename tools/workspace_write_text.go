package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/toolgen/toolgen/gen"
	"github.com/toolgen/toolgen/runtime"
)

// workspaceWriteText implements workspace.write_text. It is conditionally idempotent
// (an overwrite can be repeated, a create or an append cannot), so it is split in two:
// Prepare resolves the path and checks the mode against the file as it is; Commit, run
// only after the watermark is recorded, writes.
type workspaceWriteText struct{}

// writeTextPlan is everything Commit needs; building it leaves no mark.
type writeTextPlan struct {
	ws   workspace
	rel  string // resolved path relative to the workspace root
	path string // the caller's path, for messages
	mode gen.WorkspaceWriteTextArgsMode
	data []byte
	perm fs.FileMode // of the file replaced, or of a new file
}

func (workspaceWriteText) Prepare(ctx context.Context, tc *runtime.ExecContext, args gen.WorkspaceWriteTextArgs) (writeTextPlan, error) {
	plan := writeTextPlan{path: args.Path, mode: args.Mode, data: []byte(args.Text), perm: 0o644}
	switch args.Mode {
	case gen.WorkspaceWriteTextArgsModeCreate, gen.WorkspaceWriteTextArgsModeOverwrite, gen.WorkspaceWriteTextArgsModeAppend:
	default:
		return plan, runtime.Failf("invalid_mode", "mode %q is not create, overwrite or append", args.Mode)
	}
	ws, err := openWorkspace(tc)
	if err != nil {
		return plan, err
	}
	p, err := cleanPath(args.Path)
	if err != nil {
		return plan, err
	}
	if p == "." {
		return plan, runtime.Failf(codeIsDirectory, "%q is the workspace root; name a file", args.Path)
	}
	rp, err := ws.resolve(p)
	if err != nil {
		return plan, err
	}
	plan.ws, plan.rel = ws, rp.rel
	if !rp.exists {
		return plan, nil
	}
	r, err := ws.openRoot()
	if err != nil {
		return plan, err
	}
	defer r.Close()
	fi, err := r.Stat(rp.rel)
	switch {
	case err != nil:
		return plan, fmt.Errorf("stat %s: %w", rp.rel, err)
	case fi.IsDir():
		return plan, runtime.Failf(codeIsDirectory, "%s is a directory", args.Path)
	case !fi.Mode().IsRegular():
		return plan, runtime.Failf(codeNotRegularFile, "%s is not a regular file", args.Path)
	case args.Mode == gen.WorkspaceWriteTextArgsModeCreate:
		return plan, runtime.Failf(codeAlreadyExists, "%s already exists; use mode overwrite to replace it or append to add to it", args.Path)
	}
	plan.perm = fi.Mode().Perm()
	return plan, nil
}

func (workspaceWriteText) Commit(ctx context.Context, tc *runtime.ExecContext, plan writeTextPlan) (gen.WorkspaceWriteTextResult, error) {
	var res gen.WorkspaceWriteTextResult
	r, err := plan.ws.openRoot()
	if err != nil {
		return res, err
	}
	defer r.Close()
	var prefix io.Reader
	if plan.mode == gen.WorkspaceWriteTextArgsModeAppend {
		// The current content is read here, not in Prepare, so that a write landing in
		// between is kept rather than silently undone by the rename. Prepare saw a
		// regular file, but a FIFO or a directory may stand there by now: openRegular
		// refuses it without blocking (issue 14, finding 13), and the copy stops at the
		// call's deadline.
		cur, _, err := openRegular(r, plan.rel, plan.path)
		switch {
		case err == nil:
			defer cur.Close()
			prefix = readerCtx{ctx, cur}
		case !errors.Is(err, fs.ErrNotExist):
			return res, err
		}
	}
	err = atomicWrite(r, plan.rel, prefix, plan.data, plan.perm, plan.mode == gen.WorkspaceWriteTextArgsModeCreate)
	if errors.Is(err, fs.ErrExist) {
		return res, runtime.Failf(codeAlreadyExists, "%s was created by someone else meanwhile; nothing was written", plan.path)
	}
	if err != nil {
		return res, fmt.Errorf("write %s: %w", plan.rel, err)
	}
	sum := sha256.Sum256(plan.data)
	res.BytesWritten = int64(len(plan.data))
	res.Sha256 = hex.EncodeToString(sum[:])
	return res, nil
}
