package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"

	"github.com/toolgen/toolgen/internal/cellang"
)

// CEL at run time: a tool's idempotent_when and approval_when, and the conditions of
// the operator's policy rules (POL-1), compiled once at registration and evaluated on
// every call in internal/cellang's environments — the ones spec checked them in at
// build time (SPEC-5, POL-2): its library, its limits, its cost budget as a hard limit
// of evaluation, its bounds of the policy variables, and its declaration of args and
// principal. A tool's expressions are compiled with args typed from the tool's
// InputSchema as toolgen declared it (an adapter's, whose schema toolgen never saw,
// with map(string, dyn)); a policy rule with args typed from the schema of the one
// tool toolgen typed it by ([PolicyRule.ArgsSchema]), else map(string, dyn), as at
// build time. The numbers of the decoded arguments are converted by the called tool's
// schema ([ArgTypes]) with cellang's one conversion.

// Bounds of the policy variables other than args (cellang's): [Policy.Decide] enforces
// them — a rule is not evaluated on a longer value.
const (
	PolicyMaxToolNameLength  = cellang.PolicyMaxToolNameLength
	PolicyMaxPrincipalLength = cellang.PolicyMaxPrincipalLength
	PolicyMaxScopes          = cellang.PolicyMaxScopes
)

type celEnv struct {
	env *cel.Env
	err error
}

// The environments with args map(string, dyn), shared by every expression compiled
// without a schema.
var (
	dynToolEnv = sync.OnceValue(func() celEnv {
		env, _, err := cellang.ToolEnv(nil)
		return celEnv{env, err}
	})
	dynPolicyEnv = sync.OnceValue(func() celEnv {
		env, _, err := cellang.PolicyEnv(nil)
		return celEnv{env, err}
	})
)

// newCELEnv builds the environment of an expression with args declared by args
// (dyn when nil or untyped).
func newCELEnv(args *ArgTypes, policy bool) (env *cel.Env, err error) {
	defer func() {
		if p := recover(); p != nil {
			env, err = nil, fmt.Errorf("creating the CEL environment failed: %v", p)
		}
	}()
	a := args.args()
	if !a.Typed() {
		e := dynToolEnv()
		if policy {
			e = dynPolicyEnv()
		}
		env, err = e.env, e.err
	} else if policy {
		env, _, err = cellang.PolicyEnv(a)
	} else {
		env, _, err = cellang.ToolEnv(a)
	}
	if err != nil {
		return nil, fmt.Errorf("runtime: creating the CEL environment: %w", err)
	}
	return env, nil
}

// BoolExpr is a compiled CEL condition. It is safe for concurrent use.
type BoolExpr struct {
	src string
	prg cel.Program // enforces the cost budget
	// bounded is prg without cost tracking, or nil. It is built only when cel-go's
	// static estimate proves that the expression's worst-case cost is within the
	// budget — for a tool expression whatever the input, for a policy rule when the
	// policy variables are within the bounds of [policySizes] — so the limit can never
	// trip and tracking it would only cost time and allocations (about 6 allocations
	// and most of the time of a small rule). Expressions whose cost grows with args
	// (a comprehension over args, args.a == args.b, ...) always run with the limit.
	bounded  cel.Program
	policy   bool // bounded holds only within policySizes' bounds
	loops    bool // has a comprehension: only then can the context stop it midway
	usesArgs bool
}

// policySizes bounds the policy variables for cel-go's cost estimate (cellang's
// bounds). Decide enforces the principal and tool bounds (policyBounds) and uses the
// bounded program only when risk and side_effect are within cellang.PolicyMaxLabelLength
// (trust is always one of the four labels).
type policySizes struct{}

func (policySizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	return cellang.PolicyBound(n.Path())
}

func (policySizes) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}

// noSizes bounds nothing: a tool expression's estimate holds for any input.
type noSizes struct{}

func (noSizes) EstimateSize(checker.AstNode) *checker.SizeEstimate { return nil }

func (noSizes) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}

// CompileToolExpr compiles a tool's idempotent_when or approval_when; its one variable
// is args, declared by args: typed from the tool's input schema, or map(string, dyn)
// when args is nil or its schema is not an object with properties.
func CompileToolExpr(src string, args *ArgTypes) (*BoolExpr, error) {
	env, err := newCELEnv(args, false)
	if err != nil {
		return nil, err
	}
	return compileBool(env, src, false)
}

// CompilePolicyRule compiles the condition of an operator policy rule. Its variables
// are tool, risk, side_effect and trust (strings; trust is min(origin_trust,
// argument_trust)), principal (an object with id and tenant, strings, and scopes, a
// list of strings) and args, declared by args as in [CompileToolExpr].
func CompilePolicyRule(src string, args *ArgTypes) (*BoolExpr, error) {
	env, err := newCELEnv(args, true)
	if err != nil {
		return nil, err
	}
	return compileBool(env, src, true)
}

