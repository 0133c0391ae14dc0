package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SSERetry is the reconnection delay HTTPHandler announces in the priming event of
// every response stream (the SSE retry field, SEP-1699): a client whose stream breaks
// waits this long before it resumes it with Last-Event-ID.
const SSERetry = time.Second

// The Streamable HTTP headers the guard reads.
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"
	// headerCallRef is set by the guard on a POST carrying a call (never the
	// client's): the middleware registers the call's cancellation under it.
	headerCallRef = "X-Toolgen-Call-Ref"
)

// httpGuard stands in front of the SDK's StreamableHTTPHandler (go-sdk v1.8.0) and
// mends what a client of it would otherwise meet (each is worth reporting upstream):
//
//   - A request the SDK refuses before it reaches the session is answered with HTTP
//     400 and a plain-text body. It is answered with a JSON-RPC error instead: for a
//     POST of one request, an unknown method with -32601 and HTTP 200, as stdio
//     answers it, any other refusal with -32600 and HTTP 400 (the transport allows a
//     JSON-RPC error body there), with the request's id; for another body (a batch,
//     invalid JSON) -32600 or -32700, HTTP 400, with no id.
//   - A request other than initialize (and ping, server/discover) without an
//     Mcp-Session-Id is answered by the SDK in a throwaway session: HTTP 200 and error
//     code 0. The transport says a server that requires a session answers such a
//     request with 400: here 400 with a JSON-RPC -32600 error naming the missing
//     session.
//   - After notifications/cancelled for a request whose POST is still open, the
//     response to it is not sent on that POST's stream, nor kept for a resumption
//     (MCP: the receiver SHOULD NOT respond; the SDK does). The stream then stays
//     open until the client leaves it or the session ends: a client resumes a
//     resumable stream that ends without its response.
//   - The priming event of a response stream carries a retry field (SSERetry); the SDK
//     has no option for it and sends one only when a handler closes the stream.
//   - Shutdown ends the standalone SSE streams (GET), which otherwise hold an
//     http.Server's graceful shutdown until the client goes away: after the calls
//     in flight were answered, since a client may take the end of its standalone
//     stream for the end of the session.
type httpGuard struct {
	s         *Server
	next      http.Handler // the session-based revisions (2025-11-25 and earlier)
	modern    http.Handler // revision 2026-07-28 and later: the SDK's stateless handler
	limit     int64
	calls     *openCalls
	resumable bool // the SDK has an event store: response streams carry event ids
	// primeDelay is how long a response stream's priming event waits for the response
	// (guardWriter.Flush): the package's primeDelay when the handler was made.
	primeDelay time.Duration

	pollMu       sync.Mutex
	polling      bool  // remoteCancels runs
	cancelCursor int64 // the last recorded cancellation read (remoteCancels only)
}

func (g *httpGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The revision decides the handler (doc.go, "Transports"): 2026-07-28 has no
	// session and is served statelessly; an older revision, or initialize (which
	// carries no version header), by the session handler.
	version := r.Header.Get(headerProtocolVersion)
	if version != "" && version < protocolStateless && !slices.Contains(mcp.SupportedProtocolVersions(), version) {
		g.unsupportedVersion(w, r, version)
		return
	}
	if version >= protocolStateless {
		if r.Method == http.MethodPost {
			g.servePOST(w, r, true)
			return
		}
		g.modern.ServeHTTP(w, r) // GET and DELETE: 405, there is no session
		return
	}
	switch r.Method {
	case http.MethodPost:
		g.servePOST(w, r, false)
	case http.MethodGet:
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(g.s.streamsEnd, cancel)()
		g.next.ServeHTTP(w, r.WithContext(ctx))
	default:
		g.next.ServeHTTP(w, r)
	}
}

// postBody is what the guard reads of a POST.
type postBody struct {
	call    *jsonrpc.Request // the request, when the body is one request with an id
	cancels []jsonrpc.ID     // the requests its notifications/cancelled name
}

func parsePOST(body []byte) postBody {
	var p postBody
	var raws []json.RawMessage
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		if json.Unmarshal(body, &raws) != nil {
			return p
		}
	} else {
		raws = []json.RawMessage{body}
	}
	for _, raw := range raws {
		msg, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			continue
		}
		req, ok := msg.(*jsonrpc.Request)
		switch {
		case !ok:
		case req.IsCall():
			if len(raws) == 1 {
				p.call = req
			}
		case req.Method == "notifications/cancelled":
			var c struct {
				RequestID any `json:"requestId"`
			}
			if json.Unmarshal(req.Params, &c) == nil {
				if id, err := jsonrpc.MakeID(c.RequestID); err == nil && id.IsValid() {
					p.cancels = append(p.cancels, id)
				}
			}
		}
	}
	return p
}

