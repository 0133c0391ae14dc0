package spec

import (
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/toolgen/toolgen/model"
)

// Tree is a loaded spec root: every tool, server, protocol and the policy, with the
// positions of what they say. Files are keyed by their path relative to the root,
// slash-separated (tools/workspace.read_text.yaml).
type Tree struct {
	// Root is the directory as the caller named it; diagnostics are printed relative to it.
	Root      string
	Tools     []*Tool     // the tree's own tools/*.yaml, sorted by name: what codegen covers
	Servers   []*Server   // sorted by server_id
	Protocols []*Protocol // sorted by name
	Devices   []*Device   // sorted by device_id
	Policy    *Policy     // nil when policy.yaml is absent
	// Principals is principals.yaml, nil when absent (ID-1).
	Principals *Principals
	// Notifications is notifications.yaml, nil when absent (UI-1).
	Notifications *Notifications
	// ReferencedBuiltins are the embedded builtin specs ([Builtins]) that the tree's
	// protocols (mode tools, exclusive_tools) and policy rules name, sorted by name,
	// each once. A tree shadows a builtin with a tools/<name>.yaml of its own, which is
	// then in Tools and not here. The references were checked against these specs
	// (SPEC-8, WF-2, POL-2) but the tools are not the tree's: codegen and catalog.json
	// cover Tools only. A host serving the tree registers an implementation of each,
	// whose definition hash must be the spec's SchemaSHA256 (HOST-3).
	ReferencedBuiltins []*Tool

	scope *toolScope // what references resolve against; nil for a tree not made by a load
}

// ToolOrBuiltin returns the tool named name as the tree's references see it: the tree's
// own, or else the embedded builtin of that name unless the tree shadows it; nil when
// there is neither.
func (t *Tree) ToolOrBuiltin(name string) *Tool {
	if t.scope != nil {
		return t.scope.lookup(name)
	}
	if x := t.Tool(name); x != nil {
		return x
	}
	return Builtin(name)
}

