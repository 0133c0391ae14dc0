package runtime

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/toolgen/toolgen/runtime/internal/fastschema"
	"github.com/toolgen/toolgen/runtime/store"

	"github.com/toolgen/toolgen/internal/names"
)

// Registry holds every tool the pipeline can run and the catalog each session pinned.
//
// A session pins the catalog it was first shown — names plus schema_sha256 — and keeps
// it (ADR-0021 decision 9, MCP-7): a tool removed later stays advertised to that session
// and answers unavailable/tool_withdrawn; a tool whose definition changed keeps its
// pinned definition and answers unavailable/tool_changed; new sessions see the new
// catalog. Pins live in memory for the life of the process.
type Registry struct {
	mu       sync.RWMutex
	tools    map[string]*registered
	sessions map[string]Catalog
}

type registered struct {
	tool Tool
	spec *ToolSpec
	// bound maps a builtin's bound arguments to their sources (SPEC-4; nil for none
	// and always for adapters' tools, whose schemas come from elsewhere).
	bound  map[string]string
	input  *schemaCheck // nil: no schema
	output *schemaCheck
	exprs  toolExprs
	// argTypes types the decoded arguments for CEL as the spec declares them
	// (integers stay int64, numbers float64), so run-time evaluation agrees with the
	// build-time check.
	argTypes *ArgTypes
}

// toolExprs are a spec's CEL expressions, compiled once at registration.
type toolExprs struct {
	idempotentWhen *BoolExpr
	approvalWhen   *BoolExpr
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{tools: map[string]*registered{}, sessions: map[string]Catalog{}}
}

// Register adds builtin tools. It refuses, at startup as toolgen does at build time, a
// name outside the grammar and a name in a reserved adapter domain (RT-15), so a
// hand-written registration cannot shadow or impersonate an adapter's tool.
func (r *Registry) Register(tools ...Tool) error {
	for _, t := range tools {
		if err := r.add(t, false); err != nil {
			return err
		}
	}
	return nil
}

// RegisterAdapter adds a tool supplied by an adapter (MCP, device, sandbox): its name
// must be in the adapter's reserved domain, and its output trust is forced to
// external_untrusted whatever the spec says (RT-6).
func (r *Registry) RegisterAdapter(domain string, t Tool) error {
	if !slices.Contains(names.ReservedDomains, domain) {
		return fmt.Errorf("runtime: %q is not an adapter domain", domain)
	}
	if t == nil || t.Spec() == nil {
		return fmt.Errorf("runtime: register: nil tool or spec")
	}
	if names.Domain(t.Spec().Name) != domain {
		return fmt.Errorf("runtime: register %s: an adapter tool of %s must be named %s.*", t.Spec().Name, domain, domain)
	}
	t.Spec().OutputTrust = TrustExternalUntrusted
	return r.add(t, true)
}