// sessionless are the requests a client sends before it has a session.
func sessionless(method string) bool {
	return method == "initialize" || method == "ping" || method == "server/discover"
}

// newProtocol reports whether a request speaks the stateless revision (2026-07-28 and
// later), which has no session: the SDK answers those itself.
func newProtocol(r *http.Request, req *jsonrpc.Request) bool {
	if v := r.Header.Get(headerProtocolVersion); v >= "2026-07-28" {
		return true
	}
	var p struct {
		Meta map[string]any `json:"_meta"`
	}
	_ = json.Unmarshal(req.Params, &p)
	_, ok := p.Meta["io.modelcontextprotocol/protocolVersion"]
	return ok
}

// protocolStateless is the first revision without sessions, served by the stateless
// handler.
const protocolStateless = "2026-07-28"

// unsupportedVersion answers a request whose MCP-Protocol-Version this server does not
// speak with UnsupportedProtocolVersion (-32022) and the versions it does, as
// revision 2026-07-28 says (the SDK answers a version below 2026-07-28 it does not
// know with a plain-text 400).
func (g *httpGuard) unsupportedVersion(w http.ResponseWriter, r *http.Request, version string) {
	var id jsonrpc.ID
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(io.LimitReader(r.Body, g.limit))
		if p := parsePOST(body); p.call != nil {
			id = p.call.ID
		}
	}
	data, _ := json.Marshal(mcp.UnsupportedProtocolVersionData{Supported: mcp.SupportedProtocolVersions(), Requested: version})
	writeJSONRPCError(w, http.StatusBadRequest, id, &jsonrpc.Error{Code: mcp.CodeUnsupportedProtocolVersion, Data: data,
		Message: fmt.Sprintf("toolgen: protocol version %q is not supported by this server", version)})
}

// checkTaskName answers a tasks/get, tasks/update or tasks/cancel whose Mcp-Name
// header is not its params.taskId (SEP-2663 routes them by it) with HeaderMismatch
// (-32020, HTTP 400), which the SDK checks only for the core methods; false when it
// answered.
func checkTaskName(w http.ResponseWriter, r *http.Request, call *jsonrpc.Request) bool {
	switch call.Method {
	case methodTasksGet, methodTasksUpdate, methodTasksCancel:
	default:
		return true
	}
	var p struct {
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal(call.Params, &p)
	got, present := r.Header[http.CanonicalHeaderKey("Mcp-Name")]
	if present && len(got) == 1 && strings.TrimSpace(got[0]) == p.TaskID {
		return true
	}
	msg := "toolgen: the Mcp-Name header must be the request's params.taskId"
	if !present {
		msg = "toolgen: " + call.Method + " needs the Mcp-Name header: the request's params.taskId"
	}
	writeJSONRPCError(w, http.StatusBadRequest, call.ID, &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: msg})
	return false
}

