package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/vocab"
)

// Option configures [Run].
type Option func(*config)

type config struct {
	reopen  func(t *testing.T, s store.Store, clock *store.Clock) store.Store
	rowLock func(t *testing.T, s store.Store, id int64) (unlock func())
}

// WithReopen gives the suite a second, independent handle on the database behind s —
// its own connections or pool, as another worker process would have — for the
// concurrency tests. The handle must run on clock, s's clock, and be closed by
// reopen's cleanup. Without it those tests share one handle between goroutines.
func WithReopen(reopen func(t *testing.T, s store.Store, clock *store.Clock) store.Store) Option {
	return func(c *config) { c.reopen = reopen }
}

// WithRowLock gives the suite a way to hold a row lock as another worker in the middle
// of its transaction does: lock takes a write lock on row id of s (SELECT ... FOR
// UPDATE) in a transaction it leaves open until unlock. Only a driver with row locks
// (PostgreSQL) has one; without it the test of a sweep beside a locked row is skipped.
func WithRowLock(lock func(t *testing.T, s store.Store, id int64) (unlock func())) Option {
	return func(c *config) { c.rowLock = lock }
}

// Run is the conformance suite every driver passes (ST-2). newStore returns an empty,
// migrated store of its own (a temp file, a fresh schema) that runs on clock (its
// driver's WithClock), and registers its cleanup. The suite moves time by advancing
// the clock: a lease expires, a session goes idle, a cancellation ages, without a
// test sleeping for the database clock to pass them. Subtests run in parallel.
func Run(t *testing.T, newStore func(t *testing.T, clock *store.Clock) store.Store, opts ...Option) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := store.NewClock()
			e := &env{s: newStore(t, clock), clock: clock, ctx: t.Context(), rowLock: cfg.rowLock}
			e.other = e.s
			if cfg.reopen != nil {
				e.other = cfg.reopen(t, e.s, clock)
			}
			tc.fn(t, e)
		})
	}
}

// env is one subtest's store and helpers.
type env struct {
	s       store.Store
	other   store.Store  // a second handle on the same database (or s)
	clock   *store.Clock // the clock of s and other: advance it to move time
	ctx     context.Context
	rowLock func(t *testing.T, s store.Store, id int64) (unlock func()) // nil: no row locks
}

// handle returns s or the other handle, alternating with i.
func (e *env) handle(i int) store.Store {
	if i%2 == 0 {
		return e.s
	}
	return e.other
}

// allTools lets a recovery operation of the suite touch every row: the suite speaks
// for every tool on its store (the Claimable filter has tests of its own).
var allTools = store.Claimable{AllTools: true}

const (
	longLease = time.Hour
	// pollTimeout bounds every wait for what the suite cannot move by its clock: a
	// commit of another handle becoming visible, a wake-up, a concurrent worker.
	pollTimeout = 15 * time.Second
)

var tests = []struct {
	name string
	fn   func(t *testing.T, e *env)
}{
	// insert and read
	{"Insert_Pending_RoundTripsEveryField", testInsertPendingRoundTripsEveryField},
	{"Insert_Running_LeaseByDatabaseClock", testInsertRunningLeaseByDatabaseClock},
	{"Insert_Terminal_RecordsOutcomeOnce", testInsertTerminalRecordsOutcomeOnce},
	{"Insert_DuplicateKey_ReturnsExisting", testInsertDuplicateKeyReturnsExisting},
	{"Insert_Relaxed_RoundTrips", testInsertRelaxedRoundTrips},
	{"Insert_ReturnsTheRowAsRead", testInsertReturnsTheRowAsRead},
	{"Release_BackToPending_ThenReclaimable", testReleaseBackToPending},
	{"Release_ZombieFence_LeaseLost", testReleaseZombieFence},
	{"GetByResumeToken_FindsSuspendedRow", testGetByResumeToken},
	{"Insert_ConcurrentSameKey_ExactlyOneInserted", testInsertConcurrentSameKeyExactlyOneInserted},
	{"Insert_Invalid_ErrInvalidWritesNothing", testInsertInvalid},
	{"Get_Missing_NotFound", testGetMissingNotFound},
	// claim
	{"Claim_Pending_RunningWithLease", testClaimPendingRunningWithLease},
	{"Claim_NotPending_Conflict", testClaimNotPendingConflict},
	{"Claim_Missing_NotFound", testClaimMissingNotFound},
	{"Claim_Invalid_ErrInvalid", testClaimInvalid},
	{"Claim_Concurrent_ExactlyOneWins", testClaimConcurrentExactlyOneWins},
	// watermark
	{"MarkEffectSent_SetsWatermark", testMarkEffectSentSetsWatermark},
	{"MarkEffectSent_LostAck_RetrySucceeds", testMarkEffectSentLostAckRetrySucceeds},
	{"MarkEffectSent_OtherToken_Conflict", testMarkEffectSentOtherTokenConflict},
	{"MarkEffectSent_ZombieFence_LeaseLost", testMarkEffectSentZombieFenceLeaseLost},
	{"MarkEffectSent_LeaseExpired_LeaseLost", testMarkEffectSentLeaseExpiredLeaseLost},
	{"MarkEffectSent_EmptyToken_ErrInvalid", testMarkEffectSentEmptyToken},
	// settle
	{"Settle_RecordsOutcomeKeepsFence", testSettleRecordsOutcomeKeepsFence},
	{"Settle_LostAck_RetrySucceeds", testSettleLostAckRetrySucceeds},
	{"Settle_LostAckOtherStatus_LeaseLost", testSettleLostAckOtherStatusLeaseLost},
	{"Settle_ZombieFence_LeaseLost", testSettleZombieFenceLeaseLost},
	{"Settle_LeaseExpiredNotYetSwept_Succeeds", testSettleLeaseExpiredNotYetSwept},
	{"Settle_NonTerminal_ErrInvalid", testSettleNonTerminal},
	// the sweep (RT-4)
	{"Sweep_NoWatermark_Retry", testSweepNoWatermarkRetry},
	{"Sweep_CrashLoop_Failed", testSweepCrashLoopFailed},
	{"Sweep_WatermarkSetIdempotent_Retry", testSweepWatermarkSetIdempotentRetry},
	{"Sweep_WatermarkSetConditionalWhenTrue_Retry", testSweepWatermarkSetConditionalWhenTrueRetry},
	{"Sweep_WatermarkSetConditionalWhenFalse_BecomesUncertain", testSweepWatermarkSetConditionalWhenFalseUncertain},
	{"Sweep_WatermarkSetNonIdempotent_BecomesUncertain", testSweepWatermarkSetNonIdempotentUncertain},
	{"Sweep_WatermarkSetIdempotentCrashLoop_Failed", testSweepWatermarkSetIdempotentCrashLoopFailed},
	{"Sweep_WatermarkSet_IsVocabsRetrySafeRule", testSweepWatermarkSetIsVocabsRule},
	{"Sweep_LeaseExpiresByStoreClock_NotBefore", testSweepLeaseExpiresByStoreClock},
	{"Sweep_SuspendedRowsExcluded", testSweepSuspendedRowsExcluded},
	{"Sweep_PendingAndTerminalRowsIgnored", testSweepPendingAndTerminalRowsIgnored},
	{"Sweep_Limit_BoundsOnePass", testSweepLimitBoundsOnePass},
	{"Sweep_ZeroParams_UsesDefaults", testSweepZeroParamsUsesDefaults},
	{"Sweep_ConcurrentSweepers_EachRowOnce", testSweepConcurrentSweepersEachRowOnce},
	{"Sweep_RacesSettle_ExactlyOneWins", testSweepRacesSettleExactlyOneWins},
	// fencing across reclaims
	{"Fence_ZombieAfterReclaimByAnotherWorker_LeaseLost", testFenceZombieAfterReclaimByAnotherWorker},
	{"Settle_ZombieAfterSweptUncertain_LeaseLost", testSettleZombieAfterSweptUncertain},
	// leases
	{"Renew_ExtendsOwnersUnsuspendedLeases", testRenewExtendsOwnersUnsuspendedLeases},
	{"Renew_ExpiredLease_NotRevived", testRenewExpiredLeaseNotRevived},
	{"Renew_Invalid_ErrInvalid", testRenewInvalid},
	// suspension (RT-11)
	{"Suspend_StaysRunningReleasesLease", testSuspendStaysRunningReleasesLease},
	{"Suspend_LostAck_RetrySucceeds", testSuspendLostAckRetrySucceeds},
	{"Suspend_TokenInUse_Conflict", testSuspendTokenInUseConflict},
	{"Suspend_ZombieFence_LeaseLost", testSuspendZombieFenceLeaseLost},
	{"Resume_SettlesKeepsSuspendedAt", testResumeSettlesKeepsSuspendedAt},
	{"Resume_Errors", testResumeErrors},
	{"UnsuspendDecided_OnlyRowsWhoseApprovalIsDecided", testUnsuspendDecided},
	// queues and review
	{"ListRetryable_AllowAndApprovedHolds", testListRetryableAllowAndApprovedHolds},
	{"ListUncertain_TenantFilter_ResolvedLeave", testListUncertainTenantFilter},
	{"ResolveUncertain_MovesToWhatIsKnown", testResolveUncertainMovesToWhatIsKnown},
	{"PriorCalls_LatestGenerationAndCounts", testPriorCallsLatestGeneration},
	{"PriorCalls_KeyOfANamedCall", testPriorCallsKey},
	{"ResolveUncertain_Errors", testResolveUncertainErrors},
	{"BreakerCounts_IdenticalCallsOfRun", testBreakerCounts},
	{"InvocationList_Filters", testInvocationListFilters},
	{"SessionMode_SetAndGet", testSessionModeSetAndGet},
	// sessions (SES-1): sessionTests (sessions.go), appended by its init
	// approvals, audit, catalog
	{"Approval_DecideAndGet", testApprovalDecideAndGet},
	{"Approval_DecideTwice_Conflict", testApprovalDecideTwiceConflict},
	{"Approval_UnknownKeyOrOtherTenant_NotFound", testApprovalUnknownKeyOrOtherTenant},
	{"Audit_AppendAndPage", testAuditAppendAndPage},
	{"CatalogHistory_AppendAndListByServer", testCatalogHistory},
	// the commit count
	{"CountingStore_OneCommitPerWrite", testCountingStoreOneCommitPerWrite},
	{"Handles_SeeEachOthersCommits", testHandlesSeeEachOthersCommits},
	// the event stream: eventTests (events.go), appended by its init
}

// ---- helpers

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func ptr[T any](v T) *T { return &v }

// row is what the suite's inserts are built from: a Call and the row's first status,
// with what that status carries. Its mods (func(*row)) say what they change; params
// turns it into the one constructor that records that status, so the suite writes
// through the same constructors as the pipeline.
type row struct {
	store.Call
	Status     store.Status
	ReasonCode string
	Outcome    json.RawMessage
	Owner      string        // RUNNING
	Lease      time.Duration // RUNNING
	Relaxed    bool          // terminal: InsertRecordOnce
}

// params returns the insert r describes: InsertHeld or InsertPending for PENDING,
// InsertRunning for RUNNING, InsertRecordOnce or InsertSettled for any other status
// (which InsertSettled refuses unless it is terminal).
func (r row) params() store.InsertParams {
	switch r.Status {
	case store.StatusPending:
		if r.Decision == store.DecisionNeedsApproval {
			return store.InsertHeld(r.Call)
		}
		return store.InsertPending(r.Call)
	case store.StatusRunning:
		return store.InsertRunning(r.Call, r.Owner, r.Lease)
	}
	s := store.Settlement{Status: r.Status, ReasonCode: r.ReasonCode, Outcome: r.Outcome}
	if r.Relaxed {
		return store.InsertRecordOnce(r.Call, s)
	}
	return store.InsertSettled(r.Call, s)
}

// params returns valid PENDING insert parameters with a fresh key, changed by mods.
func params(mods ...func(*row)) store.InsertParams {
	r := row{Call: store.Call{
		Key:           randomHex(16),
		Tenant:        "tenant-a",
		Principal:     "alice",
		SessionID:     "session-1",
		RunID:         "run-1",
		Step:          1,
		CallID:        "call-" + randomHex(4),
		Tool:          "demo.write",
		ToolVersion:   1,
		Idempotency:   store.IdempotencyNonIdempotent,
		Args:          json.RawMessage(`{"path":"a.txt","text":"hi"}`),
		ArgsHash:      "hash-1",
		OriginTrust:   "user",
		ArgumentTrust: "user",
		Mode:          "default",
		Decision:      store.DecisionAllow,
	}, Status: store.StatusPending}
	for _, m := range mods {
		m(&r)
	}
	return r.params()
}

// running makes the row a fused RUNNING insert for owner with lease.
func running(owner string, lease time.Duration) func(*row) {
	return func(p *row) {
		p.Status, p.Owner, p.Lease = store.StatusRunning, owner, lease
	}
}

func idempotency(class string, when *bool) func(*row) {
	return func(p *row) { p.Idempotency, p.IdempotentWhen = class, when }
}

func (e *env) insert(t *testing.T, mods ...func(*row)) *store.Invocation {
	t.Helper()
	inv, inserted, err := e.s.InvocationInsert(e.ctx, params(mods...))
	if err != nil {
		t.Fatalf("InvocationInsert: %v", err)
	}
	if !inserted {
		t.Fatalf("InvocationInsert: inserted = false for a fresh key")
	}
	return inv
}

