package cellang

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// PrincipalTypeName is the synthetic CEL type of a policy rule's principal: an object
// with id and tenant (strings) and scopes (a list of strings), read from a
// map[string]any with those keys.
const PrincipalTypeName = "toolgen.policy.Principal"

// Provider declares args and principal to CEL without generated Go types or protobuf
// messages: it answers for a set of synthetic object types — a tool's args
// (TypeName), one per object-typed value inside them, and the policy's principal —
// and passes every other question to the shared registry of the base environment,
// which it never mutates. The field accessors read the plain decoded JSON a tool is
// called with (map[string]any) and convert its numbers as the schema declares
// them, so the environment that type-checks an expression at build time is the one
// that evaluates it at run time. A Provider is safe for concurrent use.
type Provider struct {
	*types.Registry
	structs map[string]*object
	vars    map[string]string // variable -> its synthetic type

	// misses records, by field name, the synthetic types the checker asked for a field
	// they do not have, so that "undefined field 'pth'" can be answered with a
	// did-you-mean from the fields of the type it was asked of.
	mu     sync.Mutex
	misses map[string][]*object
}

// object is one synthetic object type.
type object struct {
	display string   // how a diagnostic names a value of the type: args, args.user, args.tags[], principal
	names   []string // sorted
	fields  map[string]*types.FieldType
}

// maxMisses bounds the fields misses remembers: a check of one expression asks about a
// handful, and the provider of a run-time environment must not grow.
const maxMisses = 64

func newProvider(reg *types.Registry) *Provider {
	return &Provider{Registry: reg, structs: map[string]*object{}, vars: map[string]string{}, misses: map[string][]*object{}}
}

// declare adds the object type name for n and returns its CEL type.
func (p *Provider) declare(name, display string, n *node) *types.Type {
	o := &object{display: display, fields: make(map[string]*types.FieldType, len(n.props))}
	p.structs[name] = o
	for f, fn := range n.props {
		o.names = append(o.names, f)
		o.fields[f] = field(f, p.celType(fn, name+"."+f, display+"."+f), fn)
	}
	slices.Sort(o.names)
	return types.NewObjectType(name)
}

// celType is the CEL type of a value n declares: string, int, double, bool,
// list(items), a nested object type (name), or dyn. An array's items are name.items:
// a path is either an array or an object, so the two never clash.
func (p *Provider) celType(n *node, name, display string) *types.Type {
	if n == nil || n.nullable {
		return types.DynType
	}
	switch n.kind {
	case kindString:
		return types.StringType
	case kindInt:
		return types.IntType
	case kindDouble:
		return types.DoubleType
	case kindBool:
		return types.BoolType
	case kindList:
		return types.NewListType(p.celType(n.items, name+".items", display+"[]"))
	case kindObject:
		return p.declare(name, display, n)
	}
	return types.DynType
}

// field is a field whose value is read out of a map[string]any and converted as n
// declares it.
func field(name string, t *types.Type, n *node) *types.FieldType {
	return &types.FieldType{
		Type: t,
		IsSet: func(target any) bool {
			m, ok := target.(map[string]any)
			if !ok {
				return false
			}
			_, ok = m[name]
			return ok
		},
		GetFrom: func(target any) (any, error) {
			m, ok := target.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("field %s: expected a JSON object, found %T", name, target)
			}
			v, ok := m[name]
			if !ok {
				return nil, fmt.Errorf("no such key: %s", name)
			}
			return fieldValue(n, v), nil
		},
	}
}

var principalNode = &node{kind: kindObject, props: map[string]*node{
	"id":     {kind: kindString},
	"tenant": {kind: kindString},
	"scopes": {kind: kindList, items: &node{kind: kindString}},
}}

// ForgetMisses clears what the provider recorded about undefined fields; call it
// before checking an expression whose diagnostics [Provider.SuggestField] is to
// answer.
func (p *Provider) ForgetMisses() {
	p.mu.Lock()
	clear(p.misses)
	p.mu.Unlock()
}

// SuggestField says, for a field the checker found undefined, which declared field
// was probably meant ("; did you mean \"path\"?", closest choosing among the declared
// names), or else which fields there are; "" when the field was never asked of a
// synthetic type.
func (p *Provider) SuggestField(field string, closest func(s string, known []string) string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	objs := p.misses[field]
	if len(objs) == 0 {
		return ""
	}
	var known []string
	for _, o := range objs {
		for _, n := range o.names {
			if !slices.Contains(known, n) {
				known = append(known, n)
			}
		}
	}
	if s := closest(field, known); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	if len(objs) > 1 {
		return ""
	}
	if len(known) == 0 {
		return fmt.Sprintf("; %s has no fields", objs[0].display)
	}
	slices.Sort(known)
	return fmt.Sprintf("; the fields of %s are %s", objs[0].display, strings.Join(known, ", "))
}

