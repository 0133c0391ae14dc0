package server

import (
	"container/list"
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults of the event store's bounds (Options.EventStoreSessionBytes,
// Options.EventStoreBytes).
const (
	DefaultEventStoreSessionBytes = 4 << 20
	DefaultEventStoreBytes        = 64 << 20
)

// eventOverhead is what one stored event, and one stream, are charged besides their
// data: a session's priming events and streams are not free, so neither is unbounded.
const eventOverhead = 64

// eventStore is the mcp.EventStore of HTTPHandler: the SSE events of every HTTP
// session, kept so that a client whose response stream broke can resume it with
// Last-Event-ID. Memory is bounded per session and in total, each event and stream
// charged its data plus eventOverhead. Past a bound the oldest streams go first (the
// session's own for its bound, anyone's for the total); a stream that is still being
// written keeps its newest events. A resumption that would need an evicted event
// fails (the SDK answers it 400) rather than skip it. An event larger than a session's
// bound is not kept at all. A session's events go with the session (the SDK's
// SessionClosed: DELETE, the idle timeout).
//
// The SDK's MemoryEventStore bounds the total only, never drops the streams a session
// opens (one per POST), and purges one event of every stream in turn.
type eventStore struct {
	perSession, total int
	// calls are the guard's open calls: a response to a request the client cancelled
	// is not kept; a session's end releases its streams held open.
	calls *openCalls

	mu       sync.Mutex
	used     int
	sessions map[string]*sessionEvents
	order    *list.List // every *streamEvents, the oldest first
}

type sessionEvents struct {
	streams map[string]*streamEvents
	order   *list.List // the session's *streamEvents, the oldest first
	used    int
}

type streamEvents struct {
	session, id string
	first       int      // the SDK's index of data[0]
	data        [][]byte // nil: an event with no data (a priming event)
	size        int
	lost        bool // an event was dropped that a resumption cannot skip
	all, own    *list.Element
}

var _ mcp.EventStore = (*eventStore)(nil)

func newEventStore(perSession, total int, calls *openCalls) *eventStore {
	return &eventStore{perSession: perSession, total: total, calls: calls,
		sessions: map[string]*sessionEvents{}, order: list.New()}
}

// Open implements mcp.EventStore.
func (s *eventStore) Open(_ context.Context, session, stream string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.sessions[session]
	if se == nil {
		se = &sessionEvents{streams: map[string]*streamEvents{}, order: list.New()}
		s.sessions[session] = se
	}
	if se.streams[stream] == nil {
		st := &streamEvents{session: session, id: stream}
		st.all, st.own = s.order.PushBack(st), se.order.PushBack(st)
		se.streams[stream] = st
		s.charge(st, eventOverhead)
		s.bound(st)
	}
	return nil
}

func (s *eventStore) charge(st *streamEvents, n int) {
	st.size += n
	s.sessions[st.session].used += n
	s.used += n
}

// Append implements mcp.EventStore. An event of a stream that is not kept (evicted,
// or of a closed session) is not kept either: its resumption fails.
func (s *eventStore) Append(_ context.Context, session, stream string, data []byte) error {
	if s.calls != nil && s.calls.withhold(session, data) {
		data = nil // the index stays, the response is not replayed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.sessions[session].streamOf(stream)
	if st == nil || st.lost {
		return nil
	}
	n := len(data) + eventOverhead
	if n > s.perSession || n > s.total {
		s.drop(st)
		return nil
	}
	st.data = append(st.data, data)
	s.charge(st, n)
	s.bound(st)
	return nil
}

// bound evicts until the bounds hold, sparing the newest events of keep (the stream
// being written).
func (s *eventStore) bound(keep *streamEvents) {
	if keep != nil {
		se := s.sessions[keep.session]
		for se.used > s.perSession && s.evictFrom(se.order, keep) {
		}
	}
	for s.used > s.total && s.evictFrom(s.order, keep) {
	}
}

// evictFrom evicts the oldest stream of order other than keep, or else keep's oldest
// event; false when there is nothing left to evict.
func (s *eventStore) evictFrom(order *list.List, keep *streamEvents) bool {
	for e := order.Front(); e != nil; e = e.Next() {
		if st := e.Value.(*streamEvents); st != keep {
			s.remove(st)
			return true
		}
	}
	if keep == nil || len(keep.data) <= 1 {
		return false
	}
	s.charge(keep, -(len(keep.data[0]) + eventOverhead))
	keep.data[0] = nil
	keep.data = keep.data[1:]
	keep.first++
	return true
}

// drop forgets a stream's events and marks it unresumable.
func (s *eventStore) drop(st *streamEvents) {
	for _, d := range st.data {
		s.charge(st, -(len(d) + eventOverhead))
	}
	st.data, st.lost = nil, true
}

func (s *eventStore) remove(st *streamEvents) {
	s.drop(st)
	s.charge(st, -eventOverhead)
	se := s.sessions[st.session]
	s.order.Remove(st.all)
	se.order.Remove(st.own)
	delete(se.streams, st.id)
	if len(se.streams) == 0 {
		delete(s.sessions, st.session)
	}
}

// After implements mcp.EventStore.
func (s *eventStore) After(_ context.Context, session, stream string, index int) iter.Seq2[[]byte, error] {
	s.mu.Lock()
	var events [][]byte
	var err error
	st := s.sessions[session].streamOf(stream)
	switch start := index + 1; {
	case st == nil:
		err = fmt.Errorf("toolgen: no events kept of stream %q of session %q", stream, session)
	case st.lost || start < st.first:
		err = fmt.Errorf("toolgen: stream %q of session %q, after event %d: %w", stream, session, index, mcp.ErrEventsPurged)
	case start-st.first < len(st.data):
		events = slices.Clone(st.data[start-st.first:])
	}
	s.mu.Unlock()
	return func(yield func([]byte, error) bool) {
		if err != nil {
			yield(nil, err)
			return
		}
		for _, d := range events {
			if !yield(d, nil) {
				return
			}
		}
	}
}

func (se *sessionEvents) streamOf(stream string) *streamEvents {
	if se == nil {
		return nil
	}
	return se.streams[stream]
}

// SessionClosed implements mcp.EventStore.
func (s *eventStore) SessionClosed(_ context.Context, session string) error {
	if s.calls != nil {
		s.calls.sessionClosed(session)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if se := s.sessions[session]; se != nil {
		for e := se.order.Front(); e != nil; {
			next := e.Next()
			s.remove(e.Value.(*streamEvents))
			e = next
		}
	}
	return nil
}

// size is the memory charged now, in total and for session.
func (s *eventStore) size(session string) (total, ofSession int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if se := s.sessions[session]; se != nil {
		ofSession = se.used
	}
	return s.used, ofSession
}
