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
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/internal/lru"
	"github.com/toolgen/toolgen/internal/textsafe"
	"github.com/toolgen/toolgen/runtime"
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
	// Pipeline's store, which is what every process on that store must share.
	Sessions SessionOwners
	// MaxCachedSessions bounds the session owners kept in memory (the store holds
	// them all); 0 means runtime.DefaultMaxCachedSessions.
	MaxCachedSessions int
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
	if opts.Sessions == nil {
		opts.Sessions = opts.Pipeline.Store()
	}
	if opts.MaxCachedSessions <= 0 {
		opts.MaxCachedSessions = runtime.DefaultMaxCachedSessions
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, log: log, owners: lru.New[string, string](opts.MaxCachedSessions),
		tools: toolCache{m: lru.New[*runtime.ToolSpec, wireEntry](maxWireTools)}}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: opts.Version}, &mcp.ServerOptions{
		Logger: log,
		// Tools only, and no list_changed: lists are computed per request (see doc.go).
		// Setting Capabilities also drops the SDK's default logging capability.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	s.mcp.AddReceivingMiddleware(s.middleware)
	return s, nil
}

// connSessionKey carries the default session id of a connection served by Serve.
type connSessionKey struct{}

// Serve serves one MCP connection over t (stdio, an IOTransport, an in-memory
// transport) until the client closes it or ctx is done. The connection's default
// session id is Options.SessionID, or a random id. It returns nil when the client
// closed the connection or ctx ended it.
func (s *Server) Serve(ctx context.Context, t mcp.Transport) error {
	id := s.opts.SessionID
	if id == "" {
		id = "conn-" + rand.Text()
	}
	ctx = context.WithValue(ctx, connSessionKey{}, id)
	ss, err := s.mcp.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("mcp/server: connect: %w", err)
	}
	s.log.Debug("mcp/server: connection open", "session_id", id)
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case <-ctx.Done():
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
// on a process's stdin and stdout). A line that is not a JSON-RPC message, or is longer
// than MaxMessageBytes, is answered with a JSON-RPC error and the connection goes on
// (the SDK's transport alone would end it). Closing the connection closes out if it is
// an io.Closer. See Serve.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	w := &lockedWriter{w: out}
	limit := int(min(s.opts.MaxMessageBytes, maxStdioLine))
	guard := newStdioGuard(in, w, limit)
	rc := readCloser{Reader: guard, c: in}
	return s.Serve(ctx, &mcp.IOTransport{Reader: rc, Writer: w, MaxLineLength: limit + 2})
}

// maxStdioLine caps the stdio line limit (and keeps limit+2 from overflowing).
const maxStdioLine = 1 << 30

// readCloser reads from the guard and closes the original input, when it can be closed.
type readCloser struct {
	io.Reader
	c io.Reader
}

func (r readCloser) Close() error {
	if c, ok := r.c.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// HTTPHandler returns the Streamable HTTP handler, serving Endpoint ("/mcp") and
// nothing else (404): mount it at Endpoint, or use it as the root handler. Sessions
// are stateful (Mcp-Session-Id); the SDK's DNS-rebinding protection stays on.
func (s *Server) HTTPHandler() http.Handler {
	timeout := s.opts.HTTPSessionTimeout
	if timeout < 0 {
		timeout = 0 // the SDK's "never"
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		Logger:              s.log,
		SessionTimeout:      timeout,
		MaxRequestBodyBytes: s.opts.MaxMessageBytes,
	})
	mux := http.NewServeMux()
	mux.Handle(Endpoint, h)
	return mux
}

// middleware answers tools/list and tools/call itself and passes every other method
// to the SDK.
func (s *Server) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
		switch method {
		case "tools/list", "tools/call":
		default:
			return next(ctx, method, req)
		}
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
			return s.callTool(ctx, r)
		}
		return next(ctx, method, req)
	}
}

// CachedSessions is the number of session owners held in memory now (at most
// Options.MaxCachedSessions).
func (s *Server) CachedSessions() int { return s.owners.Len() }

// invalidParams is the JSON-RPC error for a request this package cannot turn into a
// list or a call.
func invalidParams(format string, a ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "toolgen: " + fmt.Sprintf(format, a...)}
}
