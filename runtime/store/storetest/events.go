package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// The event stream (EV-1): the store writes one event per milestone of an invocation
// or catalog change in the transaction of the write, carrying the classification and
// never the payload, and EventList pages it so that a reader misses nothing.

// eventTests are appended to tests (storetest.go) by init.
var eventTests = []struct {
	name string
	fn   func(t *testing.T, e *env)
}{
	{"Events_Call_RecordedStartedEffectSentSettled", testEventsCallMilestones},
	{"Events_Hold_HeldThenStartedAfterApproval", testEventsHold},
	{"Events_Release_ReleasedNotHeldWhenApproved", testEventsRelease},
	{"Events_Sweep_ReleasedUncertainCrashLoopResolved", testEventsSweep},
	{"Events_Suspend_SuspendedThenSettled", testEventsSuspend},
	{"Events_InsertTerminal_RecordedThenSettledNoDuration", testEventsInsertTerminal},
	{"Events_NoMilestone_NoEvent", testEventsNoMilestoneNoEvent},
	{"Events_CatalogHistory_DriftWithoutDetail", testEventsCatalogDrift},
	{"Events_Append_RoundTripsEveryField", testEventsAppend},
	{"Events_NeverCarryPayload", testEventsNeverCarryPayload},
	{"Events_Filters_TenantSessionRun", testEventsFilters},
	{"Events_Paging_EachEventOnceInOrder", testEventsPaging},
	{"Events_ConcurrentWriters_ReaderMissesNothing", testEventsConcurrentWritersReaderMissesNothing},
	{"EventCursor_FormatAndParse", testEventCursorFormatAndParse},
}

func init() { tests = append(tests, eventTests...) }

// marker is put in every payload (arguments, outcomes, catalog detail, reason text of
// outcomes) so that a test can assert it never reaches an event.
const marker = "PAYLOAD-MARKER-5f0c"

// events reads every event f selects, waiting (pollTimeout at most) until there are at
// least want: on PostgreSQL an event becomes visible only once every older writing
// transaction of the cluster has ended (store.EventCursor), which other tests delay.
func (e *env) events(t *testing.T, f store.EventFilter, want int) []store.Event {
	t.Helper()
	var got []store.Event
	eventually(t, fmt.Sprintf("%d events", want), func() bool {
		var err error
		got, err = e.other.EventList(e.ctx, f)
		noErr(t, "EventList", err)
		return len(got) >= want
	})
	return got
}

// kindsOf is the kinds of the events of invocation id, in stream order.
func kindsOf(evs []store.Event, id int64) []string {
	var out []string
	for _, ev := range evs {
		if ev.InvocationID == id {
			out = append(out, ev.Kind)
		}
	}
	return out
}

func wantKinds(t *testing.T, what string, evs []store.Event, id int64, want ...string) {
	t.Helper()
	if got := kindsOf(evs, id); !slices.Equal(got, want) {
		t.Fatalf("%s: events of invocation %d are %v, want %v", what, id, got, want)
	}
}

func lastOf(evs []store.Event, id int64, kind string) store.Event {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].InvocationID == id && evs[i].Kind == kind {
			return evs[i]
		}
	}
	return store.Event{}
}

