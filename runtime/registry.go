package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/toolgen/toolgen/runtime/internal/fastschema"
	"github.com/toolgen/toolgen/runtime/store"

	"github.com/toolgen/toolgen/internal/lru"
	"github.com/toolgen/toolgen/internal/names"
)

// Registry holds every tool the pipeline can run and the catalog each session pinned.
//
// A session pins the catalog it was first shown — names plus schema_sha256 — and keeps
// it (ADR-0021 decision 9, MCP-7): a tool removed later stays advertised to that session
// and answers unavailable/tool_withdrawn; a tool whose definition changed keeps its
// pinned definition and answers unavailable/tool_changed; new sessions see the new
// catalog. Pins are keyed by (tenant, session) and persisted through a [PinStore]
// (see [Registry.Pin]); what is kept in memory per session is bounded.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]*registered
	// retired holds definitions replaced or withdrawn in this process, and the
	// placeholders of pins no process definition matches (see Pin), by definition.
	retired *lru.Cache[defKey, *ToolSpec]
	// pins persists catalogs; cache holds some of them. Without a PinStore, memory
	// holds every catalog.
	pins   PinStore
	cache  *lru.Cache[SessionKey, Catalog]
	memory map[SessionKey]Catalog
	// epoch counts forced epochs, so a pin read from the store while one ran is read again.
	epoch uint64
	// currents caches each tenant's current catalog and its fingerprint (current), which
	// every session minted or pinned anew takes: built once per change of the tools or
	// the epoch, not per request. changes counts those changes (changedLocked), so that
	// a catalog built while one happened is not cached.
	currents map[string]MintedCatalog
	changes  uint64
}

type registered struct {
	tool Tool
	spec *ToolSpec
	// adapter: registered with RegisterAdapter (a reserved domain's tool).
	adapter bool
	// bound maps a builtin's bound arguments to their sources (SPEC-4; nil for none
	// and always for adapters' tools, whose schemas come from elsewhere).
	bound map[string]string
	// workspacePaths are the builtin's workspace-path arguments, resolved at step 2
	// (SEC-1; nil for none and always for adapters' tools).
	workspacePaths []string
	input          *schemaCheck // nil: no schema
	output         *schemaCheck
	exprs          toolExprs
	// argTypes is the declaration of the arguments to CEL, from the input schema: the
	// type of args in the tool's expressions (not an adapter's) and the CEL values of
	// the decoded arguments (integers int64, numbers float64), as toolgen checked them.
	argTypes *ArgTypes
}

// toolExprs are a spec's CEL expressions, compiled once at registration.
type toolExprs struct {
	idempotentWhen *BoolExpr
	approvalWhen   *BoolExpr
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{tools: map[string]*registered{}, memory: map[SessionKey]Catalog{},
		retired: lru.New[defKey, *ToolSpec](MaxRetiredDefinitions), currents: map[string]MintedCatalog{}}
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
	reg, err := compileTool(t, adapter)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[reg.spec.Name]; dup {
		return fmt.Errorf("runtime: register: tool %s is registered twice", reg.spec.Name)
	}
	r.tools[reg.spec.Name] = reg
	r.changedLocked()
	return nil
}

