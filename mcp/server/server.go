package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/internal/growstack"
	"github.com/toolgen/toolgen/internal/lru"
	"github.com/toolgen/toolgen/internal/textsafe"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// Endpoint is the path HTTPHandler serves Streamable HTTP at.
const Endpoint = "/mcp"

// Defaults of Options.
const (
	DefaultName               = "toolgen"
	DefaultVersion            = "dev"
	DefaultProgressInterval   = time.Second
	DefaultHTTPSessionTimeout = 30 * time.Minute
	DefaultPageSize           = 1000
	DefaultTaskAfter          = 2 * time.Second
	DefaultTaskPoll           = time.Second
	DefaultCancelPoll         = time.Second
	// DefaultMaxMessageBytes bounds one inbound message (an HTTP request body, a stdio
	// line), as the SDK bounds a stdio line (mcp.DefaultMaxLineLength): a builtin
	// accepts up to 10 MiB of text.
	DefaultMaxMessageBytes = mcp.DefaultMaxLineLength
)

// Options assemble a Server.
type Options struct {
	// Pipeline runs every tools/call. Required.
	Pipeline *runtime.Pipeline
	// Registry is the pipeline's registry: tools/list shows a session's pinned catalog
	// from it. Required, and it must be the registry the Pipeline was built with.
	Registry *runtime.Registry
	// Modes filters tools/list to the session's active mode (WF-3). Give the resolver
	// the Pipeline was built with; nil means no protocol (the whole catalog is listed).
	Modes runtime.ModeResolver
	// Principal is the caller of every call served (its Tenant is the calls' tenant)
	// when the request carries no verified identity: the principal the operator names
	// for stdio (ID-1). Its ID must not be empty.
	Principal runtime.Principal
	// PrincipalOf, when set, maps a request's verified bearer token (the go-sdk's
	// auth.TokenInfo, put there by auth.RequireBearerToken in front of the HTTP handler)
	// to its principal, which then is the caller instead of Principal. A request that
	// carries a TokenInfo PrincipalOf cannot map is refused.
	PrincipalOf func(*auth.TokenInfo) (runtime.Principal, bool)
	// CallIDSecret keys the derived call ids of calls that send none (DerivedCallID).
	// Give every server on one store the same secret (the host reads it from the
	// store): a retry through another process then finds its record. Empty draws a
	// random one for this Server, so its derived ids differ from every other process's
	// and do not survive a restart.
	CallIDSecret []byte
	// WorkspaceFor gives the workspace root of a tenant's run (runtime.Call.Workspace);
	// nil or "" is none.
	WorkspaceFor func(tenant, run string) string
	// SessionID, when set, is the session of every connection served by Serve and
	// ServeStdio that names none in _meta; empty means a random id per connection.
	// HTTP sessions always default to their Mcp-Session-Id.
	SessionID string
	// Logger receives the server's and the SDK's logs; nil discards them.
	Logger *slog.Logger
	// Name and Version are the server's implementation info (DefaultName, DefaultVersion).
	Name, Version string
	// ProgressInterval is the least time between two progress notifications of one
	// approval hold (the first is always sent); 0 means DefaultProgressInterval, a
	// negative value sends one at every poll of the hold.
	ProgressInterval time.Duration
	// HTTPSessionTimeout closes an HTTP session idle this long; 0 means
	// DefaultHTTPSessionTimeout, a negative value never.
	HTTPSessionTimeout time.Duration
	// MaxMessageBytes bounds one inbound message: an HTTP request body, a stdio line;
	// 0 means DefaultMaxMessageBytes.
	MaxMessageBytes int64
	// PageSize is the most tools in one tools/list page; 0 means DefaultPageSize.
	PageSize int
	// Sessions records which tenant owns each session id (SES-1); nil means the
	// Pipeline's store, which is what every process on that store must share. Left nil,
	// a session minted for a request (revision 2026-07-28, doc.go) is written with its
	// pins in one write when it is first echoed (Registry.Mint); set, it is claimed
	// through Sessions and pinned as any other then.
	Sessions SessionOwners
	// MCPSessions keeps the Streamable HTTP sessions of the session-based revisions
	// (2025-11-25 and earlier), so that every process on the store serves every
	// session (sessions.go); nil means the Pipeline's store when it has the role, else
	// sessions live in this process only.
	MCPSessions store.MCPSessions
	// MaxCachedSessions bounds the session owners kept in memory (the store holds
	// them all); 0 means runtime.DefaultMaxCachedSessions.
	MaxCachedSessions int
	// TaskAfter is how long a tools/call of a client that opted into the Tasks
	// extension runs before it is answered with a task (a call held for approval is
	// answered with one at once); 0 means DefaultTaskAfter.
	TaskAfter time.Duration
	// CancelPoll is the interval at which an HTTP handler with calls open reads the
	// cancellations other replicas recorded for them; 0 means DefaultCancelPoll.
	CancelPoll time.Duration
	// TaskPoll is the interval at which this server reads the row of a task it runs,
	// to stop a hold cancelled through another replica, and the pollIntervalMs it
	// announces; 0 means DefaultTaskPoll.
	TaskPoll time.Duration
	// EventStoreSessionBytes and EventStoreBytes bound the memory HTTPHandler keeps of
	// SSE events so that a client can resume a broken response stream (Last-Event-ID):
	// per HTTP session, and in total. 0 means DefaultEventStoreSessionBytes and
	// DefaultEventStoreBytes; a negative value keeps no events (no event ids, no
	// resumption).
	EventStoreSessionBytes, EventStoreBytes int
}

