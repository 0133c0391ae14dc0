package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolgen/toolgen/host/console"
	"github.com/toolgen/toolgen/internal/events"
	"github.com/toolgen/toolgen/internal/identity"
	"github.com/toolgen/toolgen/mcp/device"
	mcpserver "github.com/toolgen/toolgen/mcp/server"
	"github.com/toolgen/toolgen/spec"
)

// The paths Handler serves.
const (
	MCPPath      = "/mcp"                                  // MCP, Streamable HTTP
	MetricsPath  = "/metrics"                              // GET: the pipeline's metrics, Prometheus exposition
	EventsPath   = events.Path                             // GET: the event stream (SSE, EV-1)
	DevicesPath  = device.ConnectPath                      // devices dial in here (DEV-1)
	MetadataPath = "/.well-known/oauth-protected-resource" // GET: RFC 9728 metadata, with principals.yaml
)

// httpParts is what Handler assembled, closed with the host.
type httpParts struct {
	handler http.Handler
	events  *events.Handler
	gateway *device.Gateway
	mcp     *mcpserver.Server
	console *console.Console
}

func (p *httpParts) close() {
	p.mcp.Shutdown()
	p.events.Close()
	p.console.Close()
	p.gateway.Close()
}

// Handler returns the host's HTTP handler: MCP at MCPPath, the event stream at
// EventsPath, the metrics at MetricsPath, devices at DevicesPath, the reviewer's
// console at ConsolePath and, with principals.yaml, the OAuth protected-resource
// metadata at MetadataPath.
//
// With principals.yaml every request to MCPPath, EventsPath and MetricsPath needs a
// bearer token that verifies (401 with WWW-Authenticate naming the metadata otherwise),
// and the verified principal is the caller, held to its tenant; MetricsPath also needs
// MetricsScope (403 without it). Without the file nobody is authenticated, so the
// handler serves only requests from a loopback address (403 otherwise), where the
// caller is Config.Principal.
//
// In front of every endpoint: the Host and Origin check (Config.HTTP.AllowedHosts),
// a deadline on each request's body and on each write of its response, and, behind
// authentication, a cap on the requests one principal has in flight (HTTPConfig).
// Serve adds the header and idle timeouts and the cap on connections.
//
// Mount it on your own server and call Start (ListenAndServe and Serve do both).
func (h *Host) Handler() (http.Handler, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.http != nil {
		return h.http.handler, nil
	}
	principal, err := h.Principal("")
	if err != nil {
		return nil, err
	}
	// Options.Sessions is left to default to the pipeline's store, h.st: so a session the
	// server minted is written, owner and pins, in one write when it is first echoed
	// (mcp/server, Registry.Mint).
	opts := mcpserver.Options{Pipeline: h.pipe, Registry: h.reg, Principal: principal, CallIDSecret: h.callIDSecret,
		PrincipalOf: identity.PrincipalFrom, WorkspaceFor: h.workspaces.For, Logger: h.log,
		MaxCachedSessions: h.cfg.MaxCachedSessions}
	if h.modes != nil {
		opts.Modes = h.modes
	}
	srv, err := mcpserver.New(opts)
	if err != nil {
		return nil, err
	}
	eopts := events.Options{Store: h.st, Logger: h.log.With("component", "events")}
	if h.verifier != nil {
		eopts.TenantOf = func(r *http.Request) (string, bool) {
			p, ok := identity.PrincipalFrom(auth.TokenInfoFromContext(r.Context()))
			return p.Tenant, ok
		}
	}
	evs, err := events.NewHandler(eopts)
	if err != nil {
		return nil, err
	}
	gw, err := device.NewGateway(device.Options{Devices: h.model.Devices, Registry: h.reg, Store: h.st,
		Tenant: principal.Tenant, Logger: h.log.With("component", "devices")})
	if err != nil {
		evs.Close()
		return nil, err
	}
	// Every endpoint behind authentication counts its requests per principal (SEC-2);
	// the device channel authenticates devices itself, one connection each.
	perPrincipal := h.newPrincipalLimiter()
	mux := http.NewServeMux()
	mux.Handle(MCPPath, h.protect(perPrincipal.wrap(srv.HTTPHandler())))
	mux.Handle("GET "+MetricsPath, h.protect(perPrincipal.wrap(h.metrics.Handler), MetricsScope))
	mux.Handle("GET "+EventsPath, h.protect(perPrincipal.wrap(evs)))
	mux.Handle(DevicesPath, gw)
	// The reviewer's console (issue 18): its own sign-in (a session cookie), behind the
	// Host and Origin check, and loopback only without principals.yaml, like the rest.
	con, err := h.newConsole()
	if err != nil {
		evs.Close()
		gw.Close()
		return nil, err
	}
	mux.Handle(ConsolePath, con)
	mux.Handle(ConsolePath+"/", con)
	var handler http.Handler = mux
	if h.verifier != nil {
		mux.Handle("GET "+MetadataPath, h.metadata())
		mux.Handle("GET "+MetadataPath+MCPPath, h.metadata())
	} else {
		handler = loopbackOnly(mux)
	}
	if handler, err = h.guard(handler); err != nil {
		evs.Close()
		con.Close()
		gw.Close()
		return nil, err
	}
	h.http = &httpParts{handler: handler, events: evs, gateway: gw, mcp: srv, console: con}
	return handler, nil
}

