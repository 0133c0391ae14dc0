package diag

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// Format names an output format.
type Format string

const (
	Text     Format = "text"
	JSON     Format = "json"
	GitHub   Format = "github"
	Markdown Format = "markdown"
)

// Formats lists every format, in the order usage messages name them.
var Formats = []Format{Text, JSON, GitHub, Markdown}

// ParseFormat returns the format named s.
func ParseFormat(s string) (Format, error) {
	if slices.Contains(Formats, Format(s)) {
		return Format(s), nil
	}
	return "", fmt.Errorf("unknown -format %q: use text, json, github or markdown", s)
}

// Report is what a command adds around its findings.
type Report struct {
	// Command names the command in the Markdown heading: "### toolgen COMMAND: SUMMARY".
	Command string
	// Summary, when set, is the text format's first line and the Markdown heading's end.
	Summary string
	// Grouped prints the text and Markdown formats in one section per subject (Kind
	// Subject), in the order of groups.
	Grouped bool
	// Source, when set, returns the text of the file a finding's primary location is
	// in; the text format then prints that line and a caret under the column, as
	// cel-go prints an error in an expression.
	Source func(a Annotation) ([]byte, bool)
}

// Write prints findings, in the order given, in format f.
func Write(w io.Writer, f Format, findings []Annotation, r Report) error {
	var b strings.Builder
	switch f {
	case JSON:
		if findings == nil {
			findings = []Annotation{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(findings)
	case GitHub:
		writeGitHub(&b, findings)
	case Markdown:
		writeMarkdown(&b, findings, r)
	default:
		writeText(&b, findings, r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Write prints s, sorted, in format f, with nothing around it.
func (s Set) Write(w io.Writer, f Format) error { return Write(w, f, s.Sorted(), Report{}) }

func writeText(b *strings.Builder, findings []Annotation, r Report) {
	if r.Summary != "" {
		b.WriteString(r.Summary + "\n")
	}
	line := func(a Annotation) {
		b.WriteString(a.String() + "\n")
		if r.Source != nil {
			if src, ok := r.Source(a); ok {
				writeSnippet(b, src, a)
			}
		}
	}
	if !r.Grouped {
		for _, a := range findings {
			line(a)
		}
		return
	}
	keys, by := groups(findings)
	for _, k := range keys {
		fmt.Fprintf(b, "\n%s:\n", k)
		for _, a := range by[k] {
			line(a)
		}
	}
}

// writeSnippet prints the source line of a's position and a caret under its column
// (a run of ~ to the end when End is on the same line), dots before the caret as
// cel-go does, a tab kept a tab so the caret lines up:
//
//	| risk: hihg
//	| ......^
func writeSnippet(b *strings.Builder, src []byte, a Annotation) {
	p := a.Pos.OrStart()
	lines := strings.Split(string(src), "\n")
	if p.Line > len(lines) {
		return
	}
	text := strings.TrimRight(lines[p.Line-1], "\r")
	if !utf8.ValidString(text) {
		return
	}
	var pad strings.Builder
	col := 1
	for _, c := range text {
		if col >= p.Col {
			break
		}
		if c == '\t' {
			pad.WriteByte('\t')
		} else {
			pad.WriteByte('.')
		}
		col++
	}
	caret := "^"
	if a.End.Line == p.Line && a.End.Col > p.Col+1 {
		caret += strings.Repeat("~", a.End.Col-p.Col-1)
	}
	fmt.Fprintf(b, " | %s\n | %s%s\n", escapeControl(text), pad.String(), caret)
}

// escapeControl keeps a source line from driving the terminal it is printed on.
func escapeControl(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// writeGitHub writes GitHub Actions workflow commands ("Workflow commands for GitHub
// Actions"): an error for a check finding and a breaking change, a warning for what
// weakens, a notice for the rest and for what is acknowledged. The title is the rule,
// prefixed with the severity for a change.
func writeGitHub(b *strings.Builder, findings []Annotation) {
	for _, a := range findings {
		at := a.At()
		lvl, title := a.Severity.level(), a.Rule
		if !a.isCheck() {
			title = string(a.Severity) + " " + a.Rule
		}
		if a.Acknowledged {
			lvl, title = "notice", title+" (acknowledged)"
		}
		fmt.Fprintf(b, "::%s file=%s,line=%d,col=%d,title=%s::%s\n", lvl, ghProperty.Replace(at.File), at.Line, at.Col,
			ghProperty.Replace(title), ghData.Replace(a.messageWithPrevious()))
	}
}

var (
	ghData     = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A")
	ghProperty = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C")
	mdCell     = strings.NewReplacer("|", "\\|", "\n", " ", "\r", " ")
)

// writeMarkdown writes a pull-request comment: a heading with the summary, then one
// table, or one per subject when grouped.
func writeMarkdown(b *strings.Builder, findings []Annotation, r Report) {
	fmt.Fprintf(b, "### toolgen %s: %s\n", r.Command, r.Summary)
	code := func(l *Location) string {
		if l == nil {
			return ""
		}
		return "`" + l.String() + "`"
	}
	if !r.Grouped {
		if len(findings) == 0 {
			return
		}
		b.WriteString("\n| Where | Rule | Problem |\n|---|---|---|\n")
		for _, a := range findings {
			at := a.At()
			fmt.Fprintf(b, "| %s | `%s` | %s |\n", code(&at), a.Rule, mdCell.Replace(a.Message))
		}
		return
	}
	keys, by := groups(findings)
	for _, k := range keys {
		fmt.Fprintf(b, "\n#### %s\n\n| Severity | Rule | Change | Where | Previously |\n|---|---|---|---|---|\n", mdCell.Replace(k))
		for _, a := range by[k] {
			sev := string(a.Severity)
			if a.Acknowledged {
				sev += " (acknowledged)"
			}
			fmt.Fprintf(b, "| %s | `%s` | %s | %s | %s |\n", sev, a.Rule, mdCell.Replace(a.Message), code(a.Current), code(a.Previous))
		}
	}
}

// groups orders the subjects: tools (and the kinds not named here: issuers, webhooks,
// notifications), servers, devices, protocols, policy; by kind and name within each.
func groups(findings []Annotation) (keys []string, by map[string][]Annotation) {
	order := map[string]int{"tool": 0, "server": 1, "device": 2, "protocol": 3, "policy": 4}
	rank := func(kind string) int { return order[kind] }
	by = map[string][]Annotation{}
	for _, a := range findings {
		k := a.Kind + " " + a.Subject
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], a)
	}
	slices.SortFunc(keys, func(a, b string) int {
		ka, _, _ := strings.Cut(a, " ")
		kb, _, _ := strings.Cut(b, " ")
		if d := rank(ka) - rank(kb); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return keys, by
}
