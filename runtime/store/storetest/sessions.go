package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/toolgen/toolgen/runtime/store"
)

// sessionTests are appended to tests (storetest.go) by init: a session belongs to one
// tenant, and every session-keyed table is keyed by (tenant, session) (SES-1).
var sessionTests = []struct {
	name string
	fn   func(t *testing.T, e *env)
}{
	{"SessionClaim_FirstTenantOwnsForever", testSessionClaimFirstTenantOwnsForever},
	{"SessionClaim_ConcurrentTenants_ExactlyOneOwner", testSessionClaimConcurrentExactlyOneOwner},
	{"SessionMode_KeyedByTenantAndSession", testSessionModeKeyedByTenant},
	{"SessionPins_FirstWriterWins", testSessionPinsFirstWriterWins},
	{"SessionPins_ConcurrentWriters_AgreeOnOne", testSessionPinsConcurrentWritersAgree},
	{"SessionPins_KeyedByTenantAndSession", testSessionPinsKeyedByTenant},
	{"SessionPins_Invalid_WritesNothing", testSessionPinsInvalid},
	{"SessionPins_ForceEpoch_RepinsOnlyThePrefix", testSessionPinsForceEpoch},
	{"SessionMint_OwnsAndPinsAtOnce_OnlyANewID", testSessionMint},
	{"BreakerCounts_ScopedToTenant", testBreakerCountsScopedToTenant},
}

func init() { tests = append(tests, sessionTests...) }

func claim(t *testing.T, s store.Store, e *env, tenant, session string) bool {
	t.Helper()
	owned, err := s.SessionClaim(e.ctx, tenant, session)
	noErr(t, "claim", err)
	return owned
}

func testSessionClaimFirstTenantOwnsForever(t *testing.T, e *env) {
	if !claim(t, e.s, e, "tenant-a", "s1") {
		t.Fatal("the first claim of a new session must own it")
	}
	if !claim(t, e.other, e, "tenant-a", "s1") {
		t.Fatal("the owner's second claim (on another handle) must still own it")
	}
	for _, h := range []store.Store{e.s, e.other} {
		if claim(t, h, e, "tenant-b", "s1") {
			t.Fatal("another tenant took over a session already owned")
		}
	}
	if !claim(t, e.s, e, "tenant-a", "s1") {
		t.Fatal("a refused claim of another tenant moved the owner")
	}
	if !claim(t, e.s, e, "tenant-b", "s2") {
		t.Fatal("tenant-b cannot own a session of its own")
	}
	if _, err := e.s.SessionClaim(e.ctx, "tenant-a", ""); err == nil {
		t.Fatal("a claim of the empty session id succeeded")
	} else {
		wantErr(t, "empty session id", err, store.ErrInvalid)
	}
}

func testSessionClaimConcurrentExactlyOneOwner(t *testing.T, e *env) {
	for round := range 5 {
		session := fmt.Sprintf("race-%d-%s", round, randomHex(4))
		const claimers = 8
		owned := make([]bool, claimers)
		var wg sync.WaitGroup
		for i := range claimers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := e.handle(i).SessionClaim(e.ctx, fmt.Sprintf("tenant-%d", i), session)
				if err != nil {
					t.Errorf("claim: %v", err)
				}
				owned[i] = ok
			}()
		}
		wg.Wait()
		n := 0
		for _, ok := range owned {
			if ok {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("round %d: %d tenants own the session %v, want exactly one", round, n, owned)
		}
	}
}

func testSessionModeKeyedByTenant(t *testing.T, e *env) {
	noErr(t, "set a", e.s.SessionModeSet(e.ctx, "tenant-a", "shared", "implement"))
	noErr(t, "set b", e.s.SessionModeSet(e.ctx, "tenant-b", "shared", "review"))
	for tenant, want := range map[string]string{"tenant-a": "implement", "tenant-b": "review"} {
		got, err := e.other.SessionModeGet(e.ctx, tenant, "shared")
		if err != nil || got != want {
			t.Errorf("mode of %s's session = %q, %v; want %q (another tenant's write must not move it)", tenant, got, err, want)
		}
	}
	_, err := e.s.SessionModeGet(e.ctx, "tenant-c", "shared")
	wantErr(t, "a tenant with no mode for the id", err, store.ErrNotFound)
}

