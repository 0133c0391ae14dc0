package tooltest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// State is a snapshot of everything a tool could have changed, as comparable strings:
// one entry per observed thing (a workspace path, a recorded effect, or whatever a
// case's Observe function names), its value describing it completely enough that any
// change shows as a different value.
type State map[string]string

// Diff lists what differs from before to s, one line per entry, sorted: what appeared,
// what disappeared and what changed. An empty result means the states are equal.
func (s State) Diff(before State) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(s)) {
		was, ok := before[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s appeared (%s)", k, s[k]))
		case was != s[k]:
			out = append(out, fmt.Sprintf("%s changed (%s -> %s)", k, was, s[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if _, ok := s[k]; !ok {
			out = append(out, fmt.Sprintf("%s disappeared (was %s)", k, before[k]))
		}
	}
	return out
}

// WorkspaceState snapshots the directory tree at root: for every path below it
// (relative, with / separators, symlinks not followed) its type, permission bits and,
// for a regular file, its size and SHA-256; for a symlink, its target. Modification
// times are left out: they change without any content changing.
func WorkspaceState(root string) (State, error) {
	st := State{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		key := "workspace:" + filepath.ToSlash(rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch mode := fi.Mode(); {
		case mode.IsDir():
			st[key] = fmt.Sprintf("dir %04o", mode.Perm())
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			st[key] = "symlink -> " + target
		case mode.IsRegular():
			sum, err := fileSHA256(p)
			if err != nil {
				return err
			}
			st[key] = fmt.Sprintf("file %04o, %d bytes, sha256 %s", mode.Perm(), fi.Size(), sum)
		default:
			st[key] = fmt.Sprintf("special %s", mode)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tooltest: snapshot workspace %s: %w", root, err)
	}
	return st, nil
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	// Twelve hex digits name the content in a message; a change in the other 52 with
	// the same first 12 is not a case a test meets.
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}
