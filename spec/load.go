package spec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
)

// The layout of a spec root.
const (
	ToolsDir     = "tools"
	ServersDir   = "servers"
	ProtocolsDir = "protocols"
	DevicesDir   = "devices"
	PolicyFile   = "policy.yaml"
)

// LoadDir loads and checks the spec root dir. Diagnostics are every finding, sorted;
// the error is reserved for I/O failures (exit 2), never for a bad spec.
func LoadDir(dir string) (*Tree, Diagnostics, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, nil, err
	}
	if !st.IsDir() {
		return nil, nil, fmt.Errorf("%s is not a directory", dir)
	}
	return LoadFS(os.DirFS(dir), dir)
}

// LoadFS loads and checks a spec root held in fsys. display is prefixed to every
// diagnostic path ("." or "" for none).
//
// References to tools resolve against the tree's own tools/*.yaml and then the
// embedded builtin specs ([Builtins]) that the tree does not shadow with a file of the
// same name: a protocol or a policy may name protocol.dispatch without a copy of its
// spec. The builtins the tree names are [Tree.ReferencedBuiltins]; Tree.Tools stays
// the tree's own.
func LoadFS(fsys fs.FS, display string) (*Tree, Diagnostics, error) {
	return loadFS(fsys, display, loadBuiltins().tools)
}

// loadFS is LoadFS with the builtins references may resolve to (nil for the builtin
// specs themselves).
func loadFS(fsys fs.FS, display string, builtins []*Tool) (*Tree, Diagnostics, error) {
	var diags Diagnostics
	tree := &Tree{Root: display}
	disp := func(rel string) string {
		if display == "" || display == "." {
			return rel
		}
		return path.Join(strings.TrimSuffix(filepathToSlash(display), "/"), rel)
	}
	var toolFiles []string
	sources := map[string][]byte{} // each file's text by its displayed path, for fillEnds
	each := func(dir string, load func(rel string, data []byte)) error {
		files, err := specFiles(fsys, dir, disp, &diags)
		if err != nil {
			return err
		}
		if dir == ToolsDir {
			toolFiles = files
		}
		for _, rel := range files {
			data, err := fs.ReadFile(fsys, rel)
			if err != nil {
				return fmt.Errorf("read %s: %w", disp(rel), err)
			}
			sources[disp(rel)] = data
			load(rel, data)
		}
		return nil
	}
	err := each(ToolsDir, func(rel string, data []byte) {
		if t := loadTool(reporter{path: disp(rel), diags: &diags}, rel, data); t != nil {
			tree.Tools = append(tree.Tools, t)
		}
	})
	if err == nil {
		err = each(ServersDir, func(rel string, data []byte) {
			if s := loadServer(reporter{path: disp(rel), diags: &diags}, rel, data); s != nil {
				tree.Servers = append(tree.Servers, s)
			}
		})
	}
	if err == nil {
		err = each(ProtocolsDir, func(rel string, data []byte) {
			if p := loadProtocol(reporter{path: disp(rel), diags: &diags}, rel, data); p != nil {
				tree.Protocols = append(tree.Protocols, p)
			}
		})
	}
	if err == nil {
		err = each(DevicesDir, func(rel string, data []byte) {
			if d := loadDevice(reporter{path: disp(rel), diags: &diags}, rel, data); d != nil {
				tree.Devices = append(tree.Devices, d)
			}
		})
	}
	if err != nil {
		return nil, nil, err
	}
	data, err := fs.ReadFile(fsys, PolicyFile)
	switch {
	case err == nil:
		sources[disp(PolicyFile)] = data
		tree.Policy = loadPolicy(reporter{path: disp(PolicyFile), diags: &diags}, PolicyFile, data)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, nil, fmt.Errorf("read %s: %w", disp(PolicyFile), err)
	}
	data, err = fs.ReadFile(fsys, PrincipalsFile)
	switch {
	case err == nil:
		sources[disp(PrincipalsFile)] = data
		r := reporter{path: disp(PrincipalsFile), diags: &diags}
		if tree.Principals = loadPrincipals(r, PrincipalsFile, data); tree.Principals != nil {
			for _, is := range tree.Principals.Issuers {
				if is.KeyFile == "" {
					continue
				}
				if _, err := fs.Stat(fsys, is.KeyFile); err != nil {
					r.errorf(is.Pos, "ID-1.key-file-outside-root", "issuer %s: key_file %s is not in the spec root", is.Issuer, is.KeyFile)
				}
			}
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, nil, fmt.Errorf("read %s: %w", disp(PrincipalsFile), err)
	}
	data, err = fs.ReadFile(fsys, NotificationsFile)
	switch {
	case err == nil:
		sources[disp(NotificationsFile)] = data
		tree.Notifications = loadNotifications(reporter{path: disp(NotificationsFile), diags: &diags}, NotificationsFile, data)
		checkNotificationTenants(tree, disp, &diags)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, nil, fmt.Errorf("read %s: %w", disp(NotificationsFile), err)
	}
	slices.SortStableFunc(tree.Tools, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
	slices.SortStableFunc(tree.Servers, func(a, b *Server) int { return strings.Compare(a.ServerID, b.ServerID) })
	slices.SortStableFunc(tree.Devices, func(a, b *Device) int { return strings.Compare(a.DeviceID, b.DeviceID) })
	slices.SortStableFunc(tree.Protocols, func(a, b *Protocol) int { return strings.Compare(a.Name, b.Name) })
	check(tree, disp, &diags, toolFiles, builtins)
	fillEnds(diags, sources)
	return tree, diags.Sorted(), nil
}

func filepathToSlash(p string) string { return strings.ReplaceAll(p, string(os.PathSeparator), "/") }

// specFiles lists dir/*.yaml, sorted. A missing directory is no spec of that kind. A
// .yml file is reported rather than silently skipped: it would otherwise never be checked.
func specFiles(fsys fs.FS, dir string, disp func(string) string, diags *Diagnostics) ([]string, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", disp(dir), err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		rel := path.Join(dir, e.Name())
		switch {
		case strings.HasSuffix(e.Name(), ".yaml"):
			out = append(out, rel)
		case strings.HasSuffix(e.Name(), ".yml"):
			*diags = append(*diags, NewDiagnostic(disp(rel), Pos{1, 1}, "schema.yml-extension",
				"spec files end in .yaml; rename this file so it is checked"))
		}
	}
	slices.Sort(out)
	return out, nil
}