func testEventsCallMilestones(t *testing.T, e *env) {
	inv := e.insert(t, running("w1", longLease), func(p *row) { p.Step = 4 })
	noErr(t, "mark", e.s.InvocationMarkEffectSentIfLeased(e.ctx, inv.Fence(), "tok"))
	noErr(t, "settle", e.s.InvocationSettleIfLeased(e.ctx, inv.Fence(), settled(store.StatusSucceeded, `{}`)))
	row := e.get(t, inv.ID)
	evs := e.events(t, store.EventFilter{}, 4)
	wantKinds(t, "a call", evs, inv.ID, store.EventRecorded, store.EventStarted, store.EventEffectSent, store.EventSettled)
	for i, ev := range evs {
		want := store.Event{
			Cursor: ev.Cursor, Kind: ev.Kind, Tenant: row.Tenant, SessionID: row.SessionID, RunID: row.RunID,
			InvocationID: row.ID, Step: 4, CallID: row.CallID, Tool: row.Tool, Status: ev.Status,
			Mode: row.Mode, Decision: row.Decision, Idempotency: row.Idempotency, OriginTrust: row.OriginTrust,
			ArgumentTrust: row.ArgumentTrust, Attempt: 1, Duration: ev.Duration, At: ev.At,
		}
		if !reflect.DeepEqual(ev, want) {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, ev, want)
		}
		if i > 0 && !evs[i-1].Cursor.Less(ev.Cursor) {
			t.Errorf("event %d: cursor %v not after %v", i, ev.Cursor, evs[i-1].Cursor)
		}
		if ev.Cursor.String() == "" || ev.Cursor.ID <= 0 {
			t.Errorf("event %d: cursor %v", i, ev.Cursor)
		}
	}
	for i, want := range []store.Status{store.StatusRunning, store.StatusRunning, store.StatusRunning, store.StatusSucceeded} {
		if evs[i].Status != string(want) {
			t.Errorf("%s event: status %s, want %s", evs[i].Kind, evs[i].Status, want)
		}
	}
	// Times are the row's, by the database clock: recorded at created_at, settled at updated_at.
	if !evs[0].At.Equal(row.CreatedAt) || !evs[3].At.Equal(row.UpdatedAt) || !evs[2].At.Equal(*row.EffectSentAt) {
		t.Errorf("event times %v %v %v, want created_at %v, effect_sent_at %v, updated_at %v",
			evs[0].At, evs[2].At, evs[3].At, row.CreatedAt, *row.EffectSentAt, row.UpdatedAt)
	}
	// Only settled carries a duration: from the record to the settlement.
	for _, ev := range evs[:3] {
		if ev.Duration != nil {
			t.Errorf("%s event has a duration %v", ev.Kind, *ev.Duration)
		}
	}
	if d := evs[3].Duration; d == nil || *d != row.UpdatedAt.Sub(row.CreatedAt) {
		t.Errorf("settled duration %v, want %v", d, row.UpdatedAt.Sub(row.CreatedAt))
	}
}

func testEventsHold(t *testing.T, e *env) {
	held := e.insert(t, func(p *row) { p.Decision = store.DecisionNeedsApproval })
	evs := e.events(t, store.EventFilter{}, 2)
	wantKinds(t, "a hold", evs, held.ID, store.EventRecorded, store.EventHeld)
	if ev := lastOf(evs, held.ID, store.EventHeld); ev.Status != string(store.StatusPending) || ev.Decision != store.DecisionNeedsApproval {
		t.Errorf("held event %+v", ev)
	}
	// The decision itself is no milestone of the row; the claim that follows is.
	noErr(t, "decide", e.s.ApprovalDecide(e.ctx, store.Approval{Key: held.Key, Tenant: held.Tenant, Approved: true, DecidedBy: "bob"}, nil))
	claimed, err := e.s.InvocationClaimIfPending(e.ctx, held.ID, "w1", longLease)
	noErr(t, "claim", err)
	noErr(t, "settle", e.s.InvocationSettleIfLeased(e.ctx, claimed.Fence(), settled(store.StatusFailed, `{}`)))
	evs = e.events(t, store.EventFilter{}, 4)
	wantKinds(t, "an approved hold", evs, held.ID, store.EventRecorded, store.EventHeld, store.EventStarted, store.EventSettled)
	if ev := lastOf(evs, held.ID, store.EventSettled); ev.Status != string(store.StatusFailed) || ev.Attempt != 1 {
		t.Errorf("settled event %+v", ev)
	}
}

