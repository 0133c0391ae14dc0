package spec

import (
	"math"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/toolgen/toolgen/internal/names"
	"github.com/toolgen/toolgen/vocab"
)

// segment is the grammar of one name segment, argument, server, mode and protocol
// name (SPEC-1); see internal/names.
var segment = names.Segment

// MaxNameBytes bounds a registry name (SPEC-1).
const MaxNameBytes = names.MaxBytes

// ReservedDomains belong to adapters; a builtin spec in one of them is an error (SPEC-2).
var ReservedDomains = names.ReservedDomains

// CheckName returns why name is not a valid registry name, or "" (SPEC-1).
func CheckName(name string) string { return names.Check(name) }

// WireName is the name served to MCP clients: dots become "__" (SPEC-1).
func WireName(name string) string { return names.Wire(name) }

var toolKeys = []string{
	"name", "version", "kind", "description", "side_effect", "idempotency", "idempotent_when",
	"risk", "required_scopes", "output_trust", "confers_approval", "parallel_safe", "suspends",
	"timeout", "approval_when", "args", "result", "output", "acknowledge",
}

var fieldKeys = []string{
	"type", "description", "enum", "default", "min", "max", "min_length", "max_length",
	"min_items", "max_items", "pattern", "required", "items", "properties", "bound",
	"workspace_path",
}

// BoundKeyword is the JSON Schema annotation that marks a bound argument in a tool's
// input schema: the property's value is filled by the platform from the source it
// names, never by the caller, and the property is not advertised to models.
const BoundKeyword = "x-toolgen-bound"

// WorkspacePathKeyword is the JSON Schema annotation that marks an argument holding a
// path relative to the call's workspace (`workspace_path: true`): the pipeline
// resolves its symlinks before the key, the conditions and the policy see it, and the
// tool receives the resolved path (SEC-1).
const WorkspacePathKeyword = "x-toolgen-workspace-path"

// boundSource is the grammar of a bound argument's source (SPEC-4): the verified
// principal's id or tenant or one of its claims, or the call's session or run id.
var boundSource = regexp.MustCompile(`^(principal\.(id|tenant|claims\.[a-z][a-z0-9_]*)|session\.id|run\.id)$`)

// Enumerations of the spec language.
var (
	Kinds          = []string{"action", "control"}
	SideEffects    = vocab.Strings(vocab.SideEffects())   // from the least restrictive
	Idempotencies  = vocab.Strings(vocab.Idempotencies()) // from the least restrictive
	Risks          = vocab.Strings(vocab.Risks())         // from the lowest
	Trusts         = vocab.Strings(vocab.Trusts())        // from the most trusted
	FieldTypes     = []string{TypeString, TypeInteger, TypeNumber, TypeBoolean, TypeArray, TypeObject}
	maxTimeout     = 24 * time.Hour
	maxFieldsDepth = 16
)

// LoadTool parses and checks one tool spec. rel is its path relative to the spec root
// (for the file-name rule and the generated source line); diagnostics use display.
func LoadTool(rel, display string, data []byte) (*Tool, Diagnostics) {
	var diags Diagnostics
	r := reporter{path: display, diags: &diags}
	t := loadTool(r, rel, data)
	return t, diags
}

