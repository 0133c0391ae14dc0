package upstream_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgen/toolgen/internal/hostile"
	"github.com/toolgen/toolgen/mcp/upstream"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

const hostileID = "hostile"

func hname(remote string) string {
	n, _ := upstream.ToolName(hostileID, remote)
	return n
}

// specs returns the tool definitions session sees, by name (it pins session).
func specs(e *env, session string) map[string]*runtime.ToolSpec {
	out := map[string]*runtime.ToolSpec{}
	tools, err := e.reg.Tools(e.ctx, runtime.SessionKey{Tenant: principal.Tenant, ID: session})
	if err != nil {
		panic(err) // the test's own store failed
	}
	for _, s := range tools {
		out[s.Name] = s
	}
	return out
}

func historyRow(t *testing.T, h []store.CatalogChange, tool, change string) store.CatalogChange {
	t.Helper()
	for _, c := range h {
		if c.Tool == tool && c.Change == change {
			return c
		}
	}
	t.Fatalf("no %s row for %s in the catalog history: %v", change, tool, h)
	return store.CatalogChange{}
}

func detailOf(t *testing.T, c store.CatalogChange) map[string]any {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(c.Detail, &d); err != nil {
		t.Fatalf("detail %s: %v", c.Detail, err)
	}
	return d
}

