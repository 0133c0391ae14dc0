package sandbox

import (
	"fmt"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// The carried-provenance analysis (see doc.go, "# Trust"): a static, conservative,
// flow-insensitive dataflow analysis over the script's syntax tree that finds, for
// every tool-call site, the tool-call sites whose results its arguments, or the fact
// that it is reached at all, may depend on. At run time a call is external_untrusted
// iff one of those sites has produced untrusted output so far.
//
// Everything the analysis does not model makes it give up: the script then runs with
// the coarse per-script rule (every call after the first untrusted result is
// untrusted).

// Limits of the analysis: past them it gives up (the per-script rule).
const (
	maxProvSites  = 1024
	maxProvRounds = 256
	maxProvWork   = 20_000_000 // expressions visited, over all rounds
)

// site is the position of a call's opening parenthesis: what the interpreter reports as
// the position of the caller's frame while the call runs.
type site struct{ line, col int32 }

// provenance is the analysis's answer for one script.
type provenance struct {
	// fallback is why the analysis gave up ("" when it did not).
	fallback string
	sites    map[site]int // tool-call site → id
	deps     []bits       // id → the sites its call may depend on
}

// bits is a set of tool-call site ids.
type bits []uint64

func (b bits) has(i int) bool { return b[i/64]&(1<<(uint(i)%64)) != 0 }
func (b bits) set(i int)      { b[i/64] |= 1 << (uint(i) % 64) }

// or adds o to b and reports whether b grew.
func (b bits) or(o bits) bool {
	grew := false
	for i, w := range o {
		if b[i]|w != b[i] {
			b[i] |= w
			grew = true
		}
	}
	return grew
}

// members lists the set.
func (b bits) members() []int {
	var out []int
	for i := 0; i < len(b)*64; i++ {
		if b.has(i) {
			out = append(out, i)
		}
	}
	return out
}

// fnInfo is a def, or a lambda assigned to a name, that the analysis follows.
type fnInfo struct {
	name   string
	params []syntax.Expr
	body   []syntax.Stmt // def
	expr   syntax.Expr   // lambda
	ret    int           // node of its return value
	ctx    bits          // control context it is called or defined under
	exit   bits          // control context of its returns
}

// analysis is the state of analyzeProvenance.
type analysis struct {
	n       int // number of sites
	sites   map[site]int
	deps    []bits
	parent  []int  // union-find over nodes: a class is what may share an object
	taint   []bits // per node, valid at a class's root
	names   map[string]int
	bound   map[string]int // how many bindings a name has in the script
	fns     map[string]*fnInfo
	lambdas map[*syntax.LambdaExpr]*fnInfo
	loops   map[syntax.Node]bits // loop → control context of its breaks and continues
	global  bits                 // control context of the script's fail() calls
	changed bool
	reason  string
	work    int
}

// analyzeProvenance runs the analysis over src. It never panics: a panic is a fallback.
func analyzeProvenance(src string) (p provenance) {
	defer func() {
		if x := recover(); x != nil {
			p = provenance{fallback: fmt.Sprintf("internal error: %v", x)}
		}
	}()
	opts := &syntax.FileOptions{While: true, TopLevelControl: true, GlobalReassign: true, Set: true}
	f, err := opts.Parse("script.star", src, 0)
	if err != nil {
		return provenance{fallback: "the script does not parse"}
	}
	a := &analysis{sites: map[site]int{}, names: map[string]int{}, bound: map[string]int{},
		fns: map[string]*fnInfo{}, lambdas: map[*syntax.LambdaExpr]*fnInfo{}, loops: map[syntax.Node]bits{}}
	a.collect(f)
	if a.reason != "" {
		return provenance{fallback: a.reason}
	}
	a.deps = make([]bits, a.n)
	for i := range a.deps {
		a.deps[i] = a.newBits()
	}
	a.global = a.newBits()
	for _, fn := range a.fns {
		fn.ret = a.node("\x00ret " + fn.name)
		fn.ctx, fn.exit = a.newBits(), a.newBits()
	}
	for round := 0; ; round++ {
		if round == maxProvRounds {
			return provenance{fallback: "the analysis did not converge"}
		}
		a.changed = false
		a.stmts(f.Stmts, a.newBits(), nil, nil)
		for _, fn := range a.fns {
			a.function(fn)
		}
		if a.reason != "" {
			return provenance{fallback: a.reason}
		}
		if !a.changed {
			break
		}
	}
	for i := range a.deps {
		a.deps[i].or(a.global)
	}
	return provenance{sites: a.sites, deps: a.deps}
}

// busy counts a step of the analysis and reports whether it has given up (then it
// does no more work).
func (a *analysis) busy() bool {
	a.work++
	if a.work > maxProvWork {
		a.giveUp("the script is too large to analyse")
	}
	return a.reason != ""
}

func (a *analysis) giveUp(format string, args ...any) {
	if a.reason == "" {
		a.reason = fmt.Sprintf(format, args...)
	}
}

func (a *analysis) newBits() bits { return make(bits, (a.n+63)/64) }

func (a *analysis) clone(b bits) bits { c := a.newBits(); copy(c, b); return c }

func (a *analysis) union(x, y bits) bits { c := a.clone(x); c.or(y); return c }

// node is the node of a name (all scopes of a name are one node: conservative).
func (a *analysis) node(name string) int {
	if n, ok := a.names[name]; ok {
		return n
	}
	n := len(a.parent)
	a.names[name] = n
	a.parent = append(a.parent, n)
	a.taint = append(a.taint, a.newBits())
	return n
}

func (a *analysis) find(n int) int {
	for a.parent[n] != n {
		a.parent[n] = a.parent[a.parent[n]]
		n = a.parent[n]
	}
	return n
}

// join puts x and y in one class: they may share an object.
func (a *analysis) join(x, y int) {
	x, y = a.find(x), a.find(y)
	if x == y {
		return
	}
	a.parent[y] = x
	a.taint[x].or(a.taint[y])
	a.changed = true
}

// joinAll joins every node of targets with every node of srcs.
func (a *analysis) joinAll(targets, srcs []int) {
	for _, t := range targets {
		for _, s := range srcs {
			a.join(t, s)
		}
	}
}

// taintNodes adds t to the taint of every node's class.
func (a *analysis) taintNodes(nodes []int, t bits) {
	for _, n := range nodes {
		if a.taint[a.find(n)].or(t) {
			a.changed = true
		}
	}
}

// isToolCallee reports whether e is tools or tools.a.b...
func isToolCallee(e syntax.Expr) bool {
	for {
		switch x := e.(type) {
		case *syntax.Ident:
			return x.Name == "tools"
		case *syntax.DotExpr:
			e = x.X
		case *syntax.ParenExpr:
			e = x.X
		default:
			return false
		}
	}
}

// universe reports whether name is a builtin of Starlark the script does not rebind.
func (a *analysis) universe(name string) bool {
	_, ok := starlark.Universe[name]
	return ok && a.bound[name] == 0
}

// collect numbers the tool-call sites and finds the functions the analysis follows.
func (a *analysis) collect(f *syntax.File) {
	var lambdaAssign = map[*syntax.LambdaExpr]string{}
	var defs []*syntax.DefStmt
	bindParams := func(params []syntax.Expr) {
		for _, p := range params {
			switch x := p.(type) {
			case *syntax.Ident:
				a.bound[x.Name]++
			case *syntax.BinaryExpr:
				if id, ok := x.X.(*syntax.Ident); ok {
					a.bound[id.Name]++
				}
			case *syntax.UnaryExpr:
				if id, ok := x.X.(*syntax.Ident); ok {
					a.bound[id.Name]++
				}
			}
		}
	}
	var bindTarget func(e syntax.Expr)
	bindTarget = func(e syntax.Expr) {
		switch x := e.(type) {
		case *syntax.Ident:
			a.bound[x.Name]++
		case *syntax.ParenExpr:
			bindTarget(x.X)
		case *syntax.TupleExpr:
			for _, y := range x.List {
				bindTarget(y)
			}
		case *syntax.ListExpr:
			for _, y := range x.List {
				bindTarget(y)
			}
		}
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.CallExpr:
			if isToolCallee(x.Fn) {
				a.sites[site{x.Lparen.Line, x.Lparen.Col}] = a.n
				a.n++
			}
		case *syntax.AssignStmt:
			bindTarget(x.LHS)
			if id, ok := x.LHS.(*syntax.Ident); ok && x.Op == syntax.EQ {
				if l, ok := x.RHS.(*syntax.LambdaExpr); ok {
					lambdaAssign[l] = id.Name
				}
			}
		case *syntax.ForStmt:
			bindTarget(x.Vars)
		case *syntax.ForClause:
			bindTarget(x.Vars)
		case *syntax.DefStmt:
			a.bound[x.Name.Name]++
			bindParams(x.Params)
			defs = append(defs, x)
		case *syntax.LambdaExpr:
			bindParams(x.Params)
		case *syntax.LoadStmt:
			a.giveUp("the script loads a module")
		}
		return true
	})
	if a.n > maxProvSites {
		a.giveUp("more than %d tool-call sites", maxProvSites)
	}
	if a.bound["tools"] > 0 {
		a.giveUp("the script rebinds tools")
	}
	for _, d := range defs {
		if a.bound[d.Name.Name] != 1 {
			a.giveUp("the function %s is bound more than once", d.Name.Name)
			continue
		}
		a.fns[d.Name.Name] = &fnInfo{name: d.Name.Name, params: d.Params, body: d.Body}
	}
	for l, name := range lambdaAssign {
		if a.bound[name] != 1 {
			continue // not followed: the lambda is then a value the analysis gives up on
		}
		fn := &fnInfo{name: name, params: l.Params, expr: l.Body}
		a.fns[name], a.lambdas[l] = fn, fn
	}
}

