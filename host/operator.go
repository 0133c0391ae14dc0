package host

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolgen/toolgen/internal/identity"
	"github.com/toolgen/toolgen/internal/lru"
	"github.com/toolgen/toolgen/spec"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/sandbox"
)

// Operator is the operator service (HOST-2): the reviews people make of the pipeline's
// work — held calls approved or denied, UNCERTAIN calls resolved, the audit log read,
// a server's catalog epoch forced. It holds the rules of those reviews once, so that
// every surface (toolrun's commands, an embedder's own, the console) applies the same:
//
//   - an actor sees and acts on its own tenant's work only (ID-2): another tenant's
//     invocation is ErrNotFound, exactly as one that does not exist;
//   - a held call is decided by a principal holding ApproveScope, never by its own
//     caller (POL-3);
//   - the audit entry of a decision or a review is written in the decision's own
//     transaction: there is no decision without its entry, and no entry without it.
//
// The actor is a principal the host resolved (Principal, VerifyToken).
type Operator struct {
	h    *Host
	owns bool // OpenOperator's: Close releases the store

	mu    sync.Mutex
	holds *lru.Cache[string, HoldReason] // HoldReason's, by invocation key
}

// Operator returns the host's operator service.
func (h *Host) Operator() *Operator { return &Operator{h: h} }

// OpenOperator opens the operator service alone, on the store cfg names, without the
// pipeline: for the people who review a store — from a process that runs no tools, or
// when the spec root's tools, protocols or policy do not load (the audit log then still
// says why a protocol was refused). Only principals.yaml must load: an actor is never
// resolved from a file with findings. Close it when done.
func OpenOperator(ctx context.Context, cfg Config) (*Operator, error) {
	h, err := open(cfg)
	if err != nil {
		return nil, err
	}
	tree, diags, err := spec.LoadFS(h.root, h.dir)
	if err != nil {
		return nil, err
	}
	for _, d := range diags {
		if strings.HasSuffix(d.Path, spec.PrincipalsFile) {
			return nil, fmt.Errorf("%s", d)
		}
	}
	h.tree, h.model, h.reg = tree, tree.Model(), runtime.NewRegistry()
	if tree.Principals != nil {
		if h.verifier, err = identity.New(ctx, h.model.Principals, h.root); err != nil {
			return nil, fmt.Errorf("%s: %w", spec.PrincipalsFile, err)
		}
	}
	if h.st, err = OpenStore(ctx, cfg.Store, h.stateDir); err != nil {
		return nil, err
	}
	return &Operator{h: h, owns: true}, nil
}

// Close releases the store of an operator service OpenOperator opened; a host's own
// operator service is closed with the host.
func (o *Operator) Close() error {
	if !o.owns {
		return nil
	}
	return o.h.st.Close()
}

// Principal and VerifyToken resolve an actor, as Host.Principal and Host.VerifyToken.
func (o *Operator) Principal(id string) (runtime.Principal, error) { return o.h.Principal(id) }
func (o *Operator) VerifyToken(ctx context.Context, token string) (runtime.Principal, error) {
	return o.h.VerifyToken(ctx, token)
}

// HasPrincipals is Host.HasPrincipals.
func (o *Operator) HasPrincipals() bool { return o.h.HasPrincipals() }

// Errors of the operator service (test with errors.Is).
var (
	ErrNotFound      = errors.New("no such invocation in the actor's tenant")
	ErrNotHeld       = errors.New("the invocation does not wait for a decision")
	ErrSelfDecision  = errors.New("another principal must decide it")
	ErrMissingScope  = errors.New("does not hold the approving scope " + ApproveScope)
	ErrNotUncertain  = errors.New("the invocation is not an unresolved UNCERTAIN call")
	ErrRateLimited   = errors.New("rate limited")
	ErrUnknownServer = errors.New("no server")
)

// Audit entry kinds the operator service writes.
const (
	AuditApproval    = "approval"
	AuditResolve     = "resolve"
	AuditForcedEpoch = "forced_epoch"
)