func pinsOf(t *testing.T, s store.Store, e *env, tenant, session string) ([]store.ToolPin, bool) {
	t.Helper()
	pins, pinned, err := s.SessionPinsGet(e.ctx, tenant, session)
	noErr(t, "pins", err)
	return pins, pinned
}

func testSessionPinsFirstWriterWins(t *testing.T, e *env) {
	if pins, pinned := pinsOf(t, e.s, e, "tenant-a", "s1"); pinned || pins != nil {
		t.Fatalf("a new session: %v, pinned %v", pins, pinned)
	}
	first := []store.ToolPin{{Tool: "workspace.write_text", SHA256: "w1"}, {Tool: "mcp.a.t", SHA256: "a1"}}
	got, err := e.s.SessionPinsCreate(e.ctx, "tenant-a", "s1", first)
	noErr(t, "create", err)
	want := fmt.Sprint(store.SortedPins(first))
	if fmt.Sprint(got) != want {
		t.Fatalf("created %v, want %v (in tool order)", got, want)
	}
	got, err = e.other.SessionPinsCreate(e.ctx, "tenant-a", "s1", []store.ToolPin{{Tool: "mcp.a.t", SHA256: "a2"}})
	noErr(t, "second create", err)
	if fmt.Sprint(got) != want {
		t.Fatalf("a second writer got %v, want the first catalog %v", got, want)
	}
	if pins, pinned := pinsOf(t, e.other, e, "tenant-a", "s1"); !pinned || fmt.Sprint(pins) != want {
		t.Fatalf("stored %v (pinned %v), want %v", pins, pinned, want)
	}
	// An empty catalog is a catalog: it stays empty.
	got, err = e.s.SessionPinsCreate(e.ctx, "tenant-a", "empty", nil)
	noErr(t, "create empty", err)
	if len(got) != 0 {
		t.Fatalf("empty catalog created as %v", got)
	}
	got, err = e.s.SessionPinsCreate(e.ctx, "tenant-a", "empty", first)
	noErr(t, "create over empty", err)
	if pins, pinned := pinsOf(t, e.s, e, "tenant-a", "empty"); len(got) != 0 || !pinned || len(pins) != 0 {
		t.Fatalf("an empty catalog was replaced: %v / %v (pinned %v)", got, pins, pinned)
	}
}

func testSessionPinsConcurrentWritersAgree(t *testing.T, e *env) {
	const writers = 8
	got := make([]string, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pins, err := e.handle(i).SessionPinsCreate(e.ctx, "tenant-a", "raced",
				[]store.ToolPin{{Tool: "demo.t", SHA256: fmt.Sprint("v", i)}})
			if err != nil {
				t.Errorf("create: %v", err)
			}
			got[i] = fmt.Sprint(pins)
		}()
	}
	wg.Wait()
	for i := range got {
		if got[i] != got[0] {
			t.Fatalf("writers disagree on the catalog: %v", got)
		}
	}
	if pins, _ := pinsOf(t, e.s, e, "tenant-a", "raced"); fmt.Sprint(pins) != got[0] {
		t.Fatalf("stored %v, writers were told %v", pins, got[0])
	}
}

func testSessionPinsKeyedByTenant(t *testing.T, e *env) {
	_, err := e.s.SessionPinsCreate(e.ctx, "tenant-a", "shared", []store.ToolPin{{Tool: "demo.t", SHA256: "a"}})
	noErr(t, "create a", err)
	if _, pinned := pinsOf(t, e.s, e, "tenant-b", "shared"); pinned {
		t.Fatal("tenant-b sees tenant-a's pinned catalog of the same session id")
	}
	got, err := e.s.SessionPinsCreate(e.ctx, "tenant-b", "shared", []store.ToolPin{{Tool: "demo.t", SHA256: "b"}})
	noErr(t, "create b", err)
	if len(got) != 1 || got[0].SHA256 != "b" {
		t.Fatalf("tenant-b's catalog %v, want its own", got)
	}
	if pins, _ := pinsOf(t, e.s, e, "tenant-a", "shared"); len(pins) != 1 || pins[0].SHA256 != "a" {
		t.Fatalf("tenant-a's catalog became %v", pins)
	}
}