// SessionOwners records which tenant owns each session id: the first tenant to use
// it, for ever (store.Store satisfies it).
type SessionOwners interface {
	SessionClaim(ctx context.Context, tenant, sessionID string) (owned bool, err error)
}

// Server serves a registry over MCP. It is safe for concurrent use: one Server serves
// any number of stdio connections and HTTP sessions at once.
type Server struct {
	opts  Options
	log   *slog.Logger
	mcp   *mcp.Server
	tools toolCache
	// owners caches session id -> owning tenant (sessionOf): an owner never changes,
	// so an entry is never stale, and an evicted one is read from Options.Sessions again.
	owners *lru.Cache[string, string]
	// mintKey keys the MAC of minted session ids (minted.go). mintInRegistry: a
	// minted session echoed for the first time is written by Registry.Mint, owner and
	// pins in one commit of the pipeline's store, which keeps the owners
	// (Options.Sessions left nil); else it is claimed through Options.Sessions and
	// pinned as any session.
	mintKey        []byte
	mintInRegistry bool
	// stopping is cancelled by Shutdown (callContext); streamsEnd too, once the HTTP
	// requests carrying a call (posts) have ended.
	stopping, streamsEnd context.Context
	stop, endStreams     context.CancelFunc
	posts                openPOSTs
	// tasks are the task calls this server runs now (tasks.go).
	tasks taskRuns
	// refs are the HTTP calls in flight, for a cancellation another replica received.
	refs callRefs
}