func testEventsRelease(t *testing.T, e *env) {
	// A released call: back to PENDING, then claimed again (attempt 2).
	inv := e.insert(t, running("w1", longLease))
	noErr(t, "mark", e.s.InvocationMarkEffectSentIfLeased(e.ctx, inv.Fence(), "tok"))
	noErr(t, "release", e.s.InvocationReleaseIfLeased(e.ctx, inv.Fence()))
	again, err := e.s.InvocationClaimIfPending(e.ctx, inv.ID, "w2", longLease)
	noErr(t, "claim", err)
	// An approved hold released after its claim waits for no one: released, not held.
	held := e.insert(t, func(p *row) { p.Decision = store.DecisionNeedsApproval })
	noErr(t, "decide", e.s.ApprovalDecide(e.ctx, store.Approval{Key: held.Key, Tenant: held.Tenant, Approved: true, DecidedBy: "bob"}, nil))
	claimed, err := e.s.InvocationClaimIfPending(e.ctx, held.ID, "w3", longLease)
	noErr(t, "claim", err)
	noErr(t, "release", e.s.InvocationReleaseIfLeased(e.ctx, claimed.Fence()))
	// A hold claimed without a decision (the store does not forbid it) and released is held again.
	undecided := e.insert(t, func(p *row) { p.Decision = store.DecisionNeedsApproval })
	claimed, err = e.s.InvocationClaimIfPending(e.ctx, undecided.ID, "w4", longLease)
	noErr(t, "claim", err)
	noErr(t, "release", e.s.InvocationReleaseIfLeased(e.ctx, claimed.Fence()))

	evs := e.events(t, store.EventFilter{}, 14)
	wantKinds(t, "a release", evs, inv.ID,
		store.EventRecorded, store.EventStarted, store.EventEffectSent, store.EventReleased, store.EventStarted)
	if ev := lastOf(evs, inv.ID, store.EventStarted); ev.Attempt != again.Attempt || ev.Attempt != 2 {
		t.Errorf("second started event: attempt %d, want 2", ev.Attempt)
	}
	if ev := lastOf(evs, inv.ID, store.EventReleased); ev.Status != string(store.StatusPending) {
		t.Errorf("released event %+v", ev)
	}
	wantKinds(t, "an approved hold released", evs, held.ID,
		store.EventRecorded, store.EventHeld, store.EventStarted, store.EventReleased)
	wantKinds(t, "an undecided hold released", evs, undecided.ID,
		store.EventRecorded, store.EventHeld, store.EventStarted, store.EventReleased, store.EventHeld)
}

func testEventsSweep(t *testing.T, e *env) {
	retry := e.insert(t, running("w-retry", longLease))
	uncertain := e.runningWithWatermark(t)
	crash := e.insert(t, running("w-crash", longLease))
	e.sweepOne(t, retry, store.SweepParams{Claimable: allTools})
	e.sweepOne(t, uncertain, store.SweepParams{Claimable: allTools})
	e.sweepOne(t, crash, store.SweepParams{MaxAttempts: 1, Claimable: allTools})
	_, err := e.s.InvocationResolveUncertain(e.ctx, uncertain.ID, store.ResolutionDidNotHappen, "carol", nil, nil)
	noErr(t, "resolve", err)
	row := e.get(t, uncertain.ID)

	evs := e.events(t, store.EventFilter{}, 11)
	wantKinds(t, "a swept retry", evs, retry.ID, store.EventRecorded, store.EventStarted, store.EventReleased)
	wantKinds(t, "a swept watermarked call", evs, uncertain.ID, store.EventRecorded, store.EventStarted,
		store.EventEffectSent, store.EventUncertain, store.EventResolved)
	wantKinds(t, "a crash loop", evs, crash.ID, store.EventRecorded, store.EventStarted, store.EventSettled)
	ev := lastOf(evs, uncertain.ID, store.EventUncertain)
	if ev.Status != string(store.StatusUncertain) || ev.ReasonCode != store.ReasonEffectMayHaveHappened ||
		ev.Duration == nil || *ev.Duration < 0 {
		t.Errorf("uncertain event %+v", ev)
	}
	if ev := lastOf(evs, uncertain.ID, store.EventResolved); ev.Status != string(store.StatusPending) ||
		ev.Duration != nil || !ev.At.Equal(*row.ResolvedAt) {
		t.Errorf("resolved event %+v, want at %v", ev, *row.ResolvedAt)
	}
	if ev := lastOf(evs, crash.ID, store.EventSettled); ev.Status != string(store.StatusFailed) || ev.ReasonCode != store.ReasonCrashLoop {
		t.Errorf("crash-loop settled event %+v", ev)
	}
}