// paramNodes are the nodes of a function's parameters.
func (a *analysis) paramNodes(fn *fnInfo) []int {
	var out []int
	for _, p := range fn.params {
		switch x := p.(type) {
		case *syntax.Ident:
			out = append(out, a.node(x.Name))
		case *syntax.BinaryExpr:
			if id, ok := x.X.(*syntax.Ident); ok {
				out = append(out, a.node(id.Name))
			}
		case *syntax.UnaryExpr:
			if id, ok := x.X.(*syntax.Ident); ok {
				out = append(out, a.node(id.Name))
			}
		}
	}
	return out
}

// define is a def statement, or a lambda's assignment, under the context ctx: the
// defaults are evaluated there, and the body runs at least as dependent as that.
func (a *analysis) define(fn *fnInfo, ctx bits) {
	if fn.ctx.or(ctx) {
		a.changed = true
	}
	for _, p := range fn.params {
		if b, ok := p.(*syntax.BinaryExpr); ok {
			id, _ := b.X.(*syntax.Ident)
			if id == nil {
				a.giveUp("unexpected parameter")
				continue
			}
			n := a.node(id.Name)
			a.taintNodes([]int{n}, a.union(a.eval(b.Y, ctx), ctx))
			a.joinAll([]int{n}, a.roots(b.Y))
		}
	}
}

