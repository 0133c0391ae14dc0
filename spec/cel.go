package spec

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"gopkg.in/yaml.v3"

	"github.com/toolgen/toolgen/internal/cellang"
)

// SPEC-5: every CEL expression of a spec (idempotent_when, approval_when, and the
// conditions of policy.yaml rules) is parsed, type-checked against the tool's declared
// argument types and cost-estimated at build time, and every finding is reported at
// its own line and column in the YAML file.
//
// The environments are internal/cellang's, the ones the runtime compiles and evaluates
// the expressions in: its library (the standard library, ext.Strings,
// cel.ExtendedValidations, the parser's limit), its cost budget, its bounds of the
// policy variables, and its declaration of args — a synthetic object type per tool,
// read from the tool's InputSchema, which makes a misspelt field or a type mismatch an
// error here. What is spec's own is the cost estimate of the arguments (from
// max_length, max_items and enum) and the diagnostics.

// NewArgsEnv returns the CEL environment of tool t's own expressions
// (idempotent_when, approval_when): cellang's, with args declared from t's
// InputSchema as a synthetic object type (toolgen.args.<name with "." as "_">), so a
// misspelt field or a type mismatch fails to compile. Programs built from it evaluate
// against the decoded JSON arguments as they are:
//
//	env, err := spec.NewArgsEnv(tool)
//	ast, iss := env.Compile(tool.ApprovalWhen.Source)
//	prg, err := env.Program(ast, cel.CostLimit(cellang.CostBudget))
//	out, _, err := prg.Eval(map[string]any{"args": args}) // args: map[string]any from encoding/json
//
// JSON numbers become CEL int or double as the field declares; an absent optional
// field is tested with has(args.name). The runtime compiles the tool's expressions in
// the same environment, built from the same schema.
func NewArgsEnv(t *Tool) (*cel.Env, error) {
	env, _, err := newArgsEnv(t)
	return env, err
}

// argsVars are the variables of a tool's own expressions.
var argsVars = cellang.ToolVariables

// toolArgs is the declaration of t's arguments to CEL: read from its input schema (the
// value InputSchema encodes), as the runtime reads the schema the tool is registered
// with.
func toolArgs(t *Tool) (*cellang.Args, error) {
	if t == nil {
		return nil, fmt.Errorf("spec: the CEL arguments of a nil tool")
	}
	return cellang.SchemaArgs(t.Name, rootSchema(t.Args)), nil
}

func newArgsEnv(t *Tool) (*cel.Env, *cellang.Provider, error) {
	args, err := toolArgs(t)
	if err != nil {
		return nil, nil, err
	}
	return cellang.ToolEnv(args)
}

// NewPolicyEnv returns the CEL environment of a policy.yaml rule (POL-1, POL-2):
// cellang's. It declares tool, risk, side_effect and trust (strings), principal (an
// object with id and tenant, strings, and scopes, a list of strings) and args: typed
// as in [NewArgsEnv] when t is the one tool the rule names, map(string, dyn) when t
// is nil. Evaluate with principal bound to a map[string]any with keys "id", "tenant"
// and "scopes" ([]any or []string), within cellang's Policy* bounds.
func NewPolicyEnv(t *Tool) (*cel.Env, error) {
	env, _, err := newPolicyEnv(t)
	return env, err
}

// policyVars are the variables of a policy rule.
var policyVars = cellang.PolicyVariables

func newPolicyEnv(t *Tool) (*cel.Env, *cellang.Provider, error) {
	var args *cellang.Args
	if t != nil {
		var err error
		if args, err = toolArgs(t); err != nil {
			return nil, nil, err
		}
	}
	return cellang.PolicyEnv(args)
}

// celNames is what checkExpr suggests a misspelt name from: the environment's
// synthetic types (their fields) and its variables.
type celNames struct {
	provider *cellang.Provider
	vars     []string
}