// New returns a Server for opts.
func New(opts Options) (*Server, error) {
	switch {
	case opts.Pipeline == nil:
		return nil, errors.New("mcp/server: Options.Pipeline is required")
	case opts.Registry == nil:
		return nil, errors.New("mcp/server: Options.Registry is required")
	case opts.Principal.ID == "":
		return nil, errors.New("mcp/server: Options.Principal needs an ID (the operator names the caller)")
	}
	if opts.SessionID != "" {
		if err := textsafe.CheckID(opts.SessionID, MaxIDBytes); err != nil {
			return nil, fmt.Errorf("mcp/server: Options.SessionID %w (%s)", err, textsafe.IDAlphabet)
		}
	}
	if len(opts.CallIDSecret) == 0 {
		opts.CallIDSecret = make([]byte, CallIDSecretBytes)
		rand.Read(opts.CallIDSecret)
	} else {
		opts.CallIDSecret = slices.Clone(opts.CallIDSecret)
	}
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.Version == "" {
		opts.Version = DefaultVersion
	}
	if opts.ProgressInterval == 0 {
		opts.ProgressInterval = DefaultProgressInterval
	}
	if opts.HTTPSessionTimeout == 0 {
		opts.HTTPSessionTimeout = DefaultHTTPSessionTimeout
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.PageSize <= 0 {
		opts.PageSize = DefaultPageSize
	}
	mintInRegistry := opts.Sessions == nil
	if mintInRegistry {
		opts.Sessions = opts.Pipeline.Store()
	}
	if opts.MCPSessions == nil {
		opts.MCPSessions, _ = opts.Pipeline.Store().(store.MCPSessions)
	}
	if opts.EventStoreSessionBytes == 0 {
		opts.EventStoreSessionBytes = DefaultEventStoreSessionBytes
	}
	if opts.EventStoreBytes == 0 {
		opts.EventStoreBytes = DefaultEventStoreBytes
	}
	if opts.TaskAfter <= 0 {
		opts.TaskAfter = DefaultTaskAfter
	}
	if opts.CancelPoll <= 0 {
		opts.CancelPoll = DefaultCancelPoll
	}
	if opts.TaskPoll <= 0 {
		opts.TaskPoll = DefaultTaskPoll
	}
	if opts.MaxCachedSessions <= 0 {
		opts.MaxCachedSessions = runtime.DefaultMaxCachedSessions
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, log: log, owners: lru.New[string, string](opts.MaxCachedSessions), mintKey: mintKey(opts.CallIDSecret), mintInRegistry: mintInRegistry,
		tools: toolCache{m: lru.New[*runtime.ToolSpec, wireEntry](maxWireTools)}}
	s.stopping, s.stop = context.WithCancel(context.Background())
	s.streamsEnd, s.endStreams = context.WithCancel(context.Background())
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: opts.Version}, &mcp.ServerOptions{
		Logger: log,
		// Tools, and no list_changed: lists are computed per request (see doc.go).
		// Logging: an upstream's log lines reach the client whose call caused them, at
		// the level the client sets (relay.go); a client that checks capabilities asks
		// for them only when logging is advertised.
		// Tasks: the io.modelcontextprotocol/tasks extension (tasks.go), advertised in
		// server/discover.
		// Prompts: none are served, but prompts/list answers (an empty list), and
		// revision 2026-07-28 wants every method answered declared in server/discover.
		//lint:ignore SA1019 logging is advertised for the 2025 revisions (SEP-2577 keeps it through the deprecation window)
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Logging: &mcp.LoggingCapabilities{}, Prompts: &mcp.PromptCapabilities{},
			Extensions: map[string]any{ExtensionTasks: map[string]any{}}},
	})
	s.mcp.AddReceivingMiddleware(s.middleware)
	if err := s.addTaskMethods(); err != nil {
		return nil, err
	}
	return s, nil
}

// connSessionKey carries the default session id of a connection served by Serve;
// connStopKey carries the context that ends it (callContext).
type (
	connSessionKey struct{}
	connStopKey    struct{}
)

// ShutdownGrace bounds how long Serve and ServeStdio, once their ctx is done, wait for
// the calls they cancelled to be answered before they close the connection.
const ShutdownGrace = 5 * time.Second

// Serve serves one MCP connection over t (stdio, an IOTransport, an in-memory
// transport) until the client closes it or ctx is done. The connection's default
// session id is Options.SessionID, or a random id. It returns nil when the client
// closed the connection or ctx ended it.
//
// When ctx is done, every tools/call in flight on the connection is cancelled (a call
// held for approval stays PENDING: the client's retry finds the decision) and the
// connection is closed; Serve returns promptly, never waiting out an approval hold.
func (s *Server) Serve(ctx context.Context, t mcp.Transport) error {
	return s.serve(ctx, t, nil)
}

// serve is Serve; drained, when set, tells when every request read was answered, so
// that the answers to the cancelled calls are written before the connection closes
// (the SDK writes nothing once it is closing).
func (s *Server) serve(ctx context.Context, t mcp.Transport, drained func() <-chan struct{}) error {
	id := s.opts.SessionID
	if id == "" {
		id = "conn-" + rand.Text()
	}
	connCtx := context.WithValue(ctx, connSessionKey{}, id)
	connCtx = context.WithValue(connCtx, connStopKey{}, ctx)
	ss, err := s.mcp.Connect(connCtx, t, nil)
	if err != nil {
		return fmt.Errorf("mcp/server: connect: %w", err)
	}
	s.log.Debug("mcp/server: connection open", "session_id", id)
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case <-ctx.Done():
		// ctx cancelled the connection's calls (callContext): let them answer, then
		// close. The SDK's Close alone would wait for every handler, an approval hold
		// included.
		if drained != nil {
			grace := time.NewTimer(ShutdownGrace)
			select {
			case <-drained():
			case <-grace.C:
				s.log.Warn("mcp/server: calls still unanswered at shutdown", "session_id", id)
			case err = <-ended:
				ended <- err
			}
			grace.Stop()
		}
		ss.Close()
		<-ended
		err = nil
	case err = <-ended:
	}
	s.log.Debug("mcp/server: connection closed", "session_id", id)
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil
	}
	return fmt.Errorf("mcp/server: serve: %w", err)
}