// function analyses a function's body under the context of its callers and its own
// early exits.
func (a *analysis) function(fn *fnInfo) {
	ctx := a.union(fn.ctx, fn.exit)
	if fn.expr != nil {
		a.taintNodes([]int{fn.ret}, a.union(a.eval(fn.expr, ctx), ctx))
		a.joinAll([]int{fn.ret}, a.roots(fn.expr))
		return
	}
	a.stmts(fn.body, ctx, fn, nil)
	// Reaching the end (returning None) depends on the context too.
	a.taintNodes([]int{fn.ret}, ctx)
}

// stmts analyses statements under the control context ctx, in the function fn (nil at
// top level) and the loop whose exits are loop (nil outside loops).
func (a *analysis) stmts(list []syntax.Stmt, ctx bits, fn *fnInfo, loop bits) {
	for _, s := range list {
		switch s := s.(type) {
		case *syntax.ExprStmt:
			a.eval(s.X, ctx)
		case *syntax.AssignStmt:
			if l, ok := s.RHS.(*syntax.LambdaExpr); ok && a.lambdas[l] != nil {
				a.define(a.lambdas[l], ctx)
				continue
			}
			t := a.union(a.eval(s.RHS, ctx), ctx)
			if s.Op != syntax.EQ {
				t.or(a.eval(s.LHS, ctx)) // x += y reads x
			}
			a.assign(s.LHS, a.roots(s.RHS), t, ctx)
		case *syntax.DefStmt:
			if fn := a.fns[s.Name.Name]; fn != nil {
				a.define(fn, ctx)
			} else {
				a.giveUp("a function the analysis does not follow")
			}
		case *syntax.IfStmt:
			c := a.union(ctx, a.eval(s.Cond, ctx))
			a.stmts(s.True, c, fn, loop)
			a.stmts(s.False, c, fn, loop)
		case *syntax.ForStmt:
			exits := a.loopExits(s)
			it := a.eval(s.X, a.union(ctx, exits))
			c := a.union(a.union(ctx, exits), it)
			a.assign(s.Vars, a.roots(s.X), c, c)
			a.stmts(s.Body, c, fn, exits)
		case *syntax.WhileStmt:
			exits := a.loopExits(s)
			c := a.union(ctx, exits)
			c.or(a.eval(s.Cond, c))
			a.stmts(s.Body, c, fn, exits)
		case *syntax.BranchStmt:
			if s.Token != syntax.PASS {
				if loop == nil {
					a.giveUp("%s outside a loop", s.Token)
				} else if loop.or(ctx) {
					a.changed = true
				}
			}
		case *syntax.ReturnStmt:
			if fn == nil {
				a.giveUp("return outside a function")
				continue
			}
			t := a.clone(ctx)
			if s.Result != nil {
				t.or(a.eval(s.Result, ctx))
				a.joinAll([]int{fn.ret}, a.roots(s.Result))
			}
			a.taintNodes([]int{fn.ret}, t)
			if fn.exit.or(ctx) {
				a.changed = true
			}
		default:
			a.giveUp("unexpected statement %T", s)
		}
	}
}

