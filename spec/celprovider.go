package spec

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// celProvider declares a tool's arguments to CEL without generated Go types or
// protobuf messages (docs: /work/shared/reference/cel-typed-args.md). It answers for
// a set of synthetic object types, one per tool (toolgen.args.<tool>) and one per
// object-typed field inside it, and for the policy's principal; every other question
// goes to the embedded registry, which is shared and never mutated.
//
// The field accessors read from the plain decoded JSON a tool is called with
// (map[string]any), so the same provider type-checks at build time and evaluates at
// run time.
type celProvider struct {
	*types.Registry
	structs map[string]*celStruct

	// misses records, by field name, the synthetic types the checker asked for a field
	// they do not have, so that "undefined field 'pth'" can be answered with a
	// did-you-mean from the fields of the type it was asked of.
	mu     sync.Mutex
	misses map[string][]*celStruct
}

// celStruct is one synthetic object type.
type celStruct struct {
	display string   // how a diagnostic names a value of the type: args, args.user, args.tags[], principal
	names   []string // declaration order
	fields  map[string]*types.FieldType
}

// newCELProvider returns a provider without synthetic types that delegates to reg,
// the registry of the base environment (CEL's standard types and the protobuf
// well-known types). Providers only read reg.
func newCELProvider(reg *types.Registry) *celProvider {
	return &celProvider{Registry: reg, structs: map[string]*celStruct{}, misses: map[string][]*celStruct{}}
}

// maxMisses bounds the fields misses remembers: a check of one expression asks about a
// handful, and the provider of a run-time environment must not grow.
const maxMisses = 64

// forgetMisses clears what misses recorded, before an expression is checked.
func (p *celProvider) forgetMisses() {
	p.mu.Lock()
	clear(p.misses)
	p.mu.Unlock()
}

// suggestField says, for a field the checker found undefined, which declared field was
// probably meant ("; did you mean \"path\"?"), or else which fields there are; "" when
// the field was never asked of a synthetic type.
func (p *celProvider) suggestField(field string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	sts := p.misses[field]
	if len(sts) == 0 {
		return ""
	}
	var known []string
	for _, st := range sts {
		for _, n := range st.names {
			if !slices.Contains(known, n) {
				known = append(known, n)
			}
		}
	}
	if s := closest(field, known); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	if len(sts) > 1 {
		return ""
	}
	if len(known) == 0 {
		return fmt.Sprintf("; %s has no fields", sts[0].display)
	}
	slices.Sort(known)
	return fmt.Sprintf("; the fields of %s are %s", sts[0].display, strings.Join(known, ", "))
}

// argsTypeName is the synthetic CEL type of a tool's args. The provider is per tool,
// so two tools whose names differ only in "." versus "_" never meet.
func argsTypeName(toolName string) string {
	var b strings.Builder
	for _, r := range toolName {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "toolgen.args.tool"
	}
	return "toolgen.args." + b.String()
}

// principalTypeName is the synthetic type of a policy rule's principal.
const principalTypeName = "toolgen.policy.Principal"

// addFields declares the object type name with fields and returns its CEL type;
// display is how a diagnostic names a value of it (args, args.user). An object field
// becomes the nested type name.<field>, and an array's items name.<field>.items: a
// path is either an array or an object, so the two never clash.
func (p *celProvider) addFields(name, display string, fields []*Field) *types.Type {
	st := &celStruct{display: display, fields: map[string]*types.FieldType{}}
	p.structs[name] = st
	for _, f := range fields {
		if f == nil {
			continue
		}
		if _, dup := st.fields[f.Name]; !dup {
			st.names = append(st.names, f.Name)
		}
		st.fields[f.Name] = mapField(f.Name, p.fieldType(f, name+"."+f.Name, display+"."+f.Name), f)
	}
	return types.NewObjectType(name)
}

// fieldType is the CEL type of a field (SPEC-4 to CEL): string, int, double, bool,
// list(items) or a nested object type. An enum has its base type.
func (p *celProvider) fieldType(f *Field, name, display string) *types.Type {
	if f == nil {
		return types.DynType
	}
	switch f.Type {
	case TypeString:
		return types.StringType
	case TypeInteger:
		return types.IntType
	case TypeNumber:
		return types.DoubleType
	case TypeBoolean:
		return types.BoolType
	case TypeArray:
		return types.NewListType(p.fieldType(f.Items, name+".items", display+"[]"))
	case TypeObject:
		return p.addFields(name, display, f.Properties)
	}
	return types.DynType
}

// mapField is a field whose value is read out of a map[string]any. f (nil for the
// principal's fields) is used to give JSON numbers their declared CEL type.
func mapField(name string, t *types.Type, f *Field) *types.FieldType {
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
			return jsonValue(f, v), nil
		},
	}
}

// jsonValue converts a decoded JSON value to the Go type CEL expects for field f:
// encoding/json decodes every number as float64 (or json.Number), but an integer
// field is a CEL int and a number field a CEL double.
func jsonValue(f *Field, v any) any {
	if f == nil {
		return v
	}
	switch f.Type {
	case TypeInteger:
		switch n := v.(type) {
		case float64:
			if n == math.Trunc(n) && n >= math.MinInt64 && n < math.MaxInt64 {
				return int64(n)
			}
		case json.Number:
			if i, err := n.Int64(); err == nil {
				return i
			}
		case int:
			return int64(n)
		case int32:
			return int64(n)
		}
	case TypeNumber:
		switch n := v.(type) {
		case json.Number:
			if x, err := n.Float64(); err == nil {
				return x
			}
		case int:
			return float64(n)
		case int32:
			return float64(n)
		case int64:
			return float64(n)
		}
	case TypeArray:
		if l, ok := v.([]any); ok && f.Items != nil && f.Items.Type != TypeObject {
			out := make([]any, len(l))
			for i, e := range l {
				out[i] = jsonValue(f.Items, e)
			}
			return out
		}
	}
	return v
}

// FindStructType implements types.Provider.
func (p *celProvider) FindStructType(name string) (*types.Type, bool) {
	if _, ok := p.structs[name]; ok {
		return types.NewTypeTypeWithParam(types.NewObjectType(name)), true
	}
	return p.Registry.FindStructType(name)
}

// FindStructFieldNames implements types.Provider.
func (p *celProvider) FindStructFieldNames(name string) ([]string, bool) {
	if st, ok := p.structs[name]; ok {
		return append([]string(nil), st.names...), true
	}
	return p.Registry.FindStructFieldNames(name)
}

// FindStructFieldType implements types.Provider.
func (p *celProvider) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	if st, ok := p.structs[name]; ok {
		ft, ok := st.fields[field]
		if !ok {
			p.mu.Lock()
			if len(p.misses) < maxMisses && !slices.Contains(p.misses[field], st) {
				p.misses[field] = append(p.misses[field], st)
			}
			p.mu.Unlock()
		}
		return ft, ok
	}
	return p.Registry.FindStructFieldType(name, field)
}

// NewValue implements types.Provider. The synthetic types describe decoded JSON; an
// expression cannot construct one.
func (p *celProvider) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if _, ok := p.structs[name]; ok {
		return types.NewErr("%s cannot be constructed in an expression", name)
	}
	return p.Registry.NewValue(name, fields)
}

// celAdapter wraps the shared registry so that cel.Env.Extend, which copies an
// adapter that is a *types.Registry, shares it instead.
type celAdapter struct{ types.Adapter }