func loadTool(r reporter, rel string, data []byte) *Tool {
	root := parseDocument(r, data)
	if root == nil {
		return nil
	}
	m := r.asMapping(root, "tool spec", toolKeys...)
	if m == nil {
		return nil
	}
	lines := splitLines(data)
	t := &Tool{File: rel, Positions: Positions{m}, OutputTrust: "tool", Kind: "action", OutputMaxBytes: DefaultOutputMaxBytes}

	// SPEC-1: name grammar, and one tool per file named after it.
	if name, ok := m.requiredStr("name", "tool spec"); ok {
		t.Name = name
		if why := CheckName(name); why != "" {
			r.errorf(m.at("name"), "SPEC-1.name-grammar", "tool name %q %s", name, why)
		} else if base := path.Base(rel); base != name+".yaml" {
			r.errorf(m.at("name"), "SPEC-1.file-name", "tool %q must be in a file named %s, not %s", name, name+".yaml", base)
		}
		// SPEC-2: reserved domains belong to adapters.
		// toolgen's own adapter builtins (sandbox.run_script) are the one exception: a
		// host registers them through RegisterAdapter, which still forces their trust.
		if dom, _, _ := strings.Cut(name, "."); slices.Contains(ReservedDomains, dom) && !names.AdapterBuiltin(name) {
			r.errorf(m.at("name"), "SPEC-2.reserved-domain", "domain %q is reserved for adapters (%s); a builtin tool cannot be named %q", dom, strings.Join(ReservedDomains, ", "), name)
		}
	}
	if !m.has("version") {
		r.errorf(posOf(root), "schema.missing-key", "tool spec is missing required key %q (the tool_version of the idempotency key; start at 1)", "version")
	} else if v, ok := m.integer("version"); ok {
		if v < 1 || v > 1<<31-1 {
			r.errorf(m.at("version"), "schema.version-positive", "version must be a positive integer, found %d", v)
		}
		t.Version = int(v)
	}
	if k, ok := m.oneOf("kind", "schema", Kinds...); ok {
		t.Kind = k
	}
	if d, ok := m.requiredStr("description", "tool spec"); ok {
		t.Description = d
	}
	if !m.has("side_effect") {
		r.errorf(posOf(root), "SPEC-3.side-effect-missing", "tool spec is missing required key %q (none, read or write)", "side_effect")
	} else if s, ok := m.oneOf("side_effect", "SPEC-3", SideEffects...); ok {
		t.SideEffect = s
	}
	if !m.has("risk") {
		r.errorf(posOf(root), "schema.missing-key", "tool spec is missing required key %q (low, medium, high or critical)", "risk")
	} else if s, ok := m.oneOf("risk", "schema", Risks...); ok {
		t.Risk = s
	}
	if s, ok := m.oneOf("output_trust", "schema", Trusts...); ok {
		t.OutputTrust = s
	}
	if scopes, ok := m.strList("required_scopes"); ok {
		seen := map[string]bool{}
		for _, s := range scopes {
			switch {
			case !scopePattern.MatchString(s.Name):
				r.errorf(s.Pos, "schema.scope-grammar", "scope %q must match %s", s.Name, scopePattern)
			case seen[s.Name]:
				r.errorf(s.Pos, "schema.scope-duplicate", "scope %q is listed twice", s.Name)
			}
			seen[s.Name] = true
		}
		t.RequiredScopes = scopes
	}
	t.ConfersApproval, _ = m.boolean("confers_approval")
	t.ParallelSafe, _ = m.boolean("parallel_safe")
	if s, ok := m.str("timeout"); ok {
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			r.errorf(m.at("timeout"), "schema.duration", "timeout %q is not a duration such as 30s or 2m", s)
		case d <= 0 || d > maxTimeout:
			r.errorf(m.at("timeout"), "schema.timeout-range", "timeout must be more than 0 and at most %s, found %s", maxTimeout, s)
		default:
			t.Timeout = d
		}
	}
	if n := m.get("output"); n != nil {
		if om := r.asMapping(n, "output", "max_bytes"); om != nil {
			if v, ok := om.integer("max_bytes"); ok {
				if v < 1024 || v > 1<<30 {
					r.errorf(om.at("max_bytes"), "schema.max-bytes-range", "output.max_bytes must be between 1024 and %d, found %d", 1<<30, v)
				} else {
					t.OutputMaxBytes = int(v)
				}
			}
		}
	}
	if acks, ok := m.strList("acknowledge"); ok {
		seen := map[string]bool{}
		for _, a := range acks {
			switch {
			case !ackPattern.MatchString(a.Name):
				r.errorf(a.Pos, "acknowledge.grammar", "acknowledge entries are toolgen diff rule names such as RISK_LOWERED, found %q", a.Name)
				continue
			case seen[a.Name]:
				r.errorf(a.Pos, "acknowledge.duplicate", "acknowledge lists %s twice", a.Name)
				continue
			}
			seen[a.Name] = true
			t.Acknowledge = append(t.Acknowledge, a)
		}
	}
	t.IdempotentWhen = exprOf(m, "idempotent_when", "SPEC-5", lines)
	t.ApprovalWhen = exprOf(m, "approval_when", "SPEC-5", lines)

	checkIdempotency(r, t, m)

	if n := m.get("args"); n != nil {
		t.Args = loadFields(r, n, "args", 0)
	}
	if n := m.get("result"); n != nil {
		t.Result = loadFields(r, n, "result", 0)
	}
	return t
}

