package toolgencli

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/toolgen/toolgen/internal/cli"
	"github.com/toolgen/toolgen/spec"
	"github.com/toolgen/toolgen/spec/diag"
	"github.com/toolgen/toolgen/spec/specdiff"
)

const diffUsage = `Usage:
	toolgen diff [--against REF | OLD_DIR] [-format text|json|github|markdown] [-snippets] [--fail-on weakens,breaking|none] [DIR]

Compares the spec tree DIR (default ".") with a previous one: OLD_DIR, or DIR as it is
at the git ref REF (read with git archive, no checkout). Each finding has a stable rule
name, a severity (weakens, breaking, info) and the current and previous locations.
A finding on a tool whose spec adds its rule to acknowledge: [RULE, ...] in this change
is reported as acknowledged and never fails (see spec/specdiff/doc.go).
Exit status: 0 when nothing unacknowledged of a --fail-on severity changed (default
weakens,breaking), 1 otherwise, 2 on a usage error, a tree whose YAML cannot be read, or
an acknowledge entry that names no rule a tool can acknowledge.
`

// diffFlags are diff's flags.
type diffFlags struct {
	format, against, failOn string
	snippets                bool
}

func (f *diffFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.format, "format", "text", "output format: text, json, github or markdown")
	fs.BoolVar(&f.snippets, "snippets", false, "text format: print each finding's source line and a caret under its column")
	fs.StringVar(&f.against, "against", "", "compare with this git ref of the repository holding DIR (instead of OLD_DIR)")
	fs.StringVar(&f.failOn, "fail-on", "weakens,breaking", "severities that make the exit status 1: weakens, breaking (comma-separated), or none")
}

// runDiff is `toolgen diff [--against REF | OLD_DIR] [-format F] [--fail-on LIST] [DIR]`.
//
// Both trees are loaded as `toolgen check` loads them; a tree with check findings is
// still compared (the diff is about what changed, check is about what is wrong), but a
// tree holding a file whose YAML cannot be read at all is refused with exit 2: such a file
// loads as nothing, and comparing would report everything in it as removed or added.
func runDiff(args []string, stdout, stderr io.Writer) int {
	var fl diffFlags
	fs := newFlagSet("diff", stderr)
	fs.Usage = func() { fmt.Fprint(stderr, diffUsage) }
	fl.bind(fs)
	positional, err := cli.Parse(fs, args)
	if err != nil {
		return usageError(err, stderr)
	}
	f, err := diag.ParseFormat(fl.format)
	if err != nil {
		return usageError(err, stderr)
	}
	fail := map[specdiff.Severity]bool{}
	for _, s := range strings.Split(fl.failOn, ",") {
		switch s = strings.TrimSpace(s); s {
		case "weakens", "breaking":
			fail[specdiff.Severity(s)] = true
		case "none":
		default:
			return usageError(fmt.Errorf("unknown --fail-on %q: use weakens, breaking (comma-separated) or none", s), stderr)
		}
	}
	var oldDir, dir string
	switch {
	case fl.against != "" && len(positional) <= 1:
		dir = "."
		if len(positional) == 1 {
			dir = positional[0]
		}
	case fl.against == "" && len(positional) == 1:
		oldDir, dir = positional[0], "."
	case fl.against == "" && len(positional) == 2:
		oldDir, dir = positional[0], positional[1]
	default:
		return usageError(errors.New("diff compares two trees: toolgen diff --against REF [DIR] or toolgen diff OLD_DIR [DIR]"), stderr)
	}

	pp := newPathPrinter()
	cur, code := loadForDiff(dir, pp.show(dir), stderr)
	if cur == nil {
		return code
	}
	// An acknowledgement that names no rule would sign off nothing while looking like a
	// sign-off: refuse it, at its position. Only the current tree's entries matter; the
	// previous tree's are history.
	if bad := specdiff.CheckAcknowledgements(cur); len(bad) > 0 {
		bad.Write(stderr, spec.FormatText)
		fmt.Fprintf(stderr, "toolgen: cannot compare %s: %d acknowledge %s no rule a tool can acknowledge\n", pp.show(dir), len(bad),
			plural(len(bad), "entry names", "entries name"))
		return cli.ExitTrouble
	}
	var prev *spec.Tree
	prevRoot, prevDisplay := oldDir, pp.show(oldDir)
	if fl.against != "" {
		tmp, err := gitTree(dir, fl.against)
		if tmp != "" {
			defer os.RemoveAll(tmp)
		}
		if err != nil {
			fmt.Fprintf(stderr, "toolgen: --against %s: %v\n", fl.against, err)
			return cli.ExitTrouble
		}
		// Display the previous tree's paths as the current ones are displayed, so
		// "previously tools/x.yaml:4:1" names the same file at the ref.
		prevRoot, prevDisplay = tmp, pp.show(dir)
		prev, code = loadForDiff(tmp, pp.show(dir), stderr)
	} else {
		prev, code = loadForDiff(oldDir, prevDisplay, stderr)
	}
	if prev == nil {
		return code
	}

	findings := specdiff.Compare(prev, cur)
	report := diag.Report{Command: "diff", Summary: diffSummary(findings), Grouped: true}
	if fl.snippets {
		report.Source = func(a diag.Annotation) ([]byte, bool) {
			// The primary location is in the current tree unless the thing is gone.
			root, display := dir, pp.show(dir)
			if a.Current == nil {
				root, display = prevRoot, prevDisplay
			}
			return readDisplayed(root, display, a.Path)
		}
	}
	if err := diag.Write(stdout, f, findings, report); err != nil {
		fmt.Fprintf(stderr, "toolgen: %v\n", err)
		return cli.ExitTrouble
	}
	for _, f := range findings {
		if fail[f.Severity] && !f.Acknowledged {
			return cli.ExitFailed
		}
	}
	return cli.ExitOK
}

