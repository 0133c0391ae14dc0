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
	"slices"
	"strings"
	"syscall"

	"github.com/toolgen/toolgen/runtime"
)

// Failure codes shared by the workspace tools. They are part of each tool's contract:
// a caller (or a model) branches on them, so they never change meaning.
const (
	codeNoWorkspace      = "no_workspace"           // the run has no workspace
	codeInvalidPath      = "invalid_path"           // empty, NUL byte, or a .. component
	codeOutsideWorkspace = "path_outside_workspace" // absolute, or a symlink leading out
	codeNotFound         = "not_found"
	codeAlreadyExists    = "already_exists"
	codeIsDirectory      = "is_directory"
	codeNotDirectory     = "not_a_directory"
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
		return workspace{}, runtime.Failf(codeNoWorkspace, "this run has no workspace")
	}
	if !filepath.IsAbs(ws) {
		return workspace{}, fmt.Errorf("workspace root %q is not absolute", ws)
	}
	root, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return workspace{}, fmt.Errorf("resolve workspace root: %w", err)
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

// cleanPath checks a caller's workspace-relative path lexically and returns it in the
// OS's form. "." (the root itself) is accepted; callers that need a file refuse it.
func cleanPath(p string) (string, error) {
	switch {
	case p == "":
		return "", runtime.Failf(codeInvalidPath, "the path is empty")
	case strings.ContainsRune(p, 0):
		return "", runtime.Failf(codeInvalidPath, "the path contains a NUL byte")
	case filepath.IsAbs(p) || strings.HasPrefix(p, "/") || filepath.VolumeName(p) != "":
		return "", runtime.Failf(codeOutsideWorkspace, "%q is absolute; paths are relative to the workspace root", p)
	}
	// A .. is refused even when it stays inside lexically: "a/../b" does not name b when
	// a is a symlink, and no caller needs one.
	if slices.Contains(strings.Split(filepath.ToSlash(p), "/"), "..") {
		return "", runtime.Failf(codeInvalidPath, "%q contains a .. component; name the path from the workspace root", p)
	}
	c := filepath.Clean(filepath.FromSlash(p))
	if !filepath.IsLocal(c) { // also catches reserved names such as NUL on Windows
		return "", runtime.Failf(codeInvalidPath, "%q is not a path inside the workspace", p)
	}
	// Only the clean form is accepted: policy and approval_when match the path as
	// written, so "./.git/config" must not slip past a rule on ".git/". A trailing
	// slash (a directory) is fine.
	if filepath.ToSlash(c) != strings.TrimSuffix(p, "/") {
		return "", runtime.Failf(codeInvalidPath, "%q is not in clean form; write %q", p, filepath.ToSlash(c))
	}
	return c, nil
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

// resolve follows the symlinks of the clean relative path p and refuses a result outside
// the workspace. A path that does not exist is resolved through its nearest existing
// ancestor, so a file about to be created is judged by the directory that will hold it.
func (w workspace) resolve(p string) (resolved, error) {
	full := filepath.Join(w.root, p)
	real, err := filepath.EvalSymlinks(full)
	if err == nil {
		rel, err := w.relative(p, real)
		return resolved{rel: rel, exists: true}, err
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return resolved{}, w.pathError(p, err)
	}
	if fi, lerr := os.Lstat(full); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		// A dangling symlink: writing through it would create its target, wherever that is.
		return resolved{}, runtime.Failf(codeNotFound, "%q is a symlink whose target does not exist", filepath.ToSlash(p))
	}
	missing := []string{filepath.Base(full)}
	for dir := filepath.Dir(full); ; dir = filepath.Dir(dir) {
		real, err := filepath.EvalSymlinks(dir)
		if err == nil {
			slices.Reverse(missing)
			rel, err := w.relative(p, filepath.Join(append([]string{real}, missing...)...))
			return resolved{rel: rel}, err
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return resolved{}, w.pathError(p, err)
		}
		if fi, lerr := os.Lstat(dir); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return resolved{}, runtime.Failf(codeNotFound, "%q goes through a symlink whose target does not exist", filepath.ToSlash(p))
		}
		if len(dir) <= len(w.root) {
			// The root itself vanished under us: not the caller's doing.
			return resolved{}, fmt.Errorf("workspace root %s: %w", w.root, err)
		}
		missing = append(missing, filepath.Base(dir))
	}
}

// relative returns real relative to the root, or a failure when it lies outside.
func (w workspace) relative(p, real string) (string, error) {
	rel, err := filepath.Rel(w.root, real)
	if err != nil || !filepath.IsLocal(rel) {
		return "", runtime.Failf(codeOutsideWorkspace, "%q leads outside the workspace through a symlink", filepath.ToSlash(p))
	}
	return rel, nil
}

// pathError maps a resolution error to a failure the caller can act on.
func (w workspace) pathError(p string, err error) error {
	if errors.Is(err, syscall.ENOTDIR) {
		return runtime.Failf(codeNotDirectory, "a parent of %q is not a directory", filepath.ToSlash(p))
	}
	return fmt.Errorf("resolve %s: %w", p, err)
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
