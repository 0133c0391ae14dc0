package toolgencli

import (
	"os"
	"path/filepath"
	"strings"
)

// The paths toolgen prints (diagnostics, stale and written files) are the paths the
// user named, relative to the directory toolgen runs in: `toolgen check .` prints
// tools/x.yaml, `toolgen check ../specs` prints ../specs/tools/x.yaml.
//
// Under go generate that directory is not the user's: go generate runs each command in
// the directory of the package holding the //go:generate line (tools/), so the spec
// root is "..", and every path would print as ../tools/x.yaml although the user ran
// `go generate ./...` at the module root, where an editor or CI resolves it. So under
// go generate (which sets GOFILE and GOPACKAGE for the commands it runs; go run passes
// them on) paths are printed relative to the module root, the nearest directory at or
// above the current one holding go.mod. A path outside the module root, or a tree
// without go.mod, prints as named.

// underGoGenerate reports whether toolgen runs as a go generate command.
func underGoGenerate() bool {
	return os.Getenv("GOFILE") != "" && os.Getenv("GOPACKAGE") != ""
}

// pathPrinter shows the paths the user named by the rule above.
type pathPrinter struct {
	root string // the module root under go generate (absolute); "" prints paths as named
}

func newPathPrinter() pathPrinter {
	if !underGoGenerate() {
		return pathPrinter{}
	}
	wd, err := os.Getwd()
	if err != nil {
		return pathPrinter{}
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if st, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && !st.IsDir() {
			return pathPrinter{root: dir}
		}
		if filepath.Dir(dir) == dir {
			return pathPrinter{}
		}
	}
}

// show returns p as it is printed.
func (pp pathPrinter) show(p string) string {
	if pp.root == "" {
		return p
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	rel, err := filepath.Rel(pp.root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return p
	}
	return rel
}
