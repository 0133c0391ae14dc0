package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/runtime/store"
)

// sessionHandler serves the session-based revisions (2025-11-25 and earlier) over
// Streamable HTTP, one go-sdk StreamableServerTransport and ServerSession per
// Mcp-Session-Id, as the SDK's own StreamableHTTPHandler does — and, unlike it, with
// every session recorded in the store (SES-1, issue 16 point 3): its owner tenant, its
// user, its negotiated revision and the SDK's session state (initialize parameters,
// log level). A request for a session this process does not hold — another replica
// opened it, or this one was restarted — is served by a ServerSession restored from
// that record; its pinned catalog and mode are in the store already. A session
// unknown to the store (never opened, deleted, or unused for HTTPSessionTimeout) is
// answered 404, which tells a client to initialize again; one of another tenant or
// user 403. Both with a JSON-RPC error body.
//
// Each process keeps the sessions it serves in memory, closing one unused for
// HTTPSessionTimeout (the record stays: another request brings it back), and marks
// the record seen at most every refresh; a session a DELETE ended through another
// replica is closed here at the next refresh.
type sessionHandler struct {
	s       *Server
	store   store.MCPSessions // nil: sessions live in this process only
	events  mcp.EventStore
	timeout time.Duration // idle timeout; 0: never
	refresh time.Duration // the least time between two marks of a session as seen

	mu       sync.Mutex
	sessions map[string]*liveSession
}

// withRevision returns r with its revision (the MCP-Protocol-Version header) where
// the SDK's StreamableServerTransport reads it: in the request's context, under a key
// of the SDK's own that only its StreamableHTTPHandler sets (go-sdk v1.8.0; it decides
// the priming event and retry field of a response stream, the refusal of a batch
// from 2025-06-18 on, ...). A probe — a bodiless POST carrying only the revision —
// goes through a stateless SDK handler, which sets that key and then asks for a
// server with the request: that request's context is kept, and no server is given
// (the probe's answer is discarded). Without the header the SDK reads no revision
// either. The probe depends on the revision alone, so its context is kept per
// revision (revisionValues) and a request's context answers the SDK's key from it
// (revisionContext): one probe per revision, not per request, which cost a thirtieth
// of toolrun's CPU per call (issue 20).
func (h *sessionHandler) withRevision(r *http.Request) *http.Request {
	rev := r.Header.Get(headerProtocolVersion)
	if rev == "" {
		return r
	}
	values, ok := revisionValues.Load(rev)
	if !ok {
		if values = probeRevision(rev); values == nil {
			return r
		}
		// A client may send any value: past a few, they are probed every time.
		if revisionsKept.Add(1) <= maxKeptRevisions {
			revisionValues.Store(rev, values)
		}
	}
	return r.WithContext(revisionContext{Context: r.Context(), values: values.(context.Context)})
}

// probeRevision is the context the SDK's handler derives for a request of revision
// rev, or nil if it refuses such a request before it reads the revision.
func probeRevision(rev string) context.Context {
	ps := &probeState{}
	probe, err := http.NewRequestWithContext(context.WithValue(context.Background(), probeKey{}, ps),
		http.MethodPost, "/", http.NoBody)
	if err != nil {
		return nil
	}
	probe.Header.Set("Content-Type", "application/json")
	probe.Header.Set("Accept", "application/json, text/event-stream")
	probe.Header.Set(headerProtocolVersion, rev)
	revisionProbe.ServeHTTP(discardResponse{}, probe)
	return ps.ctx
}

// The contexts of the revisions probed so far (string -> context.Context), at most
// maxKeptRevisions of them.
var (
	revisionValues sync.Map
	revisionsKept  atomic.Int32
)

const maxKeptRevisions = 32

// revisionContext is a request's context that also answers from values, the context
// a probe derived, for a key the request's own does not hold (the SDK's revision
// key): its deadline, cancellation and every other value are the request's.
type revisionContext struct {
	context.Context
	values context.Context
}

func (c revisionContext) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.values.Value(key)
}