// Recover runs one recovery pass over the calls of the actor's tenant (RT-4): expired
// leases decided from their facts, retryable calls re-run — each in the workspace it
// was made in, never this host's default — and nothing of another tenant decided,
// re-run or counted (SEC-3; issue 14, finding 12). A host's own maintenance
// (Start) recovers every tenant's calls; this is what an operator of one tenant runs.
// It needs a host (Host.Operator): an operator service opened alone runs no tools.
func (o *Operator) Recover(ctx context.Context, actor runtime.Principal) (runtime.RecoveryReport, error) {
	if o.h.pipe == nil {
		return runtime.RecoveryReport{}, errors.New("recovery runs tools: use a host's operator service (Host.Operator), not OpenOperator's")
	}
	if actor.Tenant == "" {
		return runtime.RecoveryReport{}, errors.New("recovery needs an actor of a tenant")
	}
	return o.h.pipe.RecoverTenant(ctx, actor.Tenant)
}

// Approvals lists the held calls of the actor's tenant that no one has decided yet,
// oldest first.
func (o *Operator) Approvals(ctx context.Context, actor runtime.Principal) ([]*store.Invocation, error) {
	return o.h.st.InvocationList(ctx, store.InvocationFilter{Tenant: actor.Tenant, AwaitingApproval: true})
}

// Approve approves held call id; the caller's waiting hold, or its retry with the same
// call, then runs it. See Decide.
func (o *Operator) Approve(ctx context.Context, actor runtime.Principal, id int64, reason string) (*store.Invocation, error) {
	return o.Decide(ctx, actor, id, true, reason)
}

// Deny denies held call id: it ends denied/approval_denied. See Decide.
func (o *Operator) Deny(ctx context.Context, actor runtime.Principal, id int64, reason string) (*store.Invocation, error) {
	return o.Decide(ctx, actor, id, false, reason)
}

