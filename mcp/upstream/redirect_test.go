package upstream_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/internal/hostile"
	"github.com/toolgen/toolgen/mcp/upstream"
	"github.com/toolgen/toolgen/model"
)

// TestAttack14_16_HTTPSToHTTPRedirectRefused (issue 14, finding 16): an https server
// answers every request with a redirect to plain http. The tenant servers' egress
// client and the adapter's client of an operator server both refuse to follow it, so
// the request — a tool call's arguments, its headers — is never sent in cleartext: the
// plain listener sees nothing. An https → https redirect is still followed.
func TestAttack14_16_HTTPSToHTTPRedirectRefused(t *testing.T) {
	var cleartext atomic.Int64
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cleartext.Add(1)
		http.Error(w, "should never be reached", http.StatusTeapot)
	}))
	defer plain.Close()
	downgrade := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// 307 keeps the method and the body: the call would be replayed as it is.
		http.Redirect(w, r, plain.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer downgrade.Close()

	t.Run("tenant egress client", func(t *testing.T) {
		// The tenant's server is https://example.com (allowlisted) and redirects to
		// http://example.com — a target every other egress rule accepts.
		_, plainPort, _ := net.SplitHostPort(plain.Listener.Addr().String())
		tenantDowngrade := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://example.com:"+plainPort+r.URL.Path, http.StatusTemporaryRedirect)
		}))
		defer tenantDowngrade.Close()
		_, tlsPort, _ := net.SplitHostPort(tenantDowngrade.Listener.Addr().String())
		e := &upstream.Egress{Allow: []string{"example.com"}}
		c := e.HTTPClient()
		// example.com is the name in httptest's certificate; the test's transport dials
		// it on this machine (the dial guard is tested elsewhere: the redirect policy is
		// what this attack meets).
		tr := tenantDowngrade.Client().Transport.(*http.Transport).Clone()
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			_, port, _ := net.SplitHostPort(addr)
			return (&net.Dialer{}).DialContext(ctx, network, "127.0.0.1:"+port)
		}
		c.Transport = tr
		resp, err := c.Post("https://example.com:"+tlsPort+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"secret":"s3cr3t"}}}`))
		if err == nil {
			resp.Body.Close()
			t.Fatalf("the https → http redirect was followed: %s", resp.Status)
		}
		if !errors.Is(err, upstream.ErrRedirectDowngrade) || !errors.Is(err, upstream.ErrEgressRefused) {
			t.Fatalf("POST through a downgrading redirect = %v, want ErrRedirectDowngrade and ErrEgressRefused", err)
		}
		t.Logf("refused: %v", err)
	})

	t.Run("operator server", func(t *testing.T) {
		env := newEnv(t)
		s := server("downgrade", "read", "idempotent", "low")
		s.HTTP = &model.HTTPTransport{URL: downgrade.URL + "/mcp"}
		_, err := upstream.Connect(env.ctx, upstream.Options{Server: s, Registry: env.reg, Store: env.store,
			HTTPClient: downgrade.Client(), Logger: testLogger(t)})
		if err == nil || !strings.Contains(err.Error(), upstream.ErrRedirectDowngrade.Error()) {
			t.Fatalf("Connect to a server redirecting to http = %v, want the downgrade refused", err)
		}
		if got := env.reg.Current(); len(got) != 0 {
			t.Fatalf("tools registered from a refused server: %v", got)
		}
		t.Logf("refused: %v", err)
	})

	t.Run("https to https is followed", func(t *testing.T) {
		h := hostile.New(hostile.Config{})
		real := httptest.NewTLSServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return h.MCP() }, nil))
		defer real.Close()
		moved := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, real.URL+r.URL.Path, http.StatusTemporaryRedirect)
		}))
		defer moved.Close()
		env := newEnv(t)
		s := server("moved", "read", "idempotent", "low")
		s.HTTP = &model.HTTPTransport{URL: moved.URL + "/mcp"}
		// One client that trusts both test certificates (they share httptest's).
		u, err := upstream.Connect(env.ctx, upstream.Options{Server: s, Registry: env.reg, Store: env.store,
			HTTPClient: moved.Client(), Logger: testLogger(t)})
		if err != nil {
			t.Fatalf("Connect through an https → https redirect: %v", err)
		}
		defer u.Close()
		if len(u.ToolNames()) == 0 {
			t.Fatal("no tools through the https → https redirect")
		}
	})

	if n := cleartext.Load(); n != 0 {
		t.Fatalf("the plain http listener was reached %d times", n)
	}
}