// checkToolCEL compiles a tool's idempotent_when and approval_when (SPEC-5).
func checkToolCEL(r reporter, t *Tool) {
	if t == nil || (t.IdempotentWhen == nil && t.ApprovalWhen == nil) {
		return
	}
	exprs := []struct {
		key string
		e   *Expr
	}{{"idempotent_when", t.IdempotentWhen}, {"approval_when", t.ApprovalWhen}}
	var p *cellang.Provider
	env, err := safeEnv(func() (env *cel.Env, err error) {
		env, p, err = newArgsEnv(t)
		return env, err
	})
	for _, x := range exprs {
		if x.e == nil {
			continue
		}
		if err != nil {
			r.errorf(x.e.Pos, "SPEC-5.cel-environment", "%s: cannot build the CEL environment of %s: %v", x.key, t.Name, err)
			continue
		}
		names := celNames{provider: p, vars: argsVars}
		checkExpr(r, "SPEC-5", x.key, env, names, x.e, &celSizes{args: t.Args, typed: true})
	}
}

// checkPolicyCEL compiles every policy rule's condition (POL-2, SPEC-5). lookup finds
// the spec of a rule's one tool, the tree's own or a builtin, to type args.
func checkPolicyCEL(r reporter, p *Policy, lookup func(name string) *Tool) {
	if p == nil {
		return
	}
	type built struct {
		env *cel.Env
		p   *cellang.Provider
		err error
	}
	envs := map[*Tool]built{}
	for _, rule := range p.Rules {
		if rule == nil || rule.When == nil {
			continue
		}
		var tool *Tool
		if len(rule.Tools) == 1 && lookup != nil {
			tool = lookup(rule.Tools[0].Name)
		}
		b, ok := envs[tool]
		if !ok {
			b.env, b.err = safeEnv(func() (env *cel.Env, err error) {
				env, b.p, err = newPolicyEnv(tool)
				return env, err
			})
			envs[tool] = b
		}
		label := rule.Effect + "_when"
		if rule.Name != "" {
			label = "rule " + rule.Name + ": " + label
		}
		if b.err != nil {
			r.errorf(rule.When.Pos, "POL-2.cel-environment", "%s: cannot build the CEL environment: %v", label, b.err)
			continue
		}
		sizes := &celSizes{policy: true}
		if tool != nil {
			sizes.args, sizes.typed = tool.Args, true
		}
		rule.ArgsTool = tool
		names := celNames{provider: b.p, vars: policyVars}
		checkExpr(r, "POL-2", label, b.env, names, rule.When, sizes)
	}
}

// suggest returns a did-you-mean for a cel-go message about a misspelt name, or "":
// "undefined field 'pth'" (a field of args, of an object argument or of principal)
// and "undeclared reference to 'arg' (...)" (a variable).
func (n celNames) suggest(msg string) string {
	if field, ok := quotedAfter(msg, "undefined field '"); ok && n.provider != nil {
		return n.provider.SuggestField(field, closest)
	}
	if ref, ok := quotedAfter(msg, "undeclared reference to '"); ok {
		if s := closest(ref, n.vars); s != "" && s != ref {
			return fmt.Sprintf("; did you mean %q?", s)
		}
		if n.provider == nil {
			return ""
		}
		var fields []string
		for _, v := range n.vars {
			for _, f := range n.provider.Fields(v) {
				fields = append(fields, v+"."+f)
			}
		}
		// The bare name is compared with the field names, the suggestion is the path.
		var bare []string
		for _, f := range fields {
			bare = append(bare, f[strings.IndexByte(f, '.')+1:])
		}
		if s := closest(ref, bare); s != "" {
			for _, f := range fields {
				if strings.HasSuffix(f, "."+s) {
					return fmt.Sprintf("; did you mean %q?", f)
				}
			}
		}
	}
	return ""
}

// quotedAfter returns the text between prefix, which must start msg, and the next '.
func quotedAfter(msg, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(msg, prefix)
	if !ok {
		return "", false
	}
	name, _, ok := strings.Cut(rest, "'")
	return name, ok && name != ""
}

// regexDetail says why the regular expression literal with expression id is invalid
// (cel-go reports only that it is).
func regexDetail(env *cel.Env, src string, id int64) (detail string) {
	defer func() {
		if recover() != nil {
			detail = ""
		}
	}()
	parsed, iss := env.Parse(src)
	if iss != nil && iss.Err() != nil {
		return ""
	}
	for _, x := range celast.MatchDescendants(celast.NavigateAST(parsed.NativeRep()), func(x celast.NavigableExpr) bool { return x.ID() == id }) {
		if x.Kind() != celast.LiteralKind {
			continue
		}
		if lit, ok := x.AsLiteral().Value().(string); ok {
			if _, err := regexp.Compile(lit); err != nil {
				return ": " + err.Error()
			}
		}
	}
	return ""
}