func (a *analysis) loopExits(n syntax.Node) bits {
	b, ok := a.loops[n]
	if !ok {
		b = a.newBits()
		a.loops[n] = b
	}
	return b
}

// assign binds the target e (a name, a tuple or list of targets, x[i] or x.f) to a
// value whose objects may be those of the nodes srcs and whose taint is t.
func (a *analysis) assign(e syntax.Expr, srcs []int, t bits, ctx bits) {
	switch x := e.(type) {
	case *syntax.Ident:
		n := a.node(x.Name)
		a.joinAll([]int{n}, srcs)
		a.taintNodes([]int{n}, t)
	case *syntax.ParenExpr:
		a.assign(x.X, srcs, t, ctx)
	case *syntax.TupleExpr:
		for _, y := range x.List {
			a.assign(y, srcs, t, ctx)
		}
	case *syntax.ListExpr:
		for _, y := range x.List {
			a.assign(y, srcs, t, ctx)
		}
	case *syntax.IndexExpr:
		// x[i] = v mutates the object of x: every name that may share it.
		rt := a.union(t, a.eval(x.Y, ctx))
		rt.or(a.eval(x.X, ctx))
		r := a.roots(x.X)
		a.joinAll(r, srcs)
		a.taintNodes(r, rt)
	case *syntax.DotExpr:
		r := a.roots(x.X)
		a.joinAll(r, srcs)
		a.taintNodes(r, a.union(t, a.eval(x.X, ctx)))
	default:
		a.giveUp("unexpected assignment target %T", e)
	}
}

// roots are the nodes whose objects e's value may be or contain (may alias).
func (a *analysis) roots(e syntax.Expr) []int {
	if a.busy() {
		return nil
	}
	switch x := e.(type) {
	case nil:
		return nil
	case *syntax.Ident:
		if x.Name == "tools" || a.fns[x.Name] != nil || a.universe(x.Name) {
			return nil // eval gives up on these as values
		}
		return []int{a.node(x.Name)}
	case *syntax.Literal:
		return nil
	case *syntax.ParenExpr:
		return a.roots(x.X)
	case *syntax.ListExpr:
		return a.rootsOf(x.List)
	case *syntax.TupleExpr:
		return a.rootsOf(x.List)
	case *syntax.DictExpr:
		return a.rootsOf(x.List)
	case *syntax.DictEntry:
		return append(a.roots(x.Key), a.roots(x.Value)...)
	case *syntax.DotExpr:
		return a.roots(x.X)
	case *syntax.IndexExpr:
		return a.roots(x.X)
	case *syntax.SliceExpr:
		return a.roots(x.X)
	case *syntax.UnaryExpr:
		return a.roots(x.X)
	case *syntax.BinaryExpr:
		return append(a.roots(x.X), a.roots(x.Y)...)
	case *syntax.CondExpr:
		return append(a.roots(x.True), a.roots(x.False)...)
	case *syntax.Comprehension:
		return a.roots(x.Body)
	case *syntax.CallExpr:
		switch {
		case isToolCallee(x.Fn):
			return nil // a fresh value
		case a.calleeFn(x.Fn) != nil:
			return []int{a.calleeFn(x.Fn).ret}
		}
		r := a.rootsOf(argValues(x.Args))
		if d, ok := x.Fn.(*syntax.DotExpr); ok && !a.isJSON(d.X) {
			r = append(r, a.roots(d.X)...)
		}
		return r
	}
	return nil // a lambda: eval gives up on it
}