func (e *env) get(t *testing.T, id int64) *store.Invocation {
	t.Helper()
	inv, err := e.s.InvocationGet(e.ctx, id)
	if err != nil {
		t.Fatalf("InvocationGet(%d): %v", id, err)
	}
	return inv
}

// runningWithWatermark inserts a RUNNING row with a long lease and marks its watermark.
func (e *env) runningWithWatermark(t *testing.T, mods ...func(*row)) *store.Invocation {
	t.Helper()
	inv := e.insert(t, append(mods, running("w-"+randomHex(4), longLease))...)
	if err := e.s.InvocationMarkEffectSentIfLeased(e.ctx, inv.Fence(), "tok-"+randomHex(4)); err != nil {
		t.Fatalf("InvocationMarkEffectSentIfLeased: %v", err)
	}
	return e.get(t, inv.ID)
}

// expire makes every lease of owner run out now by the store's clock: it renews them
// to one microsecond (renewal sets now + lease), so rows of one owner expire at the
// same instant, and moves the clock a millisecond (SQLite's precision) past it. The
// other owners' leases, longLease or more, do not notice.
func (e *env) expire(t *testing.T, owner string, want int) {
	t.Helper()
	n, err := e.s.InvocationRenewLeases(e.ctx, owner, e.leasedBy(t, owner), time.Microsecond)
	if err != nil {
		t.Fatalf("InvocationRenewLeases: %v", err)
	}
	if n != want {
		t.Fatalf("InvocationRenewLeases(%s) = %d, want %d", owner, n, want)
	}
	e.elapse(time.Millisecond)
}

// elapse moves the store's time forward by d: the suite's way to let a lease run
// out, a session go idle or a cancellation age, without sleeping.
func (e *env) elapse(d time.Duration) { e.clock.Advance(d) }

// leasedBy lists the ids of the rows whose lease owner is owner.
func (e *env) leasedBy(t *testing.T, owner string) []int64 {
	t.Helper()
	rows, err := e.s.InvocationList(e.ctx, store.InvocationFilter{})
	if err != nil {
		t.Fatalf("InvocationList: %v", err)
	}
	var ids []int64
	for _, r := range rows {
		if r.LeaseOwner == owner {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// eventually polls cond until it holds or pollTimeout passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// sweepUntil sweeps with p until every id in ids has been swept, and returns what the
// passes decided, by id. The rows' leases must already have run out by the store's
// clock (expire, elapse): each pass must reclaim some of them, so nothing is waited
// for. It fails on a pass that reclaims none, a row swept twice or a row not in ids.
func (e *env) sweepUntil(t *testing.T, p store.SweepParams, ids ...int64) map[int64]store.Swept {
	t.Helper()
	want := map[int64]bool{}
	for _, id := range ids {
		want[id] = true
	}
	got := map[int64]store.Swept{}
	for len(got) < len(want) {
		swept, err := e.s.InvocationSweep(e.ctx, p)
		if err != nil {
			t.Fatalf("InvocationSweep: %v", err)
		}
		for _, sw := range swept {
			id := sw.Invocation.ID
			if !want[id] {
				t.Fatalf("InvocationSweep reclaimed unexpected row %d (%s)", id, sw.Decision)
			}
			if _, dup := got[id]; dup {
				t.Fatalf("InvocationSweep reclaimed row %d twice", id)
			}
			got[id] = sw
		}
		if len(swept) == 0 {
			t.Fatalf("InvocationSweep reclaimed none of %v (%d of %d reclaimed): their leases have run out by the store's clock", ids, len(got), len(want))
		}
	}
	return got
}

// sweepOne expires inv's lease (its owner must hold only this row) and sweeps it.
func (e *env) sweepOne(t *testing.T, inv *store.Invocation, p store.SweepParams) store.Swept {
	t.Helper()
	e.expire(t, inv.LeaseOwner, 1)
	return e.sweepUntil(t, p, inv.ID)[inv.ID]
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err = %v, want %v", what, err, target)
	}
}

func noErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func sameJSON(a, b json.RawMessage) bool { return bytes.Equal(a, b) }

func settled(status store.Status, outcome string) store.Settlement {
	return store.Settlement{Status: status, ReasonCode: "", Outcome: json.RawMessage(outcome)}
}

// ---- insert and read

func testInsertPendingRoundTripsEveryField(t *testing.T, e *env) {
	p := params(func(p *row) {
		p.Idempotency, p.IdempotentWhen = store.IdempotencyConditionallyIdempotent, ptr(true)
		p.Step, p.ToolVersion, p.Decision, p.ReasonCode = 7, 3, store.DecisionNeedsApproval, "approval_required"
		p.ToolSHA256 = "sha-demo.write-v3"
	})
	inv, inserted, err := e.s.InvocationInsert(e.ctx, p)
	noErr(t, "InvocationInsert", err)
	if !inserted || inv.ID == 0 {
		t.Fatalf("inserted = %v, id = %d", inserted, inv.ID)
	}
	for _, got := range []*store.Invocation{inv, e.get(t, inv.ID)} {
		if got.Key != p.Key || got.Tenant != p.Tenant || got.Principal != p.Principal || got.SessionID != p.SessionID ||
			got.RunID != p.RunID || got.Step != p.Step || got.CallID != p.CallID || got.Tool != p.Tool ||
			got.ToolVersion != p.ToolVersion || got.ToolSHA256 != p.ToolSHA256 || got.Idempotency != p.Idempotency || got.IdempotentWhen == nil ||
			!*got.IdempotentWhen || !sameJSON(got.Args, p.Args) || got.ArgsHash != p.ArgsHash ||
			got.OriginTrust != p.OriginTrust || got.ArgumentTrust != p.ArgumentTrust || got.Mode != p.Mode ||
			got.Decision != p.Decision || got.Status != store.StatusPending || got.ReasonCode != "" ||
			len(got.Outcome) != 0 {
			t.Fatalf("row does not carry the inserted fields:\n got %+v\nwant %+v", got, p)
		}
		if got.Attempt != 0 || got.LeaseOwner != "" || got.LeaseExpiresAt != nil || got.EffectSentAt != nil ||
			got.EarlierEffectSentAt != nil || got.SuspendedAt != nil || got.ResumeToken != "" || got.WatermarkMissing ||
			got.Resolution != "" || got.ResolvedBy != "" || got.ResolvedAt != nil {
			t.Fatalf("fresh PENDING row has state: %+v", got)
		}
		if got.CreatedAt.IsZero() || !got.CreatedAt.Equal(got.UpdatedAt) {
			t.Fatalf("CreatedAt %v, UpdatedAt %v", got.CreatedAt, got.UpdatedAt)
		}
	}
	byKey, err := e.s.InvocationGetByKey(e.ctx, p.Key)
	noErr(t, "InvocationGetByKey", err)
	if byKey.ID != inv.ID {
		t.Fatalf("InvocationGetByKey id = %d, want %d", byKey.ID, inv.ID)
	}
	// no idempotent_when and no args round-trip as nil
	bare := e.insert(t, func(p *row) { p.Args, p.IdempotentWhen = nil, nil })
	if got := e.get(t, bare.ID); got.IdempotentWhen != nil || got.Args != nil {
		t.Fatalf("IdempotentWhen %v, Args %q; want nil", got.IdempotentWhen, got.Args)
	}
}

// testInsertReturnsTheRowAsRead: the row an insert returns is the row a read of it
// returns, every field, for every constructor (a driver may build it from what it
// inserted rather than read it back).
func testInsertReturnsTheRowAsRead(t *testing.T, e *env) {
	cases := map[string]func(*row){
		"pending": func(*row) {},
		"held":    func(p *row) { p.Decision = store.DecisionNeedsApproval },
		"running": running("worker-1", time.Minute),
		"settled": func(p *row) {
			p.Status, p.ReasonCode, p.Outcome = store.StatusDenied, "denied_by_policy", json.RawMessage(`{"a": [1, 2.50, "x"]}`)
		},
		"record-once": func(p *row) {
			p.Status, p.Outcome, p.Relaxed = store.StatusSucceeded, json.RawMessage(`{"ok":true,"text":"é\u00e9"}`), true
		},
		"no args":      func(p *row) { p.Args = nil },
		"when false":   idempotency(store.IdempotencyConditionallyIdempotent, ptr(false)),
		"when true":    idempotency(store.IdempotencyConditionallyIdempotent, ptr(true)),
		"every string": func(p *row) { p.ToolSHA256, p.Workspace, p.Mode, p.Step = "sha-x", "/ws/a", "", 0 },
	}
	for name, mod := range cases {
		inv := e.insert(t, mod)
		if got := e.get(t, inv.ID); !reflect.DeepEqual(inv, got) {
			t.Errorf("%s: the insert returned\n %+v\nand a read returns\n %+v", name, inv, got)
		}
	}
}

func testInsertRunningLeaseByDatabaseClock(t *testing.T, e *env) {
	lease := 1500 * time.Millisecond
	inv := e.insert(t, running("worker-1", lease))
	if inv.Status != store.StatusRunning || inv.Attempt != 1 || inv.LeaseOwner != "worker-1" || inv.LeaseExpiresAt == nil {
		t.Fatalf("RUNNING insert: %+v", inv)
	}
	if d := inv.LeaseExpiresAt.Sub(inv.UpdatedAt); d != lease {
		t.Fatalf("lease_expires_at - updated_at = %v, want %v (both from the database clock)", d, lease)
	}
	if inv.Fence() != (store.Fence{ID: inv.ID, Owner: "worker-1", Attempt: 1}) {
		t.Fatalf("Fence() = %+v", inv.Fence())
	}
}

func testInsertTerminalRecordsOutcomeOnce(t *testing.T, e *env) {
	for _, st := range []store.Status{store.StatusSucceeded, store.StatusDenied, store.StatusFailed, store.StatusUnavailable, store.StatusUncertain} {
		inv := e.insert(t, func(p *row) {
			p.Status, p.ReasonCode, p.Outcome = st, "some_reason", json.RawMessage(`{"ok":false}`)
			p.Owner, p.Lease = "ignored", time.Minute
		})
		if inv.Status != st || inv.ReasonCode != "some_reason" || !sameJSON(inv.Outcome, json.RawMessage(`{"ok":false}`)) ||
			inv.Attempt != 0 || inv.LeaseOwner != "" || inv.LeaseExpiresAt != nil {
			t.Fatalf("terminal %s insert: %+v", st, inv)
		}
	}
}

func testInsertDuplicateKeyReturnsExisting(t *testing.T, e *env) {
	first := e.insert(t)
	again := params(running("worker-2", time.Minute), func(p *row) {
		p.Key, p.Tool, p.Args = first.Key, "other.tool", json.RawMessage(`{"x":2}`)
	})
	got, inserted, err := e.s.InvocationInsert(e.ctx, again)
	noErr(t, "InvocationInsert duplicate", err)
	if inserted {
		t.Fatal("inserted = true for an existing key")
	}
	if got.ID != first.ID || got.Status != store.StatusPending || got.Tool != first.Tool || !sameJSON(got.Args, first.Args) ||
		got.Attempt != 0 || got.LeaseOwner != "" || !got.UpdatedAt.Equal(first.UpdatedAt) {
		t.Fatalf("duplicate insert changed or misreported the row:\n got %+v\nwant %+v", got, first)
	}
	if now := e.get(t, first.ID); now.Tool != first.Tool || now.Status != store.StatusPending || !now.UpdatedAt.Equal(first.UpdatedAt) {
		t.Fatalf("duplicate insert wrote: %+v", now)
	}
}

func testInsertConcurrentSameKeyExactlyOneInserted(t *testing.T, e *env) {
	const rounds, racers = 5, 8
	for r := 0; r < rounds; r++ {
		p := params(running("w", time.Minute))
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			inserted int
			ids      = map[int64]bool{}
			errs     []error
		)
		for i := 0; i < racers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				inv, ins, err := e.handle(i).InvocationInsert(e.ctx, p)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				ids[inv.ID] = true
				if ins {
					inserted++
				}
			}()
		}
		wg.Wait()
		if len(errs) > 0 || inserted != 1 || len(ids) != 1 {
			t.Fatalf("round %d: inserted %d times, ids %v, errors %v; want exactly one insert, one id", r, inserted, ids, errs)
		}
	}
}

func testInsertInvalid(t *testing.T, e *env) {
	cases := map[string]store.InsertParams{
		"no key":              params(func(p *row) { p.Key = "" }),
		"running no owner":    params(running("", time.Minute)),
		"running no lease":    params(running("w", 0)),
		"running neg lease":   params(running("w", -time.Second)),
		"unknown status":      params(func(p *row) { p.Status = "SLEEPING" }),
		"empty status":        params(func(p *row) { p.Status = "" }),
		"suspension (status)": params(func(p *row) { p.Status = "SUSPENDED" }),
		"no constructor":      {Call: params().Call},
		"settled, missing watermark": store.InsertSettled(params().Call,
			store.SettleFailed("x", json.RawMessage(`{}`)).WithWatermarkMissing(true)),
		// arguments and outcomes are JSON (or nothing): the store checks, not the schema
		"arguments not JSON":   params(func(p *row) { p.Args = json.RawMessage(`{"a":`) }),
		"arguments two values": params(func(p *row) { p.Args = json.RawMessage(`{} {}`) }),
		"outcome not JSON": params(func(p *row) {
			p.Status, p.Outcome = store.StatusSucceeded, json.RawMessage(`succeeded`)
		}),
		"record-once outcome not JSON": params(func(p *row) {
			p.Status, p.Outcome, p.Relaxed = store.StatusSucceeded, json.RawMessage(`{"ok":tru}`), true
		}),
	}
	for name, p := range cases {
		_, _, err := e.s.InvocationInsert(e.ctx, p)
		wantErr(t, name, err, store.ErrInvalid)
		if p.Key != "" {
			_, err := e.s.InvocationGetByKey(e.ctx, p.Key)
			wantErr(t, name+": row written", err, store.ErrNotFound)
		}
	}
}

