package upstream_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/mcp/upstream"
	"github.com/toolgen/toolgen/model"
	"github.com/toolgen/toolgen/runtime"
)

func TestCheckAddr(t *testing.T) {
	refused := []string{
		"127.0.0.1", "127.255.0.9", "::1", // loopback
		"10.0.0.1", "172.16.5.4", "192.168.1.1", "fd00::1", "fc00::1", // private, ULA
		"169.254.169.254", "169.254.1.1", "fe80::1", // link-local, metadata
		"0.0.0.0", "::", "0.1.2.3", // unspecified, this network
		"224.0.0.1", "239.255.255.250", "ff02::1", "ff05::2", // multicast
		"100.64.0.1", "100.127.255.254", // CGNAT
		"192.0.0.1", "198.18.0.1", "240.0.0.1", "255.255.255.255",
		"192.0.2.1", "198.51.100.7", "203.0.113.9", "2001:db8::1", // documentation
		"::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1", "::ffff:8.8.8.8", // IPv4-mapped
		"::127.0.0.1",                                                             // IPv4-compatible
		"64:ff9b::7f00:1", "64:ff9b:1::1", "2002:7f00:1::", "2001:0:4136:e378::1", // NAT64, 6to4, Teredo
		"fec0::1", "100::1", "fe80::1%eth0",
	}
	for _, s := range refused {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if err := upstream.CheckAddr(ip); err == nil {
			t.Errorf("CheckAddr(%s) = nil, want a refusal", s)
		}
	}
	for _, s := range []string{"8.8.8.8", "1.1.1.1", "93.184.216.34", "100.128.0.1", "2606:4700:4700::1111", "2a00:1450:4001::200e"} {
		if err := upstream.CheckAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("CheckAddr(%s) = %v, want nil", s, err)
		}
	}
	if err := upstream.CheckAddr(netip.Addr{}); err == nil {
		t.Error("the zero Addr was accepted")
	}
	// Messages say what the address is.
	for s, want := range map[string]string{
		"127.0.0.1": "loopback", "169.254.169.254": "metadata", "10.0.0.1": "private",
		"::ffff:127.0.0.1": "loopback", "100.64.0.1": "carrier-grade NAT",
	} {
		if err := upstream.CheckAddr(netip.MustParseAddr(s)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckAddr(%s) = %v, want a message naming %q", s, err, want)
		}
	}
}

func TestEgressCheckURL(t *testing.T) {
	e := &upstream.Egress{Allow: []string{"mcp.example.com", "*.tools.example.org"}}
	for _, ok := range []string{"https://mcp.example.com/mcp", "https://a.tools.example.org:8443/x"} {
		if err := e.CheckURL(ok); err != nil {
			t.Errorf("CheckURL(%s) = %v", ok, err)
		}
	}
	for _, bad := range []string{
		"https://evil.example.net/mcp",                 // not allowlisted
		"https://tools.example.org/mcp",                // "*.x" does not match x itself
		"https://user:pw@mcp.example.com/mcp",          // userinfo
		"ftp://mcp.example.com/",                       // scheme
		"https://127.0.0.1/mcp",                        // literal loopback
		"https://[::ffff:169.254.169.254]/latest/meta", // literal mapped metadata
		"https:///mcp",                                 // no host
	} {
		if err := e.CheckURL(bad); err == nil || !errors.Is(err, upstream.ErrEgressRefused) {
			t.Errorf("CheckURL(%s) = %v, want ErrEgressRefused", bad, err)
		}
	}
}

// tenantServer is a tenant classification pointing at url.
func tenantServer(url string) *model.Server {
	s := server("tickets", "write", "non_idempotent", "low", "tickets.write")
	s.ConfiguredBy = "tenant"
	s.HTTP = &model.HTTPTransport{URL: url}
	return s
}