// writeJSONRPCError answers with a JSON-RPC error, encoded by the SDK.
func writeJSONRPCError(w http.ResponseWriter, status int, id jsonrpc.ID, e *jsonrpc.Error) {
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: e})
	if err != nil {
		http.Error(w, e.Message, status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("X-Content-Type-Options")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

func (g *httpGuard) servePOST(w http.ResponseWriter, r *http.Request, modern bool) {
	next := g.next
	if modern {
		next = g.modern
	}
	// Read the body the SDK will read (it bounds it too): an oversized one is left for
	// the SDK to refuse (413).
	body, err := io.ReadAll(io.LimitReader(r.Body, g.limit+1))
	if err != nil || int64(len(body)) > g.limit {
		r.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(body), r.Body), c: r.Body}
		next.ServeHTTP(w, r)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	p := parsePOST(body)
	if modern {
		// No session: every request stands alone, and a disconnect cancels it (the
		// SDK, PropagateRequestCancellation).
		if p.call != nil {
			if !checkTaskName(w, r, p.call) {
				return
			}
			g.s.posts.add()
			defer g.s.posts.done()
		}
		gw := &guardWriter{ResponseWriter: w, log: g.s.log, call: p.call, json: json.Valid(body), first: true, primeDelay: g.primeDelay}
		next.ServeHTTP(gw, r)
		gw.finish()
		return
	}
	session := r.Header.Get(headerSessionID)
	if session == "" && p.call != nil && !sessionless(p.call.Method) && !newProtocol(r, p.call) {
		writeHTTPError(w, http.StatusBadRequest, p.call.ID, jsonrpc.CodeInvalidRequest, fmt.Sprintf(
			"%q needs a session: send initialize first, then the %s header it answered with on every request", p.call.Method, headerSessionID))
		return
	}
	if p.call != nil {
		g.s.posts.add()
		defer g.s.posts.done()
	}
	user := userOf(r)
	var elsewhere []jsonrpc.ID // cancellations of requests this process does not run
	if session != "" {
		for _, id := range p.cancels {
			if !g.calls.cancel(session, user, id) {
				elsewhere = append(elsewhere, id)
			}
		}
	}
	// The call's reference, for the cancellation of another process (remoteCancels):
	// set here only, whatever the client sent.
	r.Header.Del(headerCallRef)
	gw := &guardWriter{ResponseWriter: w, log: g.s.log, call: p.call, json: json.Valid(body), first: true, primeDelay: g.primeDelay}
	if p.call != nil && session != "" {
		ref := rand.Text()
		r.Header.Set(headerCallRef, ref)
		gw.open = g.calls.add(session, user, p.call.ID, ref)
		defer g.calls.remove(gw.open)
		g.watchRemoteCancels()
	}
	next.ServeHTTP(gw, r)
	gw.finish()
	if len(elsewhere) > 0 && gw.status < 300 && g.s.opts.MCPSessions != nil {
		// The session handler accepted the notification (it is the session's own
		// client): record it for the process that runs the request.
		for _, id := range elsewhere {
			raw, err := json.Marshal(id.Raw())
			if err == nil {
				err = g.s.opts.MCPSessions.MCPCancelRecord(context.WithoutCancel(r.Context()), session, string(raw))
			}
			if err != nil {
				g.s.log.Error("mcp/server: a cancellation could not be recorded for another replica", "error", err)
			}
		}
	}
	if gw.withheld && g.resumable {
		// The stream carried an event id, so a client that sees it end without the
		// response resumes it, again and again (the TypeScript SDK's client, every
		// SSERetry): the stream stays open, as the TypeScript SDK's server leaves it,
		// until the client leaves, the session ends, or Shutdown.
		g.calls.awaitEnd(r.Context(), session, gw.open, g.s.stopping)
	}
}

func userOf(r *http.Request) string {
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		return ti.UserID
	}
	return ""
}