func testGetMissingNotFound(t *testing.T, e *env) {
	_, err := e.s.InvocationGet(e.ctx, 424242)
	wantErr(t, "InvocationGet", err, store.ErrNotFound)
	_, err = e.s.InvocationGetByKey(e.ctx, "nope")
	wantErr(t, "InvocationGetByKey", err, store.ErrNotFound)
}

// ---- claim

func testClaimPendingRunningWithLease(t *testing.T, e *env) {
	inv := e.insert(t)
	lease := 90 * time.Second
	got, err := e.s.InvocationClaimIfPending(e.ctx, inv.ID, "worker-1", lease)
	noErr(t, "InvocationClaimIfPending", err)
	if got.Status != store.StatusRunning || got.Attempt != 1 || got.LeaseOwner != "worker-1" || got.LeaseExpiresAt == nil {
		t.Fatalf("claimed row: %+v", got)
	}
	if d := got.LeaseExpiresAt.Sub(got.UpdatedAt); d != lease {
		t.Fatalf("lease_expires_at - updated_at = %v, want %v", d, lease)
	}
	if stored := e.get(t, inv.ID); stored.Status != store.StatusRunning || stored.Attempt != 1 {
		t.Fatalf("stored row: %+v", stored)
	}
}

func testClaimNotPendingConflict(t *testing.T, e *env) {
	run := e.insert(t, running("w", longLease))
	_, err := e.s.InvocationClaimIfPending(e.ctx, run.ID, "w2", time.Minute)
	wantErr(t, "claim RUNNING", err, store.ErrConflict)
	done := e.insert(t, func(p *row) { p.Status = store.StatusSucceeded })
	_, err = e.s.InvocationClaimIfPending(e.ctx, done.ID, "w2", time.Minute)
	wantErr(t, "claim SUCCEEDED", err, store.ErrConflict)
	if got := e.get(t, run.ID); got.LeaseOwner != "w" || got.Attempt != 1 {
		t.Fatalf("losing claim wrote: %+v", got)
	}
}

func testClaimMissingNotFound(t *testing.T, e *env) {
	_, err := e.s.InvocationClaimIfPending(e.ctx, 424242, "w", time.Minute)
	wantErr(t, "claim missing", err, store.ErrNotFound)
}

func testClaimInvalid(t *testing.T, e *env) {
	inv := e.insert(t)
	_, err := e.s.InvocationClaimIfPending(e.ctx, inv.ID, "", time.Minute)
	wantErr(t, "claim without owner", err, store.ErrInvalid)
	_, err = e.s.InvocationClaimIfPending(e.ctx, inv.ID, "w", 0)
	wantErr(t, "claim without lease", err, store.ErrInvalid)
	if got := e.get(t, inv.ID); got.Status != store.StatusPending {
		t.Fatalf("invalid claim wrote: %+v", got)
	}
}

func testClaimConcurrentExactlyOneWins(t *testing.T, e *env) {
	const rows, claimers = 10, 8
	for r := 0; r < rows; r++ {
		inv := e.insert(t)
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			owners []string
			errs   []error
		)
		for i := 0; i < claimers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owner := fmt.Sprintf("worker-%d", i)
				_, err := e.handle(i).InvocationClaimIfPending(e.ctx, inv.ID, owner, time.Minute)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					owners = append(owners, owner)
				case !errors.Is(err, store.ErrConflict):
					errs = append(errs, err)
				}
			}()
		}
		wg.Wait()
		if len(errs) > 0 || len(owners) != 1 {
			t.Fatalf("row %d: winners %v, unexpected errors %v; want exactly one winner", r, owners, errs)
		}
		if got := e.get(t, inv.ID); got.LeaseOwner != owners[0] || got.Attempt != 1 {
			t.Fatalf("row %d: owner %q attempt %d, want %q attempt 1", r, got.LeaseOwner, got.Attempt, owners[0])
		}
	}
}

// ---- watermark

func testMarkEffectSentSetsWatermark(t *testing.T, e *env) {
	inv := e.insert(t, running("w", longLease))
	noErr(t, "mark", e.s.InvocationMarkEffectSentIfLeased(e.ctx, inv.Fence(), "tok-1"))
	got := e.get(t, inv.ID)
	if got.EffectSentAt == nil || got.Status != store.StatusRunning || got.LeaseOwner != "w" {
		t.Fatalf("after watermark: %+v", got)
	}
	if got.EffectSentAt.Before(inv.CreatedAt) {
		t.Fatalf("effect_sent_at %v before created_at %v", got.EffectSentAt, inv.CreatedAt)
	}
}

func testMarkEffectSentLostAckRetrySucceeds(t *testing.T, e *env) {
	inv := e.insert(t, running("w", longLease))
	noErr(t, "mark", e.s.InvocationMarkEffectSentIfLeased(e.ctx, inv.Fence(), "tok-1"))
	first := e.get(t, inv.ID).EffectSentAt
	// the acknowledgement was lost: the worker retries with the same token
	noErr(t, "mark retried after lost ack", e.s.InvocationMarkEffectSentIfLeased(e.ctx, inv.Fence(), "tok-1"))
	noErr(t, "mark retried on the other handle", e.other.InvocationMarkEffectSentIfLeased(e.ctx, inv.Fence(), "tok-1"))
	if again := e.get(t, inv.ID).EffectSentAt; again == nil || !again.Equal(*first) {
		t.Fatalf("retry moved the watermark: %v -> %v", first, again)
	}
}

func testMarkEffectSentOtherTokenConflict(t *testing.T, e *env) {
	inv := e.insert(t, running("w", longLease))
	noErr(t, "mark", e.s.InvocationMarkEffectSentIfLeased(e.ctx, inv.Fence(), "tok-1"))
	err := e.s.InvocationMarkEffectSentIfLeased(e.ctx, inv.Fence(), "tok-2")
	wantErr(t, "mark with another token", err, store.ErrConflict)
}

func testMarkEffectSentZombieFenceLeaseLost(t *testing.T, e *env) {
	inv := e.insert(t, running("w", longLease))
	f := inv.Fence()
	for name, zombie := range map[string]store.Fence{
		"other owner":   {ID: f.ID, Owner: "w2", Attempt: f.Attempt},
		"older attempt": {ID: f.ID, Owner: f.Owner, Attempt: f.Attempt - 1},
		"newer attempt": {ID: f.ID, Owner: f.Owner, Attempt: f.Attempt + 1},
		"other row":     {ID: 424242, Owner: f.Owner, Attempt: f.Attempt},
		"empty owner":   {ID: f.ID, Owner: "", Attempt: f.Attempt},
	} {
		wantErr(t, name, e.s.InvocationMarkEffectSentIfLeased(e.ctx, zombie, "tok"), store.ErrLeaseLost)
	}
	if got := e.get(t, inv.ID); got.EffectSentAt != nil {
		t.Fatalf("zombie set the watermark: %+v", got)
	}
	noErr(t, "settle", e.s.InvocationSettleIfLeased(e.ctx, f, settled(store.StatusSucceeded, `{}`)))
	wantErr(t, "mark after settle", e.s.InvocationMarkEffectSentIfLeased(e.ctx, f, "tok"), store.ErrLeaseLost)
}

func testMarkEffectSentLeaseExpiredLeaseLost(t *testing.T, e *env) {
	// While the lease holds, marking (idempotently, one token) succeeds, up to its last
	// minute; once the store's clock passes it, the watermark is refused.
	inv := e.insert(t, running("w", 10*time.Minute))
	noErr(t, "mark under the lease", e.s.InvocationMarkEffectSentIfLeased(e.ctx, inv.Fence(), "tok"))
	e.elapse(9 * time.Minute)
	noErr(t, "mark in the lease's last minute", e.s.InvocationMarkEffectSentIfLeased(e.ctx, inv.Fence(), "tok"))
	e.elapse(2 * time.Minute)
	wantErr(t, "mark after the lease", e.s.InvocationMarkEffectSentIfLeased(e.ctx, inv.Fence(), "tok"), store.ErrLeaseLost)
	// not yet swept: the row is still RUNNING under the fence, and may still settle
	if got := e.get(t, inv.ID); got.Status != store.StatusRunning || got.LeaseOwner != "w" {
		t.Fatalf("expired, unswept row: %+v", got)
	}
	noErr(t, "settle after expiry", e.s.InvocationSettleIfLeased(e.ctx, inv.Fence(), settled(store.StatusFailed, `{}`)))
}

func testMarkEffectSentEmptyToken(t *testing.T, e *env) {
	inv := e.insert(t, running("w", longLease))
	wantErr(t, "mark without token", e.s.InvocationMarkEffectSentIfLeased(e.ctx, inv.Fence(), ""), store.ErrInvalid)
}

// ---- settle

func testSettleRecordsOutcomeKeepsFence(t *testing.T, e *env) {
	inv := e.insert(t, running("w", longLease))
	s := store.Settlement{Status: store.StatusFailed, ReasonCode: "tool_failed", Outcome: json.RawMessage(`{"err":"x"}`), WatermarkMissing: true}
	noErr(t, "settle", e.s.InvocationSettleIfLeased(e.ctx, inv.Fence(), s))
	got := e.get(t, inv.ID)
	if got.Status != s.Status || got.ReasonCode != s.ReasonCode || !sameJSON(got.Outcome, s.Outcome) || !got.WatermarkMissing {
		t.Fatalf("settled row: %+v", got)
	}
	if got.LeaseOwner != "w" || got.Attempt != 1 || got.LeaseExpiresAt != nil {
		t.Fatalf("settle must keep the fence (owner, attempt) and release the lease: %+v", got)
	}
	if got.UpdatedAt.Before(inv.UpdatedAt) {
		t.Fatalf("updated_at went back: %v -> %v", inv.UpdatedAt, got.UpdatedAt)
	}
}

func testSettleLostAckRetrySucceeds(t *testing.T, e *env) {
	inv := e.insert(t, running("w", longLease))
	noErr(t, "settle", e.s.InvocationSettleIfLeased(e.ctx, inv.Fence(), settled(store.StatusSucceeded, `{"n":1}`)))
	before := e.get(t, inv.ID)
	// the acknowledgement was lost: the retry finds its own write and succeeds, writing nothing
	noErr(t, "settle retried", e.s.InvocationSettleIfLeased(e.ctx, inv.Fence(), settled(store.StatusSucceeded, `{"n":2}`)))
	noErr(t, "settle retried on the other handle", e.other.InvocationSettleIfLeased(e.ctx, inv.Fence(), settled(store.StatusSucceeded, `{"n":3}`)))
	after := e.get(t, inv.ID)
	if !sameJSON(after.Outcome, json.RawMessage(`{"n":1}`)) || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("lost-ack retry rewrote the row: %+v", after)
	}
}

func testSettleLostAckOtherStatusLeaseLost(t *testing.T, e *env) {
	inv := e.insert(t, running("w", longLease))
	noErr(t, "settle", e.s.InvocationSettleIfLeased(e.ctx, inv.Fence(), settled(store.StatusSucceeded, `{}`)))
	err := e.s.InvocationSettleIfLeased(e.ctx, inv.Fence(), settled(store.StatusFailed, `{}`))
	wantErr(t, "settle again with another status", err, store.ErrLeaseLost)
	if got := e.get(t, inv.ID); got.Status != store.StatusSucceeded {
		t.Fatalf("status changed to %s", got.Status)
	}
}

func testSettleZombieFenceLeaseLost(t *testing.T, e *env) {
	inv := e.insert(t, running("w", longLease))
	f := inv.Fence()
	for name, zombie := range map[string]store.Fence{
		"other owner":   {ID: f.ID, Owner: "w2", Attempt: f.Attempt},
		"older attempt": {ID: f.ID, Owner: f.Owner, Attempt: f.Attempt - 1},
		"other row":     {ID: 424242, Owner: f.Owner, Attempt: f.Attempt},
	} {
		err := e.s.InvocationSettleIfLeased(e.ctx, zombie, settled(store.StatusSucceeded, `{}`))
		wantErr(t, name, err, store.ErrLeaseLost)
	}
	pending := e.insert(t)
	err := e.s.InvocationSettleIfLeased(e.ctx, store.Fence{ID: pending.ID, Owner: "w", Attempt: 0}, settled(store.StatusSucceeded, `{}`))
	wantErr(t, "settle a PENDING row", err, store.ErrLeaseLost)
	if got := e.get(t, inv.ID); got.Status != store.StatusRunning {
		t.Fatalf("zombie settled the row: %+v", got)
	}
}

func testSettleLeaseExpiredNotYetSwept(t *testing.T, e *env) {
	// A lease that ran out but was not reclaimed still fences: recording what happened
	// is always better than leaving it to the sweep.
	inv := e.insert(t, running("w", time.Microsecond))
	noErr(t, "settle", e.s.InvocationSettleIfLeased(e.ctx, inv.Fence(), settled(store.StatusSucceeded, `{}`)))
	if got := e.get(t, inv.ID); got.Status != store.StatusSucceeded {
		t.Fatalf("status %s", got.Status)
	}
}

