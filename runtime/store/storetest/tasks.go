package storetest

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// roleTests are appended to tests by init: the session and task cases that move the
// store's clock (issue 16, point 5) — an MCP session going idle, a cancellation
// ageing out — and the task cases of store.Tasks beyond a held call: a task waiting
// for its retry, and a cancellation racing a claim.
var roleTests = []struct {
	name string
	fn   func(t *testing.T, e *env)
}{
	{"MCPSession_Idle_ExpiresByStoreClock", testMCPSessionIdleByStoreClock},
	{"MCPCancel_AgesOutByStoreClock", testMCPCancelAgesOut},
	{"Task_CancelWhileWaitingForRetry_LeavesRecovery", testTaskCancelRetryWaiting},
	{"Task_CancelApprovedHold_BeforeItsClaim", testTaskCancelApprovedHold},
	{"Task_CancelRacesClaim_ExactlyOneWins", testTaskCancelRacesClaim},
}

func init() { tests = append(tests, roleTests...) }

func tasks(t *testing.T, s store.Store) store.Tasks {
	t.Helper()
	ts, ok := s.(store.Tasks)
	if !ok {
		t.Fatalf("%T does not implement store.Tasks", s)
	}
	return ts
}

// cancelled is the settlement of a task its client cancelled.
var cancelled = store.SettleDenied("task_cancelled", json.RawMessage(`{"status":"denied","reason_code":"task_cancelled"}`))

func testMCPSessionIdleByStoreClock(t *testing.T, e *env) {
	m, other := mcpSessions(t, e.s), mcpSessions(t, e.other)
	const idle = 10 * time.Minute
	sess := store.MCPSession{ID: "mcp-" + randomHex(8), Tenant: "acme", State: json.RawMessage(`{}`)}
	noErr(t, "create", m.MCPSessionCreate(e.ctx, sess))
	e.elapse(idle - time.Minute)
	_, err := other.MCPSessionGet(e.ctx, sess.ID, idle)
	noErr(t, "get a minute before the idle timeout (other handle)", err)
	// a touch is a request of the session: the idle time starts again
	noErr(t, "touch", m.MCPSessionTouch(e.ctx, "acme", sess.ID, nil))
	e.elapse(idle - time.Minute)
	got, err := m.MCPSessionGet(e.ctx, sess.ID, idle)
	noErr(t, "get a minute before the idle timeout after a touch", err)
	if !got.LastSeenAt.After(got.CreatedAt) {
		t.Fatalf("the touch did not move LastSeenAt: created %v, last seen %v", got.CreatedAt, got.LastSeenAt)
	}
	e.elapse(2 * time.Minute)
	_, err = m.MCPSessionGet(e.ctx, sess.ID, idle)
	wantErr(t, "get after the idle timeout", err, store.ErrNotFound)
	_, err = other.MCPSessionGet(e.ctx, sess.ID, idle)
	wantErr(t, "get after the idle timeout (other handle)", err, store.ErrNotFound)
	// idle 0 is no timeout: the session is not ended, only idle
	_, err = m.MCPSessionGet(e.ctx, sess.ID, 0)
	noErr(t, "get without an idle timeout", err)
	// an idle session is still its tenant's: a touch revives it, another tenant's does not
	wantErr(t, "touch by another tenant", m.MCPSessionTouch(e.ctx, "evil", sess.ID, nil), store.ErrNotFound)
	_, err = m.MCPSessionGet(e.ctx, sess.ID, idle)
	wantErr(t, "get after another tenant's touch", err, store.ErrNotFound)
	noErr(t, "touch by its tenant", m.MCPSessionTouch(e.ctx, "acme", sess.ID, nil))
	_, err = other.MCPSessionGet(e.ctx, sess.ID, idle)
	noErr(t, "get after its tenant's touch", err)
}

func testMCPCancelAgesOut(t *testing.T, e *env) {
	m, other := mcpSessions(t, e.s), mcpSessions(t, e.other)
	noErr(t, "record", m.MCPCancelRecord(e.ctx, "s-old", "1"))
	all, err := other.MCPCancelsSince(e.ctx, 0, time.Hour, 0)
	noErr(t, "list", err)
	if len(all) != 1 || all[0].SessionID != "s-old" {
		t.Fatalf("cancellations: %+v", all)
	}
	e.elapse(30 * time.Minute)
	if got, _ := other.MCPCancelsSince(e.ctx, 0, time.Hour, 0); len(got) != 1 {
		t.Fatalf("a cancellation half an hour old, max age an hour: %+v", got)
	}
	if got, _ := other.MCPCancelsSince(e.ctx, 0, 20*time.Minute, 0); len(got) != 0 {
		t.Fatalf("a cancellation half an hour old, max age 20 minutes: %+v", got)
	}
	// past the retention, the next record forgets it
	e.elapse(store.MCPCancelRetention)
	noErr(t, "record", m.MCPCancelRecord(e.ctx, "s-new", "2"))
	got, err := other.MCPCancelsSince(e.ctx, 0, 24*time.Hour, 0)
	noErr(t, "list", err)
	if len(got) != 1 || got[0].SessionID != "s-new" {
		t.Fatalf("after the retention, want only the new cancellation: %+v", got)
	}
}