func compileBool(env *cel.Env, src string, policy bool) (e *BoolExpr, err error) {
	defer func() {
		if p := recover(); p != nil {
			e, err = nil, fmt.Errorf("CEL: the compiler failed on the expression: %v", p)
		}
	}()
	if strings.TrimSpace(src) == "" {
		return nil, errors.New("CEL: empty expression")
	}
	checked, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("CEL: %s", strings.ReplaceAll(iss.Err().Error(), "\n", " "))
	}
	if out := checked.OutputType(); !out.IsExactType(types.BoolType) && out.Kind() != types.DynKind {
		return nil, fmt.Errorf("CEL: the expression must evaluate to bool, but its type is %s", out)
	}
	prg, err := env.Program(checked, cellang.ProgramOptions(true)...)
	if err != nil {
		return nil, fmt.Errorf("CEL: %w", err)
	}
	e = &BoolExpr{src: src, prg: prg, policy: policy}
	var sizes checker.CostEstimator = noSizes{}
	if policy {
		sizes = policySizes{}
	}
	if est, err := env.EstimateCost(checked, sizes); err == nil && est.Max <= cellang.CostBudget {
		e.bounded, err = env.Program(checked, cellang.ProgramOptions(false)...)
		if err != nil {
			return nil, fmt.Errorf("CEL: %w", err)
		}
	}
	native := checked.NativeRep()
	ast.PreOrderVisit(native.Expr(), ast.NewExprVisitor(func(x ast.Expr) {
		switch x.Kind() {
		case ast.ComprehensionKind:
			e.loops = true
		case ast.IdentKind:
			if x.AsIdent() == "args" {
				e.usesArgs = true
			}
		}
	}))
	return e, nil
}

// String returns the expression's source.
func (e *BoolExpr) String() string { return e.src }

// UsesArgs reports whether the expression reads args: when it does not, the caller
// need not decode the arguments for it.
func (e *BoolExpr) UsesArgs() bool { return e.usesArgs }

// Eval evaluates the expression with vars (for a tool expression {"args": args}, args
// from [DecodeCELArgs] or [ArgTypes.Decode]). It fails when the context is done, the
// cost budget is exceeded, a variable or field is missing, or the value is not a bool.
// Callers decide how an error fails closed: an approval_when that fails requires
// approval ([Policy.Decide] does so), and an idempotent_when that fails must count as
// false, so that recovery never retries a call on an unproven assumption (RT-4).
func (e *BoolExpr) Eval(ctx context.Context, vars map[string]any) (bool, error) {
	// The policy variables of vars are not checked against policySizes here.
	return e.eval(ctx, vars, !e.policy)
}

// eval takes a map[string]any or an interpreter.Activation. inBounds says whether the
// bounded program may be used: the input is within the bounds its estimate assumed.
func (e *BoolExpr) eval(ctx context.Context, input any, inBounds bool) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("CEL: not evaluated: %w", context.Cause(ctx))
	}
	prg := e.prg
	if inBounds && e.bounded != nil {
		prg = e.bounded
	}
	var err error
	var out ref.Val
	if e.loops {
		out, _, err = prg.ContextEval(ctx, input)
	} else {
		// Without a comprehension cel-go never looks at the context, so skip the
		// bookkeeping; the cost limit (or the static bound) still bounds the evaluation.
		out, _, err = prg.Eval(input)
	}
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			return false, fmt.Errorf("CEL: %w: %w", err, context.Cause(ctx))
		}
		return false, fmt.Errorf("CEL: %w", err)
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("CEL: the expression evaluated to %v (%T), not a bool", out.Value(), out.Value())
	}
	return bool(b), nil
}

// argsActivation binds a tool expression's one variable without building a map.
type argsActivation struct{ args map[string]any }

func (a *argsActivation) ResolveName(name string) (any, bool) {
	if name == "args" {
		if a.args == nil {
			return emptyArgs, true
		}
		return a.args, true
	}
	return nil, false
}

func (a *argsActivation) Parent() interpreter.Activation { return nil }

// emptyArgs stands for absent arguments; CEL never modifies it.
var emptyArgs = map[string]any{}

// DecodeCELArgs decodes a call's JSON arguments for CEL without knowing their schema:
// a number whose value is an integer that fits int64 (3, 3.0, 3e0) becomes an int64,
// any other number a float64. So args.count > 3 and args.count + 1 work as the build
// checked them for an integer field. For a number field use [ArgTypes], which knows
// that 3 is the double 3.0 there (CEL compares int and double, but does not mix them
// in arithmetic). Empty input and null give an empty map; anything but a JSON object
// is an error.
func DecodeCELArgs(raw []byte) (map[string]any, error) {
	return (*ArgTypes)(nil).Decode(raw)
}

// ArgTypes is the declaration of a tool's arguments to CEL (cellang's), read from its
// input schema: the type of args in the tool's expressions, and the CEL values of the
// decoded arguments (numbers declared "number" are doubles even when the JSON holds an
// integral value). A nil *ArgTypes declares no schema: args is map(string, dyn) and
// numbers follow the schema-less rule of [DecodeCELArgs]. It is safe for concurrent
// use.
type ArgTypes struct{ a *cellang.Args }

// NewArgTypes reads a JSON Schema (the generated InputSchema of a tool): the "type",
// "properties" and "items" keywords, at any depth. Other keywords are ignored, and
// where the schema says nothing the schema-less rule applies. An empty schema gives
// nil.
func NewArgTypes(inputSchema []byte) (*ArgTypes, error) {
	return newArgTypes("", inputSchema)
}

// newArgTypes is NewArgTypes for the tool named tool, whose name the synthetic type
// of its args carries.
func newArgTypes(tool string, inputSchema []byte) (*ArgTypes, error) {
	a, err := cellang.NewArgs(tool, inputSchema)
	if err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	if a == nil {
		return nil, nil
	}
	return &ArgTypes{a: a}, nil
}

func (t *ArgTypes) args() *cellang.Args {
	if t == nil {
		return nil
	}
	return t.a
}

// Decode decodes a call's JSON arguments for CEL (see [DecodeCELArgs]); numbers at
// paths the schema declares as "number" become float64.
func (t *ArgTypes) Decode(raw []byte) (map[string]any, error) {
	m, err := t.args().Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	return m, nil
}

// Normalize converts, in place, the numbers of arguments decoded some other way
// (float64 from encoding/json, json.Number, int) as Decode would have, and returns args.
func (t *ArgTypes) Normalize(args map[string]any) map[string]any {
	return t.args().Normalize(args)
}
