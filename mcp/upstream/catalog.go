package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// entry is one tool of the server's catalog as this adapter registers it.
type entry struct {
	name   string            // registry name
	remote string            // the server's name for it ("" for the synthetic read tool)
	hash   string            // SchemaSHA256, the definition hash the sessions pin
	fields map[string]string // per-field hashes of the definition, for drift records
	detail map[string]any    // what mcp_catalog_history records about it
	tool   runtime.Tool
}

// drop is a remote tool (or several) that is not registered, and why.
type drop struct {
	kind   string // ChangeDroppedCollision or ChangeDroppedInvalid
	sig    string // identifies the drop, so an unchanged one is recorded once
	detail map[string]any
}

// histState is the last recorded state of one name in mcp_catalog_history.
type histState struct {
	present bool
	kind    string // a drop's kind when !present
	sha     string // definition hash when present, drop signature otherwise
	fields  map[string]string
	remote  string
}

// definitionFields are the parts of a definition whose hashes drift records compare.
var definitionFields = []string{"name", "description", "input_schema", "output_schema", "annotations"}

func jsonMarshal(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	return json.RawMessage(b), err
}

// buildCatalog turns a tools/list answer into the entries to register and the drops to
// record (MCP-1: names normalizing alike are all dropped; schemas sanitized).
func (u *Upstream) buildCatalog(tools []*mcp.Tool) (map[string]*entry, map[string]*drop) {
	groups := map[string][]*mcp.Tool{}
	for _, t := range tools {
		name, err := DomainToolName(u.domain, u.id, t.Name)
		if err != nil { // the server id was checked by Connect; kept as a guard
			u.log.Error("cannot name an upstream tool", "remote_name", short(t.Name), "error", err)
			continue
		}
		groups[name] = append(groups[name], t)
	}
	entries := map[string]*entry{}
	drops := map[string]*drop{}
	reserved := map[string]bool{}
	if u.resourcesExposed() {
		reserved[u.readResourceName()] = true
	}
	for name, g := range groups {
		if len(g) > 1 || reserved[name] {
			remotes := make([]string, len(g))
			for i, t := range g {
				remotes[i] = t.Name
			}
			sort.Strings(remotes)
			sig, _ := hashJSON(map[string]any{"remote_names": remotes, "reserved": reserved[name]})
			detail := map[string]any{"remote_names": remotes}
			if reserved[name] {
				detail["reserved_by_adapter"] = true
			}
			u.log.Warn("upstream tools normalize to one name: all of them are dropped (MCP-1)",
				"tool", name, "remote_names", remotes, "reserved_by_adapter", reserved[name])
			drops[name] = &drop{kind: ChangeDroppedCollision, sig: sig, detail: detail}
			continue
		}
		e, err := u.remoteEntry(name, g[0])
		if err != nil {
			sig, herr := definitionHash(g[0])
			if herr != nil {
				sig, _ = hashJSON(map[string]string{"remote_name": g[0].Name, "reason": err.Error()})
			}
			u.log.Warn("upstream tool refused", "tool", name, "remote_name", short(g[0].Name), "error", err)
			drops[name] = &drop{kind: ChangeDroppedInvalid, sig: sig, detail: map[string]any{
				"remote_name": g[0].Name, "reason": err.Error(), "annotations": g[0].Annotations,
			}}
			continue
		}
		entries[name] = e
	}
	if u.resourcesExposed() {
		e := u.resourceEntry()
		entries[e.name] = e
	}
	return entries, drops
}