type (
	probeKey   struct{}
	probeState struct {
		calls int
		ctx   context.Context
	}
)

// revisionProbe is the stateless SDK handler withRevision sends its probes through:
// it asks for a server once before it reads the revision, and once after.
var revisionProbe = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
	if ps, ok := r.Context().Value(probeKey{}).(*probeState); ok {
		if ps.calls++; ps.calls == 2 {
			ps.ctx = r.Context()
		}
	}
	return nil
}, &mcp.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true})

// discardResponse is the ResponseWriter of a probe.
type discardResponse struct{}

func (discardResponse) Header() http.Header         { return http.Header{} }
func (discardResponse) Write(b []byte) (int, error) { return len(b), nil }
func (discardResponse) WriteHeader(int)             {}

type liveSession struct {
	id, tenant, user string
	ss               *mcp.ServerSession
	t                *mcp.StreamableServerTransport

	mu     sync.Mutex
	posts  int
	timer  *time.Timer
	seen   time.Time // the last time the record was marked seen (or read)
	closed bool
}

func newSessionHandler(s *Server, events mcp.EventStore, timeout time.Duration) *sessionHandler {
	h := &sessionHandler{s: s, events: events, timeout: timeout, sessions: map[string]*liveSession{}, refresh: 30 * time.Second}
	h.store = s.opts.MCPSessions
	if timeout > 0 && timeout/8 < h.refresh {
		h.refresh = timeout / 8
	}
	return h
}

func (h *sessionHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// DNS rebinding protection, as the SDK's handler has it: a request that reached a
	// loopback address with a Host that is not loopback.
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil {
		if loopbackHost(local.String()) && !loopbackHost(r.Host) {
			http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
			return
		}
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, h.s.opts.MaxMessageBytes)
	}
	r = h.withRevision(r)
	id := r.Header.Get(headerSessionID)
	switch r.Method {
	case http.MethodPost:
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
			http.Error(w, "Content-Type must be 'application/json'", http.StatusUnsupportedMediaType)
			return
		}
		if !accepts(r, "application/json") || !accepts(r, "text/event-stream") {
			http.Error(w, "Accept must contain both 'application/json' and 'text/event-stream'", http.StatusBadRequest)
			return
		}
		if id == "" {
			h.open(w, r)
			return
		}
	case http.MethodGet:
		if !accepts(r, "text/event-stream") {
			http.Error(w, "Accept must contain 'text/event-stream' for GET requests", http.StatusBadRequest)
			return
		}
	case http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	if id == "" {
		http.Error(w, fmt.Sprintf("Bad Request: %s requires an %s header", r.Method, headerSessionID), http.StatusBadRequest)
		return
	}
	ls := h.lookup(w, r, id)
	if ls == nil {
		return
	}
	if r.Method == http.MethodDelete {
		ls.ss.Close()
		if h.store != nil {
			if err := h.store.MCPSessionEnd(r.Context(), ls.tenant, ls.id); err != nil && !errors.Is(err, store.ErrNotFound) {
				h.s.log.Error("mcp/server: a deleted session could not be ended in the store", "error", err)
			}
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	ls.begin()
	defer ls.end(h.timeout)
	ls.t.ServeHTTP(w, r)
}

// open serves a POST without a session: initialize opens one (another request gets a
// session that is closed after it, as the SDK does).
func (h *sessionHandler) open(w http.ResponseWriter, r *http.Request) {
	ls := &liveSession{id: rand.Text(), user: userOf(r), seen: time.Now()}
	ls.t = &mcp.StreamableServerTransport{SessionID: ls.id, EventStore: h.events}
	ss, err := h.s.mcp.Connect(r.Context(), ls.t, nil)
	if err != nil {
		h.s.log.Error("mcp/server: connect", "error", err)
		http.Error(w, "failed connection", http.StatusInternalServerError)
		return
	}
	ls.ss = ss
	if p, err := h.s.principalOf(&mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context())}); err == nil {
		ls.tenant = p.Tenant
	}
	h.add(ls)
	ls.begin()
	ls.t.ServeHTTP(w, r)
	ls.end(h.timeout)
	if ss.InitializeParams() == nil {
		ss.Close() // not initialized: nobody can address it
	}
}