// ServeStdio serves one MCP connection over in and out (newline-delimited JSON-RPC, as
// on a process's stdin and stdout), as Serve does. No line ends the connection: see
// doc.go, "Transports", for what is answered how. Closing the connection closes in and
// out when they are io.Closers.
//
// When in ends (the client closes it to end the session), ServeStdio ends as it does
// when ctx is done: the calls in flight are cancelled, every request read is answered,
// and it returns nil.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	limit := int(min(s.opts.MaxMessageBytes, maxStdioLine))
	ctx, inputEnded := context.WithCancel(ctx)
	defer inputEnded()
	conn := newStdioConn(in, out, limit, s.log, inputEnded)
	return s.serve(ctx, stdioTransport{conn}, conn.drained)
}

// maxStdioLine caps the stdio line limit (and keeps limit+2 from overflowing).
const maxStdioLine = 1 << 30

// Shutdown cancels every tools/call in flight on every connection and HTTP session of
// s, and answers every later one at once with a JSON-RPC error (-32004, "the server is
// shutting down"; the call is not run) — what a prompt exit needs. A cancelled call
// answers as the pipeline leaves it: a call held for approval stays PENDING and
// answers unavailable/approval_pending, and the client's retry finds the decision.
// Once the HTTP requests carrying a call have ended (within ShutdownGrace), Shutdown
// ends the standalone SSE streams (GET) of HTTPHandler too, so that an http.Server's
// Shutdown is not held by them; it returns then. It closes no connection. Calling it
// again changes nothing more.
func (s *Server) Shutdown() {
	s.stop()
	grace := time.NewTimer(ShutdownGrace)
	defer grace.Stop()
	select {
	case <-s.posts.idle():
	case <-grace.C:
		s.log.Warn("mcp/server: HTTP calls still unanswered at shutdown")
	}
	s.endStreams()
}

// openPOSTs counts the HTTP requests carrying a call that have not ended.
type openPOSTs struct {
	mu    sync.Mutex
	n     int
	zeros []chan struct{}
}

func (o *openPOSTs) add() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n++
}

func (o *openPOSTs) done() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n--; o.n == 0 {
		for _, ch := range o.zeros {
			close(ch)
		}
		o.zeros = nil
	}
}

// idle is closed when no request carrying a call is open.
func (o *openPOSTs) idle() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	ch := make(chan struct{})
	if o.n == 0 {
		close(ch)
	} else {
		o.zeros = append(o.zeros, ch)
	}
	return ch
}

// callContext is the context a tools/call runs under: ctx, cancelled by Shutdown and
// by the end of the connection's Serve. done releases it.
func (s *Server) callContext(ctx context.Context) (_ context.Context, done func(), stopping bool) {
	conn, _ := ctx.Value(connStopKey{}).(context.Context)
	if s.stopping.Err() != nil || (conn != nil && conn.Err() != nil) {
		return ctx, func() {}, true
	}
	ctx, cancel := context.WithCancel(ctx)
	unregister := []func() bool{context.AfterFunc(s.stopping, cancel)}
	if conn != nil {
		unregister = append(unregister, context.AfterFunc(conn, cancel))
	}
	return ctx, func() {
		for _, f := range unregister {
			f()
		}
		cancel()
	}, false
}

// errShuttingDown answers a tools/call that arrives after Shutdown: it is not run. The
// code is the one the SDK's jsonrpc2 layer answers a call with while it closes.
var errShuttingDown = &jsonrpc.Error{Code: -32004, Message: "toolgen: the server is shutting down; the call was not run: retry it"}