func testEventsSuspend(t *testing.T, e *env) {
	inv := e.insert(t, running("w1", longLease))
	noErr(t, "suspend", e.s.InvocationSuspendIfLeased(e.ctx, inv.Fence(), "resume-"+randomHex(4), json.RawMessage(`{"asked":"`+marker+`"}`)))
	row := e.get(t, inv.ID)
	_, err := e.s.InvocationResume(e.ctx, row.ResumeToken, settled(store.StatusSucceeded, `{"answer":"`+marker+`"}`))
	noErr(t, "resume", err)
	evs := e.events(t, store.EventFilter{}, 4)
	wantKinds(t, "a control call", evs, inv.ID, store.EventRecorded, store.EventStarted, store.EventSuspended, store.EventSettled)
	if ev := lastOf(evs, inv.ID, store.EventSuspended); ev.Status != string(store.StatusRunning) || !ev.At.Equal(*row.SuspendedAt) {
		t.Errorf("suspended event %+v", ev)
	}
}

func testEventsInsertTerminal(t *testing.T, e *env) {
	denied := e.insert(t, func(p *row) {
		p.Status, p.Decision, p.ReasonCode = store.StatusDenied, store.DecisionDeny, "missing_scope"
	})
	read := e.insert(t, func(p *row) {
		p.Status, p.Outcome, p.Relaxed, p.Idempotency = store.StatusSucceeded, json.RawMessage(`{}`), true, store.IdempotencyIdempotent
	})
	unc := e.insert(t, func(p *row) { p.Status = store.StatusUncertain })
	evs := e.events(t, store.EventFilter{}, 6)
	wantKinds(t, "a denial", evs, denied.ID, store.EventRecorded, store.EventSettled)
	wantKinds(t, "a record-once read", evs, read.ID, store.EventRecorded, store.EventSettled)
	wantKinds(t, "an uncertain insert", evs, unc.ID, store.EventRecorded, store.EventUncertain)
	for _, ev := range evs {
		if ev.Duration != nil {
			t.Errorf("%s event of a row inserted settled has a duration %v", ev.Kind, *ev.Duration)
		}
	}
	if ev := lastOf(evs, denied.ID, store.EventSettled); ev.Status != string(store.StatusDenied) ||
		ev.ReasonCode != "missing_scope" || ev.Decision != store.DecisionDeny || ev.Attempt != 0 {
		t.Errorf("denial's settled event %+v", ev)
	}
}

// testEventsNoMilestoneNoEvent: lease renewals, a watermark or settle retried after a
// lost ack, a failed fenced write and a duplicate insert cross no milestone.
func testEventsNoMilestoneNoEvent(t *testing.T, e *env) {
	inv := e.insert(t, running("w1", longLease))
	noErr(t, "mark", e.s.InvocationMarkEffectSentIfLeased(e.ctx, inv.Fence(), "tok"))
	noErr(t, "mark again", e.s.InvocationMarkEffectSentIfLeased(e.ctx, inv.Fence(), "tok"))
	_, err := e.s.InvocationRenewLeases(e.ctx, "w1", []int64{inv.ID}, longLease)
	noErr(t, "renew", err)
	noErr(t, "settle", e.s.InvocationSettleIfLeased(e.ctx, inv.Fence(), settled(store.StatusSucceeded, `{}`)))
	noErr(t, "settle again", e.s.InvocationSettleIfLeased(e.ctx, inv.Fence(), settled(store.StatusSucceeded, `{}`)))
	wantErr(t, "zombie settle", e.s.InvocationSettleIfLeased(e.ctx, store.Fence{ID: inv.ID, Owner: "zombie", Attempt: 1},
		settled(store.StatusFailed, `{}`)), store.ErrLeaseLost)
	p := params()
	p.Key = inv.Key
	_, inserted, err := e.s.InvocationInsert(e.ctx, p)
	if err != nil || inserted {
		t.Fatalf("duplicate insert: inserted %v, %v", inserted, err)
	}
	// a write after them, so that the reader has caught up with everything before it
	last := e.insert(t)
	evs := e.events(t, store.EventFilter{}, 5)
	wantKinds(t, "retried writes", evs, inv.ID, store.EventRecorded, store.EventStarted, store.EventEffectSent, store.EventSettled)
	if len(evs) != 5 || evs[4].InvocationID != last.ID {
		t.Fatalf("events %+v, want 5, the last of invocation %d", evs, last.ID)
	}
}