func testSettleNonTerminal(t *testing.T, e *env) {
	inv := e.insert(t, running("w", longLease))
	for _, st := range []store.Status{store.StatusPending, store.StatusRunning, "", "DONE"} {
		err := e.s.InvocationSettleIfLeased(e.ctx, inv.Fence(), settled(st, `{}`))
		wantErr(t, "settle to "+string(st), err, store.ErrInvalid)
	}
	// An outcome that is not JSON is refused, and nothing is written: the row stays
	// RUNNING, and so does a suspension's or a review's.
	err := e.s.InvocationSettleIfLeased(e.ctx, inv.Fence(), settled(store.StatusSucceeded, `{"ok":`))
	wantErr(t, "settle with an outcome that is not JSON", err, store.ErrInvalid)
	err = e.s.InvocationSuspendIfLeased(e.ctx, inv.Fence(), "resume-json", json.RawMessage(`held`))
	wantErr(t, "suspend with an outcome that is not JSON", err, store.ErrInvalid)
	if got := e.get(t, inv.ID); got.Status != store.StatusRunning || got.SuspendedAt != nil || len(got.Outcome) != 0 {
		t.Fatalf("invalid settlements wrote: %+v", got)
	}
	uncertain := e.insert(t, func(p *row) { p.Status = store.StatusUncertain })
	_, err = e.s.InvocationResolveUncertain(e.ctx, uncertain.ID, store.ResolutionHappened, "carol", json.RawMessage(`{x}`), nil)
	wantErr(t, "resolve with an outcome that is not JSON", err, store.ErrInvalid)
	if got := e.get(t, uncertain.ID); got.Status != store.StatusUncertain || got.Resolution != "" {
		t.Fatalf("an invalid review wrote: %+v", got)
	}
}

// ---- the sweep

func testSweepNoWatermarkRetry(t *testing.T, e *env) {
	inv := e.insert(t, running("w1", longLease), func(p *row) { p.ReasonCode = "" })
	sw := e.sweepOne(t, inv, store.SweepParams{MaxAttempts: 3, Claimable: allTools})
	got := sw.Invocation
	if sw.Decision != store.SweepRetry || got.Status != store.StatusPending || got.Key != inv.Key ||
		got.Attempt != 1 || got.LeaseOwner != "" || got.LeaseExpiresAt != nil || got.EffectSentAt != nil ||
		got.EarlierEffectSentAt != nil {
		t.Fatalf("swept without watermark: %s %+v", sw.Decision, got)
	}
	if stored := e.get(t, inv.ID); stored.Status != store.StatusPending {
		t.Fatalf("stored status %s", stored.Status)
	}
	// the retry is claimed like any PENDING row; the attempt goes up
	claimed, err := e.s.InvocationClaimIfPending(e.ctx, inv.ID, "w2", longLease)
	noErr(t, "claim retry", err)
	if claimed.Attempt != 2 || claimed.Key != inv.Key {
		t.Fatalf("claimed retry: %+v", claimed)
	}
}

func testSweepCrashLoopFailed(t *testing.T, e *env) {
	const maxAttempts = 3
	inv := e.insert(t, running("w-0", longLease))
	p := store.SweepParams{MaxAttempts: maxAttempts, Claimable: allTools}
	for attempt := 1; ; attempt++ {
		sw := e.sweepOne(t, inv, p)
		if attempt < maxAttempts {
			if sw.Decision != store.SweepRetry {
				t.Fatalf("attempt %d: decision %s, want retry", attempt, sw.Decision)
			}
			var err error
			inv, err = e.s.InvocationClaimIfPending(e.ctx, inv.ID, fmt.Sprintf("w-%d", attempt), longLease)
			noErr(t, "claim", err)
			continue
		}
		got := sw.Invocation
		if sw.Decision != store.SweepFailed || got.Status != store.StatusFailed || got.ReasonCode != store.ReasonCrashLoop ||
			got.Attempt != maxAttempts || got.LeaseOwner != "" || got.LeaseExpiresAt != nil {
			t.Fatalf("attempt %d: %s %+v, want FAILED crash_loop", attempt, sw.Decision, got)
		}
		break
	}
	if rows, err := e.s.InvocationListRetryable(e.ctx, store.RetryableParams{Claimable: allTools}); err != nil || len(rows) != 0 {
		t.Fatalf("retryable after crash loop: %v %v", rows, err)
	}
}

// checkWatermarkRetry asserts a swept retry cleared the attempt's watermark and
// remembered it, and that the next attempt sets its own.
func (e *env) checkWatermarkRetry(t *testing.T, before *store.Invocation, sw store.Swept) {
	t.Helper()
	got := sw.Invocation
	if sw.Decision != store.SweepRetry || got.Status != store.StatusPending || got.EffectSentAt != nil ||
		got.EarlierEffectSentAt == nil || !got.EarlierEffectSentAt.Equal(*before.EffectSentAt) || got.LeaseOwner != "" {
		t.Fatalf("watermarked retry: %s %+v", sw.Decision, got)
	}
	claimed, err := e.s.InvocationClaimIfPending(e.ctx, got.ID, "w-next", longLease)
	noErr(t, "claim", err)
	noErr(t, "new attempt's watermark (new token)", e.s.InvocationMarkEffectSentIfLeased(e.ctx, claimed.Fence(), "tok-next"))
	again := e.get(t, got.ID)
	if again.EffectSentAt == nil || !again.EarlierEffectSentAt.Equal(*before.EffectSentAt) {
		t.Fatalf("after the retry's own watermark: %+v", again)
	}
}

func testSweepWatermarkSetIdempotentRetry(t *testing.T, e *env) {
	inv := e.runningWithWatermark(t, idempotency(store.IdempotencyIdempotent, nil))
	e.checkWatermarkRetry(t, inv, e.sweepOne(t, inv, store.SweepParams{Claimable: allTools}))
}

func testSweepWatermarkSetConditionalWhenTrueRetry(t *testing.T, e *env) {
	inv := e.runningWithWatermark(t, idempotency(store.IdempotencyConditionallyIdempotent, ptr(true)))
	e.checkWatermarkRetry(t, inv, e.sweepOne(t, inv, store.SweepParams{Claimable: allTools}))
}

// testSweepWatermarkSetIsVocabsRule holds the driver's sweep statement to RT-4's rule
// as vocab states it (Idempotency.RetrySafeWhen), for every class and every value of
// idempotent_when: the one rule the pipeline applies in flight, spelt once more in SQL.
func testSweepWatermarkSetIsVocabsRule(t *testing.T, e *env) {
	for _, class := range vocab.Idempotencies() {
		for _, when := range []*bool{nil, ptr(false), ptr(true)} {
			if when != nil && class != vocab.ConditionallyIdempotent {
				continue // idempotent_when is recorded for conditional classes only
			}
			inv := e.runningWithWatermark(t, idempotency(string(class), when))
			sw := e.sweepOne(t, inv, store.SweepParams{Claimable: allTools})
			want := store.SweepUncertain
			if class.RetrySafeWhen(when) {
				want = store.SweepRetry
			}
			if sw.Decision != want {
				t.Errorf("%s, idempotent_when %v: the sweep decided %s, vocab's rule says %s", class, fmtBool(when), sw.Decision, want)
			}
		}
	}
}

func fmtBool(b *bool) string {
	if b == nil {
		return "unevaluated"
	}
	return fmt.Sprint(*b)
}

func checkUncertain(t *testing.T, before *store.Invocation, sw store.Swept) {
	t.Helper()
	got := sw.Invocation
	if sw.Decision != store.SweepUncertain || got.Status != store.StatusUncertain ||
		got.ReasonCode != store.ReasonEffectMayHaveHappened || got.EffectSentAt == nil ||
		!got.EffectSentAt.Equal(*before.EffectSentAt) || got.LeaseOwner != "" || got.LeaseExpiresAt != nil ||
		got.Attempt != before.Attempt {
		t.Fatalf("watermarked row: %s %+v, want UNCERTAIN effect_may_have_happened with the watermark kept", sw.Decision, got)
	}
}

func testSweepWatermarkSetConditionalWhenFalseUncertain(t *testing.T, e *env) {
	for _, when := range []*bool{ptr(false), nil} {
		inv := e.runningWithWatermark(t, idempotency(store.IdempotencyConditionallyIdempotent, when))
		checkUncertain(t, inv, e.sweepOne(t, inv, store.SweepParams{Claimable: allTools}))
	}
}

func testSweepWatermarkSetNonIdempotentUncertain(t *testing.T, e *env) {
	inv := e.runningWithWatermark(t, idempotency(store.IdempotencyNonIdempotent, nil))
	// even a crash-loop bound already reached does not hide a possible effect
	checkUncertain(t, inv, e.sweepOne(t, inv, store.SweepParams{MaxAttempts: 1, Claimable: allTools}))
	queue, err := e.s.InvocationListUncertain(e.ctx, "")
	noErr(t, "InvocationListUncertain", err)
	if len(queue) != 1 || queue[0].ID != inv.ID {
		t.Fatalf("review queue: %v", queue)
	}
	// an unknown class with a watermark is not assumed safe either
	odd := e.runningWithWatermark(t, idempotency("", nil))
	checkUncertain(t, odd, e.sweepOne(t, odd, store.SweepParams{Claimable: allTools}))
}

func testSweepWatermarkSetIdempotentCrashLoopFailed(t *testing.T, e *env) {
	inv := e.runningWithWatermark(t, idempotency(store.IdempotencyIdempotent, nil))
	sw := e.sweepOne(t, inv, store.SweepParams{MaxAttempts: 1, Claimable: allTools})
	if sw.Decision != store.SweepFailed || sw.Invocation.Status != store.StatusFailed ||
		sw.Invocation.ReasonCode != store.ReasonCrashLoop || sw.Invocation.EffectSentAt == nil {
		t.Fatalf("idempotent crash loop: %s %+v", sw.Decision, sw.Invocation)
	}
}

func testSweepLeaseExpiresByStoreClock(t *testing.T, e *env) {
	long := e.insert(t, running("w-long", longLease))
	short := e.insert(t, running("w-short", 10*time.Minute))
	e.elapse(9 * time.Minute)
	swept, err := e.s.InvocationSweep(e.ctx, store.SweepParams{Claimable: allTools})
	noErr(t, "sweep before the lease ran out", err)
	if len(swept) != 0 {
		t.Fatalf("a sweep a minute before the lease ran out reclaimed %+v", swept[0].Invocation)
	}
	e.elapse(2 * time.Minute)
	if swept := e.sweepUntil(t, store.SweepParams{Claimable: allTools}, short.ID); swept[short.ID].Decision != store.SweepRetry {
		t.Fatalf("short lease: %+v", swept[short.ID])
	}
	if got := e.get(t, long.ID); got.Status != store.StatusRunning || got.LeaseOwner != "w-long" {
		t.Fatalf("unexpired lease was touched: %+v", got)
	}
}

func testSweepSuspendedRowsExcluded(t *testing.T, e *env) {
	susp := e.insert(t, running("w-s", time.Minute))
	noErr(t, "suspend", e.s.InvocationSuspendIfLeased(e.ctx, susp.Fence(), "resume-"+randomHex(4), json.RawMessage(`{"q":"?"}`)))
	control := e.insert(t, running("w-c", time.Minute))
	e.elapse(2 * time.Minute)
	// once the control row (same lease, later) is swept, the suspended one would have been too
	e.sweepUntil(t, store.SweepParams{Claimable: allTools}, control.ID)
	if got := e.get(t, susp.ID); got.Status != store.StatusRunning || got.SuspendedAt == nil || got.LeaseOwner != "w-s" {
		t.Fatalf("suspended row was swept: %+v", got)
	}
}

func testSweepPendingAndTerminalRowsIgnored(t *testing.T, e *env) {
	pending := e.insert(t)
	done := e.insert(t, running("w-d", longLease))
	noErr(t, "settle", e.s.InvocationSettleIfLeased(e.ctx, done.Fence(), settled(store.StatusSucceeded, `{}`)))
	denied := e.insert(t, func(p *row) { p.Status = store.StatusDenied })
	control := e.insert(t, running("w-c", time.Microsecond))
	e.elapse(time.Millisecond)
	e.sweepUntil(t, store.SweepParams{Claimable: allTools}, control.ID)
	for _, id := range []int64{pending.ID, done.ID, denied.ID} {
		before := map[int64]store.Status{pending.ID: store.StatusPending, done.ID: store.StatusSucceeded, denied.ID: store.StatusDenied}[id]
		if got := e.get(t, id); got.Status != before {
			t.Fatalf("row %d: %s, want %s", id, got.Status, before)
		}
	}
}

func testSweepLimitBoundsOnePass(t *testing.T, e *env) {
	var ids []int64
	for i := 0; i < 5; i++ {
		ids = append(ids, e.insert(t, running("w", longLease)).ID)
	}
	e.expire(t, "w", 5) // all five expire at the same instant
	var passes []int
	var got []int64
	for {
		swept, err := e.s.InvocationSweep(e.ctx, store.SweepParams{Limit: 2, Claimable: allTools})
		noErr(t, "sweep", err)
		if len(swept) == 0 {
			break
		}
		for i := 1; i < len(swept); i++ {
			if swept[i-1].Invocation.ID >= swept[i].Invocation.ID {
				t.Fatalf("sweep not in id order: %d, %d", swept[i-1].Invocation.ID, swept[i].Invocation.ID)
			}
		}
		passes = append(passes, len(swept))
		for _, sw := range swept {
			got = append(got, sw.Invocation.ID)
		}
	}
	if fmt.Sprint(passes) != "[2 2 1]" {
		t.Fatalf("passes reclaimed %v rows, want [2 2 1]", passes)
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("swept %v, want every expired row once, oldest first: %v", got, ids)
	}
}