// compileTool checks t's name and compiles its schemas and expressions: everything
// that can refuse a tool, done before the registry is touched.
func compileTool(t Tool, adapter bool) (*registered, error) {
	if t == nil || t.Spec() == nil {
		return nil, fmt.Errorf("runtime: register: nil tool or spec")
	}
	spec := t.Spec()
	if why := names.Check(spec.Name); why != "" {
		return nil, fmt.Errorf("runtime: register: tool name %q %s", spec.Name, why)
	}
	if !adapter && names.Reserved(spec.Name) {
		return nil, fmt.Errorf("runtime: register %s: domain %q is reserved for adapters (%v)", spec.Name, names.Domain(spec.Name), names.ReservedDomains)
	}
	reg := &registered{tool: t, spec: spec, adapter: adapter}
	var err error
	if reg.input, err = resolveSchema(spec.InputSchema); err != nil {
		return nil, fmt.Errorf("runtime: register %s: input schema: %w", spec.Name, err)
	}
	if reg.output, err = resolveSchema(spec.OutputSchema); err != nil {
		return nil, fmt.Errorf("runtime: register %s: output schema: %w", spec.Name, err)
	}
	if reg.argTypes, err = newArgTypes(spec.Name, spec.InputSchema); err != nil {
		return nil, fmt.Errorf("runtime: register %s: argument types: %w", spec.Name, err)
	}
	if !adapter {
		if reg.bound, err = boundArgs(spec.InputSchema); err != nil {
			return nil, fmt.Errorf("runtime: register %s: bound arguments: %w", spec.Name, err)
		}
		if reg.workspacePaths, err = workspacePathArgs(spec.InputSchema); err != nil {
			return nil, fmt.Errorf("runtime: register %s: workspace paths: %w", spec.Name, err)
		}
	}
	// args is typed from the input schema as toolgen declared it when it checked the
	// expressions; an adapter's schema is the upstream's, which toolgen never saw.
	exprArgs := reg.argTypes
	if adapter {
		exprArgs = nil
	}
	if spec.IdempotentWhen != "" {
		if reg.exprs.idempotentWhen, err = CompileToolExpr(spec.IdempotentWhen, exprArgs); err != nil {
			return nil, fmt.Errorf("runtime: register %s: idempotent_when: %w", spec.Name, err)
		}
	}
	if spec.ApprovalWhen != "" {
		if reg.exprs.approvalWhen, err = CompileToolExpr(spec.ApprovalWhen, exprArgs); err != nil {
			return nil, fmt.Errorf("runtime: register %s: approval_when: %w", spec.Name, err)
		}
	}
	return reg, nil
}

// Replace swaps the definition of a registered tool (an upstream catalog change).
// Sessions that pinned the old definition keep refusing it as tool_changed. A new
// definition that does not compile is refused before anything changes: the registered
// one stays, and the caller decides whether to withdraw it.
func (r *Registry) Replace(t Tool) error {
	if names.Reserved(t.Spec().Name) {
		t.Spec().OutputTrust = TrustExternalUntrusted // as RegisterAdapter does (RT-6)
	}
	reg, err := compileTool(t, names.Reserved(t.Spec().Name))
	if err != nil {
		return err // the registered definition stays
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retire(r.tools[reg.spec.Name])
	r.tools[reg.spec.Name] = reg
	r.changedLocked()
	return nil
}

// Withdraw removes a tool. Sessions that pinned it see tool_withdrawn.
func (r *Registry) Withdraw(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retire(r.tools[name])
	delete(r.tools, name)
	r.changedLocked()
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
// it (its name and schema_sha256 are what is pinned). A Catalog handed out is never
// mutated.
type Catalog map[string]*ToolSpec

// SessionKey names a session: every session-keyed state is keyed by its tenant and
// its id (SES-1), so a session id another tenant also uses names another session.
type SessionKey struct {
	Tenant string
	ID     string
}

// PinStore persists pinned catalogs (store.Store satisfies it): a restarted or second
// process serves a session the catalog it pinned, and the memory a registry keeps per
// session is a bounded cache of it.
type PinStore interface {
	SessionPinsGet(ctx context.Context, tenant, sessionID string) ([]store.ToolPin, bool, error)
	SessionPinsCreate(ctx context.Context, tenant, sessionID string, pins []store.ToolPin) ([]store.ToolPin, error)
	SessionPinsForceEpoch(ctx context.Context, e store.PinEpoch) (int, error)
	SessionMint(ctx context.Context, tenant, sessionID string, pins []store.ToolPin) error
}

// Bounds of the memory a registry keeps (SEC-2).
const (
	// DefaultMaxCachedSessions bounds the pinned catalogs held in memory when pins are
	// persisted (about 1.5 KB each with thirty tools): past it the least recently used
	// are dropped and read back from the store when their session returns.
	DefaultMaxCachedSessions = 10000
	// MaxRetiredDefinitions bounds the definitions kept after an upstream replaced or
	// withdrew them, so that a session that pinned one is still shown it. A pin whose
	// definition is not (or no longer) known to this process — after a restart, on
	// another process, or past this bound — is shown as a placeholder (see
	// [Registry.Pin]).
	MaxRetiredDefinitions = 4096
	// maxCurrentCatalogs bounds the tenants whose current catalog is cached (current);
	// past it the cache starts over.
	maxCurrentCatalogs = 1024
)

// defKey names one definition of a tool.
type defKey struct{ name, sha string }

// PersistPins makes the registry keep pinned catalogs in ps, with at most maxCached
// of them in memory (DefaultMaxCachedSessions when maxCached <= 0). NewPipeline calls
// it with the pipeline's store for a registry that has no PinStore yet; call it
// yourself, before any session pins, to choose the bound. Without a PinStore (a
// registry used alone, in a test) every pin lives in memory for the life of the
// registry. It is an error once a session has pinned.
func (r *Registry) PersistPins(ps PinStore, maxCached int) error {
	if ps == nil {
		return errors.New("runtime: PersistPins needs a PinStore")
	}
	if maxCached <= 0 {
		maxCached = DefaultMaxCachedSessions
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.memory) > 0 || r.cache != nil && r.cache.Len() > 0 {
		return errors.New("runtime: PersistPins after sessions pinned: their pins would be lost")
	}
	r.pins, r.cache = ps, lru.New[SessionKey, Catalog](maxCached)
	return nil
}

// persistsPins reports whether a PinStore is attached.
func (r *Registry) persistsPins() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.pins != nil
}

// CachedSessions is the number of sessions whose pinned catalog is held in memory now.
func (r *Registry) CachedSessions() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.cache != nil {
		return r.cache.Len()
	}
	return len(r.memory)
}

