package toolgencli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/toolgen/toolgen/codegen"
	"github.com/toolgen/toolgen/internal/cli"
	"github.com/toolgen/toolgen/spec"
	"github.com/toolgen/toolgen/spec/diag"
)

// generateFlags are generate's flags.
type generateFlags struct {
	output
	out, pkg       string
	check, verbose bool
}

func (f *generateFlags) bind(fs *flag.FlagSet) {
	f.output.bind(fs)
	fs.StringVar(&f.out, "o", "", "output directory (default DIR/gen)")
	fs.StringVar(&f.pkg, "pkg", "", "Go package name of the output (default: the output directory's base name)")
	fs.BoolVar(&f.check, "check", false, "write nothing; exit 1 and name the stale files if OUT is not what the specs produce")
	fs.BoolVar(&f.verbose, "v", false, "print every tool generated and every file written")
}

// runGenerate is `toolgen generate [DIR] [-o OUT] [-pkg NAME] [-check] [-v]`: write
// (or, with -check, compare) the Go wrappers of DIR's tools.
func runGenerate(args []string, stdout, stderr io.Writer) int {
	var f generateFlags
	fs := newFlagSet("generate", stderr)
	f.bind(fs)
	dir, err := parseDir(fs, args)
	if err != nil {
		return usageError(err, stderr)
	}
	if _, err := diag.ParseFormat(f.format); err != nil {
		return usageError(err, stderr)
	}
	if f.out == "" {
		f.out = filepath.Join(dir, "gen")
	}
	if f.pkg == "" {
		abs, err := filepath.Abs(f.out)
		if err != nil {
			return usageError(err, stderr)
		}
		f.pkg = strings.ReplaceAll(filepath.Base(abs), "-", "_")
	}
	if !goIdent(f.pkg) {
		return usageError(fmt.Errorf("package name %q is not a Go identifier; use -pkg", f.pkg), stderr)
	}
	pp := newPathPrinter()
	tree, code, ok := load(dir, pp, f.output, stdout, stderr)
	if !ok {
		return code
	}
	files, err := codegen.Generate(tree, codegen.Options{Package: f.pkg})
	if err != nil {
		fmt.Fprintf(stderr, "toolgen: generate: %v\n", err)
		return cli.ExitTrouble
	}
	changes, err := codegen.Sync(f.out, files, f.check)
	if err != nil {
		fmt.Fprintf(stderr, "toolgen: %v\n", err)
		return cli.ExitTrouble
	}
	if f.check {
		if len(changes) == 0 {
			if f.verbose {
				fmt.Fprintf(stdout, "%s is up to date (%d files)\n", pp.show(f.out), len(files))
			}
			return cli.ExitOK
		}
		for _, c := range changes {
			what := "is stale"
			switch {
			case c.Action == "delete":
				what = "is left over from a removed spec"
			case !exists(filepath.Join(f.out, c.Name)):
				what = "is missing"
			}
			fmt.Fprintf(stderr, "%s %s\n", pp.show(filepath.Join(f.out, c.Name)), what)
		}
		fmt.Fprintf(stderr, "toolgen: %d generated %s out of date; run go generate ./... (or toolgen generate %s)\n",
			len(changes), plural(len(changes), "file is", "files are"), pp.show(dir))
		return cli.ExitFailed
	}
	if f.verbose {
		printSummary(stdout, tree, pp.show(f.out), files, changes)
	}
	return cli.ExitOK
}

func printSummary(w io.Writer, tree *spec.Tree, out string, files []codegen.File, changes []codegen.Change) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tKIND\tSIDE EFFECT\tIDEMPOTENCY\tRISK\tWATERMARK")
	for _, t := range tree.Tools {
		wm := "-"
		if t.Idempotency != "idempotent" {
			wm = "Prepare/Commit"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.Kind, t.SideEffect, t.Idempotency, t.Risk, wm)
	}
	tw.Flush()
	written, deleted := 0, 0
	for _, c := range changes {
		fmt.Fprintf(w, "%s %s\n", c.Action, filepath.Join(out, c.Name))
		if c.Action == "delete" {
			deleted++
		} else {
			written++
		}
	}
	fmt.Fprintf(w, "%d tools, %d servers, %d protocols; %d files in %s: %d written, %d deleted, %d unchanged\n",
		len(tree.Tools), len(tree.Servers), len(tree.Protocols), len(files), out, written, deleted, len(files)-written)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func goIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