// add registers ls and removes it when its session closes; it returns the session
// registered under ls's id, which is another one when a concurrent restore won.
func (h *sessionHandler) add(ls *liveSession) *liveSession {
	h.mu.Lock()
	if cur := h.sessions[ls.id]; cur != nil {
		h.mu.Unlock()
		ls.ss.Close()
		return cur
	}
	h.sessions[ls.id] = ls
	h.mu.Unlock()
	go func() {
		ls.ss.Wait()
		ls.mu.Lock()
		ls.closed = true
		if ls.timer != nil {
			ls.timer.Stop()
		}
		ls.mu.Unlock()
		h.mu.Lock()
		if h.sessions[ls.id] == ls {
			delete(h.sessions, ls.id)
		}
		h.mu.Unlock()
	}()
	return ls
}

// lookup finds or restores session id for r, or answers r and returns nil.
func (h *sessionHandler) lookup(w http.ResponseWriter, r *http.Request, id string) *liveSession {
	principal, perr := h.s.principalOf(&mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context())})
	h.mu.Lock()
	ls := h.sessions[id]
	h.mu.Unlock()
	if ls == nil {
		if ls = h.restore(w, r, id); ls == nil {
			return nil
		}
	}
	if perr != nil || ls.user != userOf(r) || (ls.tenant != "" && principal.Tenant != ls.tenant) {
		h.refuse(w, r, http.StatusForbidden, fmt.Sprintf("session %q cannot be used with these credentials: it belongs to another principal", logName(id)))
		return nil
	}
	if h.store != nil && ls.tenant != "" && ls.stale(h.refresh) {
		err := h.store.MCPSessionTouch(r.Context(), ls.tenant, id, nil)
		switch {
		case errors.Is(err, store.ErrNotFound): // deleted through another replica
			ls.ss.Close()
			h.notFound(w, r, id)
			return nil
		case err != nil:
			h.s.log.Error("mcp/server: a session could not be marked seen", "error", err)
		}
	}
	return ls
}

// restore brings back a session of the store, or answers r and returns nil.
func (h *sessionHandler) restore(w http.ResponseWriter, r *http.Request, id string) *liveSession {
	if h.store == nil {
		h.notFound(w, r, id)
		return nil
	}
	rec, err := h.store.MCPSessionGet(r.Context(), id, h.timeout)
	if errors.Is(err, store.ErrNotFound) {
		h.notFound(w, r, id)
		return nil
	}
	if err != nil {
		h.s.log.Error("mcp/server: a session could not be read from the store", "error", err)
		http.Error(w, "toolgen: the session could not be read", http.StatusInternalServerError)
		return nil
	}
	var state mcp.ServerSessionState
	if err := json.Unmarshal(rec.State, &state); err != nil || state.InitializeParams == nil {
		h.s.log.Error("mcp/server: a stored session's state cannot be read", "session_id", logName(id), "error", err)
		h.notFound(w, r, id)
		return nil
	}
	// InitializedParams stay as recorded (none): the SDK gates requests on initialize
	// alone, and a restored session that then receives the client's
	// notifications/initialized takes it.
	ls := &liveSession{id: id, tenant: rec.Tenant, user: rec.UserID, seen: time.Now()}
	ls.t = &mcp.StreamableServerTransport{SessionID: id, EventStore: h.events}
	ss, err := h.s.mcp.Connect(context.WithoutCancel(r.Context()), ls.t, &mcp.ServerSessionOptions{State: &state})
	if err != nil {
		h.s.log.Error("mcp/server: connect a stored session", "error", err)
		http.Error(w, "failed connection", http.StatusInternalServerError)
		return nil
	}
	ls.ss = ss
	h.s.log.Debug("mcp/server: session restored from the store", "session_id", logName(id), "protocol_version", rec.ProtocolVersion)
	return h.add(ls)
}

