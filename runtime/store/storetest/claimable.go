package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// Whose rows recovery may touch (LIFE-1): a worker never decides for a tool it cannot
// run, so the sweep and the retryable list consider only the rows of the tools they
// are given, inside the statement that selects them; what they leave is counted. And
// the audit entry of a decision or review commits with it, or neither does (HOST-2).

// claimableTests are appended to tests (storetest.go) by init.
var claimableTests = []struct {
	name string
	fn   func(t *testing.T, e *env)
}{
	{"Sweep_Claimable_OtherToolsRowUntouched", testSweepClaimableOtherToolsRowUntouched},
	{"Sweep_Claimable_OtherHashOrVersionSkipped_EmptyHashMatches", testSweepClaimableDefinitions},
	{"Sweep_Claimable_NotBlockedByLockedForeignRow", testSweepClaimableNotBlockedByLockedForeignRow},
	{"Claimable_Invalid_ErrInvalidWritesNothing", testClaimableInvalid},
	{"ListRetryable_Claimable_OnlyTheWorkersTools", testListRetryableClaimable},
	{"CountUnclaimable_SplitsNotRegisteredAndChanged", testCountUnclaimable},
	{"Claimable_Tenant_OnlyThatTenantsRows", testClaimableTenant},
	{"Insert_Workspace_RoundTrips", testInsertWorkspace},
	{"Approval_DecideWithAudit_BothOrNeither", testApprovalDecideWithAudit},
	{"ResolveUncertain_WithAudit_BothOrNeither", testResolveUncertainWithAudit},
}

func init() { tests = append(tests, claimableTests...) }

// The worker's tool and another worker's.
var (
	mine   = store.ToolRef{Name: "demo.write", Version: 1, SHA256: "sha-write-1"}
	theirs = store.ToolRef{Name: "demo.other", Version: 1, SHA256: "sha-other-1"}
)

// tool makes the row a call of the tool definition r.
func tool(r store.ToolRef) func(*row) {
	return func(p *row) { p.Tool, p.ToolVersion, p.ToolSHA256 = r.Name, r.Version, r.SHA256 }
}

func claimableBy(refs ...store.ToolRef) store.Claimable { return store.Claimable{Tools: refs} }

// unchanged fails unless row id is exactly before: every column, updated_at included.
func (e *env) unchanged(t *testing.T, what string, before *store.Invocation) {
	t.Helper()
	if got := e.get(t, before.ID); !reflect.DeepEqual(got, before) {
		t.Fatalf("%s was written:\n got %+v\nwant %+v", what, got, before)
	}
}

// awaitUnclaimable checks that the rows tools leave are want (the expired leases
// among them have run out by the store's clock: expire).
func (e *env) awaitUnclaimable(t *testing.T, tools []store.ToolRef, want store.Unclaimable) {
	t.Helper()
	got, err := e.s.InvocationCountUnclaimable(e.ctx, tools, "")
	noErr(t, "InvocationCountUnclaimable", err)
	if got != want {
		t.Fatalf("InvocationCountUnclaimable = %+v, want %+v", got, want)
	}
}

func testSweepClaimableOtherToolsRowUntouched(t *testing.T, e *env) {
	// The other tool's row expired first: a filter applied after the pick (or after a
	// lock) would spend the limit of 1 on it and never reach the worker's own row.
	foreign := e.runningWithWatermark(t, tool(theirs))
	e.expire(t, foreign.LeaseOwner, 1)
	own := e.insert(t, tool(mine), running("w-own", longLease))
	e.expire(t, "w-own", 1)
	before := e.get(t, foreign.ID)

	got := e.sweepUntil(t, store.SweepParams{Limit: 1, Claimable: claimableBy(mine)}, own.ID)
	if sw := got[own.ID]; sw.Decision != store.SweepRetry || sw.Invocation.Status != store.StatusPending {
		t.Fatalf("own row: %s %+v, want a retry", sw.Decision, sw.Invocation)
	}
	e.unchanged(t, "the other tool's expired row", before)
	if before.Status != store.StatusRunning || before.LeaseOwner == "" || before.EffectSentAt == nil {
		t.Fatalf("the other tool's row before the sweep: %+v", before)
	}
	// It was the sweep's to take all along, for a worker that has its tool.
	if sw := e.sweepUntil(t, store.SweepParams{Claimable: claimableBy(theirs)}, foreign.ID)[foreign.ID]; sw.Decision != store.SweepUncertain {
		t.Fatalf("the other tool's worker: %s, want uncertain (watermarked non-idempotent)", sw.Decision)
	}
}