func testSessionPinsInvalid(t *testing.T, e *env) {
	for name, pins := range map[string][]store.ToolPin{
		"empty tool": {{Tool: "", SHA256: "x"}},
		"duplicate":  {{Tool: "demo.t", SHA256: "x"}, {Tool: "demo.t", SHA256: "y"}},
	} {
		_, err := e.s.SessionPinsCreate(e.ctx, "tenant-a", "bad", pins)
		wantErr(t, name, err, store.ErrInvalid)
	}
	_, err := e.s.SessionPinsCreate(e.ctx, "tenant-a", "", nil)
	wantErr(t, "empty session id", err, store.ErrInvalid)
	if _, pinned := pinsOf(t, e.s, e, "tenant-a", "bad"); pinned {
		t.Fatal("a refused create pinned the session")
	}
	for name, ep := range map[string]store.PinEpoch{
		"no prefix":      {Pins: []store.ToolPin{{Tool: "mcp.a.t"}}},
		"outside prefix": {Prefix: "mcp.a.", Pins: []store.ToolPin{{Tool: "mcp.b.t"}}},
	} {
		_, err := e.s.SessionPinsForceEpoch(e.ctx, ep)
		wantErr(t, name, err, store.ErrInvalid)
	}
}

func testSessionPinsForceEpoch(t *testing.T, e *env) {
	base := []store.ToolPin{{Tool: "mcp.a.old", SHA256: "1"}, {Tool: "mcp.a.t", SHA256: "1"}, {Tool: "mcp.ab.t", SHA256: "1"}, {Tool: "demo.t", SHA256: "1"}}
	for _, k := range [][2]string{{"tenant-a", "s1"}, {"tenant-b", "s2"}} {
		_, err := e.s.SessionPinsCreate(e.ctx, k[0], k[1], base)
		noErr(t, "create", err)
	}
	n, err := e.s.SessionPinsForceEpoch(e.ctx, store.PinEpoch{Prefix: "mcp.a.",
		Pins: []store.ToolPin{{Tool: "mcp.a.t", SHA256: "2"}, {Tool: "mcp.a.new", SHA256: "2"}}})
	noErr(t, "epoch", err)
	if n != 2 {
		t.Errorf("epoch applied to %d catalogs, want 2", n)
	}
	want := "[{demo.t 1} {mcp.a.new 2} {mcp.a.t 2} {mcp.ab.t 1}]"
	for _, k := range [][2]string{{"tenant-a", "s1"}, {"tenant-b", "s2"}} {
		if pins, _ := pinsOf(t, e.other, e, k[0], k[1]); fmt.Sprint(pins) != want {
			t.Errorf("%v after the epoch: %v, want %v", k, pins, want)
		}
	}
	// A tenant's own server: only that tenant's sessions receive its tools.
	n, err = e.s.SessionPinsForceEpoch(e.ctx, store.PinEpoch{Prefix: "mcp.ab.", Tenant: "tenant-b",
		Pins: []store.ToolPin{{Tool: "mcp.ab.t", SHA256: "3"}}})
	noErr(t, "tenant epoch", err)
	if n != 1 {
		t.Errorf("tenant epoch applied to %d catalogs, want 1", n)
	}
	if pins, _ := pinsOf(t, e.s, e, "tenant-a", "s1"); fmt.Sprint(pins) != "[{demo.t 1} {mcp.a.new 2} {mcp.a.t 2}]" {
		t.Errorf("tenant-a after tenant-b's epoch: %v", pins)
	}
	if pins, _ := pinsOf(t, e.s, e, "tenant-b", "s2"); fmt.Sprint(pins) != "[{demo.t 1} {mcp.a.new 2} {mcp.a.t 2} {mcp.ab.t 3}]" {
		t.Errorf("tenant-b after its epoch: %v", pins)
	}
}