// Decide records actor's decision on held call id, with its audit entry in the same
// transaction, and returns the call's row as it was decided. ErrNotFound (not in the
// actor's tenant), ErrMissingScope, ErrSelfDecision, ErrNotHeld (not held, or decided
// already).
func (o *Operator) Decide(ctx context.Context, actor runtime.Principal, id int64, approve bool, reason string) (*store.Invocation, error) {
	inv, err := o.visible(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(actor.Scopes, ApproveScope) {
		return nil, fmt.Errorf("%s %w", actor.ID, ErrMissingScope)
	}
	detail, err := json.Marshal(map[string]any{"approved": approve, "reason": reason, "invocation": id})
	if err != nil {
		return nil, err
	}
	audit := o.entry(actor, inv, AuditApproval, detail)
	switch err := runtime.DecideApproval(ctx, o.h.st, inv.Key, actor, approve, reason, &audit); {
	case errors.Is(err, runtime.ErrSelfApproval):
		return nil, fmt.Errorf("%s made call %d; %w", inv.Principal, id, ErrSelfDecision)
	case errors.Is(err, runtime.ErrNotHeld), errors.Is(err, store.ErrConflict):
		return nil, fmt.Errorf("invocation %d (status %s): %w", id, inv.Status, ErrNotHeld)
	case err != nil:
		return nil, err
	}
	return inv, nil
}

// Uncertain lists the UNCERTAIN calls of the actor's tenant waiting for a person's
// review, oldest first.
func (o *Operator) Uncertain(ctx context.Context, actor runtime.Principal) ([]*store.Invocation, error) {
	return o.h.st.InvocationListUncertain(ctx, actor.Tenant)
}

// Resolve records actor's review of UNCERTAIN call id — its effect happened, or did
// not — with its audit entry in the same transaction, and returns the row. Happened
// settles the call as a success (a retry is answered with the confirmation); did not
// happen releases it to run again under its own key, at the caller's retry or the next
// recovery pass, once (SES-2).
// ErrNotFound (not in the actor's tenant), ErrNotUncertain.
func (o *Operator) Resolve(ctx context.Context, actor runtime.Principal, id int64, happened bool, reason string) (*store.Invocation, error) {
	inv, err := o.visible(ctx, actor, id)
	if err != nil {
		return nil, err
	}
	resolution := store.ResolutionDidNotHappen
	if happened {
		resolution = store.ResolutionHappened
	}
	detail, err := json.Marshal(map[string]string{"resolution": resolution, "reason": reason})
	if err != nil {
		return nil, err
	}
	audit := o.entry(actor, inv, AuditResolve, detail)
	var outcome json.RawMessage
	if happened {
		if outcome, err = json.Marshal(runtime.ConfirmedHappened(inv.CallID, actor.ID)); err != nil {
			return nil, err
		}
	}
	switch inv, err = o.h.st.InvocationResolveUncertain(ctx, id, resolution, actor.ID, outcome, &audit); {
	case errors.Is(err, store.ErrConflict):
		return nil, fmt.Errorf("invocation %d: %w", id, ErrNotUncertain)
	case errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("invocation %d: %w", id, ErrNotFound)
	case err != nil:
		return nil, err
	}
	return inv, nil
}

// AuditFilter selects audit lines; every zero field is "any".
type AuditFilter struct {
	SessionID string
	// RunID, Tool, Mode, Decision and Kind keep the lines whose field is exactly this
	// (an audit entry's run and decision are those of the invocation it names).
	RunID, Tool, Mode, Decision, Kind string
}

func (f AuditFilter) keeps(l *AuditLine) bool {
	for _, c := range [][2]string{{f.SessionID, l.SessionID}, {f.RunID, l.RunID}, {f.Tool, l.Tool}, {f.Mode, l.Mode},
		{f.Decision, l.Decision}, {f.Kind, l.Kind}} {
		if c[0] != "" && c[0] != c[1] {
			return false
		}
	}
	return true
}

// AuditLine is one line of the audit view: an audit_log entry, or a tool_call — an
// invocation row, which records the mode that was active (WF-5). Reading tool calls
// from their rows keeps a call's commit budget (RT-3) and cannot disagree with them.
type AuditLine struct {
	At        time.Time       `json:"at"`
	Kind      string          `json:"kind"`
	Mode      string          `json:"mode"`
	Principal string          `json:"principal"`
	SessionID string          `json:"session_id"`
	Tool      string          `json:"tool,omitempty"`
	Status    string          `json:"status,omitempty"`
	Reason    string          `json:"reason_code,omitempty"`
	ID        int64           `json:"id"`
	Detail    json.RawMessage `json:"detail,omitempty"`
	// RunID and Decision are those of the invocation the line is about (a tool call's
	// own row, or the row an audit entry's key names), and Invocation is its id; empty
	// for an entry about no invocation.
	RunID      string `json:"run_id,omitempty"`
	Decision   string `json:"decision,omitempty"`
	Invocation int64  `json:"invocation,omitempty"`
	// Script is, for a tool call a script made (sandbox.run_script), the invocation id
	// of the script run it belongs to, and Ordinal its ordinal in the script; the line
	// follows its script's line, its calls in ordinal order (SCR-1).
	Script  int64 `json:"script,omitempty"`
	Ordinal int   `json:"ordinal,omitempty"`
}

// auditPage is how many rows one read of the audit view takes.
const auditPage = 500

// Audit returns the actor's tenant's audit view in time order: the audit log and
// every tool call, each with the mode that was active, kept by f.
func (o *Operator) Audit(ctx context.Context, actor runtime.Principal, f AuditFilter) ([]AuditLine, error) {
	lines := []AuditLine{}
	byKey := map[string]*store.Invocation{}
	for after := int64(0); ; {
		// An entry of a session names calls of that session: the rows of the others
		// are not needed.
		rows, err := o.h.st.InvocationList(ctx, store.InvocationFilter{Tenant: actor.Tenant, SessionID: f.SessionID, AfterID: after, Limit: auditPage})
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			byKey[r.Key] = r
			l := AuditLine{At: r.CreatedAt, Kind: "tool_call", Mode: r.Mode, Principal: r.Principal,
				SessionID: r.SessionID, Tool: r.Tool, Status: string(r.Status), Reason: r.ReasonCode, ID: r.ID,
				RunID: r.RunID, Decision: r.Decision, Invocation: r.ID}
			if f.keeps(&l) {
				lines = append(lines, l)
			}
			after = r.ID
		}
		if len(rows) < auditPage {
			break
		}
	}
	for after := int64(0); ; {
		page, err := o.h.st.AuditList(ctx, actor.Tenant, after, auditPage)
		if err != nil {
			return nil, err
		}
		for _, a := range page {
			l := AuditLine{At: a.At, Kind: a.Kind, Mode: a.Mode, Principal: a.Principal,
				SessionID: a.SessionID, Tool: a.Tool, ID: a.ID, Detail: a.Detail}
			if r := byKey[a.Key]; a.Key != "" && r != nil {
				l.RunID, l.Decision, l.Invocation = r.RunID, r.Decision, r.ID
			}
			if f.keeps(&l) {
				lines = append(lines, l)
			}
			after = a.ID
		}
		if len(page) < auditPage {
			break
		}
	}
	slices.SortStableFunc(lines, func(a, b AuditLine) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.ID, b.ID))
	})
	return nestScriptCalls(lines, byKey), nil
}