func testSweepClaimableDefinitions(t *testing.T, e *env) {
	otherHash := store.ToolRef{Name: mine.Name, Version: mine.Version, SHA256: "sha-write-1b"}
	otherVersion := store.ToolRef{Name: mine.Name, Version: 2, SHA256: mine.SHA256}
	legacy := store.ToolRef{Name: mine.Name, Version: mine.Version} // recorded before migration 004
	const w = "w-defs"
	exact := e.insert(t, tool(mine), running(w, longLease))
	old := e.insert(t, tool(legacy), running(w, longLease))
	byHash := e.insert(t, tool(otherHash), running(w, longLease))
	byVersion := e.insert(t, tool(otherVersion), running(w, longLease))
	e.expire(t, w, 4) // one instant: the pass that takes any of them sees all four
	beforeHash, beforeVersion := e.get(t, byHash.ID), e.get(t, byVersion.ID)

	e.sweepUntil(t, store.SweepParams{Claimable: claimableBy(mine)}, exact.ID, old.ID)
	e.unchanged(t, "a row of another definition hash", beforeHash)
	e.unchanged(t, "a row of another version", beforeVersion)
	e.awaitUnclaimable(t, []store.ToolRef{mine}, store.Unclaimable{DefinitionChanged: 2})
	// A ref without a hash does not take a row that has one (it cannot tell the code
	// apart): of the rows now retryable or expired, only the one without a hash is its.
	e.awaitUnclaimable(t, []store.ToolRef{legacy}, store.Unclaimable{DefinitionChanged: 3})
	e.sweepUntil(t, store.SweepParams{Claimable: claimableBy(otherHash, otherVersion)}, byHash.ID, byVersion.ID)
}

func testSweepClaimableNotBlockedByLockedForeignRow(t *testing.T, e *env) {
	if e.rowLock == nil {
		t.Skip("the driver has no row locks (WithRowLock)")
	}
	foreign := e.insert(t, tool(theirs), running("w-foreign", longLease))
	e.expire(t, "w-foreign", 1)
	own := e.insert(t, tool(mine), running("w-own", longLease))
	e.expire(t, "w-own", 1)
	before := e.get(t, foreign.ID)
	// Another worker holds the foreign row in its open transaction; this worker's sweep,
	// on its own handle, must neither wait for it nor take it.
	unlock := e.rowLock(t, e.s, foreign.ID)
	defer unlock()
	// the deadline only turns a blocked sweep into a failure; it is never the condition
	ctx, cancel := context.WithTimeout(e.ctx, pollTimeout)
	defer cancel()
	swept, err := e.other.InvocationSweep(ctx, store.SweepParams{Claimable: claimableBy(mine)})
	noErr(t, "sweep beside a locked foreign row", err)
	if len(swept) != 1 || swept[0].Invocation.ID != own.ID {
		t.Fatalf("swept %v, want only the own row %d", swept, own.ID)
	}
	unlock()
	e.unchanged(t, "the locked foreign row", before)
}

