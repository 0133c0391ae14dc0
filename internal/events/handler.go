package events

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// Defaults of [Options].
const (
	DefaultPoll      = 200 * time.Millisecond
	DefaultHeartbeat = 15 * time.Second
	DefaultLimit     = 100
)

// CaughtUpComment ends a stream requested with once=1: every event visible when the
// handler last read the store was sent. A stream that ends without it was cut.
const CaughtUpComment = "caught up"

// Options configure [NewHandler].
type Options struct {
	Store store.Events
	// Poll is how often a stream reads the store when it has caught up and the store
	// delivers no wake-ups of other processes' writes (default DefaultPoll). A store
	// that does (store.Waker: PostgreSQL while its listener listens) wakes a stream
	// when its tenant's events are written, and the stream reads it then and at the
	// store's fallback interval (seconds) otherwise; Handler.Wake reads at once.
	Poll time.Duration
	// Heartbeat is how often an idle stream sends a comment line (default
	// DefaultHeartbeat), so that proxies keep it open and clients see it alive.
	Heartbeat time.Duration
	// Limit bounds the events one read of the store returns (default DefaultLimit): a
	// stream far behind catches up in pages of Limit, each written before the next read.
	Limit  int
	Logger *slog.Logger
	// TenantOf, when set, is the tenant of a request's verified caller (ID-2): the
	// stream holds only that tenant's events, and a tenant parameter naming another
	// tenant is a 403. A request it cannot place (ok false) is a 401. Without it the
	// tenant parameter is a plain filter (an operator's loopback server).
	TenantOf func(r *http.Request) (tenant string, ok bool)
}

// Handler serves the event stream (GET): query parameters session, run and tenant
// filter it; the Last-Event-ID header, or else the last_event_id parameter, resumes it
// after that id; once=1 ends it when it has caught up (with the comment
// CaughtUpComment) instead of following. Each event is written as
//
//	id: <cursor>
//	event: <kind>
//	data: <the JSON of Event, one line>
//
// and flushed. A malformed id or parameter is a 400, before the stream starts. On
// PostgreSQL an event is served once every writing transaction older than its own has
// ended (store.EventCursor), so once=1 returns the events visible at that moment.
type Handler struct {
	o Options

	mu     sync.Mutex
	wake   chan struct{} // closed and replaced by Wake
	closed chan struct{} // closed by Close
	once   sync.Once

	// testHook, when set (tests only), is told of each stream's reads ("read") and of
	// each wait longer than Poll ("idle").
	testHook func(r *http.Request, what string)
}