// Pin returns the catalog of session k, pinning the current one on first use: the
// registered tools visible to k's tenant, by name and schema_sha256. With a PinStore
// the pin is written once, in the store (the first writer of any process wins), and
// read back from it by every process and after every restart, so a session sees one
// catalog wherever it is served; memory holds a bounded cache of catalogs, and
// dropping one changes nothing the session sees. A pinned definition is resolved to
// the registered tool of that name and hash, else to the definition this process
// retired (replaced or withdrawn) with that hash, else to a placeholder that names the
// tool, carries the pinned hash and says it is no longer served — never to another
// definition, so a changed description reaches no running session (MCP-7). Every call
// of a placeholder answers tool_changed or tool_withdrawn, as for the definition itself.
//
// A call that names no session (k.ID "") has nothing to pin to: it sees the current
// catalog of its tenant, and nothing is stored or kept for it.
func (r *Registry) Pin(ctx context.Context, k SessionKey) (Catalog, error) {
	if k.ID == "" {
		return r.current(k.Tenant).catalog, nil
	}
	for attempt := 0; ; attempt++ {
		r.mu.RLock()
		ps, epoch := r.pins, r.epoch
		var c Catalog
		ok := false
		if ps == nil {
			c, ok = r.memory[k]
		}
		r.mu.RUnlock()
		if ok {
			return c, nil
		}
		if ps == nil {
			return r.pinInMemory(k), nil
		}
		if c, ok := r.cache.Get(k); ok {
			return c, nil
		}
		pins, pinned, err := ps.SessionPinsGet(ctx, k.Tenant, k.ID)
		if err != nil {
			return nil, fmt.Errorf("runtime: read the pinned catalog of session %q: %w", k.ID, err)
		}
		if !pinned {
			if pins, err = ps.SessionPinsCreate(ctx, k.Tenant, k.ID, pinsOf(r.current(k.Tenant).catalog)); err != nil {
				return nil, fmt.Errorf("runtime: pin the catalog of session %q: %w", k.ID, err)
			}
		}
		c = r.catalogOf(pins)
		// The check and the insert are one step against a forced epoch, which takes
		// the write lock to re-pin the cache after writing the store: a catalog read
		// before the epoch's write either sees the epoch moved here, or is in the
		// cache when the epoch re-pins it.
		r.mu.RLock()
		if r.epoch != epoch && attempt < 3 {
			r.mu.RUnlock()
			continue
		}
		c = r.cache.AddIfAbsent(k, c)
		r.mu.RUnlock()
		return c, nil
	}
}