func testClaimableInvalid(t *testing.T, e *env) {
	inv := e.insert(t, tool(mine), running("w-inv", longLease))
	e.expire(t, "w-inv", 1)
	// The row is expired by the database clock: a sweep that took an invalid Claimable
	// for "every tool" would reclaim it.
	e.awaitUnclaimable(t, nil, store.Unclaimable{NotRegistered: 1})
	for name, c := range map[string]store.Claimable{
		"zero":            {},
		"tools and all":   {Tools: []store.ToolRef{mine}, AllTools: true},
		"nameless ref":    {Tools: []store.ToolRef{{Version: 1, SHA256: "x"}}},
		"empty tool list": {Tools: []store.ToolRef{}},
	} {
		_, err := e.s.InvocationSweep(e.ctx, store.SweepParams{Claimable: c})
		wantErr(t, "sweep, "+name, err, store.ErrInvalid)
		_, err = e.s.InvocationListRetryable(e.ctx, store.RetryableParams{Claimable: c})
		wantErr(t, "list retryable, "+name, err, store.ErrInvalid)
	}
	_, err := e.s.InvocationCountUnclaimable(e.ctx, []store.ToolRef{mine, {Version: 1}}, "")
	wantErr(t, "count with a nameless ref", err, store.ErrInvalid)
	if got := e.get(t, inv.ID); got.Status != store.StatusRunning || got.LeaseOwner != "w-inv" {
		t.Fatalf("an invalid sweep wrote: %+v", got)
	}
	e.sweepUntil(t, store.SweepParams{Claimable: claimableBy(mine)}, inv.ID)
}

// approvedHold inserts a held call of r and approves it.
func (e *env) approvedHold(t *testing.T, r store.ToolRef) *store.Invocation {
	t.Helper()
	inv := e.insert(t, tool(r), func(p *row) { p.Decision = store.DecisionNeedsApproval })
	noErr(t, "approve", e.s.ApprovalDecide(e.ctx, store.Approval{Key: inv.Key, Tenant: inv.Tenant, Approved: true, DecidedBy: "bob"}, nil))
	return inv
}

func testListRetryableClaimable(t *testing.T, e *env) {
	own := e.insert(t, tool(mine))
	foreign := e.insert(t, tool(theirs))
	legacy := e.insert(t, tool(store.ToolRef{Name: mine.Name, Version: mine.Version}))
	e.insert(t, tool(store.ToolRef{Name: mine.Name, Version: 2, SHA256: mine.SHA256}))
	e.insert(t, tool(store.ToolRef{Name: mine.Name, Version: mine.Version, SHA256: "sha-write-1b"}))
	ownHold, foreignHold := e.approvedHold(t, mine), e.approvedHold(t, theirs)
	list := func(p store.RetryableParams) []int64 {
		t.Helper()
		rows, err := e.other.InvocationListRetryable(e.ctx, p)
		noErr(t, "InvocationListRetryable", err)
		return ids(rows)
	}
	check := func(what string, got []int64, want ...int64) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
	check("the worker's tool", list(store.RetryableParams{Claimable: claimableBy(mine)}), own.ID, legacy.ID, ownHold.ID)
	check("limit 1", list(store.RetryableParams{Limit: 1, Claimable: claimableBy(mine)}), own.ID)
	check("both tools", list(store.RetryableParams{Claimable: claimableBy(theirs, mine)}),
		own.ID, foreign.ID, legacy.ID, ownHold.ID, foreignHold.ID)
	e.awaitUnclaimable(t, []store.ToolRef{mine}, store.Unclaimable{NotRegistered: 2, DefinitionChanged: 2})
}