func testSweepZeroParamsUsesDefaults(t *testing.T, e *env) {
	if p := (store.SweepParams{}).WithDefaults(); p.Limit != store.DefaultSweepLimit || p.MaxAttempts != store.DefaultMaxAttempts {
		t.Fatalf("defaults: %+v", p)
	}
	inv := e.insert(t, running("w", longLease))
	if sw := e.sweepOne(t, inv, store.SweepParams{Claimable: allTools}); sw.Decision != store.SweepRetry {
		t.Fatalf("zero params, attempt 1: %s, want retry", sw.Decision)
	}
}

func testSweepConcurrentSweepersEachRowOnce(t *testing.T, e *env) {
	const rows, sweepers = 40, 4
	want := map[int64]bool{}
	for i := 0; i < rows; i++ {
		want[e.insert(t, running("w", longLease)).ID] = true
	}
	e.expire(t, "w", rows)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = map[int64]int{}
		errs []error
	)
	deadline := time.Now().Add(pollTimeout)
	for i := 0; i < sweepers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				swept, err := e.handle(i).InvocationSweep(e.ctx, store.SweepParams{Limit: 3, Claimable: allTools})
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				for _, sw := range swept {
					seen[sw.Invocation.ID]++
				}
				done := len(seen) == rows || err != nil
				mu.Unlock()
				if done {
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("sweep errors: %v", errs)
	}
	for id, n := range seen {
		if !want[id] || n != 1 {
			t.Fatalf("row %d reclaimed %d times (known row: %v)", id, n, want[id])
		}
	}
	if len(seen) != rows {
		t.Fatalf("reclaimed %d of %d rows", len(seen), rows)
	}
}

func testSweepRacesSettleExactlyOneWins(t *testing.T, e *env) {
	const rows = 30
	var invs []*store.Invocation
	for i := 0; i < rows; i++ {
		invs = append(invs, e.insert(t, running("w", longLease)))
	}
	e.expire(t, "w", rows)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		settled = map[int64]bool{}
		swept   = map[int64]int{}
		errs    []error
	)
	wg.Add(2)
	go func() { // the worker, late: settles every row
		defer wg.Done()
		for _, inv := range invs {
			err := e.s.InvocationSettleIfLeased(e.ctx, inv.Fence(), store.Settlement{Status: store.StatusSucceeded})
			mu.Lock()
			switch {
			case err == nil:
				settled[inv.ID] = true
			case !errors.Is(err, store.ErrLeaseLost):
				errs = append(errs, err)
			}
			mu.Unlock()
		}
	}()
	go func() { // a sweeper on another handle
		defer wg.Done()
		deadline := time.Now().Add(pollTimeout)
		for time.Now().Before(deadline) {
			out, err := e.other.InvocationSweep(e.ctx, store.SweepParams{Limit: 4, Claimable: allTools})
			mu.Lock()
			if err != nil {
				errs = append(errs, err)
			}
			for _, sw := range out {
				swept[sw.Invocation.ID]++
			}
			done := len(settled)+len(swept) >= rows || err != nil
			mu.Unlock()
			if done {
				return
			}
		}
	}()
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	for _, inv := range invs {
		if settled[inv.ID] == (swept[inv.ID] == 1) || swept[inv.ID] > 1 {
			t.Fatalf("row %d: settled %v, swept %d times; want exactly one of them", inv.ID, settled[inv.ID], swept[inv.ID])
		}
		got := e.get(t, inv.ID)
		if settled[inv.ID] && got.Status != store.StatusSucceeded || !settled[inv.ID] && got.Status != store.StatusPending {
			t.Fatalf("row %d: status %s (settled %v)", inv.ID, got.Status, settled[inv.ID])
		}
	}
}

// ---- fencing across reclaims

func testFenceZombieAfterReclaimByAnotherWorker(t *testing.T, e *env) {
	first := e.insert(t, running("w1", longLease))
	e.sweepOne(t, first, store.SweepParams{Claimable: allTools}) // w1 presumed dead
	second, err := e.other.InvocationClaimIfPending(e.ctx, first.ID, "w2", longLease)
	noErr(t, "w2 claims", err)

	zombieChecks := func(f store.Fence, who string) {
		t.Helper()
		wantErr(t, who+" marks", e.s.InvocationMarkEffectSentIfLeased(e.ctx, f, "tok-z"), store.ErrLeaseLost)
		wantErr(t, who+" settles", e.s.InvocationSettleIfLeased(e.ctx, f, settled(store.StatusSucceeded, `{}`)), store.ErrLeaseLost)
		wantErr(t, who+" suspends", e.s.InvocationSuspendIfLeased(e.ctx, f, "resume-z-"+randomHex(4), nil), store.ErrLeaseLost)
	}
	zombieChecks(first.Fence(), "zombie w1 (attempt 1)")
	if got := e.get(t, first.ID); got.LeaseOwner != "w2" || got.Attempt != 2 || got.EffectSentAt != nil || got.Status != store.StatusRunning {
		t.Fatalf("zombie wrote: %+v", got)
	}

	// w2 dies as well; w1 comes back and claims again, as attempt 3
	e.sweepOne(t, second, store.SweepParams{Claimable: allTools})
	third, err := e.s.InvocationClaimIfPending(e.ctx, first.ID, "w1", longLease)
	noErr(t, "w1 claims again", err)
	if third.Attempt != 3 {
		t.Fatalf("attempt %d, want 3", third.Attempt)
	}
	zombieChecks(first.Fence(), "zombie w1 (attempt 1, same owner name)")
	zombieChecks(second.Fence(), "zombie w2 (attempt 2)")
	noErr(t, "current fence marks", e.s.InvocationMarkEffectSentIfLeased(e.ctx, third.Fence(), "tok-3"))
	noErr(t, "current fence settles", e.s.InvocationSettleIfLeased(e.ctx, third.Fence(), settled(store.StatusSucceeded, `{"by":3}`)))
	if got := e.get(t, first.ID); got.Status != store.StatusSucceeded || got.LeaseOwner != "w1" || got.Attempt != 3 {
		t.Fatalf("final row: %+v", got)
	}
}

func testSettleZombieAfterSweptUncertain(t *testing.T, e *env) {
	inv := e.runningWithWatermark(t)
	checkUncertain(t, inv, e.sweepOne(t, inv, store.SweepParams{Claimable: allTools}))
	// the zombie worker returns from its call and settles — even claiming UNCERTAIN
	// itself, its fence is gone: the sweep cleared the owner
	for _, st := range []store.Status{store.StatusSucceeded, store.StatusUncertain} {
		err := e.s.InvocationSettleIfLeased(e.ctx, inv.Fence(), settled(st, `{}`))
		wantErr(t, "zombie settles "+string(st), err, store.ErrLeaseLost)
	}
	if got := e.get(t, inv.ID); got.Status != store.StatusUncertain || got.ReasonCode != store.ReasonEffectMayHaveHappened {
		t.Fatalf("row: %+v", got)
	}
}

// ---- leases

func testRenewExtendsOwnersUnsuspendedLeases(t *testing.T, e *env) {
	a1 := e.insert(t, running("a", 30*time.Second))
	a2 := e.insert(t, running("a", 30*time.Second))
	b := e.insert(t, running("b", 30*time.Second))
	susp := e.insert(t, running("a", 30*time.Second))
	noErr(t, "suspend", e.s.InvocationSuspendIfLeased(e.ctx, susp.Fence(), "resume-"+randomHex(4), nil))
	done := e.insert(t, running("a", 30*time.Second))
	noErr(t, "settle", e.s.InvocationSettleIfLeased(e.ctx, done.Fence(), settled(store.StatusSucceeded, `{}`)))
	// a3 is the owner's too, but not among the calls it executes: not renewed.
	a3 := e.insert(t, running("a", 30*time.Second))

	n, err := e.s.InvocationRenewLeases(e.ctx, "a", []int64{a1.ID, a2.ID, b.ID, susp.ID, done.ID}, longLease)
	noErr(t, "renew", err)
	if n != 2 {
		t.Fatalf("renewed %d rows, want 2", n)
	}
	if got := e.get(t, a3.ID); !got.LeaseExpiresAt.Equal(*a3.LeaseExpiresAt) {
		t.Fatalf("a row not named was renewed: %v -> %v", a3.LeaseExpiresAt, got.LeaseExpiresAt)
	}
	if n, err := e.s.InvocationRenewLeases(e.ctx, "a", nil, longLease); err != nil || n != 0 {
		t.Fatalf("renew of no ids: %d, %v", n, err)
	}
	for _, inv := range []*store.Invocation{a1, a2} {
		got := e.get(t, inv.ID)
		if d := got.LeaseExpiresAt.Sub(got.UpdatedAt); d != longLease || !got.LeaseExpiresAt.After(*inv.LeaseExpiresAt) {
			t.Fatalf("row %d: lease %v (from %v), want db-now + %v", inv.ID, got.LeaseExpiresAt, inv.LeaseExpiresAt, longLease)
		}
	}
	if got := e.get(t, b.ID); !got.LeaseExpiresAt.Equal(*b.LeaseExpiresAt) {
		t.Fatalf("other owner's lease changed: %v -> %v", b.LeaseExpiresAt, got.LeaseExpiresAt)
	}
	if got := e.get(t, susp.ID); got.LeaseExpiresAt != nil {
		t.Fatalf("suspended row got a lease: %v", got.LeaseExpiresAt)
	}
	if got := e.get(t, done.ID); got.LeaseExpiresAt != nil {
		t.Fatalf("settled row got a lease: %v", got.LeaseExpiresAt)
	}
	if n, err := e.s.InvocationRenewLeases(e.ctx, "nobody", []int64{a1.ID, b.ID}, longLease); err != nil || n != 0 {
		t.Fatalf("renew for an owner without rows: %d, %v", n, err)
	}
}

func testRenewExpiredLeaseNotRevived(t *testing.T, e *env) {
	inv := e.insert(t, running("w", time.Minute))
	e.elapse(time.Minute + time.Millisecond)
	n, err := e.s.InvocationRenewLeases(e.ctx, "w", []int64{inv.ID}, longLease)
	noErr(t, "renew", err)
	if n != 0 {
		t.Fatalf("an expired lease was revived")
	}
	e.sweepUntil(t, store.SweepParams{Claimable: allTools}, inv.ID)
}

func testRenewInvalid(t *testing.T, e *env) {
	_, err := e.s.InvocationRenewLeases(e.ctx, "", []int64{1}, time.Minute)
	wantErr(t, "renew without owner", err, store.ErrInvalid)
	_, err = e.s.InvocationRenewLeases(e.ctx, "w", []int64{1}, 0)
	wantErr(t, "renew without lease", err, store.ErrInvalid)
}

// ---- suspension

func testSuspendStaysRunningReleasesLease(t *testing.T, e *env) {
	inv := e.insert(t, running("w", longLease))
	noErr(t, "suspend", e.s.InvocationSuspendIfLeased(e.ctx, inv.Fence(), "resume-1", json.RawMessage(`{"question":"ok?"}`)))
	got := e.get(t, inv.ID)
	if got.Status != store.StatusRunning || got.SuspendedAt == nil || got.ResumeToken != "resume-1" ||
		!sameJSON(got.Outcome, json.RawMessage(`{"question":"ok?"}`)) || got.LeaseExpiresAt != nil ||
		got.LeaseOwner != "w" || got.Attempt != 1 {
		t.Fatalf("suspended row: %+v", got)
	}
	// a suspended row is out of the worker's hands: every fenced write is refused
	wantErr(t, "mark while suspended", e.s.InvocationMarkEffectSentIfLeased(e.ctx, inv.Fence(), "tok"), store.ErrLeaseLost)
	wantErr(t, "settle while suspended", e.s.InvocationSettleIfLeased(e.ctx, inv.Fence(), settled(store.StatusSucceeded, `{}`)), store.ErrLeaseLost)
	wantErr(t, "suspend again with another token", e.s.InvocationSuspendIfLeased(e.ctx, inv.Fence(), "resume-2", nil), store.ErrLeaseLost)
	if n, err := e.s.InvocationRenewLeases(e.ctx, "w", []int64{inv.ID}, longLease); err != nil || n != 0 {
		t.Fatalf("renew of a suspended row: %d, %v", n, err)
	}
	if _, err := e.s.InvocationClaimIfPending(e.ctx, inv.ID, "w2", longLease); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("claim of a suspended row: %v", err)
	}
}

func testSuspendLostAckRetrySucceeds(t *testing.T, e *env) {
	inv := e.insert(t, running("w", longLease))
	noErr(t, "suspend", e.s.InvocationSuspendIfLeased(e.ctx, inv.Fence(), "resume-1", json.RawMessage(`{"v":1}`)))
	before := e.get(t, inv.ID)
	noErr(t, "suspend retried", e.s.InvocationSuspendIfLeased(e.ctx, inv.Fence(), "resume-1", json.RawMessage(`{"v":1}`)))
	if after := e.get(t, inv.ID); !after.SuspendedAt.Equal(*before.SuspendedAt) || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("retry rewrote the suspension: %+v", after)
	}
}

func testSuspendTokenInUseConflict(t *testing.T, e *env) {
	a := e.insert(t, running("w", longLease))
	b := e.insert(t, running("w", longLease))
	noErr(t, "suspend a", e.s.InvocationSuspendIfLeased(e.ctx, a.Fence(), "resume-same", nil))
	err := e.s.InvocationSuspendIfLeased(e.ctx, b.Fence(), "resume-same", nil)
	wantErr(t, "suspend b with a's token", err, store.ErrConflict)
	if got := e.get(t, b.ID); got.SuspendedAt != nil {
		t.Fatalf("b was suspended: %+v", got)
	}
	wantErr(t, "suspend without token", e.s.InvocationSuspendIfLeased(e.ctx, b.Fence(), "", nil), store.ErrInvalid)
}