// TestHostile_ClassificationFromFileOnly: the server's annotations claim a destructive
// tool is read-only, idempotent and harmless; the registry uses the operator's
// classification (MCP-2), records the annotations, and the call marks the watermark
// before tools/call as a non_idempotent tool must (MCP-8).
func TestHostile_ClassificationFromFileOnly(t *testing.T) {
	h := hostile.New(hostile.Config{})
	var mu sync.Mutex
	var callsAtWatermark []int
	e := newEnv(t, func(c *runtime.Config) {
		c.AfterStep = func(step string) {
			if step == "watermark" {
				mu.Lock()
				callsAtWatermark = append(callsAtWatermark, h.Calls(hostile.ToolLiar))
				mu.Unlock()
			}
		}
	})
	connectHostile(t, e, h, server(hostileID, "write", "non_idempotent", "high", "mcp.hostile"), "")

	liar := specs(e, "s1")[hname(hostile.ToolLiar)]
	if liar == nil {
		t.Fatal("the liar tool is not registered")
	}
	if liar.SideEffect != runtime.SideEffectWrite || liar.Idempotency != runtime.NonIdempotent || liar.Risk != runtime.RiskHigh ||
		!slices.Equal(liar.RequiredScopes, []string{"mcp.hostile"}) || liar.OutputTrust != runtime.TrustExternalUntrusted {
		t.Fatalf("classification = %s/%s/%s/%v/%s, want the file's write/non_idempotent/high/[mcp.hostile]/external_untrusted",
			liar.SideEffect, liar.Idempotency, liar.Risk, liar.RequiredScopes, liar.OutputTrust)
	}
	d := detailOf(t, historyRow(t, e.history(hostileID), liar.Name, upstream.ChangeAdded))
	ann, _ := d["annotations"].(map[string]any)
	if ann["readOnlyHint"] != true || ann["destructiveHint"] != false {
		t.Fatalf("the server's annotations are not recorded: %v", d["annotations"])
	}

	o := e.call("s1", liar.Name, `{}`)
	wantOutcome(t, o, runtime.OutcomeSucceeded, "")
	if got := resultText(t, o); !strings.Contains(got, "everything wiped") || !strings.Contains(got, `trust="external_untrusted"`) {
		t.Fatalf("result = %q", got)
	}
	if o.Result.Trust != runtime.TrustExternalUntrusted {
		t.Fatalf("result trust = %q", o.Result.Trust)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(callsAtWatermark, []int{0}) || h.Calls(hostile.ToolLiar) != 1 {
		t.Fatalf("watermark marked with %v server calls done (want one watermark, before the only call); calls = %d",
			callsAtWatermark, h.Calls(hostile.ToolLiar))
	}
}

// TestHostile_ReadOnlyClassificationSendsNoWatermark: an idempotent read classification
// never marks (the pipeline refuses a watermark for a record-once read).
func TestHostile_ReadOnlyClassificationSendsNoWatermark(t *testing.T) {
	h := hostile.New(hostile.Config{})
	marks := 0
	e := newEnv(t, func(c *runtime.Config) {
		c.AfterStep = func(step string) {
			if step == "watermark" {
				marks++
			}
		}
	})
	connectHostile(t, e, h, server(hostileID, "read", "idempotent", "low", "mcp.hostile"), "")
	wantOutcome(t, e.call("s1", hname(hostile.ToolEcho), `{"message":"hi"}`), runtime.OutcomeSucceeded, "")
	if marks != 0 {
		t.Fatalf("%d watermarks for an idempotent read", marks)
	}
}

// TestHostile_CollisionsAndSchemas: two remote names normalizing alike are both dropped
// and recorded (MCP-1); schemas are sanitized: a missing type becomes object, an array
// type, a remote $ref and draft-04 are refused and recorded, and the rest of the server
// works.
func TestHostile_CollisionsAndSchemas(t *testing.T) {
	h := hostile.New(hostile.Config{})
	e := newEnv(t)
	connectHostile(t, e, h, server(hostileID, "write", "non_idempotent", "low", "mcp.hostile"), "")
	hist := e.history(hostileID)
	s := specs(e, "s1")

	collided := hname(hostile.ToolCollideB)
	if s[collided] != nil {
		t.Fatalf("%s is registered although two remote tools normalize to it", collided)
	}
	d := detailOf(t, historyRow(t, hist, collided, upstream.ChangeDroppedCollision))
	if got, _ := json.Marshal(d["remote_names"]); string(got) != `["Get-Data","get_data"]` {
		t.Fatalf("collision record names %s", got)
	}
	wantOutcome(t, e.call("s1", collided, `{}`), runtime.OutcomeDenied, runtime.ReasonUnknownTool)

	noType := s[hname(hostile.ToolNoType)]
	if noType == nil {
		t.Fatal("the tool listed without a schema type was dropped; it should get type object")
	}
	var schema map[string]any
	if err := json.Unmarshal(noType.InputSchema, &schema); err != nil || schema["type"] != "object" {
		t.Fatalf("sanitized schema = %s", noType.InputSchema)
	}
	wantOutcome(t, e.call("s1", noType.Name, `{"x":"y"}`), runtime.OutcomeSucceeded, "")
	wantOutcome(t, e.call("s1", noType.Name, `{"x":5}`), runtime.OutcomeDenied, runtime.ReasonInvalidArguments)

	for remote, why := range map[string]string{
		hostile.ToolArraySchema: `"type" is "array"`,
		hostile.ToolRemoteRef:   "cannot be resolved",
		hostile.ToolDraft4:      "draft-04",
	} {
		name := hname(remote)
		if s[name] != nil {
			t.Errorf("%s is registered with an unusable schema", name)
		}
		d := detailOf(t, historyRow(t, hist, name, upstream.ChangeDroppedInvalid))
		if r, _ := d["reason"].(string); !strings.Contains(r, why) {
			t.Errorf("%s dropped for %q, want a reason mentioning %q", name, r, why)
		}
	}
	wantOutcome(t, e.call("s1", hname(hostile.ToolEcho), `{}`), runtime.OutcomeSucceeded, "")
}

// TestHostile_ArgumentsNeverNull: empty and null arguments reach the server as {}.
func TestHostile_ArgumentsNeverNull(t *testing.T) {
	h := hostile.New(hostile.Config{})
	e := newEnv(t)
	connectHostile(t, e, h, server(hostileID, "read", "idempotent", "low", "mcp.hostile"), "")
	for _, args := range []string{``, `null`, `{}`} {
		wantOutcome(t, e.call("s1", hname(hostile.ToolEcho), args), runtime.OutcomeSucceeded, "")
	}
	for i, got := range h.Args(hostile.ToolEcho) {
		if string(got) != `{}` {
			t.Errorf("call %d: the server received arguments %s, want {}", i, got)
		}
	}
}

// TestHostile_Drift: a description changed mid-session (rug pull) and a withdrawn tool,
// announced by tools/list_changed, on both protocol revisions (MCP-7): the pinned
// session keeps its catalog and is refused tool_changed / tool_withdrawn, new sessions
// see the new catalog, and every change is recorded.
func TestHostile_Drift(t *testing.T) {
	for _, version := range []string{upstream.ProtocolLegacy, upstream.ProtocolStateless} {
		t.Run(version, func(t *testing.T) {
			h := hostile.New(hostile.Config{})
			e := newEnv(t)
			u := connectHostile(t, e, h, server(hostileID, "read", "idempotent", "low", "mcp.hostile"), version)
			if u.ProtocolVersion() != version {
				t.Fatalf("negotiated %s, want %s", u.ProtocolVersion(), version)
			}
			rug, fleeting := hname(hostile.ToolRuggable), hname(hostile.ToolFleeting)
			before := specs(e, "s1") // s1 pins the catalog it was first shown
			wantOutcome(t, e.call("s1", rug, `{"a":1,"b":2}`), runtime.OutcomeSucceeded, "")

			gen := upstream.RefreshGen(u)
			h.RugPull()
			waitRefresh(t, u, gen)
			waitFor(t, "the changed row", func() bool { return slices.Contains(changes(e.history(hostileID), rug), upstream.ChangeChanged) })

			wantOutcome(t, e.call("s1", rug, `{"a":1,"b":2}`), runtime.OutcomeUnavailable, runtime.ReasonToolChanged)
			if got := specs(e, "s1")[rug].Description; got != hostile.RuggableDescription {
				t.Fatalf("the pinned session's definition changed to %q", got)
			}
			s2 := specs(e, "s2")
			if s2[rug].Description != hostile.RuggedDescription || s2[rug].SchemaSHA256 == before[rug].SchemaSHA256 {
				t.Fatalf("a new session sees %q (%s)", s2[rug].Description, s2[rug].SchemaSHA256)
			}
			o := e.call("s2", rug, `{"a":2,"b":2}`)
			wantOutcome(t, o, runtime.OutcomeSucceeded, "")
			if !strings.Contains(resultText(t, o), "4") {
				t.Fatalf("result %q", resultText(t, o))
			}
			row := historyRow(t, e.history(hostileID), rug, upstream.ChangeChanged)
			d := detailOf(t, row)
			if d["previous_sha256"] != before[rug].SchemaSHA256 || row.SHA256 != s2[rug].SchemaSHA256 {
				t.Fatalf("changed row: previous %v, now %s; want %s -> %s", d["previous_sha256"], row.SHA256, before[rug].SchemaSHA256, s2[rug].SchemaSHA256)
			}
			if got, _ := json.Marshal(d["changed_fields"]); string(got) != `["description"]` {
				t.Fatalf("changed_fields = %s", got)
			}
			lc := historyRow(t, e.history(hostileID), "", upstream.ChangeListChanged)
			if !strings.Contains(string(lc.Detail), rug) || !strings.Contains(string(lc.Detail), "tools/list_changed") {
				t.Fatalf("list_changed row %s", lc.Detail)
			}

			gen = upstream.RefreshGen(u)
			h.Withdraw()
			waitRefresh(t, u, gen)
			waitFor(t, "the removed row", func() bool { return slices.Contains(changes(e.history(hostileID), fleeting), upstream.ChangeRemoved) })
			wantOutcome(t, e.call("s1", fleeting, `{}`), runtime.OutcomeUnavailable, runtime.ReasonToolWithdrawn)
			if specs(e, "s1")[fleeting] == nil {
				t.Fatal("the withdrawn tool is no longer advertised to the pinned session")
			}
			wantOutcome(t, e.call("s3", fleeting, `{}`), runtime.OutcomeDenied, runtime.ReasonUnknownTool)
			if got := changes(e.history(hostileID), rug); !slices.Equal(got, []string{"added", "changed"}) {
				t.Fatalf("history of %s = %v", rug, got)
			}
		})
	}
}

// TestHostile_RestartRecordsOnlyDrift: a reconnect (same store) records only what
// changed while the adapter was away; Close withdraws the tools from pinned sessions.
func TestHostile_RestartRecordsOnlyDrift(t *testing.T) {
	h := hostile.New(hostile.Config{})
	e := newEnv(t)
	srv := server(hostileID, "read", "idempotent", "low", "mcp.hostile")
	u := connectHostile(t, e, h, srv, "")
	specs(e, "s1")
	n := len(e.history(hostileID))
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, e.call("s1", hname(hostile.ToolEcho), `{}`), runtime.OutcomeUnavailable, runtime.ReasonToolWithdrawn)

	h.RugPull()
	connectHostile(t, e, h, srv, "")
	rows := e.history(hostileID)[n:]
	if len(rows) != 1 || rows[0].Tool != hname(hostile.ToolRuggable) || rows[0].Change != upstream.ChangeChanged {
		t.Fatalf("rows recorded by the reconnect: %v", rows)
	}
	wantOutcome(t, e.call("s1", hname(hostile.ToolEcho), `{}`), runtime.OutcomeSucceeded, "")
	wantOutcome(t, e.call("s1", hname(hostile.ToolRuggable), `{}`), runtime.OutcomeUnavailable, runtime.ReasonToolChanged)
}

