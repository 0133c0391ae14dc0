// Package cellang is toolgen's one CEL language and its one set of environments: the
// library, the limits, the bounds and the declarations of the variables that package
// spec checks every expression with at build time (SPEC-5, POL-2) and package runtime
// compiles and evaluates it with on every call. Both build their environments with
// ToolEnv and PolicyEnv, their programs from ProgramOptions, and estimate the cost of
// a policy rule's own variables with PolicyBound, so what was checked is what runs:
// there is one place to change the language, and nothing to keep in step.
//
// args is declared by Args, read from the tool's JSON Schema (the InputSchema toolgen
// generates, which the build computes from the spec and the runtime registers the
// tool with): a synthetic object type per tool, so a misspelt field or a type
// mismatch is an error at the expression's position, whose field accessors read the
// decoded JSON arguments (map[string]any) and convert their numbers as declared.
// Where the build has no schema — a policy rule over every tool, a pattern or an MCP
// tool — args is map(string, dyn) at both ends, and the numbers of the decoded
// arguments are converted by the called tool's schema with the same conversion
// (Args.Decode, Args.Normalize). principal is one synthetic object type
// (PrincipalTypeName) everywhere.
//
// It imports the standard library and cel-go only.
package cellang

import (
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/ext"
)

// StringsVersion is the version of cel-go's string extension (ext.Strings) the
// expressions may use. Version 5, the newest of cel-go v0.31.0, is the first that
// gives its functions (indexOf, lowerAscii, replace, split, substring, trim, join...)
// cost estimates; with an earlier version a call on a 10 MiB string would be
// estimated at cost 1 and pass the budget. Raising it is a language change: a spec
// checked with a later version may not compile with an earlier runtime.
const StringsVersion = 5

// CostBudget is the largest estimated cost (cel-go cost units, roughly one unit per
// cheap operation, about 0.1 s per million) an expression may have in the worst case,
// and the hard limit of its evaluation. It is Kubernetes' per-call limit for CEL
// (PerCallLimit = 1,000,000): it accepts every expression whose cost does not grow
// with an unbounded input and rejects, until max_length and max_items bound the
// inputs, the ones that do (args.path.contains('..'), args.tags.exists(...)).
const CostBudget = 1_000_000

// MaxExpressionLength bounds an expression's length in code points, so that a hostile
// spec cannot make the build parse without end.
const MaxExpressionLength = 4096

// Bounds of the values a policy rule sees besides args (POL-1). The build estimates a
// rule's cost with them; the runtime enforces them (a rule is not evaluated on a longer
// value) and runs a rule without cost tracking only when its estimate within them fits
// the budget.
const (
	PolicyMaxToolNameLength  = 128 // code points of tool: the registry name
	PolicyMaxPrincipalLength = 256 // code points of principal.id, principal.tenant and each scope
	PolicyMaxScopes          = 256 // the number of principal.scopes
	PolicyMaxLabelLength     = 32  // code points of risk, side_effect and trust
)

// PolicyVariables are the variables of a policy rule, in declaration order: tool,
// risk, side_effect and trust (strings; trust is min(origin_trust, argument_trust)),
// principal (id, tenant, scopes) and args.
var PolicyVariables = []string{"tool", "risk", "side_effect", "trust", "principal", "args"}

// ToolVariables are the variables of a tool's own expressions (idempotent_when,
// approval_when).
var ToolVariables = []string{"args"}

// interruptCheckFrequency is how many comprehension iterations run between two looks
// at the context.
const interruptCheckFrequency = 64

// Options are the library of every environment: the standard library, ext.Strings at
// StringsVersion, cel.ExtendedValidations (regex, duration and timestamp literals and
// homogeneous aggregate literals checked when compiled) and the parser's size limit.
func Options() []cel.EnvOption {
	return []cel.EnvOption{
		ext.Strings(ext.StringsVersion(StringsVersion)),
		cel.ExtendedValidations(),
		cel.ParserExpressionSizeLimit(MaxExpressionLength),
	}
}

// ProgramOptions are the options of every program: the cost budget as a hard limit
// when limited (an input larger than the build assumed stops the evaluation instead of
// running on), a look at the context between comprehension iterations (a deadline or
// cancellation stops it midway), and cel-go's optimizer.
func ProgramOptions(limited bool) []cel.ProgramOption {
	opts := []cel.ProgramOption{cel.InterruptCheckFrequency(interruptCheckFrequency), cel.EvalOptions(cel.OptOptimize)}
	if limited {
		opts = append(opts, cel.CostLimit(CostBudget))
	}
	return opts
}

// PolicyBound is the size bound of a policy variable other than args at path (the
// node's path in cel-go's cost estimator: "tool", "principal.scopes", "@items" for
// a list's elements), or nil when path is not one of them.
func PolicyBound(path []string) *checker.SizeEstimate {
	bound := func(max int) *checker.SizeEstimate { return &checker.SizeEstimate{Min: 0, Max: uint64(max)} }
	switch strings.Join(path, ".") {
	case "tool":
		return bound(PolicyMaxToolNameLength)
	case "risk", "side_effect", "trust":
		return bound(PolicyMaxLabelLength)
	case "principal.id", "principal.tenant", "principal.scopes.@items", "principal.scopes.@keys":
		return bound(PolicyMaxPrincipalLength)
	case "principal.scopes":
		return bound(PolicyMaxScopes)
	}
	return nil
}