func testSuspendZombieFenceLeaseLost(t *testing.T, e *env) {
	inv := e.insert(t, running("w", longLease))
	err := e.s.InvocationSuspendIfLeased(e.ctx, store.Fence{ID: inv.ID, Owner: "w2", Attempt: 1}, "resume-z", nil)
	wantErr(t, "zombie suspends", err, store.ErrLeaseLost)
	if got := e.get(t, inv.ID); got.SuspendedAt != nil || got.ResumeToken != "" {
		t.Fatalf("zombie suspended: %+v", got)
	}
}

func testResumeSettlesKeepsSuspendedAt(t *testing.T, e *env) {
	inv := e.insert(t, running("w", longLease))
	noErr(t, "suspend", e.s.InvocationSuspendIfLeased(e.ctx, inv.Fence(), "resume-1", json.RawMessage(`{"question":"ok?"}`)))
	susp := e.get(t, inv.ID)
	s := store.Settlement{Status: store.StatusSucceeded, ReasonCode: "", Outcome: json.RawMessage(`{"answer":"yes"}`)}
	got, err := e.other.InvocationResume(e.ctx, "resume-1", s)
	noErr(t, "resume", err)
	if got.ID != inv.ID || got.Status != store.StatusSucceeded || !sameJSON(got.Outcome, s.Outcome) ||
		got.SuspendedAt == nil || !got.SuspendedAt.Equal(*susp.SuspendedAt) || got.ResumeToken != "resume-1" {
		t.Fatalf("resumed row: %+v", got)
	}
	_, err = e.s.InvocationResume(e.ctx, "resume-1", s)
	wantErr(t, "resume twice", err, store.ErrConflict)
	wantErr(t, "the suspending worker settles after resume",
		e.s.InvocationSettleIfLeased(e.ctx, inv.Fence(), s), store.ErrLeaseLost)
}

func testResumeErrors(t *testing.T, e *env) {
	_, err := e.s.InvocationResume(e.ctx, "no-such-token", settled(store.StatusSucceeded, `{}`))
	wantErr(t, "unknown token", err, store.ErrNotFound)
	inv := e.insert(t, running("w", longLease))
	noErr(t, "suspend", e.s.InvocationSuspendIfLeased(e.ctx, inv.Fence(), "resume-1", nil))
	_, err = e.s.InvocationResume(e.ctx, "resume-1", settled(store.StatusRunning, `{}`))
	wantErr(t, "resume to RUNNING", err, store.ErrInvalid)
	if got := e.get(t, inv.ID); got.Status != store.StatusRunning || got.SuspendedAt == nil {
		t.Fatalf("invalid resume wrote: %+v", got)
	}
}

// ---- queues and review

func testListRetryableAllowAndApprovedHolds(t *testing.T, e *env) {
	allow := e.insert(t)
	hold := func() *store.Invocation {
		return e.insert(t, func(p *row) { p.Decision = store.DecisionNeedsApproval })
	}
	approved, denied, undecided := hold(), hold(), hold()
	noErr(t, "approve", e.s.ApprovalDecide(e.ctx, store.Approval{Key: approved.Key, Tenant: approved.Tenant, Approved: true, DecidedBy: "bob"}, nil))
	noErr(t, "deny", e.s.ApprovalDecide(e.ctx, store.Approval{Key: denied.Key, Tenant: denied.Tenant, Approved: false, DecidedBy: "bob"}, nil))
	e.insert(t, running("w-r", longLease))                         // RUNNING: not retryable
	e.insert(t, func(p *row) { p.Status = store.StatusSucceeded }) // terminal
	retry := e.insert(t, running("w-retry", longLease))
	e.sweepOne(t, retry, store.SweepParams{Claimable: allTools})

	got, err := e.s.InvocationListRetryable(e.ctx, store.RetryableParams{Claimable: allTools})
	noErr(t, "list", err)
	var ids []int64
	for _, inv := range got {
		ids = append(ids, inv.ID)
	}
	if want := []int64{allow.ID, approved.ID, retry.ID}; fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("retryable %v, want %v (undecided hold %d, denied hold %d excluded)", ids, want, undecided.ID, denied.ID)
	}
	limited, err := e.s.InvocationListRetryable(e.ctx, store.RetryableParams{Limit: 2, Claimable: allTools})
	noErr(t, "list limited", err)
	if len(limited) != 2 || limited[0].ID != allow.ID || limited[1].ID != approved.ID {
		t.Fatalf("limit 2: %v", limited)
	}
}

func testListUncertainTenantFilter(t *testing.T, e *env) {
	uncertain := func(tenant string) *store.Invocation {
		return e.insert(t, func(p *row) { p.Tenant, p.Status = tenant, store.StatusUncertain })
	}
	a1, b1, a2 := uncertain("a"), uncertain("b"), uncertain("a")
	e.insert(t, func(p *row) { p.Tenant, p.Status = "a", store.StatusFailed })
	check := func(tenant string, want ...int64) {
		t.Helper()
		got, err := e.s.InvocationListUncertain(e.ctx, tenant)
		noErr(t, "list", err)
		var ids []int64
		for _, inv := range got {
			ids = append(ids, inv.ID)
		}
		if fmt.Sprint(ids) != fmt.Sprint(want) {
			t.Fatalf("tenant %q: %v, want %v", tenant, ids, want)
		}
	}
	check("a", a1.ID, a2.ID)
	check("b", b1.ID)
	check("", a1.ID, b1.ID, a2.ID)
	check("c")
	_, err := e.s.InvocationResolveUncertain(e.ctx, a1.ID, store.ResolutionDidNotHappen, "carol", nil, nil)
	noErr(t, "resolve", err)
	check("a", a2.ID)
	check("", b1.ID, a2.ID)
}

// The generations of a derived call id (SES-2): the latest row of exactly that
// tenant's run, step, arguments and id base, a refusal row never among them; read in
// the one statement that also reads the breaker's counts, which count every identical
// call of the run whatever its step or call id.
func testPriorCallsLatestGeneration(t *testing.T, e *env) {
	p := store.PriorCallsParams{Tenant: "tenant-g", RunID: "run-g", Step: 0, ArgsHash: "h-g", CallIDBase: "auto-00ff"}
	if got := e.priorCalls(t, p); got.HasLatest || got != (store.PriorCalls{}) {
		t.Fatalf("no call yet: %+v", got)
	}
	gen := func(callID string, mods ...func(*row)) *store.Invocation {
		return e.insert(t, append([]func(*row){func(ip *row) {
			ip.Tenant, ip.RunID, ip.Step, ip.ArgsHash, ip.CallID, ip.Status = p.Tenant, p.RunID, p.Step, p.ArgsHash, callID, store.StatusSucceeded
		}}, mods...)...)
	}
	gen("auto-00ff")
	want := gen("auto-00ff-2")
	gen("auto-00ff-3", func(ip *row) { // a refusal: under a key of its own
		ip.Key, ip.Status, ip.ReasonCode = ip.Key+store.RefusalKeySuffix+"1", store.StatusDenied, "missing_scope"
	})
	gen("auto-00ffe")                                             // another id that merely starts alike
	gen("auto-00ff-4", func(ip *row) { ip.Tenant = "tenant-h" })  // another tenant
	gen("auto-00ff-5", func(ip *row) { ip.Step = 1 })             // another step
	gen("auto-00ff-6", func(ip *row) { ip.ArgsHash = "h-other" }) // other arguments
	gen("auto-00ff-7", func(ip *row) { ip.RunID = "run-other" })  // another run
	got := e.priorCalls(t, p)
	if !got.HasLatest || got.Latest.ID != want.ID {
		t.Fatalf("latest generation: %+v, want %s (%d)", got, want.CallID, want.ID)
	}
	sameGeneration(t, got.Latest, want)
	// The counts, in the same answer: the base, -2, the refusal, the look-alike and
	// another step's call are identical calls of the run.
	if wantCounts := (store.BreakerCounts{Total: 5, Denied: 1}); got.Breaker != wantCounts {
		t.Fatalf("breaker counts beside the generation: %+v, want %+v", got.Breaker, wantCounts)
	}
	// A call that named its call id reads the counts alone.
	named := p
	named.CallIDBase = ""
	if got := e.priorCalls(t, named); got.HasLatest || got.Latest != (store.Generation{}) || got.Breaker.Total != 5 {
		t.Fatalf("a named call's prior calls: %+v", got)
	}
	// A generation with a watermark, the latest now: it carries it.
	marked := e.runningWithWatermark(t, func(ip *row) {
		ip.Tenant, ip.RunID, ip.Step, ip.ArgsHash, ip.CallID = p.Tenant, p.RunID, p.Step, p.ArgsHash, "auto-00ff-8"
	})
	got = e.priorCalls(t, p)
	if !got.HasLatest || got.Latest.EffectSentAt == nil {
		t.Fatalf("latest generation %+v: no watermark", got)
	}
	sameGeneration(t, got.Latest, marked)
}

// The key of a named call that may be recorded once (a read): whether any row has it,
// whatever its status or tenant's run, in the one statement that reads the breaker's
// counts; never with a derived call id, whose key the read decides.
func testPriorCallsKey(t *testing.T, e *env) {
	p := store.PriorCallsParams{Tenant: "tenant-k", RunID: "run-k", ArgsHash: "h-k", Key: "key-named-read"}
	if got := e.priorCalls(t, p); got != (store.PriorCalls{}) {
		t.Fatalf("no call yet: %+v", got)
	}
	same := func(ip *row) { ip.Tenant, ip.RunID, ip.ArgsHash = p.Tenant, p.RunID, p.ArgsHash }
	e.insert(t, same, func(ip *row) { ip.CallID, ip.Status = "other-call", store.StatusSucceeded })
	e.insert(t, func(ip *row) { ip.Key = p.Key + "x" }) // a key that merely starts alike
	if got := e.priorCalls(t, p); got.KeyTaken || got.Breaker.Total != 1 || got.HasLatest {
		t.Fatalf("an identical call under another key: %+v, want the key free and one call counted", got)
	}
	// Any row with the key takes it, held or settled: the pipeline reads that row
	// whole before it decides (dedupe).
	for _, st := range []store.Status{store.StatusPending, store.StatusSucceeded} {
		key := p.Key + "-" + string(st)
		e.insert(t, func(ip *row) { ip.Key, ip.Status, ip.Tenant, ip.RunID = key, st, "tenant-other", "run-other" })
		q := p
		q.Key = key
		if got := e.priorCalls(t, q); !got.KeyTaken || got.Breaker.Total != 1 {
			t.Fatalf("a %s row with the key: %+v, want it taken and the counts of p's run", st, got)
		}
	}
	// Without a key (a write, or a named call of a tool never recorded once), the
	// counts alone.
	q := p
	q.Key = ""
	if got := e.priorCalls(t, q); got.KeyTaken || got.Breaker.Total != 1 {
		t.Fatalf("no key: %+v", got)
	}
	q = p
	q.CallIDBase = "auto-00aa"
	if _, err := e.s.InvocationPriorCalls(e.ctx, q); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a key with a derived call id: %v, want ErrInvalid", err)
	}
}

// priorCalls reads p's prior calls.
func (e *env) priorCalls(t *testing.T, p store.PriorCallsParams) store.PriorCalls {
	t.Helper()
	got, err := e.s.InvocationPriorCalls(e.ctx, p)
	noErr(t, "prior calls", err)
	return got
}

// breaker reads the breaker's counts of a call that named its call id: never a
// generation.
func (e *env) breaker(t *testing.T, tenant, runID, argsHash string) store.BreakerCounts {
	t.Helper()
	got := e.priorCalls(t, store.PriorCallsParams{Tenant: tenant, RunID: runID, ArgsHash: argsHash})
	if got.HasLatest {
		t.Fatalf("prior calls of a named call: %+v", got)
	}
	return got.Breaker
}

// sameGeneration fails unless g has the columns of row inv.
func sameGeneration(t *testing.T, g store.Generation, inv *store.Invocation) {
	t.Helper()
	want := store.Generation{ID: inv.ID, CallID: inv.CallID, Status: inv.Status, EffectSentAt: inv.EffectSentAt,
		EarlierEffectSentAt: inv.EarlierEffectSentAt, UpdatedAt: inv.UpdatedAt}
	if !reflect.DeepEqual(g, want) {
		t.Fatalf("latest generation\n %+v\nwant the row's\n %+v", g, want)
	}
}

// happenedOutcome is the record of a confirmation a resolution as happened stores.
var happenedOutcome = json.RawMessage(`{"status":"succeeded","call_id":"c"}`)