// TestTenantRefusals: every forbidden tenant configuration is refused by Connect with an
// error that says why, before anything is dialed (MCP-4).
func TestTenantRefusals(t *testing.T) {
	e := newEnv(t)
	// The allowlist names the forbidden addresses too: the address check does not
	// depend on the operator's list being right.
	egress := &upstream.Egress{Allow: []string{"127.0.0.1", "169.254.169.254", "10.0.0.1", "::ffff:127.0.0.1", "mcp.example.com"}}
	stdio := server("tickets", "write", "non_idempotent", "low")
	stdio.ConfiguredBy = "tenant"
	stdio.Stdio = &model.StdioTransport{Command: "/bin/sh", Args: []string{"-c", "echo pwned"}}
	for _, c := range []struct {
		name string
		srv  *model.Server
		want string
	}{
		{"stdio", stdio, "cannot use stdio"},
		{"loopback", tenantServer("https://127.0.0.1/mcp"), "loopback"},
		{"metadata", tenantServer("https://169.254.169.254/latest/meta-data"), "metadata"},
		{"private", tenantServer("https://10.0.0.1/mcp"), "private"},
		{"mapped loopback", tenantServer("https://[::ffff:127.0.0.1]/mcp"), "IPv4-mapped"},
		{"not allowlisted", tenantServer("https://evil.example.net/mcp"), "not on the egress allowlist"},
		{"plain http", tenantServer("http://mcp.example.com/mcp"), "must use https"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := upstream.Connect(e.ctx, upstream.Options{Server: c.srv, Registry: e.reg, Store: e.store, Egress: egress})
			if err == nil {
				t.Fatal("Connect succeeded")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
			t.Logf("refused: %v", err)
		})
	}
	t.Run("rebinding", func(t *testing.T) {
		// The URL passes (allowlisted name); the name resolves to loopback at dial time.
		rebind := &upstream.Egress{Allow: []string{"mcp.example.com"}, Resolver: fakeResolver{"127.0.0.1"}}
		_, err := upstream.Connect(e.ctx, upstream.Options{Server: tenantServer("https://mcp.example.com/mcp"), Registry: e.reg, Store: e.store, Egress: rebind, Tenant: "acme"})
		if !errors.Is(err, upstream.ErrEgressRefused) || !strings.Contains(err.Error(), "loopback") {
			t.Fatalf("Connect to a name resolving to loopback = %v", err)
		}
		t.Logf("refused: %v", err)
	})
	t.Run("no egress guard", func(t *testing.T) {
		_, err := upstream.Connect(e.ctx, upstream.Options{Server: tenantServer("https://mcp.example.com/mcp"), Registry: e.reg, Store: e.store})
		if !errors.Is(err, upstream.ErrEgressRefused) {
			t.Fatalf("Connect without an egress guard = %v", err)
		}
	})
	t.Run("own http client", func(t *testing.T) {
		_, err := upstream.Connect(e.ctx, upstream.Options{Server: tenantServer("https://mcp.example.com/mcp"), Registry: e.reg, Store: e.store,
			Egress: egress, HTTPClient: http.DefaultClient})
		if err == nil || !strings.Contains(err.Error(), "HTTPClient") {
			t.Fatalf("Connect with a caller's HTTP client = %v", err)
		}
	})
	if got, _ := e.reg.Tools(e.ctx, runtime.SessionKey{Tenant: "acme", ID: "s"}); len(got) != 0 {
		t.Errorf("a refused server registered tools: %v", got)
	}
}

// fakeResolver resolves every name to the given addresses (DNS rebinding).
type fakeResolver []string

func (f fakeResolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	var out []net.IPAddr
	for _, a := range f {
		out = append(out, net.IPAddr{IP: net.ParseIP(a)})
	}
	return out, nil
}

// TestEgressDialRefusesRebinding: an allowlisted name that resolves to a forbidden
// address at dial time is refused, whatever the URL check said, and nothing is
// connected (a real listener on 127.0.0.1 sees no request).
func TestEgressDialRefusesRebinding(t *testing.T) {
	hits := 0
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	defer ts.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(ts.URL, "http://"))
	for _, addrs := range [][]string{{"127.0.0.1"}, {"169.254.169.254"}, {"8.8.8.8", "10.0.0.1"}, {"::ffff:127.0.0.1"}} {
		e := &upstream.Egress{Allow: []string{"mcp.example.com"}, Resolver: fakeResolver(addrs)}
		url := "http://mcp.example.com:" + port + "/mcp"
		if err := e.CheckURL(url); err != nil {
			t.Fatalf("CheckURL: %v", err)
		}
		_, err := e.HTTPClient().Get(url)
		if !errors.Is(err, upstream.ErrEgressRefused) {
			t.Fatalf("resolving to %v: Get = %v, want ErrEgressRefused", addrs, err)
		}
		t.Logf("refused: %v", err)
	}
	// A public address passes the guard: the dial is attempted (and stopped here by a
	// canceled context, so the test never leaves the machine).
	pub := &upstream.Egress{Allow: []string{"mcp.example.com"}, Resolver: fakeResolver{"8.8.8.8"}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := pub.DialContext(ctx, "tcp", "mcp.example.com:443"); err == nil || errors.Is(err, upstream.ErrEgressRefused) {
		t.Fatalf("dial to a public address = %v, want a dial error that is not a refusal", err)
	}
	// A redirect to a forbidden address is refused too.
	e := &upstream.Egress{Allow: []string{"mcp.example.com"}}
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data", http.StatusFound)
	}))
	defer redirect.Close()
	req, _ := http.NewRequest("GET", redirect.URL, nil)
	c := e.HTTPClient()
	c.Transport = http.DefaultTransport // reach the test server; CheckRedirect is what is tested
	if _, err := c.Do(req); !errors.Is(err, upstream.ErrEgressRefused) {
		t.Fatalf("redirect to the metadata address = %v, want ErrEgressRefused", err)
	}
	if hits != 0 {
		t.Fatalf("the loopback listener was reached %d times", hits)
	}
}