// writeHTTPError answers a POST with a JSON-RPC error, encoded by the SDK.
func writeHTTPError(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, msg string) {
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: "toolgen: " + msg}})
	if err != nil {
		http.Error(w, msg, status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("X-Content-Type-Options")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// guardWriter is the ResponseWriter the SDK answers one POST through (see httpGuard).
type guardWriter struct {
	http.ResponseWriter
	log  *slog.Logger
	call *jsonrpc.Request // the POST's one request, if any
	open *openCall        // its registration, when it has a session
	json bool             // the body is JSON

	status   int           // the status the handler wrote (0: none yet, 200 at the first Write)
	first    bool          // nothing written yet
	refused  *bytes.Buffer // the SDK's plain-text refusal, held back
	withheld bool          // the response was withheld

	// The SDK flushes after every event it writes. Two of those flushes are held back
	// (see Flush): mu serializes what the SDK writes with the held priming event's
	// timer.
	mu         sync.Mutex
	held       heldFlush     // what the last Write asks the next Flush to hold back
	primeDelay time.Duration // httpGuard.primeDelay
	primeWait  *time.Timer   // flushes the held priming event
	ended      bool          // the handler returned: the ResponseWriter is not ours any more
	answer     []byte        // the prefix of the response to call, once computed
}

// heldFlush is a flush guardWriter holds back.
type heldFlush uint8

const (
	flushNow      heldFlush = iota
	flushPriming            // the priming event: sent within primeDelay, or with the response
	flushResponse           // the response to the POST's one request: sent as the handler returns
)

// primeDelay is how long the priming event of a response stream waits for the response
// before it is sent on its own. A call answered sooner sends its headers, the priming
// event, the response and the end of the chunked body in one write instead of three
// (issue 20: a write is a system call, and the hop's largest cost after the store);
// a slower call has its priming event, hence its resumption id, primeDelay late.
// A variable for the tests only (export_test.go).
var primeDelay = 50 * time.Millisecond

func (gw *guardWriter) WriteHeader(status int) {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	if gw.status == 0 {
		gw.status = status
	}
	if gw.first && status == http.StatusBadRequest && strings.HasPrefix(gw.Header().Get("Content-Type"), "text/plain") {
		gw.refused = &bytes.Buffer{}
		return
	}
	gw.ResponseWriter.WriteHeader(status)
}

func (gw *guardWriter) Write(b []byte) (int, error) {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	gw.held = flushNow
	if gw.status == 0 {
		gw.status = http.StatusOK
	}
	if gw.refused != nil {
		if gw.refused.Len() < 4096 {
			gw.refused.Write(b)
		}
		return len(b), nil
	}
	if gw.first {
		gw.first = false
		// The SDK's priming event (SEP-1699) is the stream's first write: announce the
		// reconnection delay in it.
		if rest, ok := bytes.CutPrefix(b, []byte("event: prime\n")); ok {
			id, data, ok := bytes.Cut(rest, []byte("\n"))
			if ok && bytes.HasPrefix(id, []byte("id: ")) {
				n := len(b)
				primed := fmt.Appendf(nil, "event: prime\n%s\nretry: %d\n%s", id, SSERetry.Milliseconds(), data)
				_, err := gw.ResponseWriter.Write(primed)
				gw.held = flushPriming
				return n, err
			}
		}
	}
	if gw.open != nil && gw.open.cancelled.Load() && responds(eventData(b), gw.call.ID) {
		gw.withheld = true
		gw.log.Debug("mcp/server: the client cancelled the request: its response is not sent", "id", gw.call.ID.Raw(), "method", gw.call.Method)
		return len(b), nil
	}
	if gw.answers(eventData(b)) {
		gw.held = flushResponse
	}
	return gw.ResponseWriter.Write(b)
}

// answers reports whether data is the response to the POST's one request, from the
// way the SDK encodes it ({"jsonrpc":"2.0","id":ID,"result"|"error":...}) rather than
// by decoding the whole result: a message it does not recognise is flushed as before.
func (gw *guardWriter) answers(data []byte) bool {
	if gw.call == nil || !gw.call.ID.IsValid() || len(data) == 0 {
		return false
	}
	if gw.answer == nil {
		id, err := json.Marshal(gw.call.ID.Raw())
		if err != nil {
			return false
		}
		gw.answer = slices.Concat([]byte(`{"jsonrpc":"2.0","id":`), id, []byte(`,"`))
	}
	rest, ok := bytes.CutPrefix(data, gw.answer)
	return ok && (bytes.HasPrefix(rest, []byte(`result":`)) || bytes.HasPrefix(rest, []byte(`error":`)))
}

// finish answers a refusal the SDK wrote in plain text with a JSON-RPC error.
func (gw *guardWriter) finish() {
	gw.end()
	if gw.refused == nil {
		return
	}
	msg := strings.TrimSpace(gw.refused.String())
	gw.Header().Del("Content-Length")
	if gw.call == nil {
		// Not one request: the error has no id, as the transport says.
		code := int64(jsonrpc.CodeInvalidRequest)
		if !gw.json {
			code = jsonrpc.CodeParseError
		}
		writeHTTPError(gw.ResponseWriter, http.StatusBadRequest, jsonrpc.ID{}, code, msg)
		return
	}
	// The SDK's refusal of an unknown method ends "%q unsupported" (checkRequest).
	if strings.HasSuffix(msg, strconv.Quote(gw.call.Method)+" unsupported") {
		writeHTTPError(gw.ResponseWriter, http.StatusOK, gw.call.ID, jsonrpc.CodeMethodNotFound, fmt.Sprintf("method not found: %q", gw.call.Method))
		return
	}
	writeHTTPError(gw.ResponseWriter, http.StatusBadRequest, gw.call.ID, jsonrpc.CodeInvalidRequest, "invalid request: "+msg)
}

// Flush sends what was written, except in two cases that would each cost a write of
// its own for nothing:
//
//   - after the response to the POST's one request: the SDK ends the stream with it,
//     the handler returns, and net/http sends the response with the end of the body;
//   - after the priming event: it goes out with the response if that comes within
//     primeDelay, else on its own then (a client needs its id only to resume a stream
//     that broke before anything else arrived).
//
// Any other event (a progress notification, a request to the client) is sent at once,
// and sends a held priming event with it.
func (gw *guardWriter) Flush() {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	held := gw.held
	gw.held = flushNow
	switch {
	case gw.ended || held == flushResponse:
		return
	case held == flushPriming:
		if gw.primeWait == nil {
			gw.primeWait = time.AfterFunc(gw.primeDelay, gw.flushHeld)
		}
		return
	}
	if gw.primeWait != nil {
		gw.primeWait.Stop()
	}
	gw.flush()
}

// flushHeld sends a held priming event (primeWait's function).
func (gw *guardWriter) flushHeld() {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	if !gw.ended {
		gw.flush()
	}
}

func (gw *guardWriter) flush() { _ = http.NewResponseController(gw.ResponseWriter).Flush() }

// end is called as the handler returns: from then on the ResponseWriter is net/http's,
// which sends what is held.
func (gw *guardWriter) end() {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	gw.ended = true
	if gw.primeWait != nil {
		gw.primeWait.Stop()
	}
}

func (gw *guardWriter) Unwrap() http.ResponseWriter { return gw.ResponseWriter }

// eventData is the data of one SSE event as the SDK writes it (one Write per event,
// one data line).
func eventData(b []byte) []byte {
	_, data, ok := bytes.Cut(b, []byte("data: "))
	if !ok {
		return nil
	}
	data, _, _ = bytes.Cut(data, []byte("\n"))
	return data
}

// responds reports whether data is the JSON-RPC response to id.
func responds(data []byte, id jsonrpc.ID) bool {
	if len(data) == 0 {
		return false
	}
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return false
	}
	resp, ok := msg.(*jsonrpc.Response)
	return ok && resp.ID == id
}

// openCalls are the requests whose POST is open, by session and id, so that a
// notifications/cancelled (another POST) can reach them. Only a cancellation from the
// same session and the same authenticated user counts.
type openCalls struct {
	mu sync.Mutex
	m  map[openKey]*openCall
	// cancelled counts the open calls marked cancelled per session: the event store
	// looks at a stored message only in a session that has one.
	cancelled map[string]int
	// ends are closed when their session ends, for the streams held open (awaitEnd).
	ends map[string]*sessionEnd
}

type sessionEnd struct {
	ch      chan struct{}
	waiters int
}

type openKey struct {
	session string
	id      jsonrpc.ID
}

type openCall struct {
	key       openKey
	user      string
	ref       string // the call's reference for callRefs
	cancelled atomic.Bool
	// sessionEnded: its session ended while it was open (sessionClosed), which its
	// stream may not have been waiting for yet (awaitEnd). Guarded by openCalls.mu.
	sessionEnded bool
}

func newOpenCalls() *openCalls {
	return &openCalls{m: map[openKey]*openCall{}, cancelled: map[string]int{}, ends: map[string]*sessionEnd{}}
}

// add registers an open call; nil when the id is already open in the session (the
// SDK refuses that POST).
func (o *openCalls) add(session, user string, id jsonrpc.ID, ref string) *openCall {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := openKey{session, id}
	if _, dup := o.m[k]; dup {
		return nil
	}
	c := &openCall{key: k, user: user, ref: ref}
	o.m[k] = c
	return c
}

func (o *openCalls) remove(c *openCall) {
	if c == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m[c.key] == c {
		delete(o.m, c.key)
		if c.cancelled.Load() {
			if o.cancelled[c.key.session]--; o.cancelled[c.key.session] <= 0 {
				delete(o.cancelled, c.key.session)
			}
		}
	}
}

// cancel marks the open call id of session cancelled, and reports whether this process
// has it open.
func (o *openCalls) cancel(session, user string, id jsonrpc.ID) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	c, ok := o.m[openKey{session, id}]
	if ok && c.user == user && !c.cancelled.Swap(true) {
		o.cancelled[session]++
	}
	return ok
}