// ListenAndServe serves Handler on addr until ctx is done, running the host's
// maintenance meanwhile. Without principals.yaml addr must be a loopback address:
// anyone who reached the port would act as the local principal.
func (h *Host) ListenAndServe(ctx context.Context, addr string) error {
	if h.verifier == nil && !loopbackAddr(addr) {
		return fmt.Errorf("%s: without %s anyone who reaches the port would act as %q; serve on a loopback address, or declare the principals (ID-1)",
			addr, spec.PrincipalsFile, h.principalID())
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return h.Serve(ctx, ln)
}

// Serve serves Handler on ln until ctx is done, running the host's maintenance
// meanwhile. Then it shuts down promptly and returns when every request has ended
// (within 5 s): MCP calls in flight are cancelled and answered (a call held for
// approval stays PENDING and answers approval_pending; the client's retry finds the
// decision), event and standalone MCP streams end, later calls are not run.
func (h *Host) Serve(ctx context.Context, ln net.Listener) error {
	handler, err := h.Handler()
	if err != nil {
		ln.Close()
		return err
	}
	if err := h.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	// No ReadTimeout or WriteTimeout here: they would end every event stream and long
	// MCP response after a fixed time; Handler sets body and write deadlines per
	// request instead (HTTPConfig).
	hs := &http.Server{Handler: handler,
		ReadHeaderTimeout: limit(h.cfg.HTTP.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		IdleTimeout:       limit(h.cfg.HTTP.IdleTimeout, DefaultIdleTimeout),
		ConnState:         newConnLimit(limit(h.cfg.HTTP.MaxConnections, DefaultMaxConnections), h.log.With("component", "http"))}
	// An event stream never ends by itself; its client resumes elsewhere. Nor does a
	// call held for approval, nor a standalone MCP stream: the MCP server cancels
	// and ends them.
	hs.RegisterOnShutdown(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.http.mcp.Shutdown()
		h.http.events.Close()
		h.http.console.Close()
	})
	done := make(chan struct{})
	shut := make(chan struct{})
	go func() {
		defer close(shut)
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if hs.Shutdown(shutdown) != nil {
			hs.Close()
		}
	}()
	err = hs.Serve(ln)
	close(done)
	// Serve returns as soon as shutdown begins: wait for the requests to end, so that
	// none is still running when the host closes its store.
	<-shut
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (h *Host) principalID() string {
	if h.cfg.Principal != "" {
		return h.cfg.Principal
	}
	return DefaultPrincipal
}

// protect requires a verified bearer token on next (ID-1), holding every one of
// scopes (403 otherwise), when there are principals.
func (h *Host) protect(next http.Handler, scopes ...string) http.Handler {
	if h.verifier == nil {
		return next
	}
	verify := h.verifier.TokenVerifier()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		opts := &auth.RequireBearerTokenOptions{ResourceMetadataURL: baseURL(r) + MetadataPath, AllowMissingExpiration: true, Scopes: scopes}
		auth.RequireBearerToken(verify, opts)(next).ServeHTTP(w, r)
	})
}

// metadata serves the protected-resource metadata (RFC 9728): the resource
// (principals.yaml's, or the MCP endpoint as this request reached it) and its
// authorization servers (the file's, or the issuers).
func (h *Host) metadata() http.Handler {
	p := h.tree.Principals
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := &oauthex.ProtectedResourceMetadata{
			Resource:               p.Resource,
			BearerMethodsSupported: []string{"header"},
			ResourceName:           "toolgen",
		}
		if m.Resource == "" {
			m.Resource = baseURL(r) + MCPPath
		}
		for _, s := range p.AuthorizationServers {
			m.AuthorizationServers = append(m.AuthorizationServers, s.Name)
		}
		if len(m.AuthorizationServers) == 0 {
			for _, is := range p.Issuers {
				m.AuthorizationServers = append(m.AuthorizationServers, is.Issuer)
			}
		}
		auth.ProtectedResourceMetadataHandler(m).ServeHTTP(w, r)
	})
}

// baseURL is the scheme and host a request reached this server at.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// loopbackAddr reports whether a listen address can only be reached from this machine.
func loopbackAddr(addr string) bool {
	hostname, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if hostname == "localhost" {
		return true
	}
	ip := net.ParseIP(hostname)
	return ip != nil && ip.IsLoopback()
}

// loopbackOnly refuses requests whose peer is not on this machine: without
// principals every caller acts as the local principal, so the handler itself holds the
// line wherever it is mounted.
func loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hostname, _, err := net.SplitHostPort(r.RemoteAddr)
		if ip := net.ParseIP(hostname); err != nil || ip == nil || !ip.IsLoopback() {
			http.Error(w, "toolgen: without principals.yaml only this machine is served", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
