package toolgencli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime/debug"
	"strings"

	"github.com/toolgen/toolgen/internal/cli"
	"github.com/toolgen/toolgen/spec"
	"github.com/toolgen/toolgen/spec/diag"
	"github.com/toolgen/toolgen/spec/specdiff"
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

// Run runs toolgen with args (without the program name) and returns the exit code, one
// of the vocabulary both command lines share: cli.ExitOK (clean), cli.ExitFailed
// (findings, stale output, a failing diff), cli.ExitTrouble (usage or I/O error).
func Run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return cli.ExitTrouble
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
		return cli.ExitOK
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return cli.ExitOK
	default:
		fmt.Fprintf(stderr, "toolgen: unknown command %q\n\n%s", cmd, usage)
		return cli.ExitTrouble
	}
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// parseDir parses a command's flags, before or after its one positional DIR, as in
// "toolgen generate . -check" and "toolgen generate -check ." (cli.Parse), and returns
// DIR ("." when none is given).
func parseDir(fs *flag.FlagSet, args []string) (dir string, err error) {
	positional, err := cli.Parse(fs, args)
	if err != nil {
		return "", err
	}
	switch len(positional) {
	case 0:
		return ".", nil
	case 1:
		return positional[0], nil
	default:
		return "", fmt.Errorf("expected at most one spec directory, got %s", strings.Join(positional, " "))
	}
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("toolgen "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	return fs
}

// output is how findings are printed: the -format and -snippets flags, which check and
// generate take (diff declares its own, with its own help).
type output struct {
	format   string
	snippets bool
}

func (o *output) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.format, "format", "text", "diagnostics format: text, json, github or markdown")
	fs.BoolVar(&o.snippets, "snippets", false, "text format: print each finding's source line and a caret under its column")
}

// textOutput is the text format without snippets.
func textOutput() output { return output{format: string(diag.Text)} }

// load loads DIR and prints its diagnostics, their paths shown by pp. ok is false when
// the caller must stop; code is then the exit code.
func load(dir string, pp pathPrinter, out output, stdout, stderr io.Writer) (tree *spec.Tree, code int, ok bool) {
	format, err := diag.ParseFormat(out.format)
	if err != nil {
		return nil, usageError(err, stderr), false
	}
	tree, diags, err := loadDir(dir, pp)
	if err != nil {
		fmt.Fprintf(stderr, "toolgen: %v\n", err)
		return nil, cli.ExitTrouble, false
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
		if out.snippets {
			display := pp.show(dir)
			report.Source = func(a diag.Annotation) ([]byte, bool) { return readDisplayed(dir, display, a.Path) }
		}
		if format == diag.Text {
			report.Summary = "" // printed last, below
		}
		if err := diag.Write(w, format, diags, report); err != nil {
			fmt.Fprintf(stderr, "toolgen: %v\n", err)
			return nil, cli.ExitTrouble, false
		}
	}
	if len(diags) > 0 {
		if format == diag.Text {
			fmt.Fprintf(stderr, "toolgen: %s\n", checkSummary(len(diags)))
		}
		return tree, cli.ExitFailed, false
	}
	return tree, cli.ExitOK, true
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

func usageError(err error, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		return cli.ExitOK
	}
	fmt.Fprintf(stderr, "toolgen: %v\n", err)
	return cli.ExitTrouble
}
