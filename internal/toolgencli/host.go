package toolgencli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/toolgen/toolgen/internal/cli"
	"github.com/toolgen/toolgen/internal/scaffold"
	"github.com/toolgen/toolgen/spec"
)

// hostFlags are host's flags.
type hostFlags struct {
	name  string
	force bool
}

func (f *hostFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.name, "name", "", "the host program, written to cmd/NAME/main.go (default: the module path's last element and -host)")
	fs.BoolVar(&f.force, "force", false, "overwrite the files if they exist")
}

// runHost is `toolgen host`: it writes, once, the host program that serves the module's
// own tools over MCP (cmd/NAME/main.go, over host/hostcli) and, when the tools package
// has no All function, tools/all.go listing its implementations (see package scaffold
// for how the packages and the implementations are found). Nothing is written unless
// everything checks: the spec tree, an implementation for every spec, and no file to
// overwrite without -force.
func runHost(args []string, stdout, stderr io.Writer) int {
	var fl hostFlags
	fs := newFlagSet("host", stderr)
	fl.bind(fs)
	dir, err := parseDir(fs, args)
	if err != nil {
		return usageError(err, stderr)
	}
	if fl.name != "" && !scaffold.ProgramName.MatchString(fl.name) {
		return usageError(fmt.Errorf("-name %q is not a program name (letters, digits, '.', '_', '-'; one directory under cmd/)", fl.name), stderr)
	}
	pp := newPathPrinter()
	tree, code, ok := load(dir, pp, textOutput(), stdout, stderr)
	if !ok {
		return code
	}
	mod, err := scaffold.FindModule(dir)
	if err != nil {
		fmt.Fprintf(stderr, "toolgen host: %v\n", err)
		return cli.ExitTrouble
	}
	if fl.name == "" {
		if fl.name = scaffold.DefaultName(mod.Path); !scaffold.ProgramName.MatchString(fl.name) {
			return usageError(fmt.Errorf("module path %s gives no program name; use -name", mod.Path), stderr)
		}
	}
	show := func(p string) string { return pp.show(relToWD(p)) }
	report := func(findings []scaffold.Finding) int {
		var diags spec.Diagnostics
		for _, f := range findings {
			d := spec.NewDiagnostic("", f.Pos, f.Rule, f.Message)
			if f.Tool != nil {
				d.Path = specPath(pp.show(dir), f.Tool.File)
			} else {
				d.Path = show(f.File)
			}
			diags = append(diags, d)
		}
		diags.Write(stderr, spec.FormatText)
		fmt.Fprintf(stderr, "toolgen: %d %s; nothing written\n", len(diags), plural(len(diags), "problem", "problems"))
		return cli.ExitFailed
	}

	layout, findings, err := scaffold.FindLayout(mod, dir)
	if err != nil {
		fmt.Fprintf(stderr, "toolgen host: %v\n", err)
		return cli.ExitTrouble
	}
	if len(findings) > 0 {
		return report(findings)
	}
	pkg, err := scaffold.ParsePackage(layout)
	if err != nil {
		fmt.Fprintf(stderr, "toolgen host: %v\n", err)
		return cli.ExitTrouble
	}
	if pkg.Name == "main" {
		fmt.Fprintf(stderr, "toolgen host: the tools package %s is a command (package main), which the host program cannot import; "+
			"implement the tools in a package of their own\n", show(layout.ToolsDir))
		return cli.ExitFailed
	}
	mainFile := filepath.Join(mod.Root, "cmd", fl.name, "main.go")
	allFile := filepath.Join(layout.ToolsDir, scaffold.AllFileName)
	if len(pkg.BadAll) > 0 {
		for i := range pkg.BadAll {
			pkg.BadAll[i].Rule = "HOST-1"
			pkg.BadAll[i].Message = fmt.Sprintf("All is declared here, but not as func All() []runtime.Tool, which %s calls: "+
				"make it that function, or rename it and let toolgen host write %s", show(mainFile), show(allFile))
		}
		return report(pkg.BadAll)
	}
	writeAll := pkg.All.File == ""
	targets := []string{mainFile}
	if writeAll {
		targets = append(targets, allFile)
	}
	if !fl.force {
		refused := 0
		for _, t := range targets {
			if _, err := os.Lstat(t); err == nil {
				fmt.Fprintf(stderr, "toolgen host: %s exists: toolgen host writes it once and it is yours now; edit it, or run toolgen host -force to overwrite it\n", show(t))
				refused++
			}
		}
		if refused > 0 {
			return cli.ExitFailed
		}
	}

	modRel, _ := filepath.Rel(canonicalPath(mod.Root), canonicalAbs(dir))
	run := "go run ./" + path.Join("cmd", fl.name) + " serve --stdio"
	if modRel != "." && modRel != "" {
		run += " --dir " + shellQuote(filepath.ToSlash(modRel))
	}
	files := map[string][]byte{}
	if writeAll {
		skip := ""
		if _, err := os.Lstat(allFile); err == nil {
			skip = allFile // about to be overwritten (-force): what it declares does not count
		}
		impls, findings := pkg.Implementations(tree.Tools, skip, show)
		if len(findings) > 0 {
			return report(findings)
		}
		src, findings, err := scaffold.AllFile(pkg.ToolsPackageName(), layout, impls, path.Join("cmd", fl.name))
		if err != nil {
			fmt.Fprintf(stderr, "toolgen host: %s: %v\n", show(allFile), err)
			return cli.ExitTrouble
		}
		if len(findings) > 0 {
			return report(findings)
		}
		files[allFile] = src
	}
	var builtins []string
	for _, b := range tree.ReferencedBuiltins {
		builtins = append(builtins, b.Name)
	}
	src, err := scaffold.MainFile(fl.name, layout, pkg.ToolsPackageName(), builtins, run)
	if err != nil {
		fmt.Fprintf(stderr, "toolgen host: %s: %v\n", show(mainFile), err)
		return cli.ExitTrouble
	}
	files[mainFile] = src

	for _, t := range targets {
		if err := writeFile(t, files[t]); err != nil {
			fmt.Fprintf(stderr, "toolgen host: %v\n", err)
			return cli.ExitTrouble
		}
		fmt.Fprintf(stdout, "wrote %s\n", show(t))
	}
	next := run
	if root := relToWD(mod.Root); root != "." {
		next = "cd " + shellQuote(root) + " && " + run
	}
	fmt.Fprintf(stdout, "serve the tools over MCP: %s\n", next)
	return cli.ExitOK
}

// writeFile writes data to p, creating its directory. A file is replaced whole: data
// goes to a temporary file beside it first, so an interrupted write leaves the old one.
func writeFile(p string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".tmp*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), 0o644)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// relToWD is p relative to the working directory, where that is how the user would
// name it; otherwise p.
func relToWD(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	rel, err := filepath.Rel(canonicalPath(wd), canonicalPath(abs))
	if err != nil {
		return p
	}
	return rel
}

func canonicalAbs(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return canonicalPath(abs)
}

func canonicalPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// specPath is a spec file's path as diagnostics print it (spec.LoadFS's rule): its path
// under the root as displayed.
func specPath(root, file string) string {
	if root == "" || root == "." {
		return file
	}
	return path.Join(strings.TrimSuffix(filepath.ToSlash(root), "/"), file)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