func testCountUnclaimable(t *testing.T, e *env) {
	changed := store.ToolRef{Name: mine.Name, Version: mine.Version, SHA256: "sha-write-1b"}
	const dead = "w-dead"
	// What recovery would act on, of the other tool and of another definition of mine:
	e.insert(t, tool(theirs), running(dead, longLease)) // expired (below)
	e.insert(t, tool(changed), running(dead, longLease))
	e.insert(t, tool(theirs)) // a swept retry
	e.approvedHold(t, store.ToolRef{Name: mine.Name, Version: 2, SHA256: mine.SHA256})
	// and of mine, which the worker takes itself:
	e.insert(t, tool(mine), running(dead, longLease))
	e.approvedHold(t, mine)
	e.expire(t, dead, 3)
	// What recovery would not act on at all:
	e.insert(t, tool(theirs), running("w-alive", longLease))
	susp := e.insert(t, tool(theirs), running("w-susp", longLease))
	noErr(t, "suspend", e.s.InvocationSuspendIfLeased(e.ctx, susp.Fence(), "resume-"+randomHex(4), nil))
	e.insert(t, tool(theirs), func(p *row) { p.Decision = store.DecisionNeedsApproval }) // undecided
	denied := e.insert(t, tool(theirs), func(p *row) { p.Decision = store.DecisionNeedsApproval })
	noErr(t, "deny", e.s.ApprovalDecide(e.ctx, store.Approval{Key: denied.Key, Tenant: denied.Tenant, DecidedBy: "bob"}, nil))
	e.insert(t, tool(theirs), func(p *row) { p.Status = store.StatusSucceeded })
	e.insert(t, tool(theirs), func(p *row) { p.Status = store.StatusUncertain })

	e.awaitUnclaimable(t, []store.ToolRef{mine}, store.Unclaimable{NotRegistered: 2, DefinitionChanged: 2})
	for name, c := range map[string]struct {
		tools []store.ToolRef
		want  store.Unclaimable
	}{
		"no tools":       {nil, store.Unclaimable{NotRegistered: 6}},
		"the other tool": {[]store.ToolRef{theirs}, store.Unclaimable{NotRegistered: 4}},
		"both":           {[]store.ToolRef{theirs, mine}, store.Unclaimable{DefinitionChanged: 2}},
		"every definition": {[]store.ToolRef{theirs, mine, changed, {Name: mine.Name, Version: 2, SHA256: mine.SHA256}},
			store.Unclaimable{}},
	} {
		got, err := e.other.InvocationCountUnclaimable(e.ctx, c.tools, "")
		noErr(t, name, err)
		if got != c.want {
			t.Errorf("%s: %+v, want %+v", name, got, c.want)
		}
	}
}

// auditEntries reads the whole audit log through the other handle.
func (e *env) auditEntries(t *testing.T) []store.AuditEntry {
	t.Helper()
	all, err := e.other.AuditList(e.ctx, "", 0, 0)
	noErr(t, "AuditList", err)
	return all
}

// decisionAudit is the audit entry a person's decision on inv is written with.
func decisionAudit(inv *store.Invocation, kind string) *store.AuditEntry {
	return &store.AuditEntry{Tenant: inv.Tenant, Kind: kind, Principal: "bob", SessionID: inv.SessionID,
		Mode: inv.Mode, Tool: inv.Tool, Key: inv.Key, Detail: json.RawMessage(`{"by":"bob","kind":"` + kind + `"}`)}
}

// checkAudit fails unless the log holds exactly want (ids and times aside, which the
// store sets), in order.
func (e *env) checkAudit(t *testing.T, what string, since time.Time, want ...*store.AuditEntry) {
	t.Helper()
	got := e.auditEntries(t)
	if len(got) != len(want) {
		t.Fatalf("%s: audit log has %d entries, want %d: %+v", what, len(got), len(want), got)
	}
	for i, g := range got {
		if g.ID == 0 || g.At.Before(since) {
			t.Fatalf("%s: entry %d: id %d, at %v (want at or after %v)", what, i, g.ID, g.At, since)
		}
		g.ID, g.At = 0, time.Time{}
		if !reflect.DeepEqual(g, *want[i]) {
			t.Fatalf("%s: entry %d:\n got %+v\nwant %+v", what, i, g, *want[i])
		}
	}
}