// A review moves the row to what is now known (SES-2): happened is a success whose
// record answers a retry; did_not_happen is a call interrupted before its watermark,
// PENDING and retryable under the same key. Neither is UNCERTAIN any more.
func testResolveUncertainMovesToWhatIsKnown(t *testing.T, e *env) {
	happened := e.runningWithWatermark(t, func(p *row) { p.ArgsHash, p.RunID = "h-u", "run-u" })
	e.sweepOne(t, happened, store.SweepParams{Claimable: allTools})
	got, err := e.s.InvocationResolveUncertain(e.ctx, happened.ID, store.ResolutionHappened, "carol", happenedOutcome, nil)
	noErr(t, "resolve", err)
	if got.Status != store.StatusSucceeded || got.Resolution != store.ResolutionHappened || got.ResolvedBy != "carol" ||
		got.ResolvedAt == nil || got.ResolvedAt.Before(happened.CreatedAt) || string(got.Outcome) == "" || got.EffectSentAt == nil {
		t.Fatalf("resolved row: %+v", got)
	}
	var o map[string]any
	if err := json.Unmarshal(e.get(t, happened.ID).Outcome, &o); err != nil || o["status"] != "succeeded" {
		t.Fatalf("stored outcome %v, %v", o, err)
	}
	if e.breaker(t, happened.Tenant, "run-u", "h-u").Uncertain {
		t.Fatal("a call confirmed as happened still trips uncertain_repeat")
	}
	_, err = e.s.InvocationResolveUncertain(e.ctx, happened.ID, store.ResolutionDidNotHappen, "dave", nil, nil)
	wantErr(t, "resolve twice", err, store.ErrConflict)
	if stored := e.get(t, happened.ID); stored.Resolution != store.ResolutionHappened || stored.ResolvedBy != "carol" {
		t.Fatalf("second resolution overwrote the first: %+v", stored)
	}

	notHappened := e.runningWithWatermark(t, func(p *row) { p.ArgsHash, p.RunID = "h-n", "run-n" })
	e.sweepOne(t, notHappened, store.SweepParams{Claimable: allTools})
	got, err = e.s.InvocationResolveUncertain(e.ctx, notHappened.ID, store.ResolutionDidNotHappen, "carol", nil, nil)
	noErr(t, "resolve not happened", err)
	if got.Status != store.StatusPending || got.EffectSentAt != nil || got.EarlierEffectSentAt == nil ||
		got.LeaseOwner != "" || got.LeaseExpiresAt != nil || got.Resolution != store.ResolutionDidNotHappen || got.Key != notHappened.Key {
		t.Fatalf("resolved row: %+v", got)
	}
	rows, err := e.s.InvocationListRetryable(e.ctx, store.RetryableParams{Claimable: allTools})
	noErr(t, "list retryable", err)
	if !slices.ContainsFunc(rows, func(r *store.Invocation) bool { return r.ID == notHappened.ID }) {
		t.Fatal("a call that did not happen is not retryable")
	}
	claimed, err := e.s.InvocationClaimIfPending(e.ctx, notHappened.ID, "w-again", longLease)
	noErr(t, "claim", err)
	if claimed.Status != store.StatusRunning || claimed.EffectSentAt != nil {
		t.Fatalf("claimed again: %+v", claimed)
	}
	if list, _ := e.s.InvocationListUncertain(e.ctx, ""); len(list) != 0 {
		t.Fatalf("resolved rows still in the review queue: %v", list)
	}
}

func testResolveUncertainErrors(t *testing.T, e *env) {
	ok := e.insert(t, func(p *row) { p.Status = store.StatusSucceeded })
	_, err := e.s.InvocationResolveUncertain(e.ctx, ok.ID, store.ResolutionHappened, "carol", happenedOutcome, nil)
	wantErr(t, "resolve SUCCEEDED", err, store.ErrConflict)
	_, err = e.s.InvocationResolveUncertain(e.ctx, 424242, store.ResolutionHappened, "carol", happenedOutcome, nil)
	wantErr(t, "resolve missing", err, store.ErrNotFound)
	u := e.insert(t, func(p *row) { p.Status = store.StatusUncertain })
	_, err = e.s.InvocationResolveUncertain(e.ctx, u.ID, "maybe", "carol", nil, nil)
	wantErr(t, "resolve maybe", err, store.ErrInvalid)
	_, err = e.s.InvocationResolveUncertain(e.ctx, u.ID, store.ResolutionHappened, "", happenedOutcome, nil)
	wantErr(t, "resolve anonymously", err, store.ErrInvalid)
}

func testBreakerCounts(t *testing.T, e *env) {
	same := func(status store.Status) func(*row) {
		return func(p *row) { p.RunID, p.ArgsHash, p.Status = "run-b", "h-b", status }
	}
	if c := e.breaker(t, "tenant-a", "run-b", "h-b"); c != (store.BreakerCounts{}) {
		t.Fatalf("empty run: %+v", c)
	}
	e.insert(t, same(store.StatusDenied))
	e.insert(t, same(store.StatusDenied))
	e.insert(t, same(store.StatusSucceeded))
	e.insert(t, same(store.StatusPending))
	e.insert(t, func(p *row) { p.RunID, p.ArgsHash, p.Status = "run-other", "h-b", store.StatusUncertain })
	e.insert(t, func(p *row) { p.RunID, p.ArgsHash, p.Status = "run-b", "h-other", store.StatusDenied })
	if c := e.breaker(t, "tenant-a", "run-b", "h-b"); c != (store.BreakerCounts{Total: 4, Denied: 2, Uncertain: false}) {
		t.Fatalf("counts %+v, want total 4, denied 2, no uncertain", c)
	}
	e.insert(t, same(store.StatusUncertain))
	if c := e.breaker(t, "tenant-a", "run-b", "h-b"); c != (store.BreakerCounts{Total: 5, Denied: 2, Uncertain: true}) {
		t.Fatalf("counts %+v, want total 5, denied 2, uncertain", c)
	}
}

// ---- approvals, audit, catalog

func testApprovalDecideAndGet(t *testing.T, e *env) {
	inv := e.insert(t, func(p *row) { p.Decision = store.DecisionNeedsApproval })
	a := store.Approval{Key: inv.Key, Tenant: inv.Tenant, Approved: true, DecidedBy: "bob", Reason: "looks fine"}
	noErr(t, "decide", e.s.ApprovalDecide(e.ctx, a, nil))
	got, err := e.other.ApprovalGet(e.ctx, inv.Key)
	noErr(t, "get", err)
	if got.Key != a.Key || got.Tenant != a.Tenant || !got.Approved || got.DecidedBy != "bob" || got.Reason != a.Reason ||
		got.DecidedAt.IsZero() || got.DecidedAt.Before(inv.CreatedAt) {
		t.Fatalf("approval: %+v", got)
	}
	_, err = e.s.ApprovalGet(e.ctx, "no-such-key")
	wantErr(t, "get missing", err, store.ErrNotFound)
	wantErr(t, "decide without decider", e.s.ApprovalDecide(e.ctx, store.Approval{Key: inv.Key, Tenant: inv.Tenant}, nil), store.ErrInvalid)
}

func testApprovalDecideTwiceConflict(t *testing.T, e *env) {
	inv := e.insert(t, func(p *row) { p.Decision = store.DecisionNeedsApproval })
	noErr(t, "deny", e.s.ApprovalDecide(e.ctx, store.Approval{Key: inv.Key, Tenant: inv.Tenant, Approved: false, DecidedBy: "bob"}, nil))
	for _, approved := range []bool{true, false} {
		err := e.s.ApprovalDecide(e.ctx, store.Approval{Key: inv.Key, Tenant: inv.Tenant, Approved: approved, DecidedBy: "eve"}, nil)
		wantErr(t, "decide twice", err, store.ErrConflict)
	}
	got, err := e.s.ApprovalGet(e.ctx, inv.Key)
	noErr(t, "get", err)
	if got.Approved || got.DecidedBy != "bob" {
		t.Fatalf("second decision overwrote the first: %+v", got)
	}
}

func testApprovalUnknownKeyOrOtherTenant(t *testing.T, e *env) {
	err := e.s.ApprovalDecide(e.ctx, store.Approval{Key: "no-such-key", Tenant: "tenant-a", Approved: true, DecidedBy: "bob"}, nil)
	wantErr(t, "unknown key", err, store.ErrNotFound)
	inv := e.insert(t, func(p *row) { p.Tenant = "tenant-a" })
	err = e.s.ApprovalDecide(e.ctx, store.Approval{Key: inv.Key, Tenant: "tenant-b", Approved: true, DecidedBy: "mallory"}, nil)
	wantErr(t, "other tenant", err, store.ErrNotFound)
	_, err = e.s.ApprovalGet(e.ctx, inv.Key)
	wantErr(t, "no approval written", err, store.ErrNotFound)
}

func testAuditAppendAndPage(t *testing.T, e *env) {
	var ids []int64
	for i := 0; i < 5; i++ {
		tenant := []string{"a", "b"}[i%2]
		id, err := e.s.AuditAppend(e.ctx, store.AuditEntry{Tenant: tenant, Kind: "tool_call", Principal: "alice",
			SessionID: "s", Mode: "m", Tool: "demo.write", Key: fmt.Sprint("k", i), Detail: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		noErr(t, "append", err)
		if len(ids) > 0 && id <= ids[len(ids)-1] {
			t.Fatalf("ids do not increase: %v then %d", ids, id)
		}
		ids = append(ids, id)
	}
	all, err := e.other.AuditList(e.ctx, "", 0, 0)
	noErr(t, "list", err)
	if len(all) != 5 {
		t.Fatalf("all: %d entries", len(all))
	}
	for i, en := range all {
		if en.ID != ids[i] || en.Kind != "tool_call" || en.Principal != "alice" || en.SessionID != "s" || en.Mode != "m" ||
			en.Tool != "demo.write" || en.Key != fmt.Sprint("k", i) || !sameJSON(en.Detail, json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))) ||
			en.At.IsZero() {
			t.Fatalf("entry %d: %+v", i, en)
		}
	}
	page, err := e.s.AuditList(e.ctx, "", ids[1], 2)
	noErr(t, "page", err)
	if len(page) != 2 || page[0].ID != ids[2] || page[1].ID != ids[3] {
		t.Fatalf("page after %d: %+v", ids[1], page)
	}
	a, err := e.s.AuditList(e.ctx, "a", 0, 0)
	noErr(t, "tenant a", err)
	if len(a) != 3 || a[0].ID != ids[0] || a[1].ID != ids[2] || a[2].ID != ids[4] {
		t.Fatalf("tenant a: %+v", a)
	}
	b, err := e.s.AuditList(e.ctx, "b", ids[1], 0)
	noErr(t, "tenant b after", err)
	if len(b) != 1 || b[0].ID != ids[3] {
		t.Fatalf("tenant b after %d: %+v", ids[1], b)
	}
	id, err := e.s.AuditAppend(e.ctx, store.AuditEntry{Kind: "approval"})
	noErr(t, "append without detail", err)
	last, err := e.s.AuditList(e.ctx, "", id-1, 0)
	noErr(t, "list", err)
	if len(last) != 1 || last[0].Detail != nil {
		t.Fatalf("entry without detail: %+v", last)
	}
}

func testCatalogHistory(t *testing.T, e *env) {
	add := func(server, tool, change string) int64 {
		id, err := e.s.CatalogHistoryAppend(e.ctx, store.CatalogChange{ServerID: server, Tool: tool, Change: change,
			SHA256: "sha-" + tool, Detail: json.RawMessage(`{"v":1}`)})
		noErr(t, "append", err)
		return id
	}
	x1 := add("x", "mcp.x.a", "added")
	y1 := add("y", "mcp.y.b", "added")
	x2 := add("x", "mcp.x.a", "removed")
	xs, err := e.other.CatalogHistoryList(e.ctx, "x")
	noErr(t, "list x", err)
	if len(xs) != 2 || xs[0].ID != x1 || xs[1].ID != x2 || xs[0].Tool != "mcp.x.a" || xs[0].Change != "added" ||
		xs[1].Change != "removed" || xs[0].SHA256 != "sha-mcp.x.a" || !sameJSON(xs[0].Detail, json.RawMessage(`{"v":1}`)) ||
		xs[0].At.IsZero() {
		t.Fatalf("server x: %+v", xs)
	}
	all, err := e.s.CatalogHistoryList(e.ctx, "")
	noErr(t, "list all", err)
	if len(all) != 3 || all[0].ID != x1 || all[1].ID != y1 || all[2].ID != x2 {
		t.Fatalf("all: %+v", all)
	}
	none, err := e.s.CatalogHistoryList(e.ctx, "z")
	noErr(t, "list z", err)
	if len(none) != 0 {
		t.Fatalf("server z: %+v", none)
	}
}

// ---- commit counting

