package scaffold

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/toolgen/toolgen/spec"
)

// Module is the Go module around a spec root.
type Module struct {
	Root string // the absolute directory holding go.mod
	Path string // the module path go.mod declares
}

// ErrNoModule is returned by [FindModule] for a directory that no go.mod encloses.
var ErrNoModule = errors.New("not inside a Go module")

// FindModule finds the nearest go.mod at or above dir and reads its module path.
func FindModule(dir string) (Module, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Module{}, err
	}
	for d := abs; ; d = filepath.Dir(d) {
		gomod := filepath.Join(d, "go.mod")
		data, err := os.ReadFile(gomod)
		switch {
		case err == nil:
			p := modulePath(data)
			if p == "" {
				return Module{}, fmt.Errorf("%s declares no module path", gomod)
			}
			return Module{Root: d, Path: p}, nil
		case errors.Is(err, fs.ErrNotExist) || isDir(gomod):
			// None here (a directory named go.mod is none either): keep looking.
		default:
			return Module{}, err
		}
		if filepath.Dir(d) == d {
			return Module{}, fmt.Errorf("%s: %w (no go.mod in it or above it); run go mod init first", dir, ErrNoModule)
		}
	}
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// modulePath is the path of go.mod's module directive ("" if there is none): the
// directive is one line, `module PATH` with PATH bare or quoted, and a comment after it.
func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module")
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '\t' && rest[0] != '"' && rest[0] != '`') {
			continue
		}
		rest = strings.TrimSpace(rest)
		if strings.HasPrefix(rest, `"`) || strings.HasPrefix(rest, "`") {
			p, err := strconv.Unquote(rest)
			if err != nil {
				return ""
			}
			return p
		}
		if f := strings.Fields(rest); len(f) == 1 {
			return f[0]
		}
		return ""
	}
	return ""
}

// ImportPath is the import path of dir, a directory of the module; ok is false when dir
// is outside it.
func (m Module) ImportPath(dir string) (string, bool) {
	rel, ok := m.rel(dir)
	if !ok {
		return "", false
	}
	if rel == "." {
		return m.Path, true
	}
	return m.Path + "/" + filepath.ToSlash(rel), true
}

// rel is dir relative to the module root; ok is false when dir is outside it.
func (m Module) rel(dir string) (string, bool) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	rel, err := filepath.Rel(canonical(m.Root), canonical(abs))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return rel, true
}

// canonical is an absolute path with its symbolic links resolved as far as they exist,
// so that two names of one directory compare equal.
func canonical(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

var majorVersion = regexp.MustCompile(`^v[0-9]+$`)

// ProgramName matches the names DefaultName and -name may give a host program: one
// directory name under cmd/.
var ProgramName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// DefaultName is the host program of a module: its path's last element (the one before
// a major version suffix, so example.com/acme/v2 is acme) and "-host".
func DefaultName(modulePath string) string {
	elems := strings.Split(modulePath, "/")
	last := elems[len(elems)-1]
	if majorVersion.MatchString(last) && len(elems) > 1 {
		last = elems[len(elems)-2]
	}
	return last + "-host"
}

// Layout is where a spec root's Go code lives in its module.
type Layout struct {
	Module Module
	// ToolsDir is the package implementing the tools (absolute), and ToolsImport its
	// import path.
	ToolsDir, ToolsImport string
	// GenDir is the package toolgen generate writes (absolute), GenImport its import
	// path and GenName its package name.
	GenDir, GenImport, GenName string
	// Directive is the //go:generate line the layout was read from, as "file:line"
	// (absolute file); "" when no line runs toolgen generate on the spec root and the
	// layout is the convention, DIR/tools and DIR/gen.
	Directive string
}

// A Finding is a problem in the module that stops `toolgen host`: at a position of a
// Go file (File absolute), or of a tool's spec (Tool set, File empty).
type Finding struct {
	File    string
	Tool    *spec.Tool
	Pos     spec.Pos
	Message string
	Rule    string
}

// FindLayout works out the tools and gen packages of specRoot, a directory of mod.
//
// The tools package is the one holding the //go:generate line that runs
// `toolgen generate` on specRoot: every .go file of the module is scanned (test files
// too, as go generate reads them; skipping what the go command skips — testdata,
// vendor, directories starting with "." or "_", nested modules — and node_modules),
// and a line counts when a word of it is
// the toolgen command (`toolgen`, `.../cmd/toolgen`, `.../cmd/toolgen@VERSION`)
// followed by `generate`, and the spec root its DIR argument names, resolved against
// the line's own directory as go generate does, must be specRoot. The gen package is
// that line's -o (default DIR/gen) with its -pkg (default the directory's name). With
// no such line the layout is the convention README describes, specRoot/tools and
// specRoot/gen (<module>/tools and <module>/gen for a spec root at the module root).
// Lines of two different packages naming specRoot are a finding: the caller cannot
// tell which one holds the tools.
func FindLayout(mod Module, specRoot string) (Layout, []Finding, error) {
	root, err := filepath.Abs(specRoot)
	if err != nil {
		return Layout{}, nil, err
	}
	if _, ok := mod.rel(root); !ok {
		return Layout{}, nil, fmt.Errorf("%s is outside module %s (%s)", specRoot, mod.Path, mod.Root)
	}
	dirs, err := generateDirectives(mod.Root)
	if err != nil {
		return Layout{}, nil, err
	}
	var match []directive
	for _, d := range dirs {
		if canonical(d.specRoot) == canonical(root) {
			match = append(match, d)
		}
	}
	l := Layout{Module: mod, ToolsDir: filepath.Join(root, "tools"), GenDir: filepath.Join(root, "gen"), GenName: "gen"}
	if len(match) > 0 {
		first := match[0]
		var others []Finding
		for _, d := range match[1:] {
			if d.dir != first.dir {
				others = append(others, Finding{File: d.file, Pos: spec.Pos{Line: d.line, Col: 1}, Rule: "HOST-1",
					Message: fmt.Sprintf("this line and %s:%d both run toolgen generate on the spec root, from different packages: "+
						"keep one, or write cmd/NAME/main.go yourself", first.file, first.line)})
			}
		}
		if len(others) > 0 {
			return Layout{}, others, nil
		}
		l.ToolsDir, l.GenDir, l.GenName = first.dir, first.out, first.pkg
		l.Directive = fmt.Sprintf("%s:%d", first.file, first.line)
	}
	var ok bool
	if l.ToolsImport, ok = mod.ImportPath(l.ToolsDir); !ok {
		return Layout{}, nil, fmt.Errorf("the tools package %s is outside module %s", l.ToolsDir, mod.Path)
	}
	if l.GenImport, ok = mod.ImportPath(l.GenDir); !ok {
		return Layout{}, nil, fmt.Errorf("the generated package %s (-o of %s) is outside module %s", l.GenDir, l.Directive, mod.Path)
	}
	return l, nil, nil
}

// directive is one //go:generate line running toolgen generate.
type directive struct {
	file     string // absolute
	line     int
	dir      string // the file's directory: the package
	specRoot string // absolute
	out      string // absolute -o
	pkg      string // -pkg, or out's base name
}

// generateDirectives lists the toolgen generate lines of the module at root, in file
// path and line order.
func generateDirectives(root string) ([]directive, error) {
	var out []directive
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			return nil // an unreadable corner of the module holds no tools package we could use
		}
		if d.IsDir() {
			if p == root {
				return nil
			}
			name := d.Name()
			if name == "testdata" || name == "vendor" || name == "node_modules" ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || exists(filepath.Join(p, "go.mod")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		ds, err := fileDirectives(p, f)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		out = append(out, ds...)
		return nil
	})
	return out, err
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// fileDirectives reads the toolgen generate lines of one Go file.
func fileDirectives(file string, r io.Reader) ([]directive, error) {
	var out []directive
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	for n := 1; sc.Scan(); n++ {
		rest, ok := strings.CutPrefix(sc.Text(), "//go:generate")
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '\t') {
			continue
		}
		d, ok := parseDirective(filepath.Dir(file), rest)
		if !ok {
			continue
		}
		d.file, d.line = file, n
		out = append(out, d)
	}
	if err := sc.Err(); err != nil && !errors.Is(err, bufio.ErrTooLong) {
		return nil, err
	}
	return out, nil
}