// oneLine escapes the line breaks and tabs a cel-go message may quote from the
// expression, so that a diagnostic stays on one line.
func oneLine(s string) string {
	return strings.NewReplacer("\r", `\r`, "\n", `\n`, "\t", `\t`).Replace(s)
}

func safeEnv(f func() (*cel.Env, error)) (env *cel.Env, err error) {
	defer func() {
		if p := recover(); p != nil {
			env, err = nil, fmt.Errorf("%v", p)
		}
	}()
	return f()
}

// checkExpr compiles e in env and reports every error at its position in the YAML file,
// a result that is not bool, and an estimated cost over cellang.CostBudget, under the
// requirement req (SPEC-5 or POL-2: rules req.cel-error, req.cel-not-bool, ...). Each
// message starts with label (the expression's key). A misspelt field or variable gets a
// did-you-mean from names, as an unknown key does.
func checkExpr(r reporter, req, label string, env *cel.Env, names celNames, e *Expr, sizes *celSizes) {
	defer func() {
		if p := recover(); p != nil {
			r.errorf(e.Pos, req+".cel-checker-failed", "%s: the CEL checker failed on this expression: %v", label, p)
		}
	}()
	if names.provider != nil {
		names.provider.ForgetMisses()
	}
	ast, iss := env.Compile(e.Source)
	if iss != nil && iss.Err() != nil {
		m := newExprMap(e)
		for _, ce := range iss.Errors() {
			msg := ce.Message
			if msg == "invalid matches argument" {
				msg += regexDetail(env, e.Source, ce.ExprID)
			}
			r.errorf(m.location(ce.Location, msg), req+".cel-error", "%s: %s%s", label, oneLine(msg), names.suggest(msg))
		}
		return
	}
	if ast == nil {
		r.errorf(e.Pos, req+".cel-error", "%s: the expression did not compile", label)
		return
	}
	if out := ast.OutputType(); !out.IsExactType(types.BoolType) {
		hint := ""
		if out.Kind() == types.DynKind {
			hint = "; its value is only known at run time, so compare it explicitly (for example == true)"
		}
		r.errorf(newExprMap(e).start(), req+".cel-not-bool", "%s: the expression must evaluate to bool, but its type is %s%s", label, out, hint)
		return
	}
	est, err := env.EstimateCost(ast, sizes)
	if err != nil {
		r.errorf(newExprMap(e).start(), req+".cel-cost-unknown", "%s: cannot estimate the cost of the expression: %v", label, err)
		return
	}
	if est.Max > cellang.CostBudget {
		sizes.blame(env, ast)
		r.errorf(newExprMap(e).start(), req+".cel-cost-budget", "%s: estimated cost %d exceeds the budget of %d; %s", label, est.Max, uint64(cellang.CostBudget), sizes.advice())
	}
}

// celSizes is the checker.CostEstimator of one expression: the sizes of strings and
// lists come from max_length, max_items and enum of the declared fields, and of the
// policy's own variables from cellang's Policy* bounds. It records the inputs it could
// not bound, to name them when the budget is exceeded.
type celSizes struct {
	args      []*Field
	typed     bool // args is the typed args object, not map(string, dyn)
	policy    bool // the policy variables are declared
	unbounded []string
	untyped   bool // an untyped args value was asked about
	// assumed gives sizes to unbounded inputs, by name, while blame finds out which of
	// them make the cost exceed the budget.
	assumed map[string]bool
}