func testCountingStoreOneCommitPerWrite(t *testing.T, e *env) {
	c := NewCountingStore(e.s)
	// a non-idempotent call without hold: insert RUNNING, watermark, settle = 3 commits
	inv, _, err := c.InvocationInsert(e.ctx, params(running("w", longLease)))
	noErr(t, "insert", err)
	noErr(t, "mark", c.InvocationMarkEffectSentIfLeased(e.ctx, inv.Fence(), "tok"))
	_, err = c.InvocationGet(e.ctx, inv.ID)
	noErr(t, "get", err)
	noErr(t, "settle", c.InvocationSettleIfLeased(e.ctx, inv.Fence(), settled(store.StatusSucceeded, `{}`)))
	if c.Total() != 3 || fmt.Sprint(c.Commits()) != "map[InvocationInsert:1 InvocationMarkEffectSentIfLeased:1 InvocationSettleIfLeased:1]" {
		t.Fatalf("commits %v, want one per write", c.Commits())
	}
	c.Reset()
	// every writing method counts once; reads count nothing
	held, _, err := c.InvocationInsert(e.ctx, params(func(p *row) { p.Decision = store.DecisionNeedsApproval }))
	noErr(t, "insert", err)
	// a decision and a review with their audit entries are one commit each (HOST-2)
	noErr(t, "decide", c.ApprovalDecide(e.ctx, store.Approval{Key: held.Key, Tenant: held.Tenant, Approved: true, DecidedBy: "bob"},
		decisionAudit(held, "approval")))
	claimed, err := c.InvocationClaimIfPending(e.ctx, held.ID, "w2", longLease)
	noErr(t, "claim", err)
	_, err = c.InvocationRenewLeases(e.ctx, "w2", []int64{claimed.ID}, longLease)
	noErr(t, "renew", err)
	noErr(t, "mark", c.InvocationMarkEffectSentIfLeased(e.ctx, claimed.Fence(), "tok"))
	noErr(t, "settle", c.InvocationSettleIfLeased(e.ctx, claimed.Fence(), settled(store.StatusSucceeded, `{}`)))
	rel, _, err := c.InvocationInsert(e.ctx, params(running("w4", longLease)))
	noErr(t, "insert", err)
	noErr(t, "release", c.InvocationReleaseIfLeased(e.ctx, rel.Fence()))
	ctl, _, err := c.InvocationInsert(e.ctx, params(running("w3", longLease)))
	noErr(t, "insert", err)
	noErr(t, "suspend", c.InvocationSuspendIfLeased(e.ctx, ctl.Fence(), "resume-c", nil))
	_, err = c.InvocationResume(e.ctx, "resume-c", settled(store.StatusSucceeded, `{}`))
	noErr(t, "resume", err)
	_, err = c.InvocationSweep(e.ctx, store.SweepParams{Claimable: allTools})
	noErr(t, "sweep", err)
	_, err = c.InvocationUnsuspendDecided(e.ctx, store.RetryableParams{Claimable: allTools})
	noErr(t, "unsuspend decided", err)
	u, _, err := c.InvocationInsert(e.ctx, params(func(p *row) { p.Status = store.StatusUncertain }))
	noErr(t, "insert", err)
	_, err = c.InvocationResolveUncertain(e.ctx, u.ID, store.ResolutionHappened, "carol", happenedOutcome, decisionAudit(u, "resolve"))
	noErr(t, "resolve", err)
	_, err = c.AuditAppend(e.ctx, store.AuditEntry{Kind: "tool_call"})
	noErr(t, "audit", err)
	_, err = c.CatalogHistoryAppend(e.ctx, store.CatalogChange{ServerID: "x", Change: "added"})
	noErr(t, "catalog", err)
	noErr(t, "session mode", c.SessionModeSet(e.ctx, "tenant-a", "s1", "plan"))
	_, err = c.SessionClaim(e.ctx, "tenant-a", "s1")
	noErr(t, "session claim", err)
	_, err = c.SessionPinsCreate(e.ctx, "tenant-a", "s1", []store.ToolPin{{Tool: "mcp.x.t", SHA256: "v1"}})
	noErr(t, "session pins", err)
	_, err = c.SessionPinsForceEpoch(e.ctx, store.PinEpoch{Prefix: "mcp.x."})
	noErr(t, "forced epoch", err)
	_, err = c.EventAppend(e.ctx, store.Event{Kind: store.EventDeviceConnected, Server: "laptop"})
	noErr(t, "event", err)
	reads := []func() error{
		func() error { _, err := c.InvocationList(e.ctx, store.InvocationFilter{}); return err },
		func() error { _, err := c.SessionModeGet(e.ctx, "tenant-a", "s1"); return err },
		func() error { _, _, err := c.SessionPinsGet(e.ctx, "tenant-a", "s1"); return err },
		func() error { _, err := c.InvocationGetByKey(e.ctx, held.Key); return err },
		func() error {
			_, err := c.InvocationListRetryable(e.ctx, store.RetryableParams{Claimable: allTools})
			return err
		},
		func() error { _, err := c.InvocationCountUnclaimable(e.ctx, []store.ToolRef{mine}, ""); return err },
		func() error { _, err := c.InvocationListUncertain(e.ctx, ""); return err },
		func() error {
			_, err := c.InvocationPriorCalls(e.ctx, store.PriorCallsParams{Tenant: "tenant-a", RunID: "run-1", ArgsHash: "hash-1"})
			return err
		},
		func() error { _, err := c.ApprovalGet(e.ctx, held.Key); return err },
		func() error { _, err := c.AuditList(e.ctx, "", 0, 0); return err },
		func() error { _, err := c.CatalogHistoryList(e.ctx, ""); return err },
		func() error { _, err := c.EventList(e.ctx, store.EventFilter{}); return err },
	}
	for _, read := range reads {
		noErr(t, "read", read())
	}
	if fmt.Sprint(c.Methods()) != fmt.Sprint(slices.Sorted(slices.Values(WriteMethods))) {
		t.Fatalf("counted methods %v, want every write method %v", c.Methods(), WriteMethods)
	}
	if got := c.Commits(); got["InvocationInsert"] != 4 || c.Total() != len(WriteMethods)+3 {
		t.Fatalf("commits %v (total %d)", got, c.Total())
	}
}

func testHandlesSeeEachOthersCommits(t *testing.T, e *env) {
	inv := e.insert(t, running("w", longLease))
	noErr(t, "mark", e.s.InvocationMarkEffectSentIfLeased(e.ctx, inv.Fence(), "tok"))
	got, err := e.other.InvocationGet(e.ctx, inv.ID)
	noErr(t, "get on the other handle", err)
	if got.EffectSentAt == nil {
		t.Fatal("the other handle does not see the committed watermark")
	}
	noErr(t, "settle on the other handle", e.other.InvocationSettleIfLeased(e.ctx, inv.Fence(), settled(store.StatusSucceeded, `{}`)))
	if got := e.get(t, inv.ID); got.Status != store.StatusSucceeded {
		t.Fatalf("status %s", got.Status)
	}
}

func testReleaseBackToPending(t *testing.T, e *env) {
	inv := e.runningWithWatermark(t, idempotency(store.IdempotencyIdempotent, nil))
	if err := e.s.InvocationReleaseIfLeased(e.ctx, inv.Fence()); err != nil {
		t.Fatalf("InvocationReleaseIfLeased: %v", err)
	}
	// Retried after a lost acknowledgement: its own release landed.
	if err := e.other.InvocationReleaseIfLeased(e.ctx, inv.Fence()); err != nil {
		t.Fatalf("InvocationReleaseIfLeased (retry): %v", err)
	}
	got := e.get(t, inv.ID)
	if got.Status != store.StatusPending || got.LeaseOwner != "" || got.LeaseExpiresAt != nil ||
		got.EffectSentAt != nil || got.EarlierEffectSentAt == nil || got.Attempt != inv.Attempt {
		t.Fatalf("released row = %+v", got)
	}
	claimed, err := e.other.InvocationClaimIfPending(e.ctx, inv.ID, "w-next", longLease)
	if err != nil {
		t.Fatalf("InvocationClaimIfPending after release: %v", err)
	}
	if claimed.Attempt != inv.Attempt+1 || claimed.LeaseOwner != "w-next" {
		t.Fatalf("claimed row = %+v", claimed)
	}
}

func testReleaseZombieFence(t *testing.T, e *env) {
	inv := e.insert(t, running("w-zombie", longLease))
	if err := e.s.InvocationReleaseIfLeased(e.ctx, inv.Fence()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.InvocationClaimIfPending(e.ctx, inv.ID, "w-next", longLease); err != nil {
		t.Fatal(err)
	}
	// The old fence (attempt 1) no longer matches anything: the new attempt is not touched.
	if err := e.other.InvocationReleaseIfLeased(e.ctx, inv.Fence()); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("zombie release: err = %v, want ErrLeaseLost", err)
	}
	if got := e.get(t, inv.ID); got.Status != store.StatusRunning || got.LeaseOwner != "w-next" {
		t.Fatalf("row after zombie release = %+v", got)
	}
}

func testGetByResumeToken(t *testing.T, e *env) {
	inv := e.insert(t, running("w-s", longLease))
	if err := e.s.InvocationSuspendIfLeased(e.ctx, inv.Fence(), "resume-x", json.RawMessage(`{"status":"succeeded"}`)); err != nil {
		t.Fatal(err)
	}
	got, err := e.other.InvocationGetByResumeToken(e.ctx, "resume-x")
	if err != nil || got.ID != inv.ID {
		t.Fatalf("InvocationGetByResumeToken = %+v, %v", got, err)
	}
	if _, err := e.s.InvocationGetByResumeToken(e.ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown token: err = %v, want ErrNotFound", err)
	}
}

// testUnsuspendDecided: rows suspended until an approval (a script torn down at a held
// call) come back PENDING once that approval is decided, approved or denied, exactly
// once; undecided ones and control calls' suspensions stay as they are.
func testUnsuspendDecided(t *testing.T, e *env) {
	key := func(p *row) { p.Key = randomHex(32) }
	hold := func() *store.Invocation {
		return e.insert(t, key, func(p *row) { p.Decision = store.DecisionNeedsApproval })
	}
	approved, undecided, denied := hold(), hold(), hold()
	awaiting := func(held *store.Invocation) *store.Invocation {
		inv := e.insert(t, key, running("w-script", longLease), idempotency(store.IdempotencyIdempotent, nil),
			func(p *row) { p.Tool = "sandbox.run_script" })
		noErr(t, "suspend script", e.s.InvocationSuspendIfLeased(e.ctx, inv.Fence(), store.AwaitApprovalToken(held.Key, inv.Key), json.RawMessage(`{"status":"unavailable"}`)))
		return e.get(t, inv.ID)
	}
	sApproved, sUndecided, sDenied := awaiting(approved), awaiting(undecided), awaiting(denied)
	if h, ok := store.AwaitedApproval(sApproved.ResumeToken); !ok || h != approved.Key {
		t.Fatalf("AwaitedApproval(%q) = %q, %v", sApproved.ResumeToken, h, ok)
	}
	control := e.insert(t, running("w-control", longLease))
	noErr(t, "suspend control", e.s.InvocationSuspendIfLeased(e.ctx, control.Fence(), "resume-"+randomHex(4), nil))
	got, err := e.other.InvocationUnsuspendDecided(e.ctx, store.RetryableParams{Claimable: allTools})
	noErr(t, "unsuspend before any decision", err)
	if len(got) != 0 {
		t.Fatalf("unsuspended %d rows before any decision", len(got))
	}
	noErr(t, "approve", e.s.ApprovalDecide(e.ctx, store.Approval{Key: approved.Key, Tenant: approved.Tenant, Approved: true, DecidedBy: "bob"}, nil))
	noErr(t, "deny", e.s.ApprovalDecide(e.ctx, store.Approval{Key: denied.Key, Tenant: denied.Tenant, Approved: false, DecidedBy: "bob"}, nil))

	other := store.Claimable{Tools: []store.ToolRef{{Name: "demo.other", Version: 1}}}
	got, err = e.other.InvocationUnsuspendDecided(e.ctx, store.RetryableParams{Claimable: other})
	noErr(t, "unsuspend for another tool", err)
	if len(got) != 0 {
		t.Fatalf("unsuspended %d rows of a tool the caller does not have", len(got))
	}
	got, err = e.other.InvocationUnsuspendDecided(e.ctx, store.RetryableParams{Claimable: allTools, Limit: 1})
	noErr(t, "unsuspend, limit 1", err)
	if len(got) != 1 || got[0].ID != sApproved.ID {
		t.Fatalf("limit 1: %d rows, want the oldest %d", len(got), sApproved.ID)
	}
	rest, err := e.other.InvocationUnsuspendDecided(e.ctx, store.RetryableParams{Claimable: allTools})
	noErr(t, "unsuspend", err)
	if len(rest) != 1 || rest[0].ID != sDenied.ID {
		t.Fatalf("second pass: %d rows, want %d only", len(rest), sDenied.ID)
	}
	for _, inv := range append(got, rest...) {
		row := e.get(t, inv.ID)
		if row.Status != store.StatusPending || row.SuspendedAt != nil || row.ResumeToken != "" || row.LeaseOwner != "" ||
			row.LeaseExpiresAt != nil || row.Decision != store.DecisionAllow || row.Attempt != 1 {
			t.Fatalf("unsuspended row: %+v", row)
		}
		if inv.Status != store.StatusPending || inv.Key != row.Key {
			t.Fatalf("returned row is not as written: %+v", inv)
		}
	}
	again, err := e.other.InvocationUnsuspendDecided(e.ctx, store.RetryableParams{Claimable: allTools})
	noErr(t, "unsuspend again", err)
	if len(again) != 0 {
		t.Fatalf("a row was unsuspended twice")
	}
	if row := e.get(t, sUndecided.ID); row.Status != store.StatusRunning || row.SuspendedAt == nil || row.ResumeToken != sUndecided.ResumeToken {
		t.Fatalf("row awaiting an undecided approval: %+v", row)
	}
	if row := e.get(t, control.ID); row.Status != store.StatusRunning || row.SuspendedAt == nil {
		t.Fatalf("control call's suspension: %+v", row)
	}
	list, err := e.s.InvocationListRetryable(e.ctx, store.RetryableParams{Claimable: allTools})
	noErr(t, "list retryable", err)
	var ids []int64
	for _, inv := range list {
		if inv.Tool == "sandbox.run_script" {
			ids = append(ids, inv.ID)
		}
	}
	if fmt.Sprint(ids) != fmt.Sprint([]int64{sApproved.ID, sDenied.ID}) {
		t.Fatalf("retryable scripts %v, want %d and %d", ids, sApproved.ID, sDenied.ID)
	}
	claimed, err := e.s.InvocationClaimIfPending(e.ctx, sApproved.ID, "w-2", longLease)
	noErr(t, "claim", err)
	if claimed.Attempt != 2 || claimed.Status != store.StatusRunning {
		t.Fatalf("claimed: %+v", claimed)
	}
}