// loadForDiff loads dir, displayed as display. It refuses (nil, cli.ExitTrouble) a tree that
// cannot be read or holds unreadable YAML.
func loadForDiff(dir, display string, stderr io.Writer) (*spec.Tree, int) {
	st, err := os.Stat(dir)
	if err == nil && !st.IsDir() {
		err = fmt.Errorf("%s is not a directory", dir)
	}
	if err != nil {
		fmt.Fprintf(stderr, "toolgen: %v\n", err)
		return nil, cli.ExitTrouble
	}
	tree, diags, err := spec.LoadFS(os.DirFS(dir), display)
	if err != nil {
		fmt.Fprintf(stderr, "toolgen: %v\n", err)
		return nil, cli.ExitTrouble
	}
	var unreadable spec.Diagnostics
	for _, d := range diags {
		if d.Category == "yaml" {
			unreadable = append(unreadable, d)
		}
	}
	if len(unreadable) > 0 {
		unreadable.Write(stderr, spec.FormatText)
		fmt.Fprintf(stderr, "toolgen: cannot compare %s: %d %s cannot be read as YAML\n", display, len(unreadable),
			plural(len(unreadable), "file", "files"))
		return nil, cli.ExitTrouble
	}
	return tree, cli.ExitOK
}

// gitTree extracts the spec root DIR as it is at ref into a temporary directory, with
// `git archive REF:PATH` (no checkout): only the spec files (tools/, servers/,
// protocols/, policy.yaml) are written.
func gitTree(dir, ref string) (tmp string, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	top, err := gitOutput(abs, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", err
	}
	prefix, err := gitOutput(abs, "rev-parse", "--show-prefix")
	if err != nil {
		return "", err
	}
	treeish := ref + ":" + strings.TrimSuffix(strings.TrimSpace(string(prefix)), "/")
	if t, err := gitOutput(abs, "cat-file", "-t", treeish); err != nil || strings.TrimSpace(string(t)) != "tree" {
		return "", fmt.Errorf("%s is not a commit of the repository holding %s, or has no %s", ref, dir, dir)
	}
	data, err := gitOutput(strings.TrimSpace(string(top)), "archive", "--format=tar", treeish)
	if err != nil {
		return "", err
	}
	tmp, err = os.MkdirTemp("", "toolgen-diff-")
	if err != nil {
		return "", err
	}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return tmp, fmt.Errorf("read git archive: %w", err)
		}
		name := path.Clean(h.Name)
		if h.Typeflag != tar.TypeReg || !isSpecPath(name) {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return tmp, fmt.Errorf("read git archive: %w", err)
		}
		dst := filepath.Join(tmp, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return tmp, err
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return tmp, err
		}
	}
	return tmp, nil
}

// isSpecPath reports whether name (slash-separated, relative to the spec root) is a
// file the spec loader reads or reports.
func isSpecPath(name string) bool {
	if name == spec.PolicyFile {
		return true
	}
	d, f := path.Split(name)
	switch strings.TrimSuffix(d, "/") {
	case spec.ToolsDir, spec.ServersDir, spec.ProtocolsDir:
		return strings.HasSuffix(f, ".yaml") || strings.HasSuffix(f, ".yml")
	}
	return false
}

func gitOutput(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("git %s: %s", args[0], msg)
	}
	return out, nil
}

func diffSummary(fs []specdiff.Finding) string {
	if len(fs) == 0 {
		return "no changes to the specs' meaning"
	}
	n := map[specdiff.Severity]int{}
	acked := 0
	for _, f := range fs {
		if f.Acknowledged {
			acked++
			continue
		}
		n[f.Severity]++
	}
	w, b, i := n[specdiff.Weakens], n[specdiff.Breaking], n[specdiff.Info]
	s := fmt.Sprintf("%d %s safety, %d %s callers, %d info",
		w, plural(w, "change weakens", "changes weaken"), b, plural(b, "breaks", "break"), i)
	if acked > 0 {
		s += fmt.Sprintf(", %d acknowledged", acked)
	}
	return s
}
