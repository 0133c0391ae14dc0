package storetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/toolgen/toolgen/runtime/store"
)

func ids(rows []*store.Invocation) []int64 {
	out := []int64{}
	for _, r := range rows {
		out = append(out, r.ID)
	}
	return out
}

func testInvocationListFilters(t *testing.T, e *env) {
	a1 := e.insert(t)
	a2 := e.insert(t, func(p *row) { p.SessionID = "session-2" })
	b := e.insert(t, func(p *row) { p.Tenant = "tenant-b" })
	held := e.insert(t, func(p *row) { p.Decision = store.DecisionNeedsApproval })
	decided := e.insert(t, func(p *row) { p.Decision = store.DecisionNeedsApproval })
	if err := e.s.ApprovalDecide(e.ctx, store.Approval{Key: decided.Key, Tenant: decided.Tenant, Approved: true, DecidedBy: "bob"}, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    store.InvocationFilter
		want []int64
	}{
		{"all", store.InvocationFilter{}, []int64{a1.ID, a2.ID, b.ID, held.ID, decided.ID}},
		{"tenant", store.InvocationFilter{Tenant: "tenant-a"}, []int64{a1.ID, a2.ID, held.ID, decided.ID}},
		{"session", store.InvocationFilter{Tenant: "tenant-a", SessionID: "session-2"}, []int64{a2.ID}},
		{"awaiting approval", store.InvocationFilter{AwaitingApproval: true}, []int64{held.ID}},
		{"paged", store.InvocationFilter{AfterID: a1.ID, Limit: 2}, []int64{a2.ID, b.ID}},
	} {
		rows, err := e.other.InvocationList(e.ctx, tc.f)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := ids(rows); !slices.Equal(got, tc.want) {
			t.Errorf("%s: ids %v, want %v", tc.name, got, tc.want)
		}
	}
	// A held call leaves the queue once it is claimed (it is no longer PENDING).
	if _, err := e.s.InvocationClaimIfPending(e.ctx, held.ID, "w1", longLease); err != nil {
		t.Fatal(err)
	}
	rows, err := e.s.InvocationList(e.ctx, store.InvocationFilter{AwaitingApproval: true})
	if err != nil || len(rows) != 0 {
		t.Errorf("awaiting approval after the claim: %v, %v; want none", ids(rows), err)
	}
}

func testSessionModeSetAndGet(t *testing.T, e *env) {
	if _, err := e.s.SessionModeGet(e.ctx, "tenant-a", "s1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SessionModeGet of a new session: %v, want ErrNotFound", err)
	}
	if err := e.s.SessionModeSet(e.ctx, "tenant-a", "s1", "plan"); err != nil {
		t.Fatal(err)
	}
	if err := e.s.SessionModeSet(e.ctx, "tenant-a", "s1", "implement"); err != nil {
		t.Fatal(err)
	}
	if err := e.s.SessionModeSet(e.ctx, "tenant-a", "s2", "review"); err != nil {
		t.Fatal(err)
	}
	for session, want := range map[string]string{"s1": "implement", "s2": "review"} {
		if got, err := e.other.SessionModeGet(e.ctx, "tenant-a", session); err != nil || got != want {
			t.Errorf("SessionModeGet(%s) = %q, %v; want %q", session, got, err, want)
		}
	}
	for _, bad := range [][2]string{{"", "plan"}, {"s3", ""}} {
		if err := e.s.SessionModeSet(e.ctx, "tenant-a", bad[0], bad[1]); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("SessionModeSet(%q, %q) = %v, want ErrInvalid", bad[0], bad[1], err)
		}
	}
}
