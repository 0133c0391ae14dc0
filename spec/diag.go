package spec

import (
	"fmt"

	"github.com/toolgen/toolgen/spec/diag"
)

// Pos is a 1-based line and column in a spec file. The zero Pos means "the whole file"
// and is printed as 1:1, so every diagnostic carries a position an editor can jump to.
// It converts to and from diag.Pos, the position of a finding.
type Pos struct {
	Line int `json:"line"`
	Col  int `json:"column"`
}

func (p Pos) orStart() Pos { return Pos(diag.Pos(p).OrStart()) }

// Diagnostic is one finding of a check: `path:line:col: message [RULE]`, in the one
// annotation model of package diag. Rule is a check rule ID of [CheckRules].
type Diagnostic = diag.Annotation

// Diagnostics is a set of findings.
type Diagnostics = diag.Set

// Format names an output format of diagnostics.
type Format = diag.Format

const (
	FormatText     = diag.Text
	FormatJSON     = diag.JSON
	FormatGitHub   = diag.GitHub
	FormatMarkdown = diag.Markdown
)

// reporter collects findings for one file.
type reporter struct {
	path  string
	diags *Diagnostics
}

func (r reporter) errorf(p Pos, rule, format string, a ...any) {
	*r.diags = append(*r.diags, NewDiagnostic(r.path, p, rule, fmt.Sprintf(format, a...)))
}

// NewDiagnostic is a check finding of rule at p in path: an error, in the rule's
// category (the ID up to its first dot).
func NewDiagnostic(path string, p Pos, rule, msg string) Diagnostic {
	return Diagnostic{Path: path, Pos: diag.Pos(p), Rule: rule, Severity: diag.Error, Category: ruleCategory(rule), Message: msg}
}