// remoteEntry builds the registry tool of one remote tool.
func (u *Upstream) remoteEntry(name string, t *mcp.Tool) (*entry, error) {
	if len(t.Description) > MaxDescriptionBytes {
		return nil, fmt.Errorf("description is %d bytes; at most %d are accepted", len(t.Description), MaxDescriptionBytes)
	}
	hash, err := definitionHash(t)
	if err != nil {
		return nil, fmt.Errorf("definition cannot be hashed: %w", err)
	}
	fields := map[string]string{}
	for k, v := range map[string]any{
		"name": t.Name, "description": t.Description, "input_schema": t.InputSchema,
		"output_schema": t.OutputSchema, "annotations": t.Annotations,
	} {
		if fields[k], err = hashJSON(v); err != nil {
			return nil, fmt.Errorf("%s cannot be hashed: %w", k, err)
		}
	}
	input, err := sanitizeInputSchema(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	detail := map[string]any{
		"remote_name": t.Name, "description": t.Description, "annotations": t.Annotations,
		"fields": fields, "classification": u.classificationDetail(),
	}
	output, err := sanitizeOutputSchema(t.OutputSchema)
	if err != nil {
		// The tool stays usable; its structured content is then returned as text only.
		u.log.Warn("upstream output schema ignored", "tool", name, "error", err)
		detail["output_schema_ignored"] = err.Error()
		output = nil
	}
	spec := u.toolSpec(name, t.Description, input, output, hash)
	return &entry{
		name: name, remote: t.Name, hash: hash, fields: fields, detail: detail,
		tool: &remoteTool{up: u, remote: t.Name, spec: spec},
	}, nil
}

// loadHistory reads the server's last recorded catalog from mcp_catalog_history, so that a
// restart records only what changed since (drift between runs included).
func (u *Upstream) loadHistory(ctx context.Context) error {
	rows, err := u.opts.Store.CatalogHistoryList(ctx, u.id)
	if err != nil {
		return fmt.Errorf("upstream %s: read catalog history: %w", u.id, err)
	}
	h := map[string]histState{}
	for _, r := range rows {
		switch r.Change {
		case ChangeAdded, ChangeChanged:
			var d struct {
				Remote string            `json:"remote_name"`
				Fields map[string]string `json:"fields"`
			}
			_ = json.Unmarshal(r.Detail, &d)
			h[r.Tool] = histState{present: true, sha: r.SHA256, fields: d.Fields, remote: d.Remote}
		case ChangeRemoved:
			delete(h, r.Tool)
		case ChangeDroppedCollision, ChangeDroppedInvalid:
			h[r.Tool] = histState{kind: r.Change, sha: r.SHA256}
		}
	}
	u.mu.Lock()
	u.hist = h
	u.mu.Unlock()
	return nil
}

// apply makes the registry match entries, then records in mcp_catalog_history every
// difference between the last recorded catalog and the one now registered (MCP-7).
//
// It returns the recorded differences by change kind, and the catalog hash (SHA-256 over
// the sorted names and definition hashes now registered).
func (u *Upstream) apply(ctx context.Context, entries map[string]*entry, drops map[string]*drop) (map[string][]string, string, error) {
	current, hist, err := u.register(entries, drops)
	if err != nil {
		return nil, "", err
	}
	catalog := map[string]string{}
	for name, e := range current {
		catalog[name] = e.hash
	}
	catalogSHA, _ := hashJSON(catalog)
	diff, err := u.recordHistory(ctx, current, drops, hist)
	return diff, catalogSHA, err
}

// register makes the registry match entries: new tools are registered, changed ones
// replaced, and those no longer listed, or dropped (a definition the registry refuses
// is added to drops here), withdrawn. It returns the tools now registered and the
// catalog history as last recorded.
func (u *Upstream) register(entries map[string]*entry, drops map[string]*drop) (map[string]*entry, map[string]histState, error) {
	reg := u.opts.Registry
	for _, name := range sortedKeys(entries) {
		e := entries[name]
		u.mu.Lock()
		if u.closed {
			u.mu.Unlock()
			return nil, nil, ErrClosed
		}
		old := u.tools[name]
		u.mu.Unlock()
		var err error
		switch {
		case old == nil:
			err = safeRegister(func() error { return reg.RegisterAdapter(u.domain, e.tool) })
		case old.hash != e.hash:
			// The spec is already external_untrusted: Replace, unlike RegisterAdapter,
			// does not force it. A refused replacement leaves the old definition
			// registered; the drop below withdraws it.
			err = safeRegister(func() error { return reg.Replace(e.tool) })
		default:
			continue // unchanged: the registered tool stays
		}
		if err != nil {
			u.log.Error("registry refused an upstream tool", "tool", name, "error", err)
			drops[name] = &drop{kind: ChangeDroppedInvalid, sig: e.hash, detail: map[string]any{
				"remote_name": e.remote, "reason": "registry: " + err.Error(),
			}}
			continue
		}
		u.mu.Lock()
		u.tools[name] = e
		u.mu.Unlock()
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for name := range u.tools {
		if _, ok := entries[name]; !ok || drops[name] != nil {
			reg.Withdraw(name)
			delete(u.tools, name)
		}
	}
	current := make(map[string]*entry, len(u.tools))
	for name, e := range u.tools {
		current[name] = e
	}
	return current, u.hist, nil
}

// recordHistory appends to mcp_catalog_history what changed between hist, the
// catalog as last recorded, and the one now registered (current, with drops), and
// remembers what it recorded. A change that cannot be recorded is left out of the
// remembered state, so the next refresh records it.
func (u *Upstream) recordHistory(ctx context.Context, current map[string]*entry, drops map[string]*drop, hist map[string]histState) (map[string][]string, error) {
	now := map[string]histState{}
	for name, e := range current {
		now[name] = histState{present: true, sha: e.hash, fields: e.fields, remote: e.remote}
	}
	for name, d := range drops {
		now[name] = histState{kind: d.kind, sha: d.sig}
	}
	diff := map[string][]string{}
	var errs []error
	next := map[string]histState{}
	for name, st := range hist {
		next[name] = st
	}
	names := sortedKeys(now)
	for name := range hist {
		if _, ok := now[name]; !ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		was, had := hist[name]
		is, has := now[name]
		var c *store.CatalogChange
		switch {
		case has && is.present && (!had || !was.present):
			c = u.change(name, ChangeAdded, is.sha, current[name].detail)
		case has && is.present && was.sha != is.sha:
			d := cloneMap(current[name].detail)
			d["previous_sha256"] = was.sha
			var changed []string
			for _, f := range definitionFields {
				if was.fields == nil || was.fields[f] != is.fields[f] {
					changed = append(changed, f)
				}
			}
			d["changed_fields"] = changed
			c = u.change(name, ChangeChanged, is.sha, d)
		case has && !is.present && (!had || was.present || was.kind != is.kind || was.sha != is.sha):
			c = u.change(name, is.kind, is.sha, drops[name].detail)
		case !has && had && was.present:
			c = u.change(name, ChangeRemoved, was.sha, map[string]any{"remote_name": was.remote})
		}
		if c == nil {
			if has {
				next[name] = is
			} else {
				delete(next, name)
			}
			continue
		}
		if _, err := u.opts.Store.CatalogHistoryAppend(context.WithoutCancel(ctx), *c); err != nil {
			errs = append(errs, fmt.Errorf("record %s %s: %w", c.Change, name, err))
			continue // the state stays as last recorded, so the next refresh records it
		}
		u.log.Info("upstream catalog change", "tool", name, "change", c.Change, "sha256", c.SHA256)
		diff[c.Change] = append(diff[c.Change], name)
		if has {
			next[name] = is
		} else {
			delete(next, name)
		}
	}
	u.mu.Lock()
	u.hist = next
	u.mu.Unlock()
	if len(errs) > 0 {
		return diff, fmt.Errorf("upstream %s: catalog history: %w", u.id, errors.Join(errs...))
	}
	return diff, nil
}

func (u *Upstream) change(tool, kind, sha string, detail map[string]any) *store.CatalogChange {
	d := cloneMap(detail)
	d["server_id"] = u.id
	raw, err := jsonMarshal(d)
	if err != nil {
		raw, _ = jsonMarshal(map[string]string{"server_id": u.id, "error": "detail cannot be encoded: " + err.Error()})
	}
	return &store.CatalogChange{ServerID: u.id, Tool: tool, Change: kind, SHA256: sha, Detail: raw}
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+2)
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// safeRegister runs a registry change, turning a panic (the registry compiles the
// server's schemas) into an error: one tool may fail, never the worker.
func safeRegister(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("registry panicked on this definition: %v", r)
		}
	}()
	return f()
}