func testBreakerCountsScopedToTenant(t *testing.T, e *env) {
	for range 2 {
		e.insert(t, func(p *row) {
			p.Tenant, p.RunID, p.ArgsHash, p.Status = "tenant-a", "run-t", "h-t", store.StatusDenied
		})
	}
	e.insert(t, func(p *row) {
		p.Tenant, p.RunID, p.ArgsHash, p.Status = "tenant-a", "run-t", "h-t", store.StatusUncertain
	})
	if c := e.breaker(t, "tenant-b", "run-t", "h-t"); c != (store.BreakerCounts{}) {
		t.Fatalf("tenant-b's counts %+v include tenant-a's calls in a run of the same id", c)
	}
	if c := e.breaker(t, "tenant-a", "run-t", "h-t"); c != (store.BreakerCounts{Total: 3, Denied: 2, Uncertain: true}) {
		t.Fatalf("tenant-a's counts %+v", c)
	}
}

// testSessionMint: a minted session is its tenant's and pinned, as a claim and a pins
// create would leave it, in one write; an id the store knows in any way is refused
// with nothing written.
func testSessionMint(t *testing.T, e *env) {
	pins := []store.ToolPin{{Tool: "mcp.a.t", SHA256: "a1"}, {Tool: "demo.t", SHA256: "d1"}}
	want := fmt.Sprint(store.SortedPins(pins))
	noErr(t, "mint", e.s.SessionMint(e.ctx, "tenant-a", "m1", pins))
	if !claim(t, e.other, e, "tenant-a", "m1") || claim(t, e.other, e, "tenant-b", "m1") {
		t.Fatal("a minted session is not its tenant's alone")
	}
	if got, pinned := pinsOf(t, e.other, e, "tenant-a", "m1"); !pinned || fmt.Sprint(got) != want {
		t.Fatalf("a minted session's catalog: %v (pinned %v), want %v", got, pinned, want)
	}
	if got, err := e.s.SessionPinsCreate(e.ctx, "tenant-a", "m1", pins[:1]); err != nil || fmt.Sprint(got) != want {
		t.Fatalf("a later pin of a minted session got %v, %v; want the minted catalog %v", got, err, want)
	}
	noErr(t, "mint an empty catalog", e.s.SessionMint(e.ctx, "tenant-a", "m-empty", nil))
	if got, pinned := pinsOf(t, e.s, e, "tenant-a", "m-empty"); !pinned || len(got) != 0 {
		t.Fatalf("a minted empty catalog: %v (pinned %v)", got, pinned)
	}

	// Known ids: minted, claimed, or pinned without an owner.
	noErr(t, "claim", func() error { _, err := e.s.SessionClaim(e.ctx, "tenant-a", "claimed"); return err }())
	_, err := e.s.SessionPinsCreate(e.ctx, "tenant-a", "pinned", pins[:1])
	noErr(t, "pin", err)
	for _, c := range []struct{ tenant, id string }{{"tenant-a", "m1"}, {"tenant-b", "m1"}, {"tenant-a", "claimed"}, {"tenant-a", "pinned"}} {
		wantErr(t, "mint "+c.id+" for "+c.tenant, e.other.SessionMint(e.ctx, c.tenant, c.id, pins), store.ErrConflict)
	}
	if got, _ := pinsOf(t, e.s, e, "tenant-a", "m1"); fmt.Sprint(got) != want {
		t.Fatalf("a refused mint changed the catalog to %v", got)
	}
	if _, pinned := pinsOf(t, e.s, e, "tenant-a", "claimed"); pinned {
		t.Fatal("a refused mint pinned a claimed session")
	}
	if !claim(t, e.s, e, "tenant-b", "pinned") {
		t.Fatal("a refused mint recorded an owner for a session pinned without one")
	}

	for name, c := range map[string]struct {
		id   string
		pins []store.ToolPin
	}{
		"empty session id": {"", pins},
		"duplicate pins":   {"bad", []store.ToolPin{{Tool: "demo.t", SHA256: "x"}, {Tool: "demo.t", SHA256: "y"}}},
	} {
		wantErr(t, name, e.s.SessionMint(e.ctx, "tenant-a", c.id, c.pins), store.ErrInvalid)
	}
	if !claim(t, e.s, e, "tenant-b", "bad") {
		t.Fatal("a refused mint recorded an owner")
	}
}