func (r *Registry) add(t Tool, adapter bool) error {
	if t == nil || t.Spec() == nil {
		return fmt.Errorf("runtime: register: nil tool or spec")
	}
	spec := t.Spec()
	if why := names.Check(spec.Name); why != "" {
		return fmt.Errorf("runtime: register: tool name %q %s", spec.Name, why)
	}
	if !adapter && names.Reserved(spec.Name) {
		return fmt.Errorf("runtime: register %s: domain %q is reserved for adapters (%v)", spec.Name, names.Domain(spec.Name), names.ReservedDomains)
	}
	reg := &registered{tool: t, spec: spec}
	var err error
	if reg.input, err = resolveSchema(spec.InputSchema); err != nil {
		return fmt.Errorf("runtime: register %s: input schema: %w", spec.Name, err)
	}
	if reg.output, err = resolveSchema(spec.OutputSchema); err != nil {
		return fmt.Errorf("runtime: register %s: output schema: %w", spec.Name, err)
	}
	if reg.argTypes, err = NewArgTypes(spec.InputSchema); err != nil {
		return fmt.Errorf("runtime: register %s: argument types: %w", spec.Name, err)
	}
	if !adapter {
		if reg.bound, err = boundArgs(spec.InputSchema); err != nil {
			return fmt.Errorf("runtime: register %s: bound arguments: %w", spec.Name, err)
		}
	}
	if spec.IdempotentWhen != "" {
		if reg.exprs.idempotentWhen, err = CompileToolExpr(spec.IdempotentWhen); err != nil {
			return fmt.Errorf("runtime: register %s: idempotent_when: %w", spec.Name, err)
		}
	}
	if spec.ApprovalWhen != "" {
		if reg.exprs.approvalWhen, err = CompileToolExpr(spec.ApprovalWhen); err != nil {
			return fmt.Errorf("runtime: register %s: approval_when: %w", spec.Name, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[spec.Name]; dup {
		return fmt.Errorf("runtime: register: tool %s is registered twice", spec.Name)
	}
	r.tools[spec.Name] = reg
	return nil
}

// Replace swaps the definition of a registered tool (an upstream catalog change).
// Sessions that pinned the old definition keep refusing it as tool_changed.
func (r *Registry) Replace(t Tool) error {
	if names.Reserved(t.Spec().Name) {
		t.Spec().OutputTrust = TrustExternalUntrusted // as RegisterAdapter does (RT-6)
	}
	r.mu.Lock()
	delete(r.tools, t.Spec().Name)
	r.mu.Unlock()
	return r.add(t, names.Reserved(t.Spec().Name))
}

// Withdraw removes a tool. Sessions that pinned it see tool_withdrawn.
func (r *Registry) Withdraw(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.tools, name)
}

func resolveSchema(raw json.RawMessage) (*schemaCheck, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	ref, err := s.Resolve(nil)
	if err != nil {
		return nil, err
	}
	// A schema outside the fast subset (an upstream server's $ref, oneOf, ...) is
	// checked by jsonschema-go alone.
	fast, _ := fastschema.Compile(ref.Schema())
	return &schemaCheck{ref: ref, fast: fast}, nil
}

// schemaCheck validates documents against one schema. jsonschema-go is the judge;
// fastschema only proves, without allocating, that a document is valid, which is
// what almost every call's arguments and result are. Whenever it cannot, the
// document is decoded and jsonschema-go decides and explains.
type schemaCheck struct {
	ref  *jsonschema.Resolved
	fast *fastschema.Validator // nil: outside the fast subset
}

// validate checks the JSON document doc.
func (sc *schemaCheck) validate(doc []byte) error {
	if sc.fast != nil && sc.fast.Valid(doc) {
		return nil
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return err
	}
	return sc.ref.Validate(v)
}

// Catalog is a session's pinned view: each tool's definition as the session first saw
// it (its name and schema_sha256 are what is pinned).
type Catalog map[string]*ToolSpec

// Pin returns the catalog of session, pinning the current one on first use.
func (r *Registry) Pin(sessionID string) Catalog {
	r.mu.RLock()
	c, ok := r.sessions[sessionID]
	r.mu.RUnlock()
	if ok {
		return c
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.sessions[sessionID]; ok {
		return c
	}
	c = make(Catalog, len(r.tools))
	for name, reg := range r.tools {
		c[name] = reg.spec
	}
	r.sessions[sessionID] = c
	return c
}

// ForceEpoch re-pins a running session to the current catalog: the one explicit way
// an operator changes what a session sees (MCP-7). Callers log and audit it.
func (r *Registry) ForceEpoch(sessionID string) Catalog {
	r.mu.Lock()
	delete(r.sessions, sessionID)
	r.mu.Unlock()
	return r.Pin(sessionID)
}

// ForceEpochServer re-pins, in every running session, the tools whose names start with
// prefix ("mcp.<server>.") to the current catalog: new tools appear, withdrawn ones
// leave, changed ones take their new definition; every other pin is untouched. It is
// the operator's forced epoch for one server (MCP-7); callers log and audit it. It
// returns the number of sessions re-pinned.
func (r *Registry) ForceEpochServer(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, old := range r.sessions {
		c := make(Catalog, len(old))
		for name, spec := range old {
			if !strings.HasPrefix(name, prefix) {
				c[name] = spec
			}
		}
		for name, reg := range r.tools {
			if strings.HasPrefix(name, prefix) {
				c[name] = reg.spec
			}
		}
		r.sessions[id] = c // a new map: a Catalog handed out is never mutated
	}
	return len(r.sessions)
}

// Current lists the registered definitions, sorted by name, without pinning anything:
// what a new session would see (an operator's listing, the scopes a local principal
// needs).
func (r *Registry) Current() []*ToolSpec {
	r.mu.RLock()
	out := make([]*ToolSpec, 0, len(r.tools))
	for _, reg := range r.tools {
		out = append(out, reg.spec)
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b *ToolSpec) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ToolRefs lists every registered definition as the store names it — name, version
// and schema_sha256 — sorted by name: the rows recovery on this worker may claim
// (LIFE-1). Empty when nothing is registered.
func (r *Registry) ToolRefs() []store.ToolRef {
	r.mu.RLock()
	out := make([]store.ToolRef, 0, len(r.tools))
	for _, reg := range r.tools {
		out = append(out, store.ToolRef{Name: reg.spec.Name, Version: reg.spec.Version, SHA256: reg.spec.SchemaSHA256})
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b store.ToolRef) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Tools lists the definitions a session sees, sorted by name: its pinned catalog,
// including withdrawn and changed tools, which stay advertised as pinned.
func (r *Registry) Tools(sessionID string) []*ToolSpec {
	c := r.Pin(sessionID)
	out := make([]*ToolSpec, 0, len(c))
	for _, spec := range c {
		out = append(out, spec)
	}
	slices.SortFunc(out, func(a, b *ToolSpec) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// resolve is step 1: the tool a session may call under name, or the reason it may not.
func (r *Registry) resolve(sessionID, name string) (*registered, ReasonCode) {
	pinned, ok := r.Pin(sessionID)[name]
	if !ok {
		return nil, ReasonUnknownTool
	}
	r.mu.RLock()
	reg, ok := r.tools[name]
	r.mu.RUnlock()
	switch {
	case !ok:
		return nil, ReasonToolWithdrawn
	case reg.spec.SchemaSHA256 != pinned.SchemaSHA256:
		return nil, ReasonToolChanged
	}
	return reg, ""
}

// knows reports whether name is registered, or pinned in session's catalog (which only
// the registry fills): a name from a bounded set, fit for a metric label or a span.
func (r *Registry) knows(sessionID, name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if _, ok := r.tools[name]; ok {
		return true
	}
	_, ok := r.sessions[sessionID][name]
	return ok
}

// lookup finds a registered tool by name without a session (recovery re-executes a
// recorded call by its tool name and version).
func (r *Registry) lookup(name string) (*registered, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	reg, ok := r.tools[name]
	return reg, ok
}
