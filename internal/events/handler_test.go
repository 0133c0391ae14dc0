package events

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
)

// marker is in every argument and outcome the tests write; no event may carry it.
const marker = "SECRET-MARKER-9d1e"

func newStore(t *testing.T) store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newServer(t *testing.T, s store.Store, o Options) (*Handler, *httptest.Server) {
	t.Helper()
	o.Store = s
	h, err := NewHandler(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	return h, srv
}

// call writes one non-idempotent call's milestones (recorded, started, effect_sent,
// settled) with the marker in its arguments and its outcome.
func call(t *testing.T, s store.Store, tenant, session, run string) *store.Invocation {
	t.Helper()
	ctx := t.Context()
	inv, _, err := s.InvocationInsert(ctx, store.InsertRunning(store.Call{
		Key: fmt.Sprintf("%s/%s/%s/%d", tenant, session, run, time.Now().UnixNano()), Tenant: tenant, Principal: "agent",
		SessionID: session, RunID: run, CallID: "c1", Tool: "demo.write", ToolVersion: 1,
		Idempotency: store.IdempotencyNonIdempotent, Args: json.RawMessage(`{"text":"` + marker + `"}`),
		OriginTrust: "user", ArgumentTrust: "user", Mode: "m", Decision: store.DecisionAllow,
	}, "w", time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InvocationMarkEffectSentIfLeased(ctx, inv.Fence(), "tok"); err != nil {
		t.Fatal(err)
	}
	if err := s.InvocationSettleIfLeased(ctx, inv.Fence(), store.Settlement{Status: store.StatusFailed,
		ReasonCode: "tool_failure", Outcome: json.RawMessage(`{"external_detail":{"text":"` + marker + `"}}`)}); err != nil {
		t.Fatal(err)
	}
	return inv
}

// sseEvent is one event as it appeared on the wire.
type sseEvent struct {
	id, kind, data string
}

// readAll reads a once=1 stream to its end: its events, and whether it ended caught up.
func readAll(t *testing.T, srv *httptest.Server, query string, header http.Header) ([]sseEvent, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/?once=1&"+query, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET ?%s: %s: %s", query, resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type %q", ct)
	}
	if !strings.HasSuffix(string(body), ": "+CaughtUpComment+"\n\n") {
		t.Fatalf("a once=1 stream does not end caught up:\n%s", body)
	}
	var out []sseEvent
	for _, block := range strings.Split(strings.TrimSpace(string(body)), "\n\n") {
		var ev sseEvent
		for _, line := range strings.Split(block, "\n") {
			field, value, _ := strings.Cut(line, ": ")
			switch field {
			case "id":
				ev.id = value
			case "event":
				ev.kind = value
			case "data":
				ev.data = value
			}
		}
		if ev.data != "" {
			out = append(out, ev)
		}
	}
	return out, string(body)
}

func kinds(evs []sseEvent) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.kind)
	}
	return out
}

// allowedKeys are the only JSON keys an event may have: ids and classification.
var allowedKeys = []string{"id", "kind", "at", "tenant", "session_id", "run_id", "invocation_id", "step", "call_id",
	"tool", "status", "reason_code", "mode", "decision", "idempotency", "origin_trust", "argument_trust", "attempt",
	"server", "change", "duration_us"}