func (a *analysis) rootsOf(list []syntax.Expr) []int {
	var out []int
	for _, e := range list {
		out = append(out, a.roots(e)...)
	}
	return out
}

// argValues are the value expressions of a call's arguments (k=v, *v, **v, v).
func argValues(args []syntax.Expr) []syntax.Expr {
	out := make([]syntax.Expr, 0, len(args))
	for _, arg := range args {
		switch x := arg.(type) {
		case *syntax.BinaryExpr:
			if x.Op == syntax.EQ {
				out = append(out, x.Y)
				continue
			}
		case *syntax.UnaryExpr:
			if x.Op == syntax.STAR || x.Op == syntax.STARSTAR {
				out = append(out, x.X)
				continue
			}
		}
		out = append(out, arg)
	}
	return out
}

// isJSON reports whether e is the predeclared json module (its functions share no
// object with their results).
func (a *analysis) isJSON(e syntax.Expr) bool {
	id, ok := e.(*syntax.Ident)
	return ok && id.Name == "json" && a.bound["json"] == 0
}

// calleeFn is the followed function a callee names, if it does.
func (a *analysis) calleeFn(e syntax.Expr) *fnInfo {
	if id, ok := e.(*syntax.Ident); ok {
		return a.fns[id.Name]
	}
	return nil
}

// eval analyses the expression e evaluated under the control context ctx and returns
// the sites its value may depend on.
func (a *analysis) eval(e syntax.Expr, ctx bits) bits {
	out := a.newBits()
	if a.busy() {
		return out
	}
	switch x := e.(type) {
	case nil:
	case *syntax.Ident:
		switch {
		case x.Name == "tools":
			a.giveUp("tools used as a value")
		case a.fns[x.Name] != nil:
			a.giveUp("the function %s used as a value", x.Name)
		case x.Name == "None" || x.Name == "True" || x.Name == "False":
		case a.universe(x.Name):
			a.giveUp("the builtin %s used as a value", x.Name)
		default:
			out.or(a.taint[a.find(a.node(x.Name))])
		}
	case *syntax.Literal:
	case *syntax.ParenExpr:
		return a.eval(x.X, ctx)
	case *syntax.ListExpr:
		for _, y := range x.List {
			out.or(a.eval(y, ctx))
		}
	case *syntax.TupleExpr:
		for _, y := range x.List {
			out.or(a.eval(y, ctx))
		}
	case *syntax.DictExpr:
		for _, y := range x.List {
			out.or(a.eval(y, ctx))
		}
	case *syntax.DictEntry:
		out.or(a.eval(x.Key, ctx))
		out.or(a.eval(x.Value, ctx))
	case *syntax.DotExpr:
		if isToolCallee(x) {
			a.giveUp("a tool used as a value")
		}
		out.or(a.eval(x.X, ctx))
	case *syntax.IndexExpr:
		out.or(a.eval(x.X, ctx))
		out.or(a.eval(x.Y, ctx))
	case *syntax.SliceExpr:
		for _, y := range []syntax.Expr{x.X, x.Lo, x.Hi, x.Step} {
			out.or(a.eval(y, ctx))
		}
	case *syntax.UnaryExpr:
		out.or(a.eval(x.X, ctx))
	case *syntax.BinaryExpr:
		l := a.eval(x.X, ctx)
		out.or(l)
		if x.Op == syntax.AND || x.Op == syntax.OR {
			// The right operand is evaluated only depending on the left one.
			out.or(a.eval(x.Y, a.union(ctx, l)))
		} else {
			out.or(a.eval(x.Y, ctx))
		}
	case *syntax.CondExpr:
		c := a.eval(x.Cond, ctx)
		out.or(c)
		cc := a.union(ctx, c)
		out.or(a.eval(x.True, cc))
		out.or(a.eval(x.False, cc))
	case *syntax.Comprehension:
		c := a.clone(ctx)
		for _, cl := range x.Clauses {
			switch cl := cl.(type) {
			case *syntax.ForClause:
				c.or(a.eval(cl.X, c))
				a.assign(cl.Vars, a.roots(cl.X), c, c)
			case *syntax.IfClause:
				c.or(a.eval(cl.Cond, c))
			default:
				a.giveUp("unexpected comprehension clause %T", cl)
			}
		}
		out.or(c)
		out.or(a.eval(x.Body, c))
	case *syntax.CallExpr:
		return a.call(x, ctx)
	case *syntax.LambdaExpr:
		a.giveUp("a lambda used as a value")
	default:
		a.giveUp("unexpected expression %T", e)
	}
	return out
}