func testEventsCatalogDrift(t *testing.T, e *env) {
	_, err := e.s.CatalogHistoryAppend(e.ctx, store.CatalogChange{ServerID: "files", Tool: "read", Change: "changed",
		SHA256: "abc", Detail: json.RawMessage(`{"description":"` + marker + `"}`)})
	noErr(t, "catalog", err)
	evs := e.events(t, store.EventFilter{}, 1)
	ev := evs[0]
	want := store.Event{Cursor: ev.Cursor, Kind: store.EventCatalogDrift, Tool: "read", Server: "files", Change: "changed", At: ev.At}
	if len(evs) != 1 || !reflect.DeepEqual(ev, want) {
		t.Fatalf("catalog events %+v, want one %+v", evs, want)
	}
	history, err := e.s.CatalogHistoryList(e.ctx, "files")
	noErr(t, "catalog list", err)
	if !ev.At.Equal(history[0].At) {
		t.Errorf("drift at %v, want the history's %v", ev.At, history[0].At)
	}
}

func testEventsAppend(t *testing.T, e *env) {
	d := 1500 * time.Microsecond
	in := store.Event{
		Kind: store.EventDeviceDisconnected, Tenant: "tenant-a", SessionID: "s1", RunID: "r1", InvocationID: 42,
		Step: 3, CallID: "c1", Tool: "device.laptop.grep", Status: "RUNNING", ReasonCode: "device_disconnected",
		Mode: "m", Decision: "allow", Idempotency: "idempotent", OriginTrust: "user", ArgumentTrust: "user",
		Attempt: 2, Server: "laptop", Change: "x", Duration: &d,
	}
	before := time.Now()
	id, err := e.s.EventAppend(e.ctx, in)
	noErr(t, "append", err)
	second, err := e.s.EventAppend(e.ctx, store.Event{Kind: store.EventDeviceConnected, Server: "laptop"})
	noErr(t, "append", err)
	if second <= id {
		t.Errorf("ids %d then %d: want increasing", id, second)
	}
	evs := e.events(t, store.EventFilter{}, 2)
	got := evs[0]
	in.Cursor, in.At = got.Cursor, got.At
	if got.Cursor.ID != id || !reflect.DeepEqual(got, in) {
		t.Errorf("appended\n got %+v\nwant %+v (id %d)", got, in, id)
	}
	if got.At.Before(before.Add(-time.Minute)) || got.At.After(time.Now().Add(time.Minute)) {
		t.Errorf("at %v: not the database's now", got.At)
	}
	if evs[1].InvocationID != 0 || evs[1].Duration != nil || evs[1].Server != "laptop" {
		t.Errorf("second event %+v", evs[1])
	}
	for _, kind := range []string{"", "Device", "device connected", "a\nb", "data:x"} {
		_, err = e.s.EventAppend(e.ctx, store.Event{Kind: kind, Server: "laptop"})
		wantErr(t, fmt.Sprintf("append with kind %q", kind), err, store.ErrInvalid)
	}
	neg := -time.Second
	_, err = e.s.EventAppend(e.ctx, store.Event{Kind: "x", Duration: &neg})
	wantErr(t, "append with a negative duration", err, store.ErrInvalid)
}