func testApprovalDecideWithAudit(t *testing.T, e *env) {
	held := func(tenant string) *store.Invocation {
		return e.insert(t, func(p *row) { p.Tenant, p.Decision = tenant, store.DecisionNeedsApproval })
	}
	inv := held("tenant-a")
	a := store.Approval{Key: inv.Key, Tenant: inv.Tenant, Approved: true, DecidedBy: "bob", Reason: "fine"}
	audit := decisionAudit(inv, "approval")
	noErr(t, "decide with audit", e.s.ApprovalDecide(e.ctx, a, audit))
	if got, err := e.other.ApprovalGet(e.ctx, inv.Key); err != nil || !got.Approved || got.DecidedBy != "bob" {
		t.Fatalf("approval: %+v, %v", got, err)
	}
	e.checkAudit(t, "after the decision", inv.CreatedAt, audit)

	// Every refused decision writes neither the approval nor the audit entry.
	again := store.Approval{Key: inv.Key, Tenant: inv.Tenant, Approved: false, DecidedBy: "eve"}
	wantErr(t, "second decision", e.s.ApprovalDecide(e.ctx, again, decisionAudit(inv, "approval")), store.ErrConflict)
	other := held("tenant-a")
	foreign := decisionAudit(other, "approval")
	foreign.Tenant = "tenant-b"
	wantErr(t, "audit of another tenant",
		e.s.ApprovalDecide(e.ctx, store.Approval{Key: other.Key, Tenant: other.Tenant, Approved: true, DecidedBy: "bob"}, foreign),
		store.ErrInvalid)
	wantErr(t, "decision in another tenant (audit in it too)",
		e.s.ApprovalDecide(e.ctx, store.Approval{Key: other.Key, Tenant: "tenant-b", Approved: true, DecidedBy: "mallory"}, foreign),
		store.ErrNotFound)
	missing := &store.AuditEntry{Tenant: "tenant-a", Kind: "approval", Key: "no-such-key"}
	wantErr(t, "missing key",
		e.s.ApprovalDecide(e.ctx, store.Approval{Key: "no-such-key", Tenant: "tenant-a", Approved: true, DecidedBy: "bob"}, missing),
		store.ErrNotFound)
	wantErr(t, "no decider", e.s.ApprovalDecide(e.ctx, store.Approval{Key: other.Key, Tenant: other.Tenant}, decisionAudit(other, "approval")),
		store.ErrInvalid)
	if got, err := e.s.ApprovalGet(e.ctx, inv.Key); err != nil || !got.Approved || got.DecidedBy != "bob" {
		t.Fatalf("the first decision changed: %+v, %v", got, err)
	}
	_, err := e.s.ApprovalGet(e.ctx, other.Key)
	wantErr(t, "refused decisions recorded an approval", err, store.ErrNotFound)
	e.checkAudit(t, "after the refused decisions", inv.CreatedAt, audit)
}

func testResolveUncertainWithAudit(t *testing.T, e *env) {
	uncertain := func() *store.Invocation {
		return e.insert(t, func(p *row) { p.Tenant, p.Status = "tenant-a", store.StatusUncertain })
	}
	inv := uncertain()
	audit := decisionAudit(inv, "resolve")
	got, err := e.s.InvocationResolveUncertain(e.ctx, inv.ID, store.ResolutionDidNotHappen, "carol", nil, audit)
	noErr(t, "resolve with audit", err)
	if got.Resolution != store.ResolutionDidNotHappen || got.ResolvedBy != "carol" || got.Status != store.StatusPending {
		t.Fatalf("resolved row: %+v", got)
	}
	e.checkAudit(t, "after the review", inv.CreatedAt, audit)

	// Every refused review writes neither the resolution nor the audit entry.
	_, err = e.s.InvocationResolveUncertain(e.ctx, inv.ID, store.ResolutionHappened, "dave", happenedOutcome, decisionAudit(inv, "resolve"))
	wantErr(t, "second review", err, store.ErrConflict)
	other := uncertain()
	foreign := decisionAudit(other, "resolve")
	foreign.Tenant = "tenant-b"
	_, err = e.s.InvocationResolveUncertain(e.ctx, other.ID, store.ResolutionHappened, "mallory", happenedOutcome, foreign)
	wantErr(t, "audit of another tenant", err, store.ErrNotFound)
	_, err = e.s.InvocationResolveUncertain(e.ctx, 424242, store.ResolutionHappened, "carol", happenedOutcome, decisionAudit(other, "resolve"))
	wantErr(t, "missing row", err, store.ErrNotFound)
	done := e.insert(t, func(p *row) { p.Tenant, p.Status = "tenant-a", store.StatusSucceeded })
	_, err = e.s.InvocationResolveUncertain(e.ctx, done.ID, store.ResolutionHappened, "carol", happenedOutcome, decisionAudit(done, "resolve"))
	wantErr(t, "a row that is not UNCERTAIN", err, store.ErrConflict)
	_, err = e.s.InvocationResolveUncertain(e.ctx, other.ID, "maybe", "carol", nil, decisionAudit(other, "resolve"))
	wantErr(t, "unknown resolution", err, store.ErrInvalid)
	if got := e.get(t, other.ID); got.Resolution != "" || got.ResolvedBy != "" {
		t.Fatalf("a refused review was recorded: %+v", got)
	}
	if got := e.get(t, inv.ID); got.Resolution != store.ResolutionDidNotHappen || got.ResolvedBy != "carol" {
		t.Fatalf("the first review changed: %+v", got)
	}
	e.checkAudit(t, "after the refused reviews", inv.CreatedAt, audit)
	// Still the row's to review, in its own tenant.
	_, err = e.s.InvocationResolveUncertain(e.ctx, other.ID, store.ResolutionHappened, "carol", happenedOutcome, decisionAudit(other, "resolve"))
	noErr(t, "review in the row's tenant", err)
	e.checkAudit(t, "after the second row's review", inv.CreatedAt, audit, decisionAudit(other, "resolve"))
}