// nestScriptCalls shows a script run as one entry with its calls under it (SCR-1): a
// call whose id is a script hash and an ordinal (runtime.ScriptOrdinal), in the run
// and step of a sandbox.run_script row of that script, gets the row's id as Script and
// moves to follow it, in ordinal order. A script submitted again makes no row of its
// own calls (they replay), so its calls nest under the first run that made them.
func nestScriptCalls(lines []AuditLine, rows map[string]*store.Invocation) []AuditLine {
	type scriptKey struct {
		run  string
		step int
		hash string
	}
	scripts := map[scriptKey]int64{}
	byID := map[int64]*store.Invocation{}
	for _, r := range rows {
		byID[r.ID] = r
		if r.Tool != sandbox.Domain+".run_script" {
			continue
		}
		var a struct {
			Script string `json:"script"`
		}
		if json.Unmarshal(r.Args, &a) != nil {
			continue
		}
		k := scriptKey{r.RunID, r.Step, runtime.ScriptHash([]byte(a.Script))}
		if id, ok := scripts[k]; !ok || r.ID < id {
			scripts[k] = r.ID
		}
	}
	if len(scripts) == 0 {
		return lines
	}
	shown := map[int64]bool{} // the tool-call lines kept by the filter
	for i, l := range lines {
		if l.Kind != "tool_call" {
			continue
		}
		shown[l.ID] = true
		if r := byID[l.ID]; r != nil {
			if hash, n, ok := runtime.ScriptOrdinal(r.CallID); ok {
				if id, ok := scripts[scriptKey{r.RunID, r.Step, hash}]; ok {
					lines[i].Script, lines[i].Ordinal = id, n
				}
			}
		}
	}
	children := map[int64][]AuditLine{}
	out := make([]AuditLine, 0, len(lines))
	for _, l := range lines {
		if l.Script != 0 && shown[l.Script] {
			children[l.Script] = append(children[l.Script], l)
			continue
		}
		out = append(out, l)
	}
	nested := make([]AuditLine, 0, len(lines))
	for _, l := range out {
		nested = append(nested, l)
		if l.Kind != "tool_call" {
			continue
		}
		kids := children[l.ID]
		slices.SortStableFunc(kids, func(a, b AuditLine) int { return cmp.Compare(a.Ordinal, b.Ordinal) })
		nested = append(nested, kids...)
	}
	return nested
}

// Invocation reads invocation id as the actor's tenant sees it: another tenant's
// invocation is ErrNotFound, exactly as one that does not exist (ID-2).
func (o *Operator) Invocation(ctx context.Context, actor runtime.Principal, id int64) (*store.Invocation, error) {
	return o.visible(ctx, actor, id)
}