// KnownTools returns every tool the tree's references may name: its own Tools and the
// embedded builtins it does not shadow, sorted by name. WF-2's exclusive set is taken
// over them ([Protocol.ExclusiveSet]).
func (t *Tree) KnownTools() []*Tool {
	if t.scope != nil {
		return t.scope.all(t.Tools)
	}
	out := slices.Clone(t.Tools)
	for _, b := range Builtins() {
		if t.Tool(b.Name) == nil {
			out = append(out, b)
		}
	}
	slices.SortStableFunc(out, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Tool returns the tree's own tool (one of Tools) named name, or nil; [Tree.ToolOrBuiltin]
// also finds the builtins.
func (t *Tree) Tool(name string) *Tool {
	for _, x := range t.Tools {
		if x.Name == name {
			return x
		}
	}
	return nil
}

// Device returns the device with the given id, or nil.
func (t *Tree) Device(id string) *Device {
	for _, d := range t.Devices {
		if d.DeviceID == id {
			return d
		}
	}
	return nil
}

// Server returns the server with the given id, or nil.
func (t *Tree) Server(id string) *Server {
	for _, s := range t.Servers {
		if s.ServerID == id {
			return s
		}
	}
	return nil
}

// Tool is one tools/*.yaml spec (DESIGN.md section 3).
type Tool struct {
	File            string // path relative to the spec root
	Name            string
	Version         int
	Kind            string // action | control
	Description     string
	SideEffect      string // none | read | write
	Idempotency     string // effective class: idempotent when side_effect is none and it is unset
	IdempotentWhen  *Expr
	Risk            string
	RequiredScopes  []Ref
	OutputTrust     string // default tool
	ConfersApproval bool
	ParallelSafe    bool
	Suspends        bool
	Timeout         time.Duration // 0: the runtime's default
	ApprovalWhen    *Expr
	Args            []*Field // in declaration order
	Result          []*Field // in declaration order
	OutputMaxBytes  int      // default DefaultOutputMaxBytes
	// Builtin is set on the embedded builtin specs ([Builtins]); File is then their
	// path in this module (tools/<name>.yaml), not a file of the tree.
	Builtin bool
	// Acknowledge lists the `toolgen diff` rules a reviewer signed off for this change
	// of the tool (see spec/specdiff). It is review metadata: it changes neither the
	// catalog, nor the definition hash, nor the generated code.
	Acknowledge []Ref

	Positions // of the document's keys
}

// DefaultOutputMaxBytes is output.max_bytes when a spec does not set it.
const DefaultOutputMaxBytes = 65536

// Field types (SPEC-4).
const (
	TypeString  = "string"
	TypeInteger = "integer"
	TypeNumber  = "number"
	TypeBoolean = "boolean"
	TypeArray   = "array"
	TypeObject  = "object"
)

// Field is one argument or result field, or an array's items.
type Field struct {
	Name        string // empty for an array's items
	Pos         Pos    // the field's key (or the items value)
	Type        string
	Description string
	Enum        []any // string or int64 values
	EnumPos     []Pos // where each enum value is written
	Default     any   // string, int64, float64, bool, []any or map[string]any; nil when absent
	HasDefault  bool
	Min, Max    *float64
	MinLength   *int64
	MaxLength   *int64
	MinItems    *int64
	MaxItems    *int64
	Pattern     string
	Required    bool // explicit required, or no default
	// Bound is the source a bound argument is filled from (principal.id, ...): the
	// caller never supplies it and models never see it (SPEC-4).
	Bound string
	// WorkspacePath marks a top-level string argument that names a path in the call's
	// workspace: the pipeline resolves its symlinks before the key, the CEL conditions
	// and the policy see it, and the tool acts on the resolved path (SEC-1).
	WorkspacePath bool
	Items         *Field   // arrays
	Properties    []*Field // objects, in declaration order

	m *mapping
}

// At returns the position of the value of one of the field's keys.
func (f *Field) At(key string) Pos {
	if f.m == nil {
		return f.Pos
	}
	return f.m.at(key)
}

// Expr is a CEL expression written in a spec, with what is needed to map a position
// inside the expression back to the YAML file.
type Expr struct {
	Source string
	Pos    Pos        // the YAML scalar holding the expression
	Style  yaml.Style // plain, quoted, literal or folded: decides how columns map
	lines  []string   // the file's lines, for block scalars
}

// Server is one servers/*.yaml classification (SPEC-7).
type Server struct {
	File         string
	ServerID     string
	ConfiguredBy string // operator | tenant
	// Tenant is the tenant a tenant-configured server belongs to: only its principals
	// see and call the server's tools (ID-2). Empty for an operator's server.
	Tenant string
	HTTP   *HTTPTransport
	Stdio  *StdioTransport
	// Classification, with every missing field already set to its most restrictive value.
	SideEffect     string
	Risk           string
	Idempotency    string
	RequiredScopes []Ref
	// Defaulted lists the classification fields the file left out, sorted.
	Defaulted []string
	Resources string // expose | hide (default hide)
	Prompts   string // expose | hide (default hide)

	Positions // of the document's keys
}

// UnclassifiedScope is the scope an unclassified server's tools require: no principal
// may be granted it, so such a tool cannot run until the operator classifies the server.
const UnclassifiedScope = model.UnclassifiedScope

// HTTPTransport is a Streamable HTTP server.
type HTTPTransport struct {
	URL    string
	URLPos Pos
}

// StdioTransport is a subprocess server (operator only, MCP-4).
type StdioTransport struct {
	Command string
	Args    []string
	Env     map[string]string
}

// Protocol is one protocols/*.yaml file (SPEC-8, ADR 017).
type Protocol struct {
	File           string
	Name           string
	InitialMode    Ref
	Modes          []*Mode // in declaration order
	ExclusiveTools []Ref   // as declared; see ExclusiveSet for the effective set (WF-2)

	Positions // of the document's keys
}

// Mode is one mode of a protocol and the tools it holds.
type Mode struct {
	Name  string
	Pos   Pos // the mode's key
	Tools []Ref

	Positions // of the mode's keys (tools, description)
}

// DefaultExclusiveTools are exclusive in every protocol, whatever it declares (WF-2).
var DefaultExclusiveTools = []string{"review.approve", "review.merge"}

// Policy is policy.yaml (POL-2).
type Policy struct {
	File        string
	EgressAllow []Ref
	Rules       []*Rule

	Positions // of the document's keys
}

// Rule is one operator policy rule. Exactly one of its conditions is set.
type Rule struct {
	Name  string
	Pos   Pos
	Tools []Ref
	// Effect is approve, deny or allow; When is its condition.
	Effect string
	When   *Expr
	// ArgsTool is the tool whose arguments When was checked with as typed args (the one
	// tool the rule names, the tree's own or a builtin); nil when args is
	// map(string, dyn) in it. The runtime types args from this tool's InputSchema too.
	ArgsTool *Tool

	Positions // of the rule's keys
}