// testTaskCancelRetryWaiting: a task whose worker died is PENDING again after the
// sweep, waiting for its retry; its client cancels it, and recovery never runs it.
func testTaskCancelRetryWaiting(t *testing.T, e *env) {
	ts := tasks(t, e.s)
	inv := e.insert(t, running("w-dead", longLease))
	if sw := e.sweepOne(t, inv, store.SweepParams{Claimable: allTools}); sw.Decision != store.SweepRetry {
		t.Fatalf("sweep: %s, want retry", sw.Decision)
	}
	retryable, err := e.s.InvocationListRetryable(e.ctx, store.RetryableParams{Claimable: allTools})
	noErr(t, "list retryable", err)
	if len(retryable) != 1 || retryable[0].ID != inv.ID {
		t.Fatalf("retryable before the cancel: %v", retryable)
	}
	got, err := ts.InvocationCancelPending(e.ctx, inv.Tenant, inv.ID, cancelled, nil)
	noErr(t, "cancel a task waiting for its retry", err)
	if got.Status != store.StatusDenied || got.ReasonCode != "task_cancelled" || got.Attempt != 1 || got.LeaseOwner != "" {
		t.Fatalf("cancelled row: %+v", got)
	}
	retryable, err = e.s.InvocationListRetryable(e.ctx, store.RetryableParams{Claimable: allTools})
	noErr(t, "list retryable", err)
	if len(retryable) != 0 {
		t.Fatalf("a cancelled task is still retryable: %+v", retryable[0])
	}
	e.elapse(2 * longLease)
	if swept, err := e.s.InvocationSweep(e.ctx, store.SweepParams{Claimable: allTools}); err != nil || len(swept) != 0 {
		t.Fatalf("the sweep touched a cancelled task: %v, %v", swept, err)
	}
	// the task is read as any row (InvocationGet): its recorded outcome
	if got := e.get(t, inv.ID); got.Status != store.StatusDenied || !sameJSON(got.Outcome, cancelled.Outcome) {
		t.Fatalf("read after the cancel: %+v", got)
	}
}

// testTaskCancelApprovedHold: an approved hold not yet claimed is still PENDING: its
// client may cancel it, and no worker then claims it.
func testTaskCancelApprovedHold(t *testing.T, e *env) {
	ts := tasks(t, e.s)
	held := e.insert(t, func(p *row) { p.Decision = store.DecisionNeedsApproval })
	noErr(t, "approve", e.s.ApprovalDecide(e.ctx, store.Approval{Key: held.Key, Tenant: held.Tenant, Approved: true, DecidedBy: "bob"}, nil))
	_, err := ts.InvocationCancelPending(e.ctx, held.Tenant, held.ID, cancelled, nil)
	noErr(t, "cancel an approved hold", err)
	_, err = e.other.InvocationClaimIfPending(e.ctx, held.ID, "w", longLease)
	wantErr(t, "claim a cancelled hold", err, store.ErrConflict)
	if a, err := e.s.ApprovalGet(e.ctx, held.Key); err != nil || !a.Approved {
		t.Fatalf("the approval of a cancelled hold: %+v, %v", a, err)
	}
}

// testTaskCancelRacesClaim: a client's cancel and a worker's claim of one PENDING task,
// on two handles: exactly one wins, and the row is what the winner wrote.
func testTaskCancelRacesClaim(t *testing.T, e *env) {
	ts := tasks(t, e.other)
	const rounds = 10
	for i := 0; i < rounds; i++ {
		inv := e.insert(t)
		var (
			wg                  sync.WaitGroup
			cancelErr, claimErr error
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, cancelErr = ts.InvocationCancelPending(e.ctx, inv.Tenant, inv.ID, cancelled, nil)
		}()
		go func() { defer wg.Done(); _, claimErr = e.s.InvocationClaimIfPending(e.ctx, inv.ID, "w", longLease) }()
		wg.Wait()
		got := e.get(t, inv.ID)
		switch {
		case cancelErr == nil && errors.Is(claimErr, store.ErrConflict):
			if got.Status != store.StatusDenied || got.Attempt != 0 {
				t.Fatalf("round %d: the cancel won, row %+v", i, got)
			}
		case claimErr == nil && errors.Is(cancelErr, store.ErrConflict):
			if got.Status != store.StatusRunning || got.Attempt != 1 || got.LeaseOwner != "w" {
				t.Fatalf("round %d: the claim won, row %+v", i, got)
			}
		default:
			t.Fatalf("round %d: cancel %v, claim %v: want exactly one to win", i, cancelErr, claimErr)
		}
	}
}
