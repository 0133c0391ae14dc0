package host

import "testing"

// The Host rule of every endpoint (SEC-3): loopback names and addresses always; the
// allowlist by host (any port) or host:port (that port); other IP literals only off a
// loopback listener; any other name never — what a DNS-rebinding page sends.
func TestHostAllowed(t *testing.T) {
	allowed := map[string]bool{"gw.acme.example": true, "gw2.acme.example:8443": true, "*.tenants.example": true}
	for _, c := range []struct {
		host             string
		loopback, remote bool // accepted on a loopback listener, on another one
	}{
		{"127.0.0.1:8080", true, true},
		{"127.1.2.3", true, true},
		{"localhost:8080", true, true},
		{"LocalHost", true, true},
		{"[::1]:8080", true, true},
		{"[::1]", true, true},
		{"[::ffff:127.0.0.1]:80", true, true},
		{"gw.acme.example", true, true},
		{"GW.acme.example:1", true, true},
		{"gw2.acme.example:8443", true, true},
		{"gw2.acme.example:9999", false, false},
		{"gw2.acme.example", false, false},
		{"acme.tenants.example", true, true},
		{"a.b.tenants.example:443", true, true},
		{"tenants.example", false, false},
		{"xtenants.example", false, false},
		{"192.0.2.7:8080", false, true},
		{"[2001:db8::1]:443", false, true},
		{"attacker.example", false, false},
		{"attacker.example:8080", false, false},
		{"localhost.attacker.example", false, false},
		{"127.0.0.1.nip.io", false, false},
		{"localhost.", false, false},
		{"", false, false},
		{":8080", false, false},
		{"[", false, false},
	} {
		if got := hostAllowed(c.host, allowed, true); got != c.loopback {
			t.Errorf("Host %q on a loopback listener: allowed = %v, want %v", c.host, got, c.loopback)
		}
		if got := hostAllowed(c.host, allowed, false); got != c.remote {
			t.Errorf("Host %q on another listener: allowed = %v, want %v", c.host, got, c.remote)
		}
	}
}

// An allowed host is a host name, host:port or *.domain; a URL or anything else is
// refused with what to write instead, so a typo never silently refuses every client.
func TestCheckAllowedHost(t *testing.T) {
	for _, ok := range []string{"tools.acme.example", "tools.acme.example:8443", "*.tenants.example", "localhost", "10.0.0.5",
		"10.0.0.5:80", "[2001:db8::1]:443", "2001:db8::1", "TOOLS.Acme.example"} {
		if err := CheckAllowedHost(ok); err != nil {
			t.Errorf("CheckAllowedHost(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "https://tools.acme.example", "tools.acme.example/mcp", "user@tools", "tools:0", "tools:http",
		"tools:99999", "*.tenants.example:443", "*", "*.", "a.*.example", "-tools.example", "tools..example", "tools example", "tools_1.example"} {
		if err := CheckAllowedHost(bad); err == nil {
			t.Errorf("CheckAllowedHost(%q) accepted it", bad)
		}
	}
}