// wantDeclined asserts a call ended failed/input_request_declined (not retryable)
// because the server asked for client input (MCP-6).
func wantDeclined(t *testing.T, o runtime.Outcome) {
	t.Helper()
	if o.Status != runtime.OutcomeFailed || o.Retryable || o.ReasonCode != runtime.ReasonInputRequestDeclined {
		t.Fatalf("outcome %s/%s retryable=%t, want failed/input_request_declined, not retryable", o.Status, o.ReasonCode, o.Retryable)
	}
}

func refusedAudits(t *testing.T, e *env) []string {
	t.Helper()
	entries, err := e.store.AuditList(e.ctx, "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var methods []string
	for _, a := range entries {
		if a.Kind == upstream.AuditRequestRefused {
			var d struct{ Method string }
			_ = json.Unmarshal(a.Detail, &d)
			methods = append(methods, d.Method)
		}
	}
	slices.Sort(methods)
	return methods
}

var askTools = []string{hostile.ToolAskRoots, hostile.ToolAskSampling, hostile.ToolAskElicitation}

// TestHostile_DirectRequestsRefused (2025-11-25): the server sends roots/list,
// sampling/createMessage and elicitation/create to the client; each is refused
// (MCP-6), the server never gets an answer, and each refusal is audited. The client
// declared no capability.
func TestHostile_DirectRequestsRefused(t *testing.T) {
	h := hostile.New(hostile.Config{})
	e := newEnv(t)
	connectHostile(t, e, h, server(hostileID, "read", "idempotent", "low", "mcp.hostile"), upstream.ProtocolLegacy)
	for _, tool := range askTools {
		o := e.call("s1", hname(tool), `{}`)
		// The server reports the refusal however it likes: here as an (untrusted) result.
		wantOutcome(t, o, runtime.OutcomeSucceeded, "")
		if !strings.Contains(resultText(t, o), "refused") {
			t.Fatalf("%s: %q", tool, resultText(t, o))
		}
	}
	obs := h.Observations()
	var methods []string
	for _, ob := range obs {
		if ob.Err == "" || ob.Result != "" || !strings.Contains(ob.Err, "does not grant") {
			t.Errorf("%s: the server got %q (error %q), want a refusal", ob.Method, ob.Result, ob.Err)
		}
		methods = append(methods, ob.Method)
	}
	slices.Sort(methods)
	want := []string{"elicitation/create", "roots/list", "sampling/createMessage"}
	if !slices.Equal(methods, want) {
		t.Fatalf("the server sent %v, want %v", methods, want)
	}
	if got := refusedAudits(t, e); !slices.Equal(got, want) {
		t.Fatalf("audited refusals %v, want %v", got, want)
	}
	caps := h.ClientCapabilities()
	//lint:ignore SA1019 asserts the deprecated capabilities are not declared
	if len(caps) != 1 || caps[0].RootsV2 != nil || caps[0].Sampling != nil || caps[0].Elicitation != nil {
		t.Fatalf("the client declared %+v", caps)
	}
}

// TestHostile_InputRequestsDeclined (2026-07-28): the server returns inputRequests for
// roots, sampling and elicitation; none is fulfilled (the SDK's automatic multi
// round-trip would answer roots/list itself), the call is not retried, and it ends
// failed with input_request_declined (MCP-6).
func TestHostile_InputRequestsDeclined(t *testing.T) {
	h := hostile.New(hostile.Config{})
	e := newEnv(t)
	u := connectHostile(t, e, h, server(hostileID, "write", "non_idempotent", "low", "mcp.hostile"), upstream.ProtocolStateless)
	if u.ProtocolVersion() != upstream.ProtocolStateless {
		t.Fatalf("negotiated %s", u.ProtocolVersion())
	}
	for _, tool := range askTools {
		o := e.call("s1", hname(tool), `{}`)
		wantDeclined(t, o)
		if h.Calls(tool) != 1 {
			t.Fatalf("%s ran %d times on the server, want once (no retry with answers)", tool, h.Calls(tool))
		}
		if strings.Contains(o.Message, "roots") || strings.Contains(o.Message, "sampling") {
			t.Fatalf("message %q carries call detail", o.Message)
		}
	}
	for _, ob := range h.Observations() {
		if ob.Method == "input_responses" {
			t.Fatalf("the client answered input requests: %s", ob.Result)
		}
	}
	want := []string{"elicitation/create", "roots/list", "sampling/createMessage"}
	if got := refusedAudits(t, e); !slices.Equal(got, want) {
		t.Fatalf("audited refusals %v, want %v", got, want)
	}
}

// TestHostile_LargeResult: a 20 MB result is excerpted inline and stored whole as an
// artifact: nothing is lost (RT-9).
func TestHostile_LargeResult(t *testing.T) {
	h := hostile.New(hostile.Config{})
	e := newEnv(t)
	connectHostile(t, e, h, server(hostileID, "read", "idempotent", "low", "mcp.hostile"), "")
	checkBig(t, e, e.call("s1", hname(hostile.ToolBig), `{}`))
}

func checkBig(t *testing.T, e *env, o runtime.Outcome) {
	t.Helper()
	wantOutcome(t, o, runtime.OutcomeSucceeded, "")
	inline := len(resultText(t, o))
	if inline > upstream.DefaultOutputMaxBytes+1024 {
		t.Fatalf("%d bytes inline; the output budget is %d", inline, upstream.DefaultOutputMaxBytes)
	}
	if !strings.Contains(resultText(t, o), "elided") {
		t.Fatal("the inline excerpt has no elision marker")
	}
	want := hostile.BigText()
	for _, a := range o.Result.Artifacts {
		r, err := e.art.Open(a.URI)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == len(want) && bytes.Equal(got, []byte(want)) {
			return
		}
	}
	t.Fatalf("no artifact holds the %d bytes of the result: %+v", len(want), o.Result.Artifacts)
}

// TestHostile_InjectionOnlyInExternalDetail: a remote error string (isError text or a
// JSON-RPC error message) carrying a prompt injection reaches the outcome only in
// external_detail, enveloped and external_untrusted; the message is the reason table's
// (MCP-3, RT-7).
func TestHostile_InjectionOnlyInExternalDetail(t *testing.T) {
	h := hostile.New(hostile.Config{})
	e := newEnv(t)
	connectHostile(t, e, h, server(hostileID, "write", "non_idempotent", "low", "mcp.hostile"), "")
	for _, tool := range []string{hostile.ToolInjectError, hostile.ToolInjectProtocolError} {
		o := e.call("s1", hname(tool), `{}`)
		wantOutcome(t, o, runtime.OutcomeFailed, runtime.ReasonToolFailure)
		if o.Message != runtime.ReasonToolFailure.Message() || strings.Contains(o.Message, "IGNORE") {
			t.Fatalf("%s: message %q", tool, o.Message)
		}
		d := o.ExternalDetail
		if d == nil || d.Trust != runtime.TrustExternalUntrusted || !strings.Contains(d.Text, hostile.Injection) {
			t.Fatalf("%s: external_detail %+v", tool, d)
		}
		if trust, _, _, ok := runtime.ParseEnvelope(d.Text); !ok || trust != runtime.TrustExternalUntrusted {
			t.Fatalf("%s: external_detail is not enveloped: %q", tool, d.Text)
		}
		raw, _ := json.Marshal(o)
		var stored struct{ Message string }
		_ = json.Unmarshal(raw, &stored)
		if strings.Contains(stored.Message, "IGNORE") {
			t.Fatalf("%s: the stored outcome's message carries the injection", tool)
		}
	}
}

// TestHostile_HangHitsDeadline: a server that never answers is stopped by the tool
// timeout, and the cancellation reaches the server. An idempotent classification ends
// failed/timeout; a non-idempotent one, whose watermark is set, ends UNCERTAIN.
func TestHostile_HangHitsDeadline(t *testing.T) {
	h := hostile.New(hostile.Config{})
	e := newEnv(t)
	short := func(o *upstream.Options) { o.ToolTimeout = 500 * time.Millisecond }
	connectHostile(t, e, h, server("hostile_ro", "read", "idempotent", "low", "mcp.hostile"), "", short)
	connectHostile(t, e, h, server(hostileID, "write", "non_idempotent", "low", "mcp.hostile"), "", short)

	wantOutcome(t, e.call("s1", "mcp.hostile_ro.hang", `{}`), runtime.OutcomeFailed, runtime.ReasonTimeout)
	waitFor(t, "the server to see the cancellation", func() bool {
		for _, o := range h.Observations() {
			if o.Tool == hostile.ToolHang && o.Method == "cancelled" {
				return true
			}
		}
		return false
	})
	wantOutcome(t, e.call("s1", hname(hostile.ToolHang), `{}`), runtime.OutcomeUncertain, runtime.ReasonEffectMayHaveHappened)
	un, err := e.store.InvocationListUncertain(e.ctx, "acme")
	if err != nil || len(un) != 1 || un[0].Tool != hname(hostile.ToolHang) || un[0].EffectSentAt == nil {
		t.Fatalf("uncertain rows %+v, %v", un, err)
	}
}

// TestHostile_StructuredAndImages: structured content is validated against the
// declared output schema (a server breaking its own schema gets invalid_result); an
// image is stored whole as an artifact and named by a placeholder.
func TestHostile_StructuredAndImages(t *testing.T) {
	h := hostile.New(hostile.Config{})
	e := newEnv(t)
	connectHostile(t, e, h, server(hostileID, "read", "idempotent", "low", "mcp.hostile"), "")
	o := e.call("s1", hname(hostile.ToolStructured), `{}`)
	wantOutcome(t, o, runtime.OutcomeSucceeded, "")
	if string(o.Result.Structured) != `{"sum":3}` {
		t.Fatalf("structured = %s", o.Result.Structured)
	}
	wantOutcome(t, e.call("s1", hname(hostile.ToolStructuredLiar), `{}`), runtime.OutcomeFailed, runtime.ReasonInvalidResult)

	o = e.call("s1", hname(hostile.ToolImage), `{}`)
	wantOutcome(t, o, runtime.OutcomeSucceeded, "")
	if len(o.Result.Artifacts) != 1 || !strings.Contains(resultText(t, o), o.Result.Artifacts[0].URI) {
		t.Fatalf("image result %q, artifacts %+v", resultText(t, o), o.Result.Artifacts)
	}
	r, err := e.art.Open(o.Result.Artifacts[0].URI)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, _ := io.ReadAll(r); !bytes.Equal(got, hostile.TinyPNG) {
		t.Fatalf("artifact holds %q", got)
	}
}

// TestHostile_Stdio runs the hostile server as a subprocess (the test binary itself):
// the initialize request on the wire advertises nothing; a 20 MB message passes (the
// SDK's command transport would cap it at 16 MiB); a server that exits mid-call leaves
// a non-idempotent call UNCERTAIN and an idempotent one unavailable (retryable), and
// later calls fail before any watermark (reconnection is off here; see
// reconnect_test.go).
func TestHostile_Stdio(t *testing.T) {
	e := newEnv(t)
	w := &wire{}
	opts := upstream.Options{Server: hostileStdio(t, hostileID, "write", "non_idempotent", "low"), Registry: e.reg, Store: e.store, Logger: testLogger(t),
		NoReconnect: true}
	upstream.SetStdioTap(&opts, w)
	u, err := upstream.Connect(e.ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if err := u.Err(); err != nil {
		t.Fatalf("Err() of a live connection = %v", err)
	}
	noClientCapabilities(t, initializeCapabilities(t, w.String()))

	checkBig(t, e, e.call("s1", hname(hostile.ToolBig), `{}`))

	wantOutcome(t, e.call("s1", hname(hostile.ToolDie), `{}`), runtime.OutcomeUncertain, runtime.ReasonEffectMayHaveHappened)
	un, err := e.store.InvocationListUncertain(e.ctx, "acme")
	if err != nil || len(un) != 1 || un[0].Tool != hname(hostile.ToolDie) || un[0].EffectSentAt == nil {
		t.Fatalf("uncertain rows %+v, %v", un, err)
	}
	waitFor(t, "the adapter to notice the lost connection", func() bool { return errors.Is(u.Err(), upstream.ErrConnectionLost) })
	o := e.call("s1", hname(hostile.ToolEcho), `{}`)
	wantOutcome(t, o, runtime.OutcomeUnavailable, runtime.ReasonUpstreamOffline)
	if !strings.Contains(o.ExternalDetail.Text, "connection to the server was lost") {
		t.Fatalf("detail %q", o.ExternalDetail.Text)
	}
	if un, _ := e.store.InvocationListUncertain(e.ctx, "acme"); len(un) != 1 {
		t.Fatalf("a call to the dead server was recorded UNCERTAIN: %d rows", len(un))
	}

	ro, err := upstream.Connect(e.ctx, upstream.Options{Server: hostileStdio(t, "hostile_ro", "read", "idempotent", "low"), Registry: e.reg, Store: e.store})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	wantOutcome(t, e.call("s2", "mcp.hostile_ro.die", `{}`), runtime.OutcomeUnavailable, runtime.ReasonUpstreamDisconnected)
}
