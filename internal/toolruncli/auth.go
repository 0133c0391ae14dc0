package toolruncli

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolgen/toolgen/internal/host"
	"github.com/toolgen/toolgen/internal/identity"
	"github.com/toolgen/toolgen/spec"
)

// MetadataPath is where toolrun serve --http publishes its OAuth protected-resource
// metadata (RFC 9728) when principals.yaml exists.
const MetadataPath = "/.well-known/oauth-protected-resource"

// httpAuth is the authentication of toolrun serve --http (ID-1, ID-2): with
// principals.yaml every request to MCPPath must carry a bearer token that verifies
// (the go-sdk's auth.RequireBearerToken: 401 with WWW-Authenticate naming the metadata
// otherwise), and the verified principal is the caller. Without the file nobody is
// authenticated, so the server only listens on loopback, where the caller is the
// operator's --principal.
type httpAuth struct {
	verifier  *identity.Verifier
	principal *spec.Principals
}

// newHTTPAuth returns the authentication of the HTTP server on addr, or nil when
// principals.yaml is absent and addr is a loopback address. It refuses a non-loopback
// address without principals.yaml.
func newHTTPAuth(e *env, c *common, h *host.Host, addr string) (*httpAuth, error) {
	p := h.Tree.Principals
	if p == nil {
		if !loopback(addr) {
			return nil, fmt.Errorf("--http %s: without %s anyone who reaches the port would act as %q; serve on a loopback address, or declare the principals (ID-1)", addr, spec.PrincipalsFile, c.principal)
		}
		return nil, nil
	}
	v, err := identity.New(e.ctx, p, os.DirFS(c.dir))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spec.PrincipalsFile, err)
	}
	return &httpAuth{verifier: v, principal: p}, nil
}

// loopback reports whether a listen address can only be reached from this machine.
func loopback(addr string) bool {
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

// protect requires a verified bearer token on next.
func (a *httpAuth) protect(next http.Handler) http.Handler {
	if a == nil {
		return next
	}
	verify := a.verifier.TokenVerifier()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		opts := &auth.RequireBearerTokenOptions{ResourceMetadataURL: baseURL(r) + MetadataPath, AllowMissingExpiration: true}
		auth.RequireBearerToken(verify, opts)(next).ServeHTTP(w, r)
	})
}

// metadata serves the protected-resource metadata: the resource (principals.yaml's, or
// the MCP endpoint as this request reached it) and its authorization servers (the
// file's, or the issuers).
func (a *httpAuth) metadata() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := &oauthex.ProtectedResourceMetadata{
			Resource:               a.principal.Resource,
			BearerMethodsSupported: []string{"header"},
			ResourceName:           "toolgen",
		}
		if m.Resource == "" {
			m.Resource = baseURL(r) + MCPPath
		}
		for _, s := range a.principal.AuthorizationServers {
			m.AuthorizationServers = append(m.AuthorizationServers, s.Name)
		}
		if len(m.AuthorizationServers) == 0 {
			for _, is := range a.principal.Issuers {
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

// errNoPrincipal refuses a --principal that principals.yaml does not declare.
var errNoPrincipal = errors.New("is not declared in " + spec.PrincipalsFile + " (tokens or local)")