// ApprovalOf returns the decision recorded on held call inv (a row of the actor's
// tenant), false when none was made yet.
func (o *Operator) ApprovalOf(ctx context.Context, actor runtime.Principal, inv *store.Invocation) (*store.Approval, bool, error) {
	if inv == nil || inv.Tenant != actor.Tenant {
		return nil, false, fmt.Errorf("invocation in tenant %s: %w", actor.Tenant, ErrNotFound)
	}
	a, err := o.h.st.ApprovalGet(ctx, inv.Key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	case a.Tenant != actor.Tenant:
		return nil, false, nil
	}
	return a, true, nil
}

// HoldReason is why a call was held for approval, as the pipeline recorded it when it
// held the call (runtime.AuditHeld): the check of POL-1 that held it (Cause, a
// runtime.Hold* constant), the operator rule when one did, and the decision's words.
type HoldReason struct {
	Cause string
	Rule  string
	Why   string
	At    time.Time // when it was recorded
}

// holdSlack is how far apart, by the database clock, a held row's created_at and its
// held entry's time may be taken to be when the entry is looked for.
const holdSlack = time.Minute

// holdScanPages bounds the pages of the audit log one lookup reads past the row's time.
const holdScanPages = 8

// HoldReason returns why held call inv (a row of the actor's tenant) was held; false
// when nothing was recorded (a call held before the reason was recorded, or whose
// entry failed to write). The entry is found by time — a binary search over the
// audit log's ids for the row's created_at, then a short forward scan — so a lookup
// costs a few indexed reads however long the log is; found reasons are cached.
func (o *Operator) HoldReason(ctx context.Context, actor runtime.Principal, inv *store.Invocation) (HoldReason, bool, error) {
	if inv == nil || inv.Tenant != actor.Tenant {
		return HoldReason{}, false, fmt.Errorf("invocation in tenant %s: %w", actor.Tenant, ErrNotFound)
	}
	o.mu.Lock()
	if o.holds == nil {
		o.holds = lru.New[string, HoldReason](holdCacheSize)
	}
	cache := o.holds
	o.mu.Unlock()
	if r, ok := cache.Get(inv.Key); ok {
		return r, true, nil
	}
	first := func(after int64) (*store.AuditEntry, error) {
		page, err := o.h.st.AuditList(ctx, actor.Tenant, after, 1)
		if err != nil || len(page) == 0 {
			return nil, err
		}
		return &page[0], nil
	}
	// hi: an id after which the tenant has no entry.
	hi := int64(1024)
	for {
		e, err := first(hi)
		if err != nil {
			return HoldReason{}, false, err
		}
		if e == nil {
			break
		}
		hi = e.ID * 2
	}
	// lo: the largest "after" whose next entry is older than the row (less the slack).
	since := inv.CreatedAt.Add(-holdSlack)
	lo := int64(0)
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		e, err := first(mid)
		if err != nil {
			return HoldReason{}, false, err
		}
		if e != nil && e.At.Before(since) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	until := inv.CreatedAt.Add(holdSlack)
	for after, pages := lo, 0; pages < holdScanPages; pages++ {
		page, err := o.h.st.AuditList(ctx, actor.Tenant, after, auditPage)
		if err != nil {
			return HoldReason{}, false, err
		}
		for _, e := range page {
			if e.Kind == runtime.AuditHeld && e.Key == inv.Key {
				var d runtime.HeldDetail
				if err := json.Unmarshal(e.Detail, &d); err != nil {
					return HoldReason{}, false, nil
				}
				r := HoldReason{Cause: d.Cause, Rule: d.Rule, Why: d.Why, At: e.At}
				cache.Add(inv.Key, r)
				return r, true, nil
			}
			if e.At.After(until) {
				return HoldReason{}, false, nil
			}
			after = e.ID
		}
		if len(page) < auditPage {
			break
		}
	}
	return HoldReason{}, false, nil
}

// holdCacheSize bounds the hold reasons one operator service keeps (SEC-2).
const holdCacheSize = 4096