func TestHandler_FiltersAndNoPayload(t *testing.T) {
	s := newStore(t)
	_, srv := newServer(t, s, Options{})
	a := call(t, s, "t1", "s1", "r1")
	b := call(t, s, "t1", "s2", "r2")
	c := call(t, s, "t2", "s1", "r3")
	if _, err := s.CatalogHistoryAppend(t.Context(), store.CatalogChange{ServerID: "files", Tool: "read", Change: "changed",
		Detail: json.RawMessage(`{"description":"` + marker + `"}`)}); err != nil {
		t.Fatal(err)
	}
	milestones := []string{"recorded", "started", "effect_sent", "settled"}
	for _, tc := range []struct {
		query string
		want  []int64 // invocations, each with its four milestones; 0: the catalog drift
	}{
		{"", []int64{a.ID, b.ID, c.ID, 0}},
		{"session=s1", []int64{a.ID, c.ID}},
		{"session=s1&tenant=t1", []int64{a.ID}},
		{"run=r2", []int64{b.ID}},
		{"tenant=t2", []int64{c.ID}},
		{"session=none", nil},
	} {
		evs, body := readAll(t, srv, tc.query, nil)
		if strings.Contains(body, marker) {
			t.Fatalf("?%s: the stream carries the payload:\n%s", tc.query, body)
		}
		var want []string
		var got []string
		for _, id := range tc.want {
			if id == 0 {
				want = append(want, "0:catalog_drift")
				continue
			}
			for _, m := range milestones {
				want = append(want, fmt.Sprintf("%d:%s", id, m))
			}
		}
		prev := store.EventCursor{}
		for _, ev := range evs {
			var e Event
			if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
				t.Fatalf("?%s: data %s: %v", tc.query, ev.data, err)
			}
			if e.ID != ev.id || e.Kind != ev.kind {
				t.Errorf("?%s: data %s under id %q, event %q", tc.query, ev.data, ev.id, ev.kind)
			}
			cur, err := store.ParseEventCursor(ev.id)
			if err != nil || !prev.Less(cur) {
				t.Errorf("?%s: id %q after %v: %v", tc.query, ev.id, prev, err)
			}
			prev = cur
			got = append(got, fmt.Sprintf("%d:%s", e.InvocationID, e.Kind))
			var keys map[string]any
			json.Unmarshal([]byte(ev.data), &keys)
			for k := range keys {
				if !slices.Contains(allowedKeys, k) {
					t.Errorf("?%s: event has a field %q: %s", tc.query, k, ev.data)
				}
			}
			if e.InvocationID != 0 && (e.Tool != "demo.write" || e.Mode != "m" || e.OriginTrust != "user" || e.At.IsZero()) {
				t.Errorf("?%s: event %+v lacks its classification", tc.query, e)
			}
			if e.Kind == "settled" && (e.Status != "FAILED" || e.ReasonCode != "tool_failure" || e.DurationUS == nil) {
				t.Errorf("?%s: settled event %+v", tc.query, e)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("?%s: events %v, want %v", tc.query, got, want)
		}
	}
}

func TestHandler_ResumeGivesExactlyTheMissedEvents(t *testing.T) {
	s := newStore(t)
	_, srv := newServer(t, s, Options{Limit: 3}) // pages smaller than the backlog
	for range 3 {
		call(t, s, "t1", "s1", "r1")
	}
	all, _ := readAll(t, srv, "", nil)
	if len(all) != 12 {
		t.Fatalf("%d events, want 12", len(all))
	}
	for i := range all {
		last := all[i].id
		want := all[i+1:]
		for _, how := range []struct {
			name   string
			query  string
			header http.Header
		}{
			{"header", "", http.Header{"Last-Event-Id": {last}}},
			{"query", "last_event_id=" + last, nil},
			// the header wins: it is what a reconnecting EventSource sends
			{"header over query", "last_event_id=0", http.Header{"Last-Event-Id": {last}}},
		} {
			got, _ := readAll(t, srv, how.query, how.header)
			if !slices.Equal(got, want) {
				t.Fatalf("resumed by %s after %s: %v, want %v", how.name, last, kinds(got), kinds(want))
			}
		}
	}
	// "0" and no id are the start.
	if got, _ := readAll(t, srv, "last_event_id=0", nil); !slices.Equal(got, all) {
		t.Fatalf("after 0: %d events, want all %d", len(got), len(all))
	}
	// Events written after a reader's last id are exactly what it gets next.
	inv := call(t, s, "t1", "s1", "r1")
	got, _ := readAll(t, srv, "", http.Header{"Last-Event-Id": {all[len(all)-1].id}})
	if !slices.Equal(kinds(got), []string{"recorded", "started", "effect_sent", "settled"}) ||
		!strings.Contains(got[0].data, fmt.Sprintf(`"invocation_id":%d`, inv.ID)) {
		t.Fatalf("after the last id, then a call: %v", got)
	}
}

func TestHandler_MalformedRequest400(t *testing.T) {
	s := newStore(t)
	_, srv := newServer(t, s, Options{})
	for _, tc := range []struct {
		query, header string
	}{
		{"", "abc"},
		{"", "-1"},
		{"", "1-2-3"},
		{"last_event_id=x", ""},
		{"once=maybe", ""},
		// a PostgreSQL cursor on SQLite: the driver refuses it
		{"", "7-3"},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/?"+tc.query, nil)
		if tc.header != "" {
			req.Header.Set("Last-Event-ID", tc.header)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("?%s Last-Event-ID %q: %s %s, want 400", tc.query, tc.header, resp.Status, body)
		}
	}
	resp, err := srv.Client().Post(srv.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %s, want 405", resp.Status)
	}
}