// cancelRemote marks the open call id of session cancelled (a cancellation another
// process received: its user was checked there) and returns its reference, or "".
func (o *openCalls) cancelRemote(session string, id jsonrpc.ID) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	c, ok := o.m[openKey{session, id}]
	if !ok {
		return ""
	}
	if !c.cancelled.Swap(true) {
		o.cancelled[session]++
	}
	return c.ref
}

func (o *openCalls) open() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.m)
}

// withhold reports whether data, a message of session about to be stored for
// resumption, is the response to a cancelled request.
func (o *openCalls) withhold(session string, data []byte) bool {
	o.mu.Lock()
	n := o.cancelled[session]
	o.mu.Unlock()
	if n == 0 || len(data) == 0 {
		return false
	}
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return false
	}
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	c, ok := o.m[openKey{session, resp.ID}]
	return ok && c.cancelled.Load()
}

// readCloser reads r and closes c.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (r readCloser) Close() error { return r.c.Close() }

// awaitEnd waits until ctx or stop is done, or session ends (sessionClosed). c is the
// open call whose stream waits (nil if it was not added): if its session ended before
// this wait began, it does not begin.
func (o *openCalls) awaitEnd(ctx context.Context, session string, c *openCall, stop context.Context) {
	o.mu.Lock()
	if c != nil && c.sessionEnded {
		o.mu.Unlock()
		return
	}
	e := o.ends[session]
	if e == nil {
		e = &sessionEnd{ch: make(chan struct{})}
		o.ends[session] = e
	}
	e.waiters++
	o.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-stop.Done():
	case <-e.ch:
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if e.waiters--; e.waiters == 0 && o.ends[session] == e {
		delete(o.ends, session)
	}
}