// A session minted for a request that named none (MCP-10, mcp/server) is pinned in
// memory only (MintCatalog, PinMinted), and written to the store when its id comes back
// (Mint): a client that never echoes its session costs the store nothing. The minted id
// carries a MAC over the fingerprint of the catalog it pinned, so any process can tell
// which catalog that was, as long as it is this process's copy or the current one.

// MintedCatalog is the catalog a minted session pins, and its Fingerprint, which the
// minted id's MAC covers.
type MintedCatalog struct {
	Fingerprint [sha256.Size]byte
	catalog     Catalog
	epoch       uint64
}

// MintCatalog is what a session minted now for tenant pins: its current catalog.
func (r *Registry) MintCatalog(tenant string) MintedCatalog { return r.current(tenant) }

// PinMinted pins k to m in this process's memory, and writes nothing: a forced epoch
// since MintCatalog makes it false and pin nothing (mint again). As in Pin, the check
// and the cache's insert hold the read lock, which a forced epoch's re-pin excludes.
func (r *Registry) PinMinted(k SessionKey, m MintedCatalog) bool {
	r.mu.RLock()
	ps, ok := r.pins, r.epoch == m.epoch
	if ok && ps != nil {
		r.cache.AddIfAbsent(k, m.catalog)
	}
	r.mu.RUnlock()
	if ok && ps == nil {
		r.mu.Lock()
		if ok = r.epoch == m.epoch; ok {
			r.memory[k] = m.catalog
		}
		r.mu.Unlock()
	}
	return ok
}

// MintFingerprints are the fingerprints a minted session k can have been minted with,
// as far as this process can tell: the catalog it holds for k, if any, then k's
// tenant's current one.
func (r *Registry) MintFingerprints(k SessionKey) [][sha256.Size]byte {
	var out [][sha256.Size]byte
	if c, ok := r.held(k); ok {
		out = append(out, fingerprint(c))
	}
	return append(out, r.current(k.Tenant).Fingerprint)
}

// held is the catalog this process holds for k, without reading the store.
func (r *Registry) held(k SessionKey) (Catalog, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.pins == nil {
		c, ok := r.memory[k]
		return c, ok
	}
	return r.cache.Get(k)
}

// ErrCatalogChanged: a minted session's catalog is neither held here nor the current
// one, so its pins cannot be known (Mint).
var ErrCatalogChanged = errors.New("runtime: the catalog changed since the session was minted")

// Mint writes minted session k, whose id proved fingerprint fp, to the PinStore:
// k.Tenant as its owner and the catalog with that fingerprint (the one this process
// holds for k, else the current one) as its pins, in one relaxed commit
// (store.Store.SessionMint), and keeps the catalog in memory. Use it only when the
// PinStore is where sessions' owners are kept (mcp/server does when its owners are the
// pipeline's store). It reports false, doing nothing, without a PinStore.
// ErrCatalogChanged if no catalog has fp; the store's ErrConflict (wrapped) if it knows
// k.ID already.
func (r *Registry) Mint(ctx context.Context, k SessionKey, fp [sha256.Size]byte) (bool, error) {
	r.mu.RLock()
	ps, epoch := r.pins, r.epoch
	r.mu.RUnlock()
	if ps == nil || k.ID == "" {
		return false, nil
	}
	c, ok := r.held(k)
	if !ok || fingerprint(c) != fp {
		m := r.current(k.Tenant)
		if m.Fingerprint != fp {
			return false, ErrCatalogChanged
		}
		c = m.catalog
	}
	if err := ps.SessionMint(ctx, k.Tenant, k.ID, pinsOf(c)); err != nil {
		return false, fmt.Errorf("runtime: record minted session %q: %w", k.ID, err)
	}
	// As in Pin: after a forced epoch in between, the session's next Pin reads its
	// catalog back from the store instead.
	r.mu.RLock()
	if r.epoch == epoch {
		r.cache.Add(k, c)
	}
	r.mu.RUnlock()
	return true, nil
}

