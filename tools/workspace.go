package tools

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/toolgen/toolgen/internal/wspath"
	"github.com/toolgen/toolgen/runtime"
)

// Failure codes shared by the workspace tools. They are part of each tool's contract:
// a caller (or a model) branches on them, so they never change meaning. The path codes
// are wspath's, which the pipeline shares.
const (
	codeNoWorkspace      = "no_workspace"              // the run has no workspace
	codeInvalidPath      = wspath.CodeInvalidPath      // empty, NUL byte, a .. component
	codeOutsideWorkspace = wspath.CodeOutsideWorkspace // absolute, or a symlink leading out
	codeNotFound         = wspath.CodeNotFound
	codeAlreadyExists    = "already_exists"
	codeIsDirectory      = "is_directory"
	codeNotDirectory     = wspath.CodeNotDirectory
	codeNotRegularFile   = "not_regular_file" // a device, socket or named pipe
)

// workspace is the run's workspace root, resolved through symlinks, so that a resolved
// path can be compared with it by prefix.
type workspace struct {
	root string
}

// openWorkspace returns the workspace of the call, or a no_workspace failure.
func openWorkspace(tc *runtime.ExecContext) (workspace, error) {
	ws := tc.Workspace()
	if ws == "" {
		return workspace{}, runtime.Failf(codeNoWorkspace, "this run has no workspace: the host serves none (start it with a workspace, e.g. toolrun serve --workspace DIR)")
	}
	root, err := wspath.Root(ws)
	if err != nil {
		return workspace{}, err
	}
	return workspace{root: root}, nil
}

// resolveExisting opens the call's workspace and resolves a caller's path that must
// exist in it (the readers' common start); not_found when it does not.
func resolveExisting(tc *runtime.ExecContext, path string) (workspace, resolved, error) {
	ws, err := openWorkspace(tc)
	if err != nil {
		return ws, resolved{}, err
	}
	p, err := cleanPath(path)
	if err != nil {
		return ws, resolved{}, err
	}
	rp, err := ws.resolve(p)
	if err != nil {
		return ws, rp, err
	}
	if !rp.exists {
		return ws, rp, runtime.Failf(codeNotFound, "%s does not exist", path)
	}
	return ws, rp, nil
}

// cleanPath checks a caller's workspace-relative path lexically (wspath.Clean) and
// returns it in the OS's form.
func cleanPath(p string) (string, error) {
	c, err := wspath.Clean(p)
	return c, failure(err)
}

// resolved is a caller's path after symlinks were followed inside the workspace.
type resolved struct {
	// rel is the real path relative to the workspace root, with every symlink resolved
	// ("." for the root). File operations use it through an os.Root.
	rel string
	// exists says whether the path exists. When it does not, rel is its nearest existing
	// ancestor, resolved, joined with the missing components.
	exists bool
}

// resolve resolves the clean relative path p, which must already be resolved: the
// pipeline resolved it before the conditions and the policy judged it (the path
// arguments are workspace_path in the specs), so a path that now goes through a
// symlink changed since, and acting on it would act on a file nobody checked
// (path_changed; SEC-1). A path leading outside the workspace is refused.
func (w workspace) resolve(p string) (resolved, error) {
	r, err := wspath.ResolveUnchanged(w.root, p)
	return resolved{rel: r.Rel, exists: r.Exists}, failure(err)
}

// failure turns a wspath refusal into the tool's failure with the same code; other
// errors stay internal.
func failure(err error) error {
	var we *wspath.Error
	if errors.As(err, &we) {
		return runtime.Failf(we.Code, "%s", we.Msg)
	}
	return err
}

// openRoot opens the workspace as an os.Root: every operation through it is confined to
// the workspace even if a symlink changes after resolve looked at it.
func (w workspace) openRoot() (*os.Root, error) {
	r, err := os.OpenRoot(w.root)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	return r, nil
}

// atomicWrite replaces (or, with noClobber, creates) the file rel under r with the
// content of prefix followed by data: it writes a temporary file beside it, syncs it,
// moves it into place and syncs the directory, so a reader or a crash sees the old
// content or the new one, never a mix. Missing parent directories are created. With
// noClobber an existing file is left alone and fs.ErrExist is returned. The file gets
// mode perm exactly (the umask does not apply, so a replaced file can keep its mode).
func atomicWrite(r *os.Root, rel string, prefix io.Reader, data []byte, perm fs.FileMode, noClobber bool) error {
	dir, base := filepath.Dir(rel), filepath.Base(rel)
	if err := mkdirAllDurable(r, dir); err != nil {
		return err
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+base+"."+hex.EncodeToString(rnd[:])+".tmp")
	if err := writeSynced(r, tmp, prefix, data, perm); err != nil {
		r.Remove(tmp)
		return err
	}
	if noClobber {
		// link(2) fails when the name is taken: creation is atomic and never clobbers.
		err := r.Link(tmp, rel)
		r.Remove(tmp) // the content now lives under rel, or nowhere
		if errors.Is(err, fs.ErrExist) {
			return fs.ErrExist
		}
		if err != nil {
			return fmt.Errorf("link %s: %w", rel, err)
		}
	} else if err := r.Rename(tmp, rel); err != nil {
		r.Remove(tmp)
		return fmt.Errorf("rename into %s: %w", rel, err)
	}
	return syncDir(r, dir)
}

// writeSynced creates name (which must not exist) with prefix and data, and syncs it.
func writeSynced(r *os.Root, name string, prefix io.Reader, data []byte, perm fs.FileMode) error {
	f, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	err = f.Chmod(perm)
	if err == nil && prefix != nil {
		_, err = io.Copy(f, prefix)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write temporary file: %w", err)
	}
	return nil
}

// mkdirAllDurable creates dir and its missing parents under r, syncing the parent of
// each directory it creates so the new entries survive a crash.
func mkdirAllDurable(r *os.Root, dir string) error {
	var missing []string
	for d := dir; d != "."; d = filepath.Dir(d) {
		if _, err := r.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
	}
	if len(missing) == 0 {
		return nil
	}
	if err := r.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create directory %s: %w", dir, err)
	}
	for _, d := range missing {
		if err := syncDir(r, filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// syncDir makes a rename, link or mkdir in dir durable.
func syncDir(r *os.Root, dir string) error {
	d, err := r.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