// sessionClosed ends the waits of awaitEnd for session, and those its open calls'
// streams are about to begin.
func (o *openCalls) sessionClosed(session string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, c := range o.m {
		if k.session == session {
			c.sessionEnded = true
		}
	}
	if e := o.ends[session]; e != nil {
		close(e.ch)
		delete(o.ends, session)
	}
}

// Cancellation across replicas (doc.go, "Transports"). A notifications/cancelled that
// reaches a process that does not run the request is recorded in the store
// (servePOST); while a process has calls open, it reads the recent cancellations every
// Options.CancelPoll and cancels those of its calls, as the SDK cancels a local one:
// the call's context ends and its response is withheld.

// callRefs are the cancel functions of the calls in flight by reference (headerCallRef).
type callRefs struct {
	mu sync.Mutex
	m  map[string]context.CancelFunc
}

func (c *callRefs) add(ref string, cancel context.CancelFunc) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]context.CancelFunc{}
	}
	c.m[ref] = cancel
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.m, ref)
	}
}

func (c *callRefs) cancel(ref string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.m[ref]; f != nil {
		f()
	}
}

// watchRemoteCancels starts the reader of recorded cancellations unless it runs; it
// ends when no call is open.
func (g *httpGuard) watchRemoteCancels() {
	if g.s.opts.MCPSessions == nil {
		return
	}
	g.pollMu.Lock()
	defer g.pollMu.Unlock()
	if g.polling {
		return
	}
	g.polling = true
	go g.remoteCancels()
}

func (g *httpGuard) remoteCancels() {
	tick := time.NewTicker(g.s.opts.CancelPoll)
	defer tick.Stop()
	for {
		select {
		case <-g.s.stopping.Done():
		case <-tick.C:
		}
		g.pollMu.Lock()
		if g.calls.open() == 0 || g.s.stopping.Err() != nil {
			g.polling = false
			g.pollMu.Unlock()
			return
		}
		g.pollMu.Unlock()
		// A cancellation older than a minute names a request no client still waits for.
		cancels, err := g.s.opts.MCPSessions.MCPCancelsSince(g.s.stopping, g.cancelCursor, time.Minute, 1000)
		if err != nil {
			g.s.log.Warn("mcp/server: recorded cancellations could not be read", "error", err)
			continue
		}
		for _, c := range cancels {
			g.cancelCursor = c.ID
			var raw any
			if json.Unmarshal([]byte(c.RequestID), &raw) != nil {
				continue
			}
			id, err := jsonrpc.MakeID(raw)
			if err != nil {
				continue
			}
			if ref := g.calls.cancelRemote(c.SessionID, id); ref != "" {
				g.s.log.Debug("mcp/server: a call cancelled through another replica", "id", id.Raw())
				g.s.refs.cancel(ref)
			}
		}
	}
}