func TestHandler_FollowsNewEventsAndHeartbeats(t *testing.T) {
	s := newStore(t)
	// No poll during the test: only Wake makes the stream read the store.
	h, srv := newServer(t, s, Options{Poll: time.Hour, Heartbeat: 10 * time.Millisecond})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+Path, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	next := func(want string) {
		t.Helper()
		for lines.Scan() {
			if strings.HasPrefix(lines.Text(), want) {
				return
			}
		}
		t.Fatalf("stream ended before a line %q: %v", want, lines.Err())
	}
	next(": keepalive")
	inv := call(t, s, "t1", "s1", "r1")
	h.Wake()
	next("event: recorded")
	next(`data: {"id":`)
	if !strings.Contains(lines.Text(), fmt.Sprintf(`"invocation_id":%d`, inv.ID)) {
		t.Fatalf("data %s", lines.Text())
	}
	next("event: settled")
	// Close ends the stream (server shutdown).
	h.Close()
	for lines.Scan() {
	}
}

func TestFollow_ReconnectsWithLastEventID(t *testing.T) {
	s := newStore(t)
	for range 3 {
		call(t, s, "t1", "s1", "r1")
	}
	h, err := NewHandler(Options{Store: s, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// The first two connections are cut after a few hundred bytes, mid-event.
	var mu sync.Mutex
	var lastIDs []string
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		if n.Add(1) <= 2 {
			w = &cutWriter{ResponseWriter: w, left: 700}
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	var got []Event
	var retries int
	err = Follow(t.Context(), srv.URL, Filter{SessionID: "s1"}, "", func(ev Event) error {
		got = append(got, ev)
		return nil
	}, Once(), Backoff(time.Millisecond, time.Millisecond), OnRetry(func(error, time.Duration) { retries++ }))
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.EventList(t.Context(), store.EventFilter{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	var gotIDs, wantIDs []string
	for _, ev := range got {
		gotIDs = append(gotIDs, ev.ID)
	}
	for _, ev := range want {
		wantIDs = append(wantIDs, ev.Cursor.String())
	}
	if !slices.Equal(gotIDs, wantIDs) {
		t.Fatalf("followed %v, want each of %v once", gotIDs, wantIDs)
	}
	if retries != 2 || len(lastIDs) != 3 || lastIDs[0] != "" || lastIDs[1] == "" || lastIDs[2] == lastIDs[1] {
		t.Fatalf("%d retries, Last-Event-IDs %q: want two reconnections, each from the last id received", retries, lastIDs)
	}
	// Each reconnection resumed from the last event delivered before the cut.
	for _, id := range lastIDs[1:] {
		if !slices.Contains(gotIDs, id) {
			t.Errorf("reconnected after %q, an id never delivered", id)
		}
	}
}

// cutWriter fails every write after left bytes, as a dropped connection does.
type cutWriter struct {
	http.ResponseWriter
	left int
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if len(p) > c.left {
		n, _ := c.ResponseWriter.Write(p[:c.left])
		c.left = 0
		c.ResponseWriter.(http.Flusher).Flush()
		return n, errors.New("connection cut")
	}
	c.left -= len(p)
	return c.ResponseWriter.Write(p)
}

func (c *cutWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func TestFollow_StopsOnRefusalCallbackErrorAndContext(t *testing.T) {
	s := newStore(t)
	call(t, s, "t1", "s1", "r1")
	_, srv := newServer(t, s, Options{})
	err := Follow(t.Context(), srv.URL, Filter{}, "not-an-id", func(Event) error { return nil }, Once())
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "400") {
		t.Errorf("malformed id: %v, want ErrRefused (400)", err)
	}
	stop := errors.New("enough")
	calls := 0
	err = Follow(t.Context(), srv.URL, Filter{}, "", func(Event) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Errorf("callback error: %v after %d calls, want it after 1", err, calls)
	}
	ctx, cancel := context.WithCancel(t.Context())
	err = Follow(ctx, srv.URL, Filter{}, "", func(Event) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	err = Follow(t.Context(), "ftp://x", Filter{}, "", func(Event) error { return nil })
	if err == nil {
		t.Error("an ftp URL was accepted")
	}
	// Nothing listening: MaxRetries bounds the attempts.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	err = Follow(t.Context(), dead.URL, Filter{}, "", func(Event) error { return nil },
		MaxRetries(2), Backoff(time.Millisecond, time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), "giving up after 3 attempts") {
		t.Errorf("nothing listening: %v", err)
	}
}

func TestStreamURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8080":                 "http://127.0.0.1:8080/events?once=1&session=s+1",
		"http://127.0.0.1:8080/":                "http://127.0.0.1:8080/events?once=1&session=s+1",
		"https://gw.example.com/api/events?x=1": "https://gw.example.com/api/events?once=1&session=s+1&x=1",
	} {
		got, err := streamURL(in, Filter{SessionID: "s 1"}, true)
		if err != nil || got != want {
			t.Errorf("streamURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