// HTTPHandler returns the Streamable HTTP handler, serving Endpoint ("/mcp") and
// nothing else (404): mount it at Endpoint, or use it as the root handler. Sessions
// are stateful (Mcp-Session-Id); the SDK's DNS-rebinding protection stays on. Response
// streams are resumable (event ids, Last-Event-ID) within the event store's bounds
// (Options.EventStoreSessionBytes, Options.EventStoreBytes). Each call returns a new
// handler with its own sessions and event store.
func (s *Server) HTTPHandler() http.Handler {
	timeout := s.opts.HTTPSessionTimeout
	if timeout < 0 {
		timeout = 0 // the SDK's "never"
	}
	calls := newOpenCalls()
	opts := &mcp.StreamableHTTPOptions{
		Logger:              s.log,
		SessionTimeout:      timeout,
		MaxRequestBodyBytes: s.opts.MaxMessageBytes,
	}
	resumable := s.opts.EventStoreSessionBytes > 0 && s.opts.EventStoreBytes > 0
	if resumable {
		opts.EventStore = newEventStore(s.opts.EventStoreSessionBytes, s.opts.EventStoreBytes, calls)
	}
	getServer := func(*http.Request) *mcp.Server { return s.mcp }
	// The session-based revisions: sessions recorded in the store, served by any
	// process on it (sessions.go).
	h := newSessionHandler(s, opts.EventStore, timeout)
	// Revision 2026-07-28 has no sessions: the SDK serves it only statelessly, so a
	// second handler serves it on the same URL (doc.go, "Transports"). A disconnect
	// cancels the request, as that revision says.
	modern := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless: true, Logger: s.log, MaxRequestBodyBytes: s.opts.MaxMessageBytes, PropagateRequestCancellation: true,
	})
	mux := http.NewServeMux()
	mux.Handle(Endpoint, &httpGuard{s: s, next: h, modern: modern, limit: s.opts.MaxMessageBytes, calls: calls, resumable: resumable, primeDelay: primeDelay})
	return mux
}

// middleware answers tools/list and tools/call itself and passes every other method
// to the SDK.
func (s *Server) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
		switch method {
		case "tools/list", "tools/call", methodTasksGet, methodTasksUpdate, methodTasksCancel:
		case "initialize":
			res, err := initialize(ctx, next, req)
			if ir, ok := req.(*mcp.ServerRequest[*mcp.InitializeParams]); ok && err == nil {
				if err := s.persistSession(ctx, ir, res.(*mcp.InitializeResult)); err != nil {
					s.log.Error("mcp/server: a new session could not be recorded", "error", err)
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "toolgen: the session could not be opened"}
				}
			}
			return res, err
		case "logging/setLevel":
			res, err := next(ctx, method, req)
			//lint:ignore SA1019 logging/setLevel of the 2025 revisions
			if r, ok := req.(*mcp.ServerRequest[*mcp.SetLoggingLevelParams]); ok && err == nil {
				s.persistLogLevel(ctx, r)
			}
			return res, err
		default:
			return next(ctx, method, req)
		}
		// These reach the pipeline and the store on the SDK's new goroutine for the
		// request: its stack grows once here, not frame by frame deep in a statement.
		growstack.Grow()
		defer func() {
			// No client message may crash the server: a panic below is a bug, logged
			// with its stack and answered as an internal error.
			if r := recover(); r != nil {
				s.log.Error("mcp/server: panic while serving a request", "method", method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "toolgen: internal error"}
			}
		}()
		switch r := req.(type) {
		case *mcp.ListToolsRequest:
			return s.listTools(ctx, r)
		case *mcp.CallToolRequest:
			if wantsTask(r) {
				return s.callToolTask(ctx, r) // tasks.go
			}
			res, err := s.callTool(ctx, r)
			if err != nil {
				return nil, err
			}
			return forRevision(r.ProtocolVersion(), res), nil
		}
		if p, ok := req.GetParams().(*taskParams); ok {
			return s.serveTaskMethod(ctx, method, req.GetExtra(), p) // tasks.go
		}
		return next(ctx, method, req)
	}
}

// initialize passes initialize to the SDK, giving its refusal of a second initialize a
// JSON-RPC code: the SDK answers it with a plain error, code 0, which is no JSON-RPC
// code (go-sdk v1.8.0, ServerSession.initialize; upstream: -32600). Its other refusals
// carry their codes.
func initialize(ctx context.Context, next mcp.MethodHandler, req mcp.Request) (mcp.Result, error) {
	res, err := next(ctx, "initialize", req)
	if err != nil && wireCode(err) == 0 {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: "toolgen: initialize was already received on this connection: a session is initialized once (" + err.Error() + ")"}
	}
	return res, err
}

// CachedSessions is the number of session owners held in memory now (at most
// Options.MaxCachedSessions).
func (s *Server) CachedSessions() int { return s.owners.Len() }

// invalidParams is the JSON-RPC error for a request this package cannot turn into a
// list or a call.
func invalidParams(format string, a ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "toolgen: " + fmt.Sprintf(format, a...)}
}
