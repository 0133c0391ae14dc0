package codegen

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Change is one file Sync wrote or deleted (or, in check mode, would have).
type Change struct {
	Name   string // relative to the output directory
	Action string // ActionWrite or ActionDelete
}

// Change actions.
const (
	ActionWrite  = "write"
	ActionDelete = "delete"
)

// Sync makes outDir hold exactly files, as far as toolgen's own files go. It writes a
// file only when its bytes differ (so unchanged files keep their mtime and nothing
// downstream rebuilds) and deletes the .go files in outDir that start with [Header]
// but are not in files, and a catalog.json that is not in files: those are left over
// from removed specs. It never touches any other file. With check set it writes
// nothing and only reports (toolgen generate -check, GEN-4).
//
// The returned changes are sorted by name. outDir is created when missing.
func Sync(outDir string, files []File, check bool) ([]Change, error) {
	want := make(map[string]bool, len(files))
	for _, f := range files {
		if !filepath.IsLocal(f.Name) || f.Name != filepath.ToSlash(filepath.Clean(f.Name)) {
			return nil, fmt.Errorf("codegen: sync: file name %q is not a clean path inside the output directory", f.Name)
		}
		if want[f.Name] {
			return nil, fmt.Errorf("codegen: sync: file %s is given twice", f.Name)
		}
		want[f.Name] = true
	}

	var changes []Change
	for _, f := range files {
		path := filepath.Join(outDir, filepath.FromSlash(f.Name))
		old, err := os.ReadFile(path)
		switch {
		case err == nil && bytes.Equal(old, f.Data):
			continue
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("codegen: sync: %w", err)
		}
		changes = append(changes, Change{Name: f.Name, Action: ActionWrite})
		if !check {
			if err := writeFile(path, f.Data); err != nil {
				return nil, err
			}
		}
	}

	entries, err := os.ReadDir(outDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("codegen: sync: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if want[name] || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(outDir, name)
		var ours bool
		switch {
		case strings.HasSuffix(name, ".go"):
			ours, err = startsWith(path, Header+"\n", Header+"\r\n")
		case name == CatalogFile:
			ours, err = startsWith(path, "{\n  \"tools\": [", "{\r\n  \"tools\": [")
		}
		if err != nil {
			return nil, fmt.Errorf("codegen: sync: %w", err)
		}
		if !ours {
			continue
		}
		changes = append(changes, Change{Name: name, Action: ActionDelete})
		if !check {
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("codegen: sync: %w", err)
			}
		}
	}
	slices.SortFunc(changes, func(a, b Change) int { return strings.Compare(a.Name, b.Name) })
	return changes, nil
}

// startsWith reports whether the file at path begins with one of prefixes (a checkout
// with CRLF line endings still holds toolgen's files).
func startsWith(path string, prefixes ...string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	n := 0
	for _, p := range prefixes {
		n = max(n, len(p))
	}
	buf := make([]byte, n)
	m, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return false, err
	}
	for _, p := range prefixes {
		if bytes.HasPrefix(buf[:m], []byte(p)) {
			return true, nil
		}
	}
	return false, nil
}

// writeFile replaces path with data atomically: a crash leaves the old file or the
// new one, never half of one (a truncated generated file would still carry the header).
func writeFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("codegen: sync: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".toolgen-*.tmp")
	if err != nil {
		return fmt.Errorf("codegen: sync: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("codegen: sync: write %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("codegen: sync: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("codegen: sync: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("codegen: sync: %w", err)
	}
	return nil
}
