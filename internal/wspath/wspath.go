// Package wspath resolves a caller's workspace-relative path the one way both the
// pipeline and the workspace tools do it (SEC-1): lexically checked, then every
// symlink inside the workspace followed, and refused when the result leaves the
// workspace.
//
// The pipeline resolves the arguments a spec marks `workspace_path: true` before the
// idempotency key, the CEL conditions and the policy see them, so an `approval_when`
// on ".git/" also holds for "scratch/config" when scratch is a symlink to .git (issue
// 14, finding 2). The tool then acts on exactly that path: it resolves it again and
// refuses it when it no longer resolves to itself (a symlink created between the check
// and the effect).
//
// It imports only the standard library: runtime and tools both use it.
package wspath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Failure codes of a path that cannot be used. They are the workspace tools'
// failure codes (part of their contract), so they never change meaning.
const (
	CodeInvalidPath      = "invalid_path"           // empty, NUL byte, a .. component, not in clean form
	CodeOutsideWorkspace = "path_outside_workspace" // absolute, or a symlink leading out
	CodeNotFound         = "not_found"              // a dangling symlink on the way
	CodeNotDirectory     = "not_a_directory"        // a parent is a file
	// CodePathChanged: the path given no longer resolves to itself — a symlink on it
	// appeared after the pipeline resolved it and the conditions were checked.
	CodePathChanged = "path_changed"
)

// Error is a path the caller can correct; Code is one of the Code constants.
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func failf(code, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Clean checks a caller's workspace-relative path lexically and returns it in the
// OS's form. "." (the root itself) is accepted; callers that need a file refuse it.
func Clean(p string) (string, error) {
	switch {
	case p == "":
		return "", failf(CodeInvalidPath, "the path is empty")
	case strings.ContainsRune(p, 0):
		return "", failf(CodeInvalidPath, "the path contains a NUL byte")
	case filepath.IsAbs(p) || strings.HasPrefix(p, "/") || filepath.VolumeName(p) != "":
		return "", failf(CodeOutsideWorkspace, "%q is absolute; paths are relative to the workspace root", p)
	}
	// A .. is refused even when it stays inside lexically: "a/../b" does not name b when
	// a is a symlink, and no caller needs one.
	if slices.Contains(strings.Split(filepath.ToSlash(p), "/"), "..") {
		return "", failf(CodeInvalidPath, "%q contains a .. component; name the path from the workspace root", p)
	}
	c := filepath.Clean(filepath.FromSlash(p))
	if !filepath.IsLocal(c) { // also catches reserved names such as NUL on Windows
		return "", failf(CodeInvalidPath, "%q is not a path inside the workspace", p)
	}
	// Only the clean form is accepted: conditions match the path as resolved, and
	// "./.git/config" must not be a second spelling of ".git/config". A trailing slash
	// (a directory) is fine.
	if filepath.ToSlash(c) != strings.TrimSuffix(p, "/") {
		return "", failf(CodeInvalidPath, "%q is not in clean form; write %q", p, filepath.ToSlash(c))
	}
	return c, nil
}

// Root returns the workspace root ws resolved through symlinks, so that resolved
// paths can be compared with it.
func Root(ws string) (string, error) {
	if !filepath.IsAbs(ws) {
		return "", fmt.Errorf("workspace root %q is not absolute", ws)
	}
	root, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return "", fmt.Errorf("resolve workspace root: %w", err)
	}
	return root, nil
}

// Resolved is a caller's path after the symlinks in it were followed.
type Resolved struct {
	// Rel is the real path relative to the workspace root, every symlink resolved ("."
	// for the root). File operations use it through an os.Root.
	Rel string
	// Exists says whether the path exists. When it does not, Rel is its nearest existing
	// ancestor, resolved, joined with the missing components: a file about to be created
	// is judged by the directory that will hold it.
	Exists bool
}

// Slash is Rel with / separators: the form a condition and a caller see.
func (r Resolved) Slash() string { return filepath.ToSlash(r.Rel) }

// Resolve follows the symlinks of the clean relative path p (see Clean) under the
// resolved root (see Root) and refuses a result outside the workspace.
func Resolve(root, p string) (Resolved, error) {
	full := filepath.Join(root, p)
	real, err := filepath.EvalSymlinks(full)
	if err == nil {
		rel, err := relative(root, p, real)
		return Resolved{Rel: rel, Exists: true}, err
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return Resolved{}, pathError(p, err)
	}
	if fi, lerr := os.Lstat(full); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		// A dangling symlink: writing through it would create its target, wherever that is.
		return Resolved{}, failf(CodeNotFound, "%q is a symlink whose target does not exist", filepath.ToSlash(p))
	}
	missing := []string{filepath.Base(full)}
	for dir := filepath.Dir(full); ; dir = filepath.Dir(dir) {
		real, err := filepath.EvalSymlinks(dir)
		if err == nil {
			slices.Reverse(missing)
			rel, err := relative(root, p, filepath.Join(append([]string{real}, missing...)...))
			return Resolved{Rel: rel}, err
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return Resolved{}, pathError(p, err)
		}
		if fi, lerr := os.Lstat(dir); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return Resolved{}, failf(CodeNotFound, "%q goes through a symlink whose target does not exist", filepath.ToSlash(p))
		}
		if len(dir) <= len(root) {
			// The root itself vanished under us: not the caller's doing.
			return Resolved{}, fmt.Errorf("workspace root %s: %w", root, err)
		}
		missing = append(missing, filepath.Base(dir))
	}
}

// ResolveUnchanged is Resolve for a path that must already be resolved: the tool's
// side of the rule. A path whose resolution differs from itself went through a
// symlink the pipeline did not see, and is refused with CodePathChanged.
func ResolveUnchanged(root, p string) (Resolved, error) {
	r, err := Resolve(root, p)
	if err != nil {
		return r, err
	}
	if r.Rel != filepath.Clean(p) {
		return r, failf(CodePathChanged, "%q now resolves to %q through a symlink that changed after the call was checked; call again to have the new path checked",
			filepath.ToSlash(p), r.Slash())
	}
	return r, nil
}

// relative returns real relative to the root, or a failure when it lies outside.
func relative(root, p, real string) (string, error) {
	rel, err := filepath.Rel(root, real)
	if err != nil || !filepath.IsLocal(rel) {
		return "", failf(CodeOutsideWorkspace, "%q leads outside the workspace through a symlink", filepath.ToSlash(p))
	}
	return rel, nil
}

// pathError maps a resolution error to a failure the caller can act on.
func pathError(p string, err error) error {
	if errors.Is(err, syscall.ENOTDIR) {
		return failf(CodeNotDirectory, "a parent of %q is not a directory", filepath.ToSlash(p))
	}
	return fmt.Errorf("resolve %s: %w", p, err)
}
