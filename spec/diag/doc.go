// Package diag is toolgen's one model of a finding and its one set of formatters:
// `toolgen check` and `toolgen generate` report spec problems with it, `toolgen diff`
// reports changes with it, and all three print through [Write].
//
// The model is buf's FileAnnotation (bufanalysis): a finding is a path, a start (and,
// when known, end) position, a severity, a stable rule ID, a category grouping the rule,
// a message and, for a change, the previous location and whether a reviewer
// acknowledged it. The formats are text (the `path:line:col: message` of go vet and
// gopls, optionally followed by the source line and a caret as cel-go prints its
// errors), JSON, GitHub Actions workflow commands and Markdown for a pull-request
// comment. The escaping each format needs lives here and nowhere else.
//
// The rule IDs themselves belong to the packages that fire them: spec's check rules
// (spec.CheckRules) and specdiff's change rules (specdiff.Rules).
//
// diag imports only the standard library: spec, spec/specdiff and the CLI import it,
// never the other way round.
package diag