func (h *sessionHandler) notFound(w http.ResponseWriter, r *http.Request, id string) {
	h.refuse(w, r, http.StatusNotFound, fmt.Sprintf("session %q not found (never opened, deleted, or expired): initialize a new session", logName(id)))
}

// refuse answers r with a JSON-RPC error (the request's id when it has one).
func (h *sessionHandler) refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	var id jsonrpc.ID
	if r.Method == http.MethodPost {
		var buf [1 << 16]byte
		n, _ := r.Body.Read(buf[:])
		if p := parsePOST(buf[:n]); p.call != nil {
			id = p.call.ID
		}
	}
	writeJSONRPCError(w, status, id, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "toolgen: " + msg})
}

func (ls *liveSession) begin() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.posts++
	if ls.timer != nil {
		ls.timer.Stop()
	}
}

// end starts the idle timer when no request of the session is open.
func (ls *liveSession) end(timeout time.Duration) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.posts--; ls.posts > 0 || timeout <= 0 || ls.closed {
		return
	}
	if ls.timer == nil {
		ss := ls.ss
		ls.timer = time.AfterFunc(timeout, func() { ss.Close() })
		return
	}
	ls.timer.Reset(timeout)
}

// stale reports whether the record was last marked seen more than refresh ago, and
// counts it as seen now.
func (ls *liveSession) stale(refresh time.Duration) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if time.Since(ls.seen) < refresh {
		return false
	}
	ls.seen = time.Now()
	return true
}

func accepts(r *http.Request, media string) bool {
	family, _, _ := strings.Cut(media, "/")
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case media, family + "/*", "*/*":
				return true
			}
		}
	}
	return false
}

// loopbackHost reports whether host (with or without a port) is a loopback name or
// address.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// persistSession records the session initialize just opened (the middleware, before
// the answer is written: a client that sends its next request to another replica
// finds it). A session of no HTTP handler (stdio, in memory) has no id and is not
// recorded.
func (s *Server) persistSession(ctx context.Context, req *mcp.ServerRequest[*mcp.InitializeParams], res *mcp.InitializeResult) error {
	ms := s.opts.MCPSessions
	if ms == nil || req.Session == nil || req.Session.ID() == "" || res == nil {
		return nil
	}
	principal, err := s.principalOf(req.Extra)
	if err != nil {
		return err
	}
	user := ""
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		user = req.Extra.TokenInfo.UserID
	}
	state, err := json.Marshal(mcp.ServerSessionState{InitializeParams: req.Params, NegotiatedProtocolVersion: res.ProtocolVersion,
		LogLevel: "info"})
	if err != nil {
		return err
	}
	return ms.MCPSessionCreate(ctx, store.MCPSession{ID: req.Session.ID(), Tenant: principal.Tenant, UserID: user,
		ProtocolVersion: res.ProtocolVersion, State: state})
}

// persistLogLevel records a session's new log level (logging/setLevel), so that a
// replica that restores the session later relays upstream log lines at it.
//
//lint:ignore SA1019 logging/setLevel of the 2025 revisions
func (s *Server) persistLogLevel(ctx context.Context, req *mcp.ServerRequest[*mcp.SetLoggingLevelParams]) {
	ms := s.opts.MCPSessions
	if ms == nil || req.Session == nil || req.Session.ID() == "" || req.Params == nil {
		return
	}
	rec, err := ms.MCPSessionGet(ctx, req.Session.ID(), 0)
	if err != nil {
		return
	}
	var state mcp.ServerSessionState
	if json.Unmarshal(rec.State, &state) != nil {
		return
	}
	state.LogLevel = req.Params.Level
	data, err := json.Marshal(state)
	if err == nil {
		err = ms.MCPSessionTouch(ctx, rec.Tenant, rec.ID, data)
	}
	if err != nil {
		s.log.Warn("mcp/server: a session's log level could not be recorded", "error", err)
	}
}