// pinsOf is c's pins.
func pinsOf(c Catalog) []store.ToolPin {
	pins := make([]store.ToolPin, 0, len(c))
	for name, spec := range c {
		pins = append(pins, store.ToolPin{Tool: name, SHA256: spec.SchemaSHA256})
	}
	return pins
}

// fingerprint identifies the pins of c: its tools' names and definition hashes.
func fingerprint(c Catalog) [sha256.Size]byte {
	h := sha256.New()
	for _, p := range store.SortedPins(pinsOf(c)) {
		h.Write([]byte(p.Tool))
		h.Write([]byte{0})
		h.Write([]byte(p.SHA256))
		h.Write([]byte{'\n'})
	}
	var fp [sha256.Size]byte
	h.Sum(fp[:0])
	return fp
}

// pinInMemory pins k's catalog without a PinStore.
func (r *Registry) pinInMemory(k SessionKey) Catalog {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.memory[k]; ok {
		return c
	}
	c := r.currentLocked(k.Tenant)
	r.memory[k] = c
	return c
}

// current is what a new session of tenant pins, and its fingerprint. Every minted
// session asks for it (a 2026-07-28 request that echoes none mints one), so it is
// built once per change of the tools or the epoch and shared: a Catalog handed out is
// never mutated.
func (r *Registry) current(tenant string) MintedCatalog {
	r.mu.RLock()
	if m, ok := r.currents[tenant]; ok {
		r.mu.RUnlock()
		return m
	}
	c, epoch, changes := r.currentLocked(tenant), r.epoch, r.changes
	r.mu.RUnlock()
	m := MintedCatalog{Fingerprint: fingerprint(c), catalog: c, epoch: epoch}
	r.mu.Lock()
	if r.changes == changes {
		if len(r.currents) >= maxCurrentCatalogs {
			clear(r.currents)
		}
		r.currents[tenant] = m
	}
	r.mu.Unlock()
	return m
}

// changedLocked records a change of the tools or the epoch: the current catalogs are
// built anew.
func (r *Registry) changedLocked() {
	r.changes++
	clear(r.currents)
}

func (r *Registry) currentLocked(tenant string) Catalog {
	c := make(Catalog, len(r.tools))
	for name, reg := range r.tools {
		if reg.spec.VisibleTo(tenant) {
			c[name] = reg.spec
		}
	}
	return c
}

// catalogOf resolves stored pins to definitions (see Pin).
func (r *Registry) catalogOf(pins []store.ToolPin) Catalog {
	c := make(Catalog, len(pins))
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, p := range pins {
		if reg, ok := r.tools[p.Tool]; ok && reg.spec.SchemaSHA256 == p.SHA256 {
			c[p.Tool] = reg.spec
			continue
		}
		k := defKey{p.Tool, p.SHA256}
		spec, ok := r.retired.Get(k)
		if !ok {
			// One placeholder per definition, so that caches keyed by the spec (the
			// MCP server's wire forms) stay bounded by definitions, not by reloads.
			spec = r.retired.AddIfAbsent(k, placeholder(p))
		}
		c[p.Tool] = spec
	}
	return c
}

// placeholder stands for a pinned definition this process does not know: it names
// the tool and its pinned hash, describes nothing the tool's provider wrote, and is
// classified at the most restrictive values. It is never executed: resolve refuses it
// as tool_changed (another definition is registered) or tool_withdrawn (none is).
func placeholder(p store.ToolPin) *ToolSpec {
	return &ToolSpec{
		Name: p.Tool, Kind: KindAction, SchemaSHA256: p.SHA256,
		Description: "The definition of this tool that this session pinned is no longer served: " +
			"calls are refused (tool_changed or tool_withdrawn). Start a new session to see the current catalog.",
		SideEffect: SideEffectWrite, Idempotency: NonIdempotent, Risk: RiskCritical,
		OutputTrust: TrustExternalUntrusted,
	}
}

// retire keeps a definition that is being replaced or withdrawn, for the sessions
// that pinned it. Call with r.mu held.
func (r *Registry) retire(reg *registered) {
	if reg != nil {
		r.retired.Add(defKey{reg.spec.Name, reg.spec.SchemaSHA256}, reg.spec)
	}
}