// ChangeForcedEpoch is the mcp_catalog_history change a forced epoch records; the
// adapter's own changes are mcp/upstream's Change* constants.
const ChangeForcedEpoch = "forced_epoch"

// ForceEpochWindow is the rate limit of forced epochs: at most one per server per
// window. A forced epoch changes what running sessions may call, so it is rare by
// design; the window keeps a script in a loop from turning pinning off.
const ForceEpochWindow = time.Minute

// ForceEpoch records an operator's forced epoch of upstream server id (MCP-7): every
// serving process on the store re-pins that server's tools in every running session
// (Start's watcher applies it). Logged, audited and rate-limited (ErrRateLimited);
// ErrUnknownServer for a server of no servers/*.yaml, or another tenant's. It returns
// the catalog history entry's id.
func (o *Operator) ForceEpoch(ctx context.Context, actor runtime.Principal, id, reason string) (int64, error) {
	srv := o.h.tree.Server(id)
	if srv == nil || (srv.Tenant != "" && srv.Tenant != actor.Tenant) {
		return 0, fmt.Errorf("%w %q in %s/servers", ErrUnknownServer, id, o.h.dir)
	}
	history, err := o.h.st.CatalogHistoryList(ctx, id)
	if err != nil {
		return 0, err
	}
	var last *store.CatalogChange
	for i := range history {
		if history[i].Change == ChangeForcedEpoch {
			last = &history[i]
		}
	}
	// Entries carry the store's clock; the host and its store share a clock in
	// practice, and a skew only shifts the window.
	if last != nil {
		if wait := ForceEpochWindow - time.Since(last.At); wait > 0 {
			return 0, fmt.Errorf("a forced epoch of %s was recorded at %s; at most one per %s (try again in %s): %w",
				id, last.At.UTC().Format(time.RFC3339), ForceEpochWindow, wait.Round(time.Second), ErrRateLimited)
		}
	}
	detail, _ := json.Marshal(map[string]string{"by": actor.ID, "reason": reason})
	hid, err := o.h.st.CatalogHistoryAppend(ctx, store.CatalogChange{ServerID: id, Change: ChangeForcedEpoch, Detail: detail})
	if err != nil {
		return 0, err
	}
	if _, err := o.h.st.AuditAppend(ctx, store.AuditEntry{Tenant: actor.Tenant, Kind: AuditForcedEpoch, Principal: actor.ID,
		Detail: detail, Tool: "mcp." + id + ".*"}); err != nil {
		return 0, err
	}
	o.h.log.Warn("forced epoch recorded", "server", id, "by", actor.ID, "history_id", hid)
	return hid, nil
}

// CatalogHistory lists the upstream catalog changes recorded on the store, oldest
// first (drift is recorded; running sessions keep their pins).
func (o *Operator) CatalogHistory(ctx context.Context, actor runtime.Principal) ([]store.CatalogChange, error) {
	all, err := o.h.st.CatalogHistoryList(ctx, "")
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(c store.CatalogChange) bool {
		srv := o.h.tree.Server(c.ServerID)
		return srv != nil && srv.Tenant != "" && srv.Tenant != actor.Tenant
	}), nil
}

// visible reads invocation id as actor's tenant sees it (ID-2).
func (o *Operator) visible(ctx context.Context, actor runtime.Principal, id int64) (*store.Invocation, error) {
	inv, err := o.h.st.InvocationGet(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound), err == nil && inv.Tenant != actor.Tenant:
		return nil, fmt.Errorf("invocation %d in tenant %s: %w", id, actor.Tenant, ErrNotFound)
	case err != nil:
		return nil, err
	}
	return inv, nil
}

// entry is the audit entry of actor's review of inv, in the mode the call ran in.
func (o *Operator) entry(actor runtime.Principal, inv *store.Invocation, kind string, detail json.RawMessage) store.AuditEntry {
	return store.AuditEntry{Tenant: inv.Tenant, Kind: kind, Principal: actor.ID, SessionID: inv.SessionID,
		Mode: inv.Mode, Tool: inv.Tool, Key: inv.Key, Detail: detail}
}