// nonMutating are the methods of Starlark's values that change nothing: every other
// method call may store its arguments into its receiver.
var nonMutating = map[string]bool{
	"get": true, "items": true, "keys": true, "values": true, "index": true,
	"difference": true, "intersection": true, "issubset": true, "issuperset": true,
	"symmetric_difference": true, "union": true, "elems": true,
	"capitalize": true, "codepoint_ords": true, "codepoints": true, "count": true,
	"elem_ords": true, "endswith": true, "find": true, "format": true, "isalnum": true,
	"isalpha": true, "isdigit": true, "islower": true, "isspace": true, "istitle": true,
	"isupper": true, "join": true, "lower": true, "lstrip": true, "partition": true,
	"removeprefix": true, "removesuffix": true, "replace": true, "rfind": true,
	"rindex": true, "rpartition": true, "rsplit": true, "rstrip": true, "split": true,
	"splitlines": true, "startswith": true, "strip": true, "title": true, "upper": true,
}

// call analyses a call: a tool call (a site), a followed function, a builtin or a
// method. Any other callee makes the analysis give up.
func (a *analysis) call(x *syntax.CallExpr, ctx bits) bits {
	args := argValues(x.Args)
	argTaint := a.newBits()
	var argRoots []int
	evalArgs := func() {
		for _, y := range args {
			argTaint.or(a.eval(y, ctx))
			argRoots = append(argRoots, a.roots(y)...)
		}
	}
	out := a.newBits()
	switch {
	case isToolCallee(x.Fn):
		evalArgs()
		id, ok := a.sites[site{x.Lparen.Line, x.Lparen.Col}]
		if !ok {
			a.giveUp("a tool call the analysis did not number")
			return out
		}
		// The call's arguments, and whether it is made at all.
		if a.deps[id].or(a.union(argTaint, ctx)) {
			a.changed = true
		}
		// Its result depends on the call itself and on what fed it (a tool may echo
		// its arguments).
		out.set(id)
		out.or(a.deps[id])
		return out
	case a.calleeFn(x.Fn) != nil:
		fn := a.calleeFn(x.Fn)
		evalArgs()
		// Every argument may bind every parameter.
		params := a.paramNodes(fn)
		a.joinAll(params, argRoots)
		a.taintNodes(params, a.union(argTaint, ctx))
		if fn.ctx.or(ctx) {
			a.changed = true
		}
		out.or(a.taint[a.find(fn.ret)])
		return out
	}
	switch fx := x.Fn.(type) {
	case *syntax.Ident:
		if !a.universe(fx.Name) {
			a.giveUp("a call of %s, which the analysis does not follow", fx.Name)
			return out
		}
		switch fx.Name {
		case "getattr":
			a.giveUp("getattr")
		case "fail":
			// The script ends here: whether any later call is made depends on ctx.
			if a.global.or(ctx) {
				a.changed = true
			}
		}
		for _, arg := range x.Args {
			if b, ok := arg.(*syntax.BinaryExpr); ok && b.Op == syntax.EQ {
				if k, ok := b.X.(*syntax.Ident); ok && k.Name == "key" {
					a.giveUp("a builtin given a key function")
				}
			}
			if u, ok := arg.(*syntax.UnaryExpr); ok && u.Op == syntax.STARSTAR {
				a.giveUp("a builtin given **kwargs")
			}
		}
		evalArgs()
		out.or(argTaint)
	case *syntax.DotExpr:
		out.or(a.eval(fx.X, ctx))
		evalArgs()
		out.or(argTaint)
		if a.isJSON(fx.X) {
			break // json.encode, json.decode: nothing to mutate
		}
		if !nonMutating[fx.Name.Name] {
			// x.append(v), x.update(d), ...: the receiver, and whatever may share its
			// object, may now hold the arguments.
			r := a.roots(fx.X)
			a.joinAll(r, argRoots)
			a.taintNodes(r, a.union(argTaint, ctx))
		}
	default:
		a.giveUp("a call of a %T", x.Fn)
	}
	return out
}
