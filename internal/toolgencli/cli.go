package toolgencli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"text/tabwriter"

	"github.com/toolgen/toolgen/codegen"
	"github.com/toolgen/toolgen/spec"
	"github.com/toolgen/toolgen/spec/diag"
	"github.com/toolgen/toolgen/spec/specdiff"
)

// Exit codes, the diff(1) convention: 0 clean, 1 findings or stale output, 2 trouble.
const (
	ExitOK       = 0
	ExitFindings = 1
	ExitUsage    = 2
)

const usage = `toolgen checks tool, server, protocol and policy specs and generates Go wrappers.

Usage:
	toolgen check [-format text|json|github|markdown] [-snippets] [DIR]
	toolgen generate [DIR] [-o OUT] [-pkg NAME] [-check] [-v] [-format text|json|github|markdown] [-snippets]
	toolgen diff [--against REF | OLD_DIR] [-format text|json|github|markdown] [-snippets] [--fail-on weakens,breaking|none] [DIR]
	toolgen host [-name NAME] [-force] [DIR]
	toolgen schema tool|server|protocol|policy|device|principals|notifications
	toolgen version

DIR is the spec root holding tools/, servers/, protocols/ and policy.yaml (default ".").
OUT defaults to DIR/gen and the package name to OUT's base name.
host writes, once, the program serving DIR's tools over MCP: cmd/NAME/main.go in DIR's
Go module (NAME defaults to the module path's last element and -host), and, if the
tools package (the one whose //go:generate line runs toolgen generate on DIR, else
DIR/tools) declares no All function, tools/all.go returning its implementations.
It never overwrites a file without -force.
Findings name a stable rule ID (docs/rules.md); -snippets adds, in the text format, the
source line and a caret under the column.
Exit status: 0 clean, 1 findings or stale output, 2 usage or I/O error.
`

// Run runs toolgen with args (without the program name) and returns the exit code.
func Run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return ExitUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "check":
		return runCheck(rest, stdout, stderr)
	case "generate":
		return runGenerate(rest, stdout, stderr)
	case "diff":
		return runDiff(rest, stdout, stderr)
	case "host":
		return runHost(rest, stdout, stderr)
	case "schema":
		return runSchema(rest, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "toolgen", version())
		return ExitOK
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return ExitOK
	default:
		fmt.Fprintf(stderr, "toolgen: unknown command %q\n\n%s", cmd, usage)
		return ExitUsage
	}
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// parseInterleaved parses flags that may come before or after the one positional DIR,
// as in "toolgen generate . -check" and "toolgen generate -check .".
func parseInterleaved(fs *flag.FlagSet, args []string) (dir string, err error) {
	dir = "."
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch len(positional) {
	case 0:
	case 1:
		dir = positional[0]
	default:
		return "", fmt.Errorf("expected at most one spec directory, got %s", strings.Join(positional, " "))
	}
	return dir, nil
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("toolgen "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	return fs
}

// output is how findings are printed: the -format and -snippets flags.
type output struct {
	format   *string
	snippets *bool
}

func outputFlags(fs *flag.FlagSet) output {
	return output{
		format:   fs.String("format", "text", "diagnostics format: text, json, github or markdown"),
		snippets: fs.Bool("snippets", false, "text format: print each finding's source line and a caret under its column"),
	}
}

// textOutput is the text format without snippets.
func textOutput() output {
	format, snippets := string(diag.Text), false
	return output{format: &format, snippets: &snippets}
}

// load loads DIR and prints its diagnostics, their paths shown by pp. ok is false when
// the caller must stop; code is then the exit code.
func load(dir string, pp pathPrinter, out output, stdout, stderr io.Writer) (tree *spec.Tree, code int, ok bool) {
	format, err := diag.ParseFormat(*out.format)
	if err != nil {
		return nil, usageError(err, stderr), false
	}
	tree, diags, err := loadDir(dir, pp)
	if err != nil {
		fmt.Fprintf(stderr, "toolgen: %v\n", err)
		return nil, ExitUsage, false
	}
	if tree != nil {
		// acknowledge: names specdiff's rules; spec cannot import specdiff to check them.
		diags = append(diags, specdiff.CheckAcknowledgements(tree)...).Sorted()
	}
	if len(diags) > 0 || format == diag.JSON || format == diag.Markdown {
		// Findings go to stdout in the machine formats, stderr as text, like go vet.
		w := stderr
		if format != diag.Text {
			w = stdout
		}
		report := diag.Report{Command: "check", Summary: checkSummary(len(diags))}
		if *out.snippets {
			display := pp.show(dir)
			report.Source = func(a diag.Annotation) ([]byte, bool) { return readDisplayed(dir, display, a.Path) }
		}
		if format == diag.Text {
			report.Summary = "" // printed last, below
		}
		if err := diag.Write(w, format, diags, report); err != nil {
			fmt.Fprintf(stderr, "toolgen: %v\n", err)
			return nil, ExitUsage, false
		}
	}
	if len(diags) > 0 {
		if format == diag.Text {
			fmt.Fprintf(stderr, "toolgen: %s\n", checkSummary(len(diags)))
		}
		return tree, ExitFindings, false
	}
	return tree, ExitOK, true
}

// loadDir is spec.LoadDir with the diagnostics' paths shown by pp.
func loadDir(dir string, pp pathPrinter) (*spec.Tree, spec.Diagnostics, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, nil, err
	}
	if !st.IsDir() {
		return nil, nil, fmt.Errorf("%s is not a directory", pp.show(dir))
	}
	return spec.LoadFS(os.DirFS(dir), pp.show(dir))
}