// blame narrows s.unbounded to the inputs that exceed the budget on their own: those
// for which the estimate is still over it when every other unbounded input is
// assumed to hold a single element. When no input does on its own, all stay named.
func (s *celSizes) blame(env *cel.Env, ast *cel.Ast) {
	if len(s.unbounded) < 2 {
		return
	}
	var culprits []string
	for _, name := range s.unbounded {
		t := &celSizes{args: s.args, typed: s.typed, policy: s.policy, assumed: map[string]bool{}}
		for _, other := range s.unbounded {
			if other != name {
				t.assumed[other] = true
			}
		}
		if est, err := env.EstimateCost(ast, t); err == nil && est.Max > cellang.CostBudget {
			culprits = append(culprits, name)
		}
	}
	if len(culprits) > 0 {
		s.unbounded = culprits
	}
}

// EstimateSize implements checker.CostEstimator.
func (s *celSizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	path := n.Path()
	if len(path) == 0 {
		return nil
	}
	if path[0] == "args" {
		if !s.typed {
			if len(path) > 1 {
				s.untyped = true
			}
			return nil
		}
		return s.argSize(path[1:])
	}
	if !s.policy {
		return nil
	}
	return cellang.PolicyBound(path)
}

// EstimateCallCost implements checker.CostEstimator: cel-go's own estimates apply.
func (s *celSizes) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}

// argSize bounds the value at path below args (field names, "@items" for an array's
// elements), or records that it is unbounded.
func (s *celSizes) argSize(path []string) *checker.SizeEstimate {
	var f *Field
	for i, seg := range path {
		switch {
		case seg == "@items":
			if f == nil || f.Type != TypeArray {
				return nil
			}
			f = f.Items
		case i == 0:
			f = fieldNamed(s.args, seg)
		case f.Type == TypeObject:
			f = fieldNamed(f.Properties, seg)
		default:
			return nil
		}
		if f == nil {
			return nil
		}
	}
	if f == nil {
		return nil
	}
	name := func() string {
		parts := slices.Clone(path)
		for i, p := range parts {
			if p == "@items" {
				parts[i] = "items"
			}
		}
		return "args." + strings.Join(parts, ".")
	}
	switch f.Type {
	case TypeString:
		if len(f.Enum) > 0 {
			lo, hi := -1, 0
			for _, v := range f.Enum {
				s, _ := v.(string)
				n := utf8.RuneCountInString(s)
				if lo < 0 || n < lo {
					lo = n
				}
				hi = max(hi, n)
			}
			return &checker.SizeEstimate{Min: uint64(max(lo, 0)), Max: uint64(hi)}
		}
		if f.MaxLength != nil {
			return &checker.SizeEstimate{Min: nonNeg(f.MinLength), Max: uint64(*f.MaxLength)}
		}
	case TypeArray:
		if f.MaxItems != nil {
			return &checker.SizeEstimate{Min: nonNeg(f.MinItems), Max: uint64(*f.MaxItems)}
		}
	default:
		return nil
	}
	n := name()
	if s.assumed[n] {
		return &checker.SizeEstimate{Min: 0, Max: 1}
	}
	if !slices.Contains(s.unbounded, n) {
		s.unbounded = append(s.unbounded, n)
	}
	return nil
}

// advice says how to bring an expression's cost within the budget.
func (s *celSizes) advice() string {
	var parts []string
	if len(s.unbounded) > 0 {
		names := slices.Clone(s.unbounded)
		slices.Sort(names)
		parts = append(parts, "bound the inputs it iterates over with max_length (strings) or max_items (arrays) on "+strings.Join(names, ", "))
	}
	if s.untyped {
		parts = append(parts, "args is untyped in this rule: name exactly one tool in its tools so that the tool's max_length and max_items apply")
	}
	if len(parts) == 0 {
		return "simplify it, or lower max_length (strings) and max_items (arrays) on the inputs it iterates over"
	}
	return strings.Join(parts, "; ")
}

func fieldNamed(fields []*Field, name string) *Field {
	for _, f := range fields {
		if f != nil && f.Name == name {
			return f
		}
	}
	return nil
}

func nonNeg(p *int64) uint64 {
	if p == nil || *p < 0 {
		return 0
	}
	return uint64(*p)
}

// exprMap maps positions inside an expression (a code point offset into Source, or a
// CEL line and 0-based column) to 1-based line:col positions in the YAML file. It
// follows the scalar through the file: the opening quote, ” in single-quoted and
// backslash escapes in double-quoted scalars, line folding in plain, quoted and folded
// scalars, and the indentation of block scalars. Where the file cannot be followed the
// last position found is used, and a position outside the file falls back to the
// scalar's own.
type exprMap struct {
	e         *Expr
	src       []rune
	lineStart []int // offset of each CEL line (split at \n, as cel-go does)
	at        []Pos // per offset, len(src)+1
}

