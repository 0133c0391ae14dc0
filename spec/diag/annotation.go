package diag

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Pos is a 1-based line and column in a spec file. The zero Pos means "the whole file"
// and is printed as 1:1, so every finding carries a position an editor can jump to.
type Pos struct {
	Line int `json:"line"`
	Col  int `json:"column"`
}

// IsZero reports whether p is no position.
func (p Pos) IsZero() bool { return p == Pos{} }

// OrStart is p, with 1:1 for the whole file and column 1 for a whole line.
func (p Pos) OrStart() Pos {
	if p.Line <= 0 {
		return Pos{1, 1}
	}
	if p.Col <= 0 {
		p.Col = 1
	}
	return p
}

// Location is a position in a named file. The zero Location means "none".
type Location struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"column"`
}

// IsZero reports whether l is no location.
func (l Location) IsZero() bool { return l.File == "" }

func (l Location) String() string { return fmt.Sprintf("%s:%d:%d", l.File, l.Line, l.Col) }

// Severity says how much a finding matters. A check finding is an [Error]; a change
// found by `toolgen diff` [Weakens] safety, is [Breaking] for callers, or is [Info].
type Severity string

const (
	Error    Severity = "error"    // the spec is wrong: nothing is generated or served from it
	Weakens  Severity = "weakens"  // the platform will do more without a person
	Breaking Severity = "breaking" // callers (or recorded results) no longer fit
	Info     Severity = "info"     // anything else that changed the catalog or a spec
)

// level is the GitHub Actions command of s: error, warning or notice.
func (s Severity) level() string {
	switch s {
	case Weakens:
		return "warning"
	case Info:
		return "notice"
	}
	return "error"
}

// Annotation is one finding.
//
// Path and Pos are the primary location: where a check finding is, or where a change is
// in the current tree (in the previous one for a thing that is gone). A change also has
// Current and Previous, the same key in each tree where it exists.
type Annotation struct {
	Path string `json:"path"`
	Pos  Pos    `json:"pos"`
	// End is the position just past the finding when it is known; zero otherwise.
	End     Pos    `json:"end,omitzero"`
	Message string `json:"message"`
	// Rule is the stable ID of the check or change rule that fired: spec.CheckRules
	// (SPEC-4.enum-duplicate, schema.unknown-key, ...) or specdiff.Rules (RISK_LOWERED,
	// ...). CI configurations, acknowledge entries and documentation name it.
	Rule     string   `json:"rule"`
	Severity Severity `json:"severity,omitempty"`
	// Category groups the rule: for a check rule, the requirement of DESIGN.md it
	// enforces (SPEC-4, ID-1, ...) or the structural group (yaml, schema).
	Category string `json:"category,omitempty"`
	// Kind is what Subject names: tool, server, device, protocol, policy, issuer,
	// webhook or notifications. Subject is its name. Set on changes.
	Kind    string `json:"kind,omitempty"`
	Subject string `json:"subject,omitempty"`
	// Current and Previous locate a change in the current and the previous tree.
	Current  *Location `json:"current,omitempty"`
	Previous *Location `json:"previous,omitempty"`
	// Acknowledged is set when the spec signed the change off (acknowledge: [RULE]):
	// it is still reported, but must not fail a check.
	Acknowledged bool `json:"acknowledged,omitempty"`
}

// At is the primary location.
func (a Annotation) At() Location {
	p := a.Pos.OrStart()
	return Location{File: a.Path, Line: p.Line, Col: p.Col}
}

// Tag is the severity and rule as the text and Markdown formats print a change:
// "WEAKENS RISK_LOWERED", with ", acknowledged" when it is signed off.
func (a Annotation) Tag() string {
	s := strings.ToUpper(string(a.Severity)) + " " + a.Rule
	if a.Acknowledged {
		s += ", acknowledged"
	}
	return s
}

// isCheck reports whether a is a problem of a spec rather than a change.
func (a Annotation) isCheck() bool { return a.Severity == "" || a.Severity == Error }

// messageWithPrevious is the message, followed by where the changed key was before
// when it exists in both trees.
func (a Annotation) messageWithPrevious() string {
	if a.Current != nil && a.Previous != nil {
		return fmt.Sprintf("%s (previously %s)", a.Message, *a.Previous)
	}
	return a.Message
}

// String is the finding's line of the text format: `path:line:col: message [RULE]` for
// a check finding, `path:line:col: [SEVERITY RULE] message (previously LOC)` for a
// change.
func (a Annotation) String() string {
	if a.isCheck() {
		return fmt.Sprintf("%s: %s [%s]", a.At(), a.Message, a.Rule)
	}
	return fmt.Sprintf("%s: [%s] %s", a.At(), a.Tag(), a.messageWithPrevious())
}

// Set is a list of findings.
type Set []Annotation

// Sorted returns the findings deduplicated and ordered by path, line, column, rule and
// message, the order in which they are printed.
func (s Set) Sorted() Set {
	out := make(Set, len(s))
	for i, a := range s {
		a.Pos = a.Pos.OrStart()
		out[i] = a
	}
	slices.SortStableFunc(out, Compare)
	return slices.CompactFunc(out, func(a, b Annotation) bool {
		return Compare(a, b) == 0 && a.Subject == b.Subject && a.Kind == b.Kind &&
			a.Severity == b.Severity && a.Category == b.Category && a.End == b.End &&
			a.Acknowledged == b.Acknowledged && eqLoc(a.Current, b.Current) && eqLoc(a.Previous, b.Previous)
	})
}

// Compare orders findings by primary location (path, line, column), then rule and
// message.
func Compare(a, b Annotation) int {
	pa, pb := a.Pos.OrStart(), b.Pos.OrStart()
	return cmp.Or(
		cmp.Compare(a.Path, b.Path),
		cmp.Compare(pa.Line, pb.Line),
		cmp.Compare(pa.Col, pb.Col),
		cmp.Compare(a.Rule, b.Rule),
		cmp.Compare(a.Message, b.Message),
	)
}

func eqLoc(a, b *Location) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