func ofTenant(tenant string) func(*row) {
	return func(p *row) { p.Tenant = tenant }
}

// A tenant's operator recovers its tenant's calls only (SEC-3; issue 14, finding 12):
// the sweep, the retryable list and the counts of a Claimable with a Tenant neither
// decide, re-run nor count another tenant's rows.
func testClaimableTenant(t *testing.T, e *env) {
	const w = "w-tenants"
	ownExpired := e.insert(t, tool(mine), ofTenant("tenant-a"), running(w, longLease))
	otherExpired := e.insert(t, tool(mine), ofTenant("tenant-b"), running(w, longLease))
	e.expire(t, w, 2)
	otherRetry := e.insert(t, tool(mine), ofTenant("tenant-b"))
	e.insert(t, tool(theirs), ofTenant("tenant-b")) // another tool, another tenant: not counted for a
	ownRetry := e.insert(t, tool(mine), ofTenant("tenant-a"))
	beforeExpired, beforeRetry := e.get(t, otherExpired.ID), e.get(t, otherRetry.ID)

	forA := store.Claimable{Tools: []store.ToolRef{mine}, Tenant: "tenant-a"}
	e.sweepUntil(t, store.SweepParams{Claimable: forA}, ownExpired.ID)
	e.unchanged(t, "tenant-b's expired row", beforeExpired)
	rows, err := e.s.InvocationListRetryable(e.ctx, store.RetryableParams{Claimable: forA})
	noErr(t, "list retryable", err)
	for _, r := range rows {
		if r.Tenant != "tenant-a" {
			t.Fatalf("tenant-a's retryable list holds %s's row %d", r.Tenant, r.ID)
		}
	}
	if len(rows) != 2 || rows[0].ID != ownExpired.ID && rows[1].ID != ownExpired.ID || rows[0].ID != ownRetry.ID && rows[1].ID != ownRetry.ID {
		t.Fatalf("tenant-a's retryable list: %v", ids(rows))
	}
	got, err := e.s.InvocationCountUnclaimable(e.ctx, []store.ToolRef{mine}, "tenant-a")
	noErr(t, "count for tenant-a", err)
	if got != (store.Unclaimable{}) {
		t.Fatalf("tenant-a's count holds another tenant's rows: %+v", got)
	}
	e.awaitUnclaimable(t, []store.ToolRef{mine}, store.Unclaimable{NotRegistered: 1})
	e.unchanged(t, "tenant-b's retryable row", beforeRetry)
	// Without a tenant, the host's maintenance takes every tenant's.
	e.sweepUntil(t, store.SweepParams{Claimable: claimableBy(mine)}, otherExpired.ID)
}

// The workspace a call was made in is recorded with it, for recovery to re-run it
// there (issue 14, finding 12).
func testInsertWorkspace(t *testing.T, e *env) {
	inv := e.insert(t, func(p *row) { p.Workspace = "/srv/ws/tenant-a/run-1" })
	if inv.Workspace != "/srv/ws/tenant-a/run-1" || e.get(t, inv.ID).Workspace != inv.Workspace {
		t.Fatalf("workspace %q, read back %q", inv.Workspace, e.get(t, inv.ID).Workspace)
	}
	if none := e.insert(t); none.Workspace != "" {
		t.Fatalf("a call without a workspace recorded %q", none.Workspace)
	}
}