func checkSummary(n int) string {
	if n == 0 {
		return "no problems"
	}
	return fmt.Sprintf("%d %s", n, plural(n, "problem", "problems"))
}

// readDisplayed reads the file a finding names by its displayed path: the spec root
// root is displayed as display, and its files as display/REL.
func readDisplayed(root, display, p string) ([]byte, bool) {
	rel := p
	if display != "" && display != "." {
		var ok bool
		if rel, ok = strings.CutPrefix(p, strings.ReplaceAll(display, "\\", "/")+"/"); !ok {
			return nil, false
		}
	}
	if !fs.ValidPath(rel) {
		return nil, false
	}
	b, err := fs.ReadFile(os.DirFS(root), rel)
	return b, err == nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check", stderr)
	out := outputFlags(fs)
	dir, err := parseInterleaved(fs, args)
	if err != nil {
		return usageError(err, stderr)
	}
	if _, err := diag.ParseFormat(*out.format); err != nil {
		return usageError(err, stderr)
	}
	_, code, _ := load(dir, newPathPrinter(), out, stdout, stderr)
	return code
}

func runGenerate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("generate", stderr)
	output := outputFlags(fs)
	out := fs.String("o", "", "output directory (default DIR/gen)")
	pkg := fs.String("pkg", "", "Go package name of the output (default: the output directory's base name)")
	check := fs.Bool("check", false, "write nothing; exit 1 and name the stale files if OUT is not what the specs produce")
	verbose := fs.Bool("v", false, "print every tool generated and every file written")
	dir, err := parseInterleaved(fs, args)
	if err != nil {
		return usageError(err, stderr)
	}
	if _, err := diag.ParseFormat(*output.format); err != nil {
		return usageError(err, stderr)
	}
	if *out == "" {
		*out = filepath.Join(dir, "gen")
	}
	if *pkg == "" {
		abs, err := filepath.Abs(*out)
		if err != nil {
			return usageError(err, stderr)
		}
		*pkg = strings.ReplaceAll(filepath.Base(abs), "-", "_")
	}
	if !goIdent(*pkg) {
		return usageError(fmt.Errorf("package name %q is not a Go identifier; use -pkg", *pkg), stderr)
	}
	pp := newPathPrinter()
	tree, code, ok := load(dir, pp, output, stdout, stderr)
	if !ok {
		return code
	}
	files, err := codegen.Generate(tree, codegen.Options{Package: *pkg})
	if err != nil {
		fmt.Fprintf(stderr, "toolgen: generate: %v\n", err)
		return ExitUsage
	}
	changes, err := codegen.Sync(*out, files, *check)
	if err != nil {
		fmt.Fprintf(stderr, "toolgen: %v\n", err)
		return ExitUsage
	}
	if *check {
		if len(changes) == 0 {
			if *verbose {
				fmt.Fprintf(stdout, "%s is up to date (%d files)\n", pp.show(*out), len(files))
			}
			return ExitOK
		}
		for _, c := range changes {
			what := "is stale"
			switch {
			case c.Action == "delete":
				what = "is left over from a removed spec"
			case !exists(filepath.Join(*out, c.Name)):
				what = "is missing"
			}
			fmt.Fprintf(stderr, "%s %s\n", pp.show(filepath.Join(*out, c.Name)), what)
		}
		fmt.Fprintf(stderr, "toolgen: %d generated %s out of date; run go generate ./... (or toolgen generate %s)\n",
			len(changes), plural(len(changes), "file is", "files are"), pp.show(dir))
		return ExitFindings
	}
	if *verbose {
		printSummary(stdout, tree, pp.show(*out), files, changes)
	}
	return ExitOK
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

func runSchema(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		return usageError(errors.New("schema takes one file kind: tool, server, protocol or policy"), stderr)
	}
	b, ok := spec.FileSchema(args[0])
	if !ok {
		return usageError(fmt.Errorf("unknown file kind %q: use tool, server, protocol or policy", args[0]), stderr)
	}
	stdout.Write(b)
	return ExitOK
}

func usageError(err error, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	fmt.Fprintf(stderr, "toolgen: %v\n", err)
	return ExitUsage
}