// parseDirective reads the words of a go:generate line (after "//go:generate") run in
// dir; ok is false unless they run toolgen generate with arguments it accepts.
func parseDirective(dir, line string) (directive, bool) {
	words, ok := splitWords(line)
	if !ok {
		return directive{}, false
	}
	start := -1
	for i := 0; i+1 < len(words); i++ {
		if isToolgen(words[i]) && words[i+1] == "generate" {
			start = i + 2
			break
		}
	}
	if start < 0 {
		return directive{}, false
	}
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := fs.String("o", "", "")
	pkg := fs.String("pkg", "", "")
	fs.Bool("check", false, "")
	fs.Bool("v", false, "")
	fs.String("format", "", "")
	args := words[start:]
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return directive{}, false
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(positional) > 1 {
		return directive{}, false
	}
	d := directive{dir: dir, specRoot: dir}
	if len(positional) == 1 {
		d.specRoot = join(dir, positional[0])
	}
	d.out = filepath.Join(d.specRoot, "gen")
	if *o != "" {
		d.out = join(dir, *o)
	}
	d.pkg = *pkg
	if d.pkg == "" {
		// toolgen generate's own default (toolgencli): the output directory's name.
		d.pkg = strings.ReplaceAll(filepath.Base(d.out), "-", "_")
	}
	return d, true
}

func join(dir, p string) string {
	p = filepath.FromSlash(p)
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, p)
}

// isToolgen reports whether a word of a go:generate line is the toolgen command.
func isToolgen(w string) bool {
	w, _, _ = strings.Cut(w, "@")
	base := path.Base(filepath.ToSlash(w))
	return base == "toolgen" || base == "toolgen.exe"
}

// splitWords splits a go:generate line the way go generate does: at spaces and tabs,
// with double-quoted Go strings as one word.
func splitWords(line string) ([]string, bool) {
	var words []string
	for {
		line = strings.TrimLeft(line, " \t")
		if line == "" {
			return words, true
		}
		if line[0] == '"' {
			end := 1
			for end < len(line) && line[end] != '"' {
				if line[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(line) {
				return nil, false
			}
			w, err := strconv.Unquote(line[:end+1])
			if err != nil {
				return nil, false
			}
			words = append(words, w)
			line = line[end+1:]
			continue
		}
		i := strings.IndexAny(line, " \t")
		if i < 0 {
			i = len(line)
		}
		words = append(words, line[:i])
		line = line[i:]
	}
}