// testEventsNeverCarryPayload: the marker is in every argument, outcome, suspension
// note and catalog detail, and in no event; the Event type has no field to carry it.
func testEventsNeverCarryPayload(t *testing.T, e *env) {
	args := json.RawMessage(`{"text":"` + marker + `"}`)
	inv := e.insert(t, running("w1", longLease), func(p *row) { p.Args = args })
	noErr(t, "mark", e.s.InvocationMarkEffectSentIfLeased(e.ctx, inv.Fence(), "tok-"+marker))
	noErr(t, "settle", e.s.InvocationSettleIfLeased(e.ctx, inv.Fence(),
		settled(store.StatusFailed, `{"external_detail":{"text":"`+marker+`"}}`)))
	e.insert(t, func(p *row) {
		p.Args, p.Status, p.Outcome = args, store.StatusSucceeded, json.RawMessage(`{"result":"`+marker+`"}`)
	})
	_, err := e.s.CatalogHistoryAppend(e.ctx, store.CatalogChange{ServerID: "s", Change: "added", Detail: args})
	noErr(t, "catalog", err)
	evs := e.events(t, store.EventFilter{}, 7)
	if dump := fmt.Sprintf("%+v", evs); strings.Contains(dump, marker) {
		t.Fatalf("an event carries the payload: %s", dump)
	}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[store.Event]()) {
		switch strings.ToLower(f.Name) {
		case "args", "arguments", "outcome", "result", "detail", "text", "externaldetail", "content":
			t.Errorf("store.Event has a payload field %s", f.Name)
		}
	}
}

