package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func replay(t *testing.T, s *eventStore, session, stream string, index int) ([]string, error) {
	t.Helper()
	var got []string
	for d, err := range s.After(context.Background(), session, stream, index) {
		if err != nil {
			return got, err
		}
		got = append(got, string(d))
	}
	return got, nil
}

func appendN(t *testing.T, s *eventStore, session, stream string, from, n, size int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		d := fmt.Sprintf("%s-%d-", stream, i)
		d += strings.Repeat("x", max(0, size-len(d)))
		if err := s.Append(context.Background(), session, stream, []byte(d)); err != nil {
			t.Fatal(err)
		}
	}
}

// The store's memory stays within its bounds, per session and in total; eviction
// takes the oldest streams first, then the oldest events of the stream being
// written; a resumption that needs an evicted event fails instead of skipping it.
func TestEventStore_Bounds(t *testing.T) {
	ctx := context.Background()
	const per, total = 10 * (100 + eventOverhead), 25 * (100 + eventOverhead)
	s := newEventStore(per, total, nil)

	// Session a: stream s1 (5 events), then s2 (8 events): s1 goes first.
	s.Open(ctx, "a", "s1")
	appendN(t, s, "a", "s1", 0, 5, 100)
	s.Open(ctx, "a", "s2")
	appendN(t, s, "a", "s2", 0, 8, 100)
	if _, of := s.size("a"); of > per {
		t.Fatalf("session a holds %d bytes, bound %d", of, per)
	}
	if _, err := replay(t, s, "a", "s1", -1); err == nil {
		t.Error("the evicted stream s1 replays")
	}
	got, err := replay(t, s, "a", "s2", 3)
	if err != nil || len(got) != 4 || !strings.HasPrefix(got[0], "s2-4-") {
		t.Errorf("s2 after event 3: %v %v, want events 4..7", got, err)
	}
	// s2 alone over the bound: its oldest events go, and a resumption from before
	// them fails.
	appendN(t, s, "a", "s2", 8, 6, 100)
	if _, of := s.size("a"); of > per {
		t.Fatalf("session a holds %d bytes, bound %d", of, per)
	}
	if _, err := replay(t, s, "a", "s2", 0); !errors.Is(err, mcp.ErrEventsPurged) {
		t.Errorf("s2 from event 0 after eviction: %v, want ErrEventsPurged", err)
	}
	got, err = replay(t, s, "a", "s2", 11)
	if err != nil || len(got) != 2 || !strings.HasPrefix(got[0], "s2-12-") {
		t.Errorf("s2 after event 11: %v %v, want events 12, 13", got, err)
	}

	// The total: three more sessions each near their bound.
	for _, sess := range []string{"b", "c", "d"} {
		s.Open(ctx, sess, "s")
		appendN(t, s, sess, "s", 0, 9, 100)
		if all, _ := s.size(sess); all > total {
			t.Fatalf("the store holds %d bytes, bound %d", all, total)
		}
	}
	if _, err := replay(t, s, "a", "s2", 11); err == nil {
		t.Error("session a's old stream survived the total bound")
	}
	if got, err := replay(t, s, "d", "s", 7); err != nil || len(got) != 1 {
		t.Errorf("the newest session after event 7: %v %v", got, err)
	}

	// An event larger than a session's bound is not kept, and its stream cannot be
	// resumed at all (it would skip the event).
	s.Open(ctx, "e", "s")
	appendN(t, s, "e", "s", 0, 1, 10)
	appendN(t, s, "e", "s", 1, 1, per)
	appendN(t, s, "e", "s", 2, 1, 10)
	if _, err := replay(t, s, "e", "s", -1); !errors.Is(err, mcp.ErrEventsPurged) {
		t.Errorf("a stream with an event over the bound: %v, want ErrEventsPurged", err)
	}

	// Closed sessions take their events with them.
	for _, sess := range []string{"a", "b", "c", "d", "e"} {
		s.SessionClosed(ctx, sess)
	}
	if all, _ := s.size(""); all != 0 || len(s.sessions) != 0 || s.order.Len() != 0 {
		t.Errorf("after every session closed: %d bytes, %d sessions, %d streams", all, len(s.sessions), s.order.Len())
	}
	// A write to a stream that is not kept (its session closed) keeps nothing.
	appendN(t, s, "a", "s2", 20, 1, 10)
	if all, _ := s.size(""); all != 0 {
		t.Errorf("a write after the session closed kept %d bytes", all)
	}
}

// Many streams of empty events (one per POST: the priming event) are bounded too.
func TestEventStore_ManyStreamsBounded(t *testing.T) {
	ctx := context.Background()
	const per = 100 * eventOverhead
	s := newEventStore(per, 10*per, nil)
	for i := range 10000 {
		stream := fmt.Sprint("p", i)
		s.Open(ctx, "a", stream)
		s.Append(ctx, "a", stream, nil)
	}
	if _, of := s.size("a"); of > per {
		t.Fatalf("session a holds %d bytes in %d streams, bound %d", of, len(s.sessions["a"].streams), per)
	}
}

// The response to a request its caller cancelled keeps its place (the indexes of the events after it) and is
// never replayed.
func TestEventStore_Withhold(t *testing.T) {
	ctx := context.Background()
	calls := newOpenCalls()
	s := newEventStore(1<<20, 1<<20, calls)
	id2, _ := jsonrpc.MakeID(float64(2))
	s.Open(ctx, "a", "s")
	open := calls.add("a", "u", id2, "")
	calls.cancel("a", "other user", id2) // not the caller's: no effect
	s.Append(ctx, "a", "s", []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	s.Append(ctx, "a", "s", []byte(`{"jsonrpc":"2.0","id":2,"result":{"n":1}}`))
	calls.cancel("a", "u", id2)
	for _, d := range []string{`{"jsonrpc":"2.0","id":2,"result":{"n":2}}`, "three"} {
		s.Append(ctx, "a", "s", []byte(d))
	}
	calls.remove(open)
	got, err := replay(t, s, "a", "s", 1)
	if err != nil || strings.Join(got, ",") != ",three" {
		t.Errorf("after event 1: %q %v, want an empty event (the withheld response), then three", got, err)
	}
	if len(calls.m) != 0 || len(calls.cancelled) != 0 {
		t.Errorf("open calls left: %v %v", calls.m, calls.cancelled)
	}
}