// NewHandler returns a handler reading o.Store.
func NewHandler(o Options) (*Handler, error) {
	if o.Store == nil {
		return nil, errors.New("events: no store")
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.Limit <= 0 {
		o.Limit = DefaultLimit
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{o: o, wake: make(chan struct{}), closed: make(chan struct{})}, nil
}

// Wake makes every open stream read the store now rather than at its next poll: a host
// that knows it just wrote a milestone may call it. Streams miss nothing without it.
func (h *Handler) Wake() {
	h.mu.Lock()
	close(h.wake)
	h.wake = make(chan struct{})
	h.mu.Unlock()
}

func (h *Handler) wakeChan() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.wake
}

// Close ends every open stream (http.Server.Shutdown waits for handlers to return, and
// a stream never returns by itself). Its clients reconnect with their last id.
func (h *Handler) Close() {
	h.once.Do(func() { close(h.closed) })
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "events: use GET", http.StatusMethodNotAllowed)
		return
	}
	f, once, err := parseRequest(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if h.o.TenantOf != nil {
		tenant, ok := h.o.TenantOf(r)
		switch {
		case !ok:
			http.Error(w, "events: the request names no verified caller", http.StatusUnauthorized)
			return
		case f.Tenant != "" && f.Tenant != tenant:
			http.Error(w, "events: another tenant's events", http.StatusForbidden)
			return
		}
		f.Tenant = tenant
	}
	f.Limit = h.o.Limit
	ctx := r.Context()
	// Subscribed before the first read: an event committed after it wakes the stream.
	// The topic is the tenant's events (every tenant's for a stream without a tenant):
	// another tenant's events never wake it; a session or run filter narrows the reads.
	waker := store.WakerOf(h.o.Store)
	sub := waker.Subscribe(store.EventsTopic(f.Tenant))
	defer sub.Close()
	// The first read decides the status: a cursor the driver refuses is the client's
	// error, and nothing has been written yet.
	wake := h.wakeChan()
	h.hook(r, "read")
	evs, err := h.o.Store.EventList(ctx, f)
	switch {
	case errors.Is(err, store.ErrInvalid):
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	case err != nil:
		h.o.Logger.Error("events: reading the store", "err", err)
		http.Error(w, "events: the store could not be read", http.StatusInternalServerError)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream; charset=utf-8")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	s := &stream{w: bufio.NewWriter(w), rc: http.NewResponseController(w)}
	heartbeat := time.NewTicker(h.o.Heartbeat)
	defer heartbeat.Stop()
	poll := time.NewTimer(h.o.Poll)
	defer poll.Stop()
	woken := false // the last read followed a wake-up of the store
	for {
		for _, ev := range evs {
			s.event(FromStore(ev))
			f.After = ev.Cursor
		}
		if len(evs) == f.Limit {
			// more are waiting: write this page and read the next at once
			if err := s.flush(); err != nil {
				return
			}
			woken = false
		} else {
			if once {
				s.comment(CaughtUpComment)
				s.flush()
				return
			}
			if err := s.flush(); err != nil {
				return
			}
			next := store.WaitInterval(waker, h.o.Poll)
			if woken && len(evs) == 0 {
				// Woken, yet nothing to read: on PostgreSQL an event is readable only
				// once every older writing transaction has ended (store.EventCursor),
				// and one may still have been running. Read again after Poll, once,
				// rather than after the fallback.
				next = min(next, h.o.Poll)
			}
			poll.Reset(next)
			if next > h.o.Poll {
				h.hook(r, "idle")
			}
			var ok bool
			if woken, ok = h.wait(ctx, s, poll.C, heartbeat.C, wake, sub.C()); !ok {
				return
			}
		}
		wake = h.wakeChan()
		h.hook(r, "read")
		if evs, err = h.o.Store.EventList(ctx, f); err != nil {
			if ctx.Err() == nil {
				// The client reconnects with its last id and misses nothing.
				h.o.Logger.Error("events: reading the store; ending the stream", "err", err)
			}
			return
		}
	}
}

func (h *Handler) hook(r *http.Request, what string) {
	if h.testHook != nil {
		h.testHook(r, what)
	}
}

// wait blocks until the next read is due (poll, Wake, or the store's wake-up), writing
// heartbeats meanwhile; ok is false when the stream must end, woken true when the
// store woke it.
func (h *Handler) wait(ctx context.Context, s *stream, poll, heartbeat <-chan time.Time, wake, stored <-chan struct{}) (woken, ok bool) {
	for {
		select {
		case <-ctx.Done():
			return false, false
		case <-h.closed:
			return false, false
		case <-poll:
			return false, true
		case <-wake:
			return false, true
		case <-stored:
			return true, true
		case <-heartbeat:
			s.comment("keepalive")
			if s.flush() != nil {
				return false, false
			}
		}
	}
}

func parseRequest(r *http.Request) (store.EventFilter, bool, error) {
	q := r.URL.Query()
	f := store.EventFilter{Tenant: q.Get("tenant"), SessionID: q.Get("session"), RunID: q.Get("run")}
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = q.Get("last_event_id")
	}
	var err error
	if f.After, err = store.ParseEventCursor(last); err != nil {
		return f, false, fmt.Errorf("events: Last-Event-ID %q: want an id this stream sent (ID or TX-ID), or 0", last)
	}
	once := false
	if v := q.Get("once"); v != "" {
		if once, err = strconv.ParseBool(v); err != nil {
			return f, false, fmt.Errorf("events: once=%q: want 1 or 0", v)
		}
	}
	return f, once, nil
}

// stream writes SSE lines; the first write error sticks and ends the stream.
type stream struct {
	w   *bufio.Writer
	rc  *http.ResponseController
	err error
}

func (s *stream) event(ev Event) {
	data, err := json.Marshal(ev) // one line: JSON escapes every newline
	if err != nil {
		s.err = err
		return
	}
	fmt.Fprintf(s.w, "id: %s\nevent: %s\ndata: %s\n\n", ev.ID, ev.Kind, data)
}

func (s *stream) comment(text string) { fmt.Fprintf(s.w, ": %s\n\n", text) }

func (s *stream) flush() error {
	if s.err != nil {
		return s.err
	}
	if err := s.w.Flush(); err != nil {
		s.err = err
		return err
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
	}
	return s.err
}