// ackPattern is the grammar of a toolgen diff rule name. Which names exist is known to
// spec/specdiff, which imports this package: `toolgen diff` reports an unknown one.
var ackPattern = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$`)

var scopePattern = regexp.MustCompile(`^[a-z][a-z0-9_]*([.:][a-z0-9_]+)*$`)

// exprOf reads the CEL expression at key; req is the requirement its rules are under
// (SPEC-5, POL-2).
func exprOf(m *mapping, key, req string, lines []string) *Expr {
	s, ok := m.str(key)
	if !ok {
		return nil
	}
	if strings.TrimSpace(s) == "" {
		m.r.errorf(m.at(key), req+".empty-expression", "%s must not be empty", key)
		return nil
	}
	v := m.get(key)
	return &Expr{Source: s, Pos: posOf(v), Style: v.Style, lines: lines}
}

// checkIdempotency applies SPEC-3.
func checkIdempotency(r reporter, t *Tool, m *mapping) {
	idem, hasIdem := m.oneOf("idempotency", "SPEC-3", Idempotencies...)
	none, write := string(vocab.SideEffectNone), string(vocab.SideEffectWrite)
	idempotent, conditional := string(vocab.Idempotent), string(vocab.ConditionallyIdempotent)
	switch {
	case t.SideEffect == none && hasIdem && idem != idempotent:
		r.errorf(m.at("idempotency"), "SPEC-3.none-implies-idempotent", "side_effect none implies idempotent; remove idempotency or declare the side effect (found %s)", idem)
	case t.SideEffect == none:
		t.Idempotency = idempotent
	case t.SideEffect != "" && !m.has("idempotency"):
		r.errorf(m.keyAt("side_effect"), "SPEC-3.idempotency-missing", "idempotency is required when side_effect is %s: declare idempotent, conditionally_idempotent or non_idempotent", t.SideEffect)
	default:
		t.Idempotency = idem
	}
	if idem == conditional && !m.has("idempotent_when") {
		r.errorf(m.at("idempotency"), "SPEC-3.idempotent-when-missing", "conditionally_idempotent requires idempotent_when: the CEL condition over args under which a retry is safe")
	}
	if m.has("idempotent_when") && hasIdem && idem != conditional {
		r.errorf(m.keyAt("idempotent_when"), "SPEC-3.idempotent-when-not-allowed", "idempotent_when is allowed only with idempotency: conditionally_idempotent (found %s)", idem)
	} else if m.has("idempotent_when") && !hasIdem && t.SideEffect == none {
		r.errorf(m.keyAt("idempotent_when"), "SPEC-3.idempotent-when-not-allowed", "idempotent_when is allowed only with idempotency: conditionally_idempotent")
	}
	if t.ParallelSafe && t.SideEffect == write {
		r.errorf(m.at("parallel_safe"), "SPEC-3.parallel-safe-write", "parallel_safe is allowed only for side_effect none or read; a writing tool runs alone in its batch")
	}
	suspends, hasSuspends := m.boolean("suspends")
	switch {
	case t.Kind == "control" && !m.has("suspends"):
		r.errorf(m.at("kind"), "SPEC-3.suspends-missing", "a control tool must declare suspends: true or false")
	case t.Kind != "control" && m.has("suspends"):
		r.errorf(m.keyAt("suspends"), "SPEC-3.suspends-not-allowed", "suspends is allowed only on kind: control")
	case hasSuspends:
		t.Suspends = suspends
	}
}

// loadFields reads a mapping of field name to field definition.
func loadFields(r reporter, n *yaml.Node, what string, depth int) []*Field {
	m := r.asMapping(n, what)
	if m == nil {
		return nil
	}
	fields := make([]*Field, 0, len(m.order))
	for _, name := range m.order {
		kp := m.keyAt(name)
		if !segment.MatchString(name) {
			r.errorf(kp, "SPEC-4.field-name", "field name %q in %s must be lower_snake_case: [a-z][a-z0-9]*(_[a-z0-9]+)*", name, what)
		}
		f := loadField(r, m.get(name), what+"."+name, depth)
		if f == nil {
			continue
		}
		f.Name, f.Pos = name, kp
		fields = append(fields, f)
	}
	return fields
}

func loadField(r reporter, n *yaml.Node, what string, depth int) *Field {
	if depth > maxFieldsDepth {
		r.errorf(posOf(n), "SPEC-4.too-deep", "%s is nested more than %d levels deep", what, maxFieldsDepth)
		return nil
	}
	m := r.asMapping(n, what, fieldKeys...)
	if m == nil {
		return nil
	}
	f := &Field{Pos: posOf(n), m: m}
	typ, ok := m.requiredStr("type", what)
	if ok && !slices.Contains(FieldTypes, typ) {
		r.errorf(m.at("type"), "SPEC-4.unknown-type", "%s has unknown type %q; use one of %s", what, typ, strings.Join(FieldTypes, ", "))
		ok = false
	}
	if !ok {
		return nil
	}
	f.Type = typ
	f.Description, _ = m.str("description")
	l := &fieldLoader{r: r, m: m, f: f, what: what, depth: depth}
	l.constraints()
	l.children()
	l.enum()
	l.requiredAndDefault()
	l.bound()
	l.workspacePath()
	return f
}

// fieldLoader loads the keywords of one field f, of mapping m, named what in
// diagnostics, depth levels below the arguments.
type fieldLoader struct {
	r     reporter
	m     *mapping
	f     *Field
	what  string
	depth int
}

// only reports whether key is present, and refuses it (false) on a field whose type is
// not one of types.
func (l *fieldLoader) only(key string, types ...string) bool {
	if l.m.has(key) && !slices.Contains(types, l.f.Type) {
		l.r.errorf(l.m.keyAt(key), "SPEC-4.keyword-not-allowed", "%s is not allowed on %s of type %s", key, l.what, l.f.Type)
		return false
	}
	return l.m.has(key)
}

// constraints loads min/max, the length and item counts and the pattern.
func (l *fieldLoader) constraints() {
	r, m, f, what := l.r, l.m, l.f, l.what
	if l.only("min", TypeInteger, TypeNumber) {
		if v, ok := m.number("min"); ok {
			f.Min = &v
		}
	}
	if l.only("max", TypeInteger, TypeNumber) {
		if v, ok := m.number("max"); ok {
			f.Max = &v
		}
	}
	if f.Min != nil && f.Max != nil && *f.Min > *f.Max {
		r.errorf(m.at("max"), "SPEC-4.max-below-min", "%s has max %v below min %v", what, *f.Max, *f.Min)
	}
	f.MinLength = nonNegative(r, m, "min_length", what, l.only("min_length", TypeString))
	f.MaxLength = nonNegative(r, m, "max_length", what, l.only("max_length", TypeString))
	if f.MinLength != nil && f.MaxLength != nil && *f.MinLength > *f.MaxLength {
		r.errorf(m.at("max_length"), "SPEC-4.max-length-below-min-length", "%s has max_length %d below min_length %d", what, *f.MaxLength, *f.MinLength)
	}
	f.MinItems = nonNegative(r, m, "min_items", what, l.only("min_items", TypeArray))
	f.MaxItems = nonNegative(r, m, "max_items", what, l.only("max_items", TypeArray))
	if f.MinItems != nil && f.MaxItems != nil && *f.MinItems > *f.MaxItems {
		r.errorf(m.at("max_items"), "SPEC-4.max-items-below-min-items", "%s has max_items %d below min_items %d", what, *f.MaxItems, *f.MinItems)
	}
	if l.only("pattern", TypeString) {
		if p, ok := m.str("pattern"); ok {
			if _, err := regexp.Compile(p); err != nil {
				r.errorf(m.at("pattern"), "SPEC-4.invalid-pattern", "%s has an invalid pattern: %v", what, err)
			} else {
				f.Pattern = p
			}
		}
	}
}

// children loads an array's items and an object's properties.
func (l *fieldLoader) children() {
	r, m, f, what := l.r, l.m, l.f, l.what
	switch f.Type {
	case TypeArray:
		if !m.has("items") {
			r.errorf(m.keyAt("type"), "SPEC-4.items-missing", "%s is an array and must declare items", what)
		} else {
			f.Items = loadField(r, m.get("items"), what+".items", l.depth+1)
			if f.Items != nil {
				f.Items.Pos = m.at("items")
			}
		}
	case TypeObject:
		if !m.has("properties") {
			r.errorf(m.keyAt("type"), "SPEC-4.properties-missing", "%s is an object and must declare properties", what)
		} else {
			f.Properties = loadFields(r, m.get("properties"), what, l.depth+1)
			if len(m.get("properties").Content) == 0 {
				r.errorf(m.at("properties"), "SPEC-4.properties-empty", "%s must declare at least one property", what)
			}
		}
	}
	l.only("items", TypeArray)
	l.only("properties", TypeObject)
}

// enum loads the enum values, each checked against the field's constraints.
func (l *fieldLoader) enum() {
	r, m, f, what := l.r, l.m, l.f, l.what
	if !l.only("enum", TypeString, TypeInteger) {
		return
	}
	en := m.get("enum")
	if en.Kind != yaml.SequenceNode || len(en.Content) == 0 {
		r.errorf(posOf(en), "SPEC-4.enum-empty", "enum of %s must be a non-empty list", what)
		return
	}
	seen := map[any]bool{}
	var values []any
	for _, e := range en.Content {
		v, ok := value(r, f, e, what+" enum value")
		if !ok {
			continue
		}
		if seen[v] {
			r.errorf(posOf(e), "SPEC-4.enum-duplicate", "enum of %s lists %v twice", what, v)
			continue
		}
		seen[v] = true
		values = append(values, v)
		f.EnumPos = append(f.EnumPos, posOf(e))
	}
	f.Enum = values
}

// requiredAndDefault loads required and default: a field is required unless it has a
// default or says otherwise.
func (l *fieldLoader) requiredAndDefault() {
	r, m, f, what := l.r, l.m, l.f, l.what
	f.Required = true
	if m.has("default") {
		if v, ok := value(r, f, m.get("default"), what+" default"); ok {
			f.Default, f.HasDefault = v, true
			f.Required = false
		}
	}
	if req, ok := m.boolean("required"); ok {
		if req && m.has("default") {
			r.errorf(m.at("required"), "SPEC-4.required-with-default", "%s is required and has a default; a default makes it optional, so drop one of them", what)
		}
		f.Required = req
	}
}

// bound loads bound: a top-level string the platform fills from the principal, the
// session or the run.
func (l *fieldLoader) bound() {
	r, m, f, what := l.r, l.m, l.f, l.what
	src, ok := m.str("bound")
	if !ok {
		return
	}
	switch {
	case l.depth > 0:
		r.errorf(m.at("bound"), "SPEC-4.bound-nested", "%s: only a top-level argument can be bound", what)
	case !boundSource.MatchString(src):
		r.errorf(m.at("bound"), "SPEC-4.bound-source", "%s: bound source %q must be principal.id, principal.tenant, principal.claims.NAME, session.id or run.id", what, src)
	case f.Type != TypeString:
		r.errorf(m.at("type"), "SPEC-4.bound-type", "%s is bound to %s, a string: its type must be string, not %s", what, src, f.Type)
	case m.has("default") || m.has("required"):
		r.errorf(m.at("bound"), "SPEC-4.bound-default-or-required", "%s is bound: the platform always fills it, so it takes neither default nor required", what)
	default:
		f.Bound, f.Required = src, true
	}
}

// workspacePath loads workspace_path: a top-level string the pipeline resolves in the
// workspace before anything reads it.
func (l *fieldLoader) workspacePath() {
	r, m, f, what := l.r, l.m, l.f, l.what
	if wp, ok := m.boolean("workspace_path"); !ok || !wp {
		return
	}
	switch {
	case l.depth > 0:
		r.errorf(m.at("workspace_path"), "SPEC-4.workspace-path-nested", "%s: only a top-level argument can be a workspace path", what)
	case f.Type != TypeString:
		r.errorf(m.at("type"), "SPEC-4.workspace-path-type", "%s is a workspace path, a string: its type must be string, not %s", what, f.Type)
	case f.Bound != "":
		r.errorf(m.at("workspace_path"), "SPEC-4.workspace-path-bound", "%s is bound to %s: the platform fills it, so it cannot also be a workspace path the pipeline resolves", what, f.Bound)
	default:
		f.WorkspacePath = true
	}
}

func nonNegative(r reporter, m *mapping, key, what string, present bool) *int64 {
	if !present {
		return nil
	}
	v, ok := m.integer(key)
	if !ok {
		return nil
	}
	if v < 0 {
		r.errorf(m.at(key), "SPEC-4.negative", "%s of %s must not be negative, found %d", key, what, v)
		return nil
	}
	return &v
}

// value decodes n as a value of field f's type and checks it against f's constraints
// (used for defaults and enum values).
func value(r reporter, f *Field, n *yaml.Node, what string) (any, bool) {
	var v any
	ok := false
	switch f.Type {
	case TypeString:
		v, ok = stringValue(r, f, n, what)
	case TypeInteger:
		v, ok = integerValue(r, f, n, what)
	case TypeNumber:
		v, ok = numberValue(r, f, n, what)
	case TypeBoolean:
		var b bool
		if n.Kind == yaml.ScalarNode && n.Tag == "!!bool" && n.Decode(&b) == nil {
			return b, true
		}
		return badValue(r, f, n, what)
	case TypeArray:
		v, ok = arrayValue(r, f, n, what)
	case TypeObject:
		v, ok = objectValue(r, f, n, what)
	default:
		return badValue(r, f, n, what)
	}
	if !ok {
		return nil, false
	}
	return v, true
}

// badValue reports n as not of f's type.
func badValue(r reporter, f *Field, n *yaml.Node, what string) (any, bool) {
	r.errorf(posOf(n), "SPEC-4.value-type", "%s must be of type %s, found %s", what, f.Type, kindName(n))
	return nil, false
}

func stringValue(r reporter, f *Field, n *yaml.Node, what string) (any, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return badValue(r, f, n, what)
	}
	s := n.Value
	switch {
	case f.MaxLength != nil && int64(len([]rune(s))) > *f.MaxLength:
		r.errorf(posOf(n), "SPEC-4.value-too-long", "%s is longer than max_length %d", what, *f.MaxLength)
	case f.MinLength != nil && int64(len([]rune(s))) < *f.MinLength:
		r.errorf(posOf(n), "SPEC-4.value-too-short", "%s is shorter than min_length %d", what, *f.MinLength)
	case f.Pattern != "" && !regexp.MustCompile(f.Pattern).MatchString(s):
		r.errorf(posOf(n), "SPEC-4.value-pattern", "%s does not match pattern %q", what, f.Pattern)
	case f.Enum != nil && !slices.Contains(f.Enum, any(s)):
		r.errorf(posOf(n), "SPEC-4.value-not-in-enum", "%s %q is not one of the enum values", what, s)
	default:
		return s, true
	}
	return nil, false
}

func integerValue(r reporter, f *Field, n *yaml.Node, what string) (any, bool) {
	var i int64
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&i) != nil {
		return badValue(r, f, n, what)
	}
	if !inRange(r, f, float64(i), n, what) {
		return nil, false
	}
	if f.Enum != nil && !slices.Contains(f.Enum, any(i)) {
		r.errorf(posOf(n), "SPEC-4.value-not-in-enum", "%s %d is not one of the enum values", what, i)
		return nil, false
	}
	return i, true
}

func numberValue(r reporter, f *Field, n *yaml.Node, what string) (any, bool) {
	var x float64
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") || n.Decode(&x) != nil {
		return badValue(r, f, n, what)
	}
	if math.IsInf(x, 0) || math.IsNaN(x) {
		r.errorf(posOf(n), "SPEC-4.non-finite", "%s must be a finite number, found %s (JSON has no infinities or NaN)", what, n.Value)
		return nil, false
	}
	if !inRange(r, f, x, n, what) {
		return nil, false
	}
	return x, true
}

func arrayValue(r reporter, f *Field, n *yaml.Node, what string) (any, bool) {
	if n.Kind != yaml.SequenceNode || f.Items == nil {
		return badValue(r, f, n, what)
	}
	out := []any{}
	for _, e := range n.Content {
		v, ok := value(r, f.Items, e, what+" item")
		if !ok {
			return nil, false
		}
		out = append(out, v)
	}
	if f.MaxItems != nil && int64(len(out)) > *f.MaxItems || f.MinItems != nil && int64(len(out)) < *f.MinItems {
		r.errorf(posOf(n), "SPEC-4.value-items-count", "%s has %d items, outside min_items/max_items", what, len(out))
		return nil, false
	}
	return out, true
}

func objectValue(r reporter, f *Field, n *yaml.Node, what string) (any, bool) {
	m := r.asMapping(n, what, fieldNames(f.Properties)...)
	if m == nil {
		return nil, false
	}
	out := map[string]any{}
	ok := true
	for _, p := range f.Properties {
		if !m.has(p.Name) {
			if p.Required {
				r.errorf(posOf(n), "SPEC-4.value-missing-property", "%s is missing required property %q", what, p.Name)
				ok = false
			}
			continue
		}
		v, vok := value(r, p, m.get(p.Name), what+"."+p.Name)
		ok = ok && vok
		out[p.Name] = v
	}
	return out, ok
}

func fieldNames(fs []*Field) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

func inRange(r reporter, f *Field, x float64, n *yaml.Node, what string) bool {
	if f.Min != nil && x < *f.Min || f.Max != nil && x > *f.Max {
		r.errorf(posOf(n), "SPEC-4.value-out-of-range", "%s %v is outside min/max", what, n.Value)
		return false
	}
	return true
}