// Fields returns the fields of variable (args, principal) when the environment
// declares it a synthetic object, sorted; nil otherwise.
func (p *Provider) Fields(variable string) []string {
	if o := p.structs[p.vars[variable]]; o != nil {
		return slices.Clone(o.names)
	}
	return nil
}

// FindStructType implements types.Provider.
func (p *Provider) FindStructType(name string) (*types.Type, bool) {
	if _, ok := p.structs[name]; ok {
		return types.NewTypeTypeWithParam(types.NewObjectType(name)), true
	}
	return p.Registry.FindStructType(name)
}

// FindStructFieldNames implements types.Provider.
func (p *Provider) FindStructFieldNames(name string) ([]string, bool) {
	if o, ok := p.structs[name]; ok {
		return slices.Clone(o.names), true
	}
	return p.Registry.FindStructFieldNames(name)
}

// FindStructFieldType implements types.Provider.
func (p *Provider) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	if o, ok := p.structs[name]; ok {
		ft, ok := o.fields[field]
		if !ok {
			p.mu.Lock()
			if len(p.misses) < maxMisses && !slices.Contains(p.misses[field], o) {
				p.misses[field] = append(p.misses[field], o)
			}
			p.mu.Unlock()
		}
		return ft, ok
	}
	return p.Registry.FindStructFieldType(name, field)
}

// NewValue implements types.Provider. The synthetic types describe decoded JSON; an
// expression cannot construct one.
func (p *Provider) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if _, ok := p.structs[name]; ok {
		return types.NewErr("%s cannot be constructed in an expression", name)
	}
	return p.Registry.NewValue(name, fields)
}

// adapter wraps the shared registry so that cel.Env.Extend, which copies an adapter
// that is a *types.Registry, shares it instead. It calls the registry directly: every
// value an evaluation reads goes through it.
type adapter struct{ reg *types.Registry }

// NativeToValue implements types.Adapter.
func (a adapter) NativeToValue(v any) ref.Val { return a.reg.NativeToValue(v) }

type base struct {
	reg *types.Registry
	env *cel.Env
	err error
}

// baseEnv is the environment every tool and policy environment extends: creating a
// CEL environment is expensive, extending one is cheap.
var baseEnv = sync.OnceValue(func() (b *base) {
	b = &base{}
	defer func() {
		if p := recover(); p != nil {
			b.err = fmt.Errorf("creating the CEL environment failed: %v", p)
		}
	}()
	if b.reg, b.err = types.NewRegistry(); b.err != nil {
		return b
	}
	b.env, b.err = cel.NewEnv(append([]cel.EnvOption{
		// A provider and adapter that are not a *types.Registry are shared, not copied,
		// by every Extend.
		cel.CustomTypeProvider(newProvider(b.reg)),
		cel.CustomTypeAdapter(adapter{b.reg}),
	}, Options()...)...)
	if b.err == nil {
		// Build the checker now, once, rather than in the first Extend.
		_, b.err = b.env.Extend()
	}
	return b
})

// argsType declares args in p: the typed object of a, or map(string, dyn).
func (p *Provider) argsType(a *Args) *types.Type {
	if !a.Typed() {
		return types.NewMapType(types.StringType, types.DynType)
	}
	p.vars["args"] = a.typeName
	return p.declare(a.typeName, "args", a.root)
}

// ToolEnv returns the environment of a tool's own expressions (idempotent_when,
// approval_when), with its provider: one variable, args, declared by a (see [Args]).
// Programs evaluate with args bound to the decoded JSON arguments, a map[string]any.
func ToolEnv(a *Args) (*cel.Env, *Provider, error) {
	b := baseEnv()
	if b.err != nil {
		return nil, nil, b.err
	}
	p := newProvider(b.reg)
	env, err := b.env.Extend(cel.CustomTypeProvider(p), cel.Variable("args", p.argsType(a)))
	if err != nil {
		return nil, nil, err
	}
	return env, p, nil
}

// PolicyEnv returns the environment of a policy rule, with its provider: the
// variables of PolicyVariables — tool, risk, side_effect and trust (strings),
// principal (PrincipalTypeName) and args, declared by a (nil: map(string, dyn)).
// Programs evaluate with principal bound to a map[string]any with keys "id",
// "tenant" and "scopes" ([]string or []any).
func PolicyEnv(a *Args) (*cel.Env, *Provider, error) {
	b := baseEnv()
	if b.err != nil {
		return nil, nil, b.err
	}
	p := newProvider(b.reg)
	p.vars["principal"] = PrincipalTypeName
	principal := p.declare(PrincipalTypeName, "principal", principalNode)
	env, err := b.env.Extend(
		cel.CustomTypeProvider(p),
		cel.Variable("tool", types.StringType),
		cel.Variable("risk", types.StringType),
		cel.Variable("side_effect", types.StringType),
		cel.Variable("trust", types.StringType),
		cel.Variable("principal", principal),
		cel.Variable("args", p.argsType(a)),
	)
	if err != nil {
		return nil, nil, err
	}
	return env, p, nil
}