// ForceEpochServer re-pins, in every session, the tools whose names start with prefix
// ("mcp.<server>.") to the current catalog: new tools appear, withdrawn ones leave,
// changed ones take their new definition; every other pin is untouched. It is the
// operator's forced epoch for one server (MCP-7); callers log and audit it. With a
// PinStore it rewrites the pins of every session on the store (each serving process
// applies the same epoch, to the same effect) and the catalogs held in memory; it
// returns the number of sessions re-pinned.
func (r *Registry) ForceEpochServer(ctx context.Context, prefix string) (int, error) {
	r.mu.RLock()
	ps := r.pins
	var pins []store.ToolPin
	tenant, mixed := "", false
	for name, reg := range r.tools {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		pins = append(pins, store.ToolPin{Tool: name, SHA256: reg.spec.SchemaSHA256})
		switch {
		case len(pins) == 1:
			tenant = reg.spec.Tenant
		case tenant != reg.spec.Tenant:
			mixed = true
		}
	}
	r.mu.RUnlock()
	if mixed {
		tenant = "" // every session gets the pins; VisibleTo still hides what is not its tenant's
	}
	n := 0
	if ps != nil {
		// The store first: a session read from it after this point is re-pinned already,
		// and one read before is in the cache when the cache is re-pinned below (Pin).
		var err error
		if n, err = ps.SessionPinsForceEpoch(ctx, store.PinEpoch{Prefix: prefix, Pins: pins, Tenant: tenant}); err != nil {
			return 0, fmt.Errorf("runtime: forced epoch of %s: %w", prefix, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.epoch++
	r.changedLocked()
	repin := func(k SessionKey, old Catalog) Catalog {
		c := make(Catalog, len(old))
		for name, spec := range old {
			if !strings.HasPrefix(name, prefix) {
				c[name] = spec
			}
		}
		for name, reg := range r.tools {
			if strings.HasPrefix(name, prefix) && reg.spec.VisibleTo(k.Tenant) {
				c[name] = reg.spec
			}
		}
		return c // a new map: a Catalog handed out is never mutated
	}
	for k, old := range r.memory {
		r.memory[k] = repin(k, old)
	}
	if ps == nil {
		return len(r.memory), nil
	}
	r.cache.Update(repin)
	return n, nil
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

// Tools lists the definitions session k sees, sorted by name: its pinned catalog,
// including withdrawn and changed tools, which stay advertised as pinned.
func (r *Registry) Tools(ctx context.Context, k SessionKey) ([]*ToolSpec, error) {
	c, err := r.Pin(ctx, k)
	if err != nil {
		return nil, err
	}
	out := make([]*ToolSpec, 0, len(c))
	for _, spec := range c {
		out = append(out, spec)
	}
	slices.SortFunc(out, func(a, b *ToolSpec) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// resolve is step 1: the tool session k may call under name, or the reason it may not.
// The error is the store's (the pin could not be read or written).
func (r *Registry) resolve(ctx context.Context, k SessionKey, name string) (*registered, ReasonCode, error) {
	c, err := r.Pin(ctx, k)
	if err != nil {
		return nil, "", err
	}
	pinned, ok := c[name]
	if !ok {
		return nil, ReasonUnknownTool, nil
	}
	r.mu.RLock()
	reg, ok := r.tools[name]
	r.mu.RUnlock()
	switch {
	case !ok:
		return nil, ReasonToolWithdrawn, nil
	case reg.spec.SchemaSHA256 != pinned.SchemaSHA256:
		return nil, ReasonToolChanged, nil
	}
	return reg, "", nil
}

// knows reports whether name is registered, or pinned in the session's catalog as this
// process holds it (only the registry fills catalogs; the store is not read): a name
// from a bounded set, fit for a metric label or a span.
func (r *Registry) knows(k SessionKey, name string) bool {
	r.mu.RLock()
	_, ok := r.tools[name]
	c := r.memory[k]
	r.mu.RUnlock()
	if ok {
		return true
	}
	if c == nil && r.cache != nil {
		c, _ = r.cache.Get(k)
	}
	_, ok = c[name]
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