func newExprMap(e *Expr) *exprMap {
	m := &exprMap{e: e, src: []rune(e.Source), lineStart: []int{0}}
	for i, r := range m.src {
		if r == '\n' {
			m.lineStart = append(m.lineStart, i+1)
		}
	}
	m.at = make([]Pos, len(m.src)+1)
	m.align()
	last := Pos{}
	for i, p := range m.at {
		if p.Line == 0 || !m.inFile(p) {
			m.at[i] = last
			continue
		}
		last = p
	}
	return m
}

// location maps the location of a cel-go error (1-based line, 0-based column). cel-go
// places a field selection at its "." and a call at its "("; when the message names
// the field or function ('name'), the name itself is reported instead.
func (m *exprMap) location(loc common.Location, msg string) Pos {
	if loc == nil {
		return m.start()
	}
	line, col := loc.Line(), loc.Column()
	if line < 1 || line > len(m.lineStart) || col < 0 {
		return m.start()
	}
	off := m.lineStart[line-1] + col
	if line < len(m.lineStart) {
		off = min(off, m.lineStart[line]-1)
	}
	off = min(off, len(m.src))
	return m.offset(m.nameAt(off, msg))
}

// nameAt moves off from a "." or "(" to the name quoted in msg next to it.
func (m *exprMap) nameAt(off int, msg string) int {
	_, rest, ok := strings.Cut(msg, "'")
	name, _, ok2 := strings.Cut(rest, "'")
	if !ok || !ok2 || name == "" || off >= len(m.src) {
		return off
	}
	n := []rune(name)
	switch m.src[off] {
	case '.':
		i := off + 1
		for i < len(m.src) && isSpaceRune(m.src[i]) {
			i++
		}
		if i+len(n) <= len(m.src) && string(m.src[i:i+len(n)]) == name {
			return i
		}
	case '(':
		i := off
		for i > 0 && isSpaceRune(m.src[i-1]) {
			i--
		}
		if i-len(n) >= 0 && string(m.src[i-len(n):i]) == name {
			return i - len(n)
		}
	}
	return off
}

// start is the position of the expression's first token.
func (m *exprMap) start() Pos {
	for i, r := range m.src {
		if !isSpaceRune(r) {
			return m.offset(i)
		}
	}
	return m.offset(0)
}

func (m *exprMap) offset(i int) Pos {
	if i >= 0 && i < len(m.at) && m.at[i].Line != 0 {
		return m.at[i]
	}
	return m.e.Pos
}

func (m *exprMap) inFile(p Pos) bool {
	if len(m.e.lines) == 0 {
		return p.Line == m.e.Pos.Line && p.Col >= 1
	}
	return p.Line >= 1 && p.Line <= len(m.e.lines) && p.Col >= 1 &&
		p.Col <= utf8.RuneCountInString(strings.TrimSuffix(m.e.lines[p.Line-1], "\r"))+1
}

func isSpaceRune(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }

// align fills m.at by walking the source and the file side by side.
func (m *exprMap) align() {
	e := m.e
	style := e.Style &^ (yaml.TaggedStyle | yaml.FlowStyle)
	var quote rune
	switch style {
	case yaml.DoubleQuotedStyle:
		quote = '"'
	case yaml.SingleQuotedStyle:
		quote = '\''
	}
	if len(e.lines) == 0 {
		m.alignWithoutText(style, quote)
		return
	}
	if e.Pos.Line < 1 || e.Pos.Line > len(e.lines) {
		return
	}
	cur := newFileCursor(e.lines, e.Pos.Line, max(e.Pos.Col, 1))
	src := m.src
	i := 0
	if style == yaml.LiteralStyle || style == yaml.FoldedStyle {
		// The position is the | or > indicator; the content starts on the next line,
		// after the block's indentation.
		cur.nextLine()
		for i < len(src) && isSpaceRune(src[i]) {
			i++
		}
		cur.skipBlanksAndBreaks()
		for j := range i {
			m.at[j] = cur.pos()
		}
	} else {
		if e.Style&yaml.TaggedStyle != 0 && cur.at() == '!' {
			for r := cur.at(); r != -1 && r != ' ' && r != '\t'; r = cur.at() {
				cur.c++
			}
			cur.skipBlanks()
		}
		if quote != 0 && cur.at() == quote {
			cur.c++
		}
	}
	for i < len(src) && cur.inText() {
		ch, fc := src[i], cur.at()
		if quote == '"' && fc == '\\' {
			if cur.c >= len(cur.line) { // an escaped line break: nothing in the value
				cur.nextLine()
				cur.skipBlanks()
				continue
			}
			m.at[i] = cur.pos()
			i, cur.c = i+1, cur.c+escapeWidth(cur.line[cur.c])
			continue
		}
		if isSpaceRune(ch) && (fc == -1 || fc == ' ' || fc == '\t') {
			// Blanks and line breaks: folded, indented or kept, they are whitespace to
			// CEL, so skip them on both sides.
			p := cur.pos()
			for i < len(src) && isSpaceRune(src[i]) {
				m.at[i] = p
				i++
			}
			if i < len(src) {
				cur.skipBlanksAndBreaks()
			}
			continue
		}
		if fc != ch {
			return // lost: the rest keeps the last position found
		}
		m.at[i] = cur.pos()
		i, cur.c = i+1, cur.c+1
		if quote == '\'' && ch == '\'' {
			cur.c++ // '' stands for '
		}
	}
	if i == len(src) && cur.inText() {
		m.at[i] = cur.pos()
	}
}

// alignWithoutText maps an expression whose file text is not at hand: only a one-line
// flow scalar can be, column by column from its position (after its opening quote).
func (m *exprMap) alignWithoutText(style yaml.Style, quote rune) {
	e := m.e
	if style == yaml.LiteralStyle || style == yaml.FoldedStyle || strings.Contains(e.Source, "\n") || e.Pos.Line <= 0 {
		return
	}
	q := 0
	if quote != 0 {
		q = 1
	}
	for i := range m.at {
		m.at[i] = Pos{e.Pos.Line, e.Pos.Col + q + i}
	}
}

// escapeWidth is how many runes of a double-quoted YAML scalar the escape whose
// letter is r takes, its backslash included: \xXX, \uXXXX, \UXXXXXXXX, else two.
func escapeWidth(r rune) int {
	switch r {
	case 'x':
		return 4
	case 'u':
		return 6
	case 'U':
		return 10
	}
	return 2
}

// fileCursor walks the file text of a YAML scalar: line l (1-based), column c (1-based,
// in runes), line holding line l's runes.
type fileCursor struct {
	lines []string
	l, c  int
	line  []rune
}

func newFileCursor(lines []string, l, c int) *fileCursor {
	f := &fileCursor{lines: lines, l: l, c: c}
	f.line = f.fileLine(l)
	return f
}

func (f *fileCursor) fileLine(l int) []rune {
	if l < 1 || l > len(f.lines) {
		return nil
	}
	return []rune(strings.TrimSuffix(f.lines[l-1], "\r"))
}

func (f *fileCursor) pos() Pos     { return Pos{f.l, f.c} }
func (f *fileCursor) inText() bool { return f.l <= len(f.lines) }
func (f *fileCursor) nextLine()    { f.l, f.c = f.l+1, 1; f.line = f.fileLine(f.l) }

// at is the rune under the cursor, -1 at the end of the line.
func (f *fileCursor) at() rune {
	if f.c-1 < len(f.line) {
		return f.line[f.c-1]
	}
	return -1
}

// skipBlanks moves the cursor over spaces and tabs on its line.
func (f *fileCursor) skipBlanks() {
	for r := f.at(); r == ' ' || r == '\t'; r = f.at() {
		f.c++
	}
}

// skipBlanksAndBreaks moves the cursor over blanks and line breaks.
func (f *fileCursor) skipBlanksAndBreaks() {
	for f.inText() {
		switch f.at() {
		case ' ', '\t':
			f.c++
		case -1:
			f.nextLine()
		default:
			return
		}
	}
}