func testEventsFilters(t *testing.T, e *env) {
	a := e.insert(t)
	b := e.insert(t, func(p *row) { p.Tenant = "tenant-b" })
	s2 := e.insert(t, func(p *row) { p.SessionID, p.RunID = "session-2", "run-2" })
	r2 := e.insert(t, func(p *row) { p.RunID = "run-2" })
	_, err := e.s.EventAppend(e.ctx, store.Event{Kind: store.EventDeviceConnected, Server: "laptop"})
	noErr(t, "append", err)
	e.events(t, store.EventFilter{}, 5)
	invs := func(evs []store.Event) []int64 {
		out := []int64{}
		for _, ev := range evs {
			out = append(out, ev.InvocationID)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		f    store.EventFilter
		want []int64
	}{
		{"all", store.EventFilter{}, []int64{a.ID, b.ID, s2.ID, r2.ID, 0}},
		{"tenant", store.EventFilter{Tenant: "tenant-a"}, []int64{a.ID, s2.ID, r2.ID}},
		{"session", store.EventFilter{SessionID: "session-1"}, []int64{a.ID, b.ID, r2.ID}},
		{"tenant and session", store.EventFilter{Tenant: "tenant-a", SessionID: "session-1"}, []int64{a.ID, r2.ID}},
		{"run", store.EventFilter{RunID: "run-2"}, []int64{s2.ID, r2.ID}},
		{"session and run", store.EventFilter{SessionID: "session-2", RunID: "run-2"}, []int64{s2.ID}},
		{"limit", store.EventFilter{Limit: 2}, []int64{a.ID, b.ID}},
		{"nothing", store.EventFilter{SessionID: "no-such-session"}, []int64{}},
	} {
		evs, err := e.other.EventList(e.ctx, tc.f)
		noErr(t, tc.name, err)
		if got := invs(evs); !slices.Equal(got, tc.want) {
			t.Errorf("%s: events of invocations %v, want %v", tc.name, got, tc.want)
		}
	}
}

func testEventsPaging(t *testing.T, e *env) {
	for range 5 {
		inv := e.insert(t, running("w1", longLease))
		noErr(t, "settle", e.s.InvocationSettleIfLeased(e.ctx, inv.Fence(), settled(store.StatusSucceeded, `{}`)))
	}
	all := e.events(t, store.EventFilter{}, 15)
	var paged []store.Event
	var after store.EventCursor
	for {
		page, err := e.other.EventList(e.ctx, store.EventFilter{After: after, Limit: 4})
		noErr(t, "page", err)
		if len(page) == 0 {
			break
		}
		if len(page) > 4 {
			t.Fatalf("page of %d events, limit 4", len(page))
		}
		paged = append(paged, page...)
		after = page[len(page)-1].Cursor
		// the cursor survives its string form (the SSE id)
		parsed, err := store.ParseEventCursor(after.String())
		noErr(t, "parse cursor", err)
		if parsed != after {
			t.Fatalf("cursor %v formats as %q, parses as %v", after, after.String(), parsed)
		}
	}
	if !reflect.DeepEqual(paged, all) {
		t.Fatalf("paged\n%+v\nall\n%+v", paged, all)
	}
	// After the last event: nothing, until the next write.
	if evs, err := e.other.EventList(e.ctx, store.EventFilter{After: after}); err != nil || len(evs) != 0 {
		t.Fatalf("after the last event: %+v, %v", evs, err)
	}
	last := e.insert(t)
	evs := e.events(t, store.EventFilter{After: after}, 1)
	if len(evs) != 1 || evs[0].InvocationID != last.ID || evs[0].Kind != store.EventRecorded {
		t.Fatalf("after the last event, then a write: %+v", evs)
	}
}

// testEventsConcurrentWritersReaderMissesNothing: calls on two handles, and a reader
// paging by cursor (small pages) while they run; once they are done and the reader has
// caught up, it has read every event exactly once, in stream order.
func testEventsConcurrentWritersReaderMissesNothing(t *testing.T, e *env) {
	const writers, calls = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			s := e.handle(w)
			for range calls {
				inv, _, err := s.InvocationInsert(e.ctx, params(running(fmt.Sprintf("w%d", w), longLease)))
				if err == nil {
					err = s.InvocationMarkEffectSentIfLeased(e.ctx, inv.Fence(), "tok")
				}
				if err == nil {
					err = s.InvocationSettleIfLeased(e.ctx, inv.Fence(), settled(store.StatusSucceeded, `{}`))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var read []store.Event
	var after store.EventCursor
	seen := map[store.EventCursor]bool{}
	page := func() int {
		evs, err := e.other.EventList(e.ctx, store.EventFilter{After: after, Limit: 3})
		noErr(t, "EventList", err)
		for _, ev := range evs {
			if seen[ev.Cursor] || !after.Less(ev.Cursor) {
				t.Fatalf("event %v read twice or out of order (after %v)", ev.Cursor, after)
			}
			seen[ev.Cursor] = true
			after = ev.Cursor
		}
		read = append(read, evs...)
		return len(evs)
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			page()
		}
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	const want = writers * calls * 4
	eventually(t, fmt.Sprintf("%d events read", want), func() bool { page(); return len(read) >= want })
	all := e.events(t, store.EventFilter{}, want)
	if len(all) != want || !reflect.DeepEqual(read, all) {
		t.Fatalf("the reader read %d events, the store holds %d (want %d); the reader's differ", len(read), len(all), want)
	}
}

func testEventCursorFormatAndParse(t *testing.T, _ *env) {
	for _, tc := range []struct {
		c    store.EventCursor
		text string
	}{
		{store.EventCursor{}, "0"},
		{store.EventCursor{ID: 42}, "42"},
		{store.EventCursor{TX: 7, ID: 42}, "7-42"},
	} {
		if got := tc.c.String(); got != tc.text {
			t.Errorf("%+v formats as %q, want %q", tc.c, got, tc.text)
		}
		if got, err := store.ParseEventCursor(tc.text); err != nil || got != tc.c {
			t.Errorf("ParseEventCursor(%q) = %+v, %v", tc.text, got, err)
		}
	}
	if got, err := store.ParseEventCursor(""); err != nil || got != (store.EventCursor{}) {
		t.Errorf(`ParseEventCursor("") = %+v, %v; want the start`, got, err)
	}
	for _, bad := range []string{"x", "-1", "1-", "-", "1-2-3", "+1", "01", "1.5", " 1", "1-x", "99999999999999999999"} {
		if _, err := store.ParseEventCursor(bad); err == nil {
			t.Errorf("ParseEventCursor(%q) accepted", bad)
		}
	}
}
