package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/toolgen/toolgen/gen"
	"github.com/toolgen/toolgen/runtime"
)

// workspaceList implements workspace.list (idempotent: it only reads).
type workspaceList struct{}

// errListFull stops the walk once one entry more than max_entries has been seen.
var errListFull = errors.New("list full")

func (workspaceList) Run(ctx context.Context, tc *runtime.ExecContext, args gen.WorkspaceListArgs) (gen.WorkspaceListResult, error) {
	res := gen.WorkspaceListResult{Entries: []gen.WorkspaceListResultEntriesItem{}}
	ws, rp, err := resolveExisting(tc, args.Path)
	if err != nil {
		return res, err
	}
	r, err := ws.openRoot()
	if err != nil {
		return res, err
	}
	defer r.Close()
	if fi, err := r.Stat(rp.rel); err != nil {
		return res, fmt.Errorf("stat %s: %w", rp.rel, err)
	} else if !fi.IsDir() {
		return res, runtime.Failf(codeNotDirectory, "%s is not a directory; use workspace.read_text", args.Path)
	}
	dir, err := r.OpenRoot(rp.rel)
	if err != nil {
		return res, fmt.Errorf("open %s: %w", rp.rel, err)
	}
	defer dir.Close()

	// Entries are named under the path the caller gave, so each one can be passed back
	// as it is; WalkDir visits in lexical order and never follows a symlink.
	prefix := strings.TrimSuffix(args.Path, "/") // the clean form: cleanPath accepted it
	err = fs.WalkDir(dir.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if name == "." {
			return err // an unreadable listed directory is an error; below it, a gap
		}
		if err != nil {
			return nil
		}
		entry := gen.WorkspaceListResultEntriesItem{Path: path.Join(prefix, name)}
		switch t := d.Type(); {
		case t.IsDir():
			entry.Type = gen.WorkspaceListResultEntriesItemTypeDir
		case t&fs.ModeSymlink != 0:
			entry.Type = gen.WorkspaceListResultEntriesItemTypeSymlink
		case t.IsRegular():
			entry.Type = gen.WorkspaceListResultEntriesItemTypeFile
		default:
			return nil // devices, sockets and pipes are not workspace content
		}
		if int64(len(res.Entries)) >= args.MaxEntries {
			res.Truncated = true
			return errListFull
		}
		if fi, err := d.Info(); err == nil {
			entry.Size = fi.Size()
		}
		res.Entries = append(res.Entries, entry)
		if d.IsDir() && (!args.Recursive || d.Name() == ".git") {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil && !errors.Is(err, errListFull) {
		return res, fmt.Errorf("list %s: %w", rp.rel, err)
	}
	return res, nil
}
