package spec

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Pos is a 1-based line and column in a spec file. The zero Pos means "the whole file"
// and is printed as 1:1, so every diagnostic carries a position an editor can jump to.
type Pos struct {
	Line int `json:"line"`
	Col  int `json:"column"`
}

func (p Pos) orStart() Pos {
	if p.Line <= 0 {
		return Pos{1, 1}
	}
	if p.Col <= 0 {
		p.Col = 1
	}
	return p
}

// Diagnostic is one finding: `path:line:col: message [RULE]`.
type Diagnostic struct {
	Path    string `json:"path"`
	Pos     Pos    `json:"pos"`
	Message string `json:"message"`
	// Rule is the stable name of the rule that fired: a requirement ID of DESIGN.md
	// (SPEC-1, WF-1, POL-2, ...) or one of the structural names (yaml, unknown-key,
	// duplicate-key).
	Rule string `json:"rule"`
}

func (d Diagnostic) String() string {
	p := d.Pos.orStart()
	return fmt.Sprintf("%s:%d:%d: %s [%s]", d.Path, p.Line, p.Col, d.Message, d.Rule)
}

// Diagnostics is a set of findings.
type Diagnostics []Diagnostic

// Sorted returns the findings deduplicated and ordered by path, line, column, rule and
// message, the order in which they are printed.
func (ds Diagnostics) Sorted() Diagnostics {
	out := make(Diagnostics, len(ds))
	for i, d := range ds {
		d.Pos = d.Pos.orStart()
		out[i] = d
	}
	slices.SortFunc(out, func(a, b Diagnostic) int {
		return cmp.Or(
			cmp.Compare(a.Path, b.Path),
			cmp.Compare(a.Pos.Line, b.Pos.Line),
			cmp.Compare(a.Pos.Col, b.Pos.Col),
			cmp.Compare(a.Rule, b.Rule),
			cmp.Compare(a.Message, b.Message),
		)
	})
	return slices.Compact(out)
}

// Format names an output format of diagnostics.
type Format string

const (
	FormatText   Format = "text"
	FormatJSON   Format = "json"
	FormatGitHub Format = "github"
)

// Write prints the findings, sorted, in the given format.
func (ds Diagnostics) Write(w io.Writer, f Format) error {
	sorted := ds.Sorted()
	switch f {
	case FormatJSON:
		if sorted == nil {
			sorted = Diagnostics{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(sorted)
	case FormatGitHub:
		for _, d := range sorted {
			// GitHub Actions workflow command; see "Workflow commands for GitHub Actions".
			if _, err := fmt.Fprintf(w, "::error file=%s,line=%d,col=%d,title=%s::%s\n",
				ghEscapeProperty(d.Path), d.Pos.Line, d.Pos.Col, ghEscapeProperty(d.Rule), ghEscapeData(d.Message)); err != nil {
				return err
			}
		}
		return nil
	default:
		for _, d := range sorted {
			if _, err := fmt.Fprintln(w, d.String()); err != nil {
				return err
			}
		}
		return nil
	}
}

func ghEscapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func ghEscapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

// reporter collects findings for one file.
type reporter struct {
	path  string
	diags *Diagnostics
}

func (r reporter) errorf(p Pos, rule, format string, a ...any) {
	*r.diags = append(*r.diags, Diagnostic{Path: r.path, Pos: p, Rule: rule, Message: fmt.Sprintf(format, a...)})
}
