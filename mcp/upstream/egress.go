package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"syscall"
	"time"

	"github.com/toolgen/toolgen/model"
)

// ErrEgressRefused is wrapped by every refusal of the egress guard (MCP-4).
var ErrEgressRefused = errors.New("egress refused")

// Resolver resolves host names for the egress dialer; *net.Resolver implements it.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Egress is the network guard of tenant-configured servers (MCP-4, policy.yaml
// egress.allow). It checks twice:
//
//   - the URL ([Egress.CheckURL]): http or https, no userinfo, a host matching the
//     allowlist, and a literal IP host must be a public address;
//   - every connection ([Egress.DialContext]): the host is resolved at dial time and
//     every address it resolves to must be public ([CheckAddr]), else nothing is dialed;
//     the connection goes to the checked address itself (no second lookup, so DNS
//     rebinding between check and connect cannot redirect it), and a socket-level
//     control function re-checks the address actually connected to.
//
// Redirects are re-checked against the URL rules, and a redirect from https to http is
// refused ([Egress.HTTPClient]); proxies from the environment are never used, since a
// proxy would make the connection on our behalf.
// Operator-configured servers are not restricted.
type Egress struct {
	// Allow are the host patterns of policy.yaml egress.allow: an exact host, or "*.x"
	// for any subdomain of x (not x itself).
	Allow []string
	// Resolver resolves host names at dial time; nil means net.DefaultResolver.
	Resolver Resolver
	// DialTimeout bounds one connection attempt; zero means 10s.
	DialTimeout time.Duration
}

// NewEgress returns a guard over policy.yaml's egress.allow host patterns
// (model.Tree.EgressAllow; nil: nothing is allowed).
func NewEgress(allow []string) *Egress {
	return &Egress{Allow: slices.Clone(allow)}
}

// CheckURL checks a tenant server URL before anything is dialed.
func (e *Egress) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: url %q does not parse: %v", ErrEgressRefused, raw, err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return fmt.Errorf("%w: url %q: scheme %q is not http or https", ErrEgressRefused, raw, u.Scheme)
	}
	if u.User != nil {
		return fmt.Errorf("%w: url %q carries userinfo; credentials never go in a tenant server URL", ErrEgressRefused, u.Redacted())
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("%w: url %q has no host", ErrEgressRefused, raw)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := CheckAddr(ip); err != nil {
			return fmt.Errorf("%w: url %q: %v", ErrEgressRefused, raw, err)
		}
	}
	if !model.HostAllowed(host, e.Allow) {
		return fmt.Errorf("%w: host %q of url %q is not on the egress allowlist (policy.yaml egress.allow)", ErrEgressRefused, host, raw)
	}
	return nil
}

// DialContext resolves addr's host, refuses it unless every address it resolves to is
// public, and connects to the first checked address that answers.
func (e *Egress) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: dial %q: %v", ErrEgressRefused, addr, err)
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		r := e.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		res, err := r.LookupIPAddr(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("egress: resolve %q: %w", host, err)
		}
		for _, a := range res {
			ip, ok := netip.AddrFromSlice(a.IP)
			if !ok {
				return nil, fmt.Errorf("%w: host %q resolved to an unparsable address %v", ErrEgressRefused, host, a.IP)
			}
			// net.IP spells an IPv4 address in its 16-byte mapped form; the address
			// checked and dialed is the IPv4 address itself.
			ips = append(ips, ip.Unmap())
		}
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("egress: host %q resolved to no address", host)
	}
	// Every address must be public: a name that also resolves to a private address is
	// refused outright rather than trusted to pick the right one.
	for _, ip := range ips {
		if err := CheckAddr(ip); err != nil {
			return nil, fmt.Errorf("%w: host %q resolves to %s: %v", ErrEgressRefused, host, ip, err)
		}
	}
	timeout := e.DialTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	d := &net.Dialer{Timeout: timeout, Control: controlCheck}
	var errs []error
	for _, ip := range ips {
		c, err := d.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("egress: dial %s: %w", addr, errors.Join(errs...))
}

// controlCheck runs on the socket about to connect: the last word on the address.
func controlCheck(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: connect to %q: %v", ErrEgressRefused, address, err)
	}
	if err := CheckAddr(ap.Addr()); err != nil {
		return fmt.Errorf("%w: connect to %s: %v", ErrEgressRefused, address, err)
	}
	return nil
}

// HTTPClient returns a client whose every connection goes through [Egress.DialContext]
// and whose redirects are re-checked by [Egress.CheckURL] and refused when they would
// leave https ([ErrRedirectDowngrade]). It never uses a proxy.
func (e *Egress) HTTPClient() *http.Client {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           e.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return fmt.Errorf("%w: more than 5 redirects", ErrEgressRefused)
			}
			if err := checkDowngrade(req, via); err != nil {
				return fmt.Errorf("%w: %w", ErrEgressRefused, err)
			}
			if err := e.CheckURL(req.URL.String()); err != nil {
				return fmt.Errorf("redirect: %w", err)
			}
			return nil
		},
	}
}

// ErrRedirectDowngrade is wrapped by the refusal of a redirect from https to http: the
// request — a tool call's arguments, the client's headers — would be sent again in
// cleartext, to anyone on the path (issue 14, finding 16).
var ErrRedirectDowngrade = errors.New("redirect from https to plain http refused")

// checkDowngrade refuses a redirect to a non-https URL once any request of the chain
// was https. Every HTTP client of this package checks it, operator servers' too.
func checkDowngrade(req *http.Request, via []*http.Request) error {
	if req.URL.Scheme == "https" {
		return nil
	}
	for _, v := range via {
		if v.URL.Scheme == "https" {
			return fmt.Errorf("%w: %s to %s", ErrRedirectDowngrade, v.URL.Redacted(), req.URL.Redacted())
		}
	}
	return nil
}

var (
	cgnat      = netip.MustParsePrefix("100.64.0.0/10") // RFC 6598 shared address space
	thisNet    = netip.MustParsePrefix("0.0.0.0/8")     // RFC 791 "this network"
	ietfV4     = netip.MustParsePrefix("192.0.0.0/24")  // RFC 6890 IETF protocol assignments
	benchmark  = netip.MustParsePrefix("198.18.0.0/15") // RFC 2544 benchmarking
	reservedV4 = netip.MustParsePrefix("240.0.0.0/4")   // RFC 1112 reserved, and broadcast
	testNet1   = netip.MustParsePrefix("192.0.2.0/24")  // RFC 5737 documentation
	testNet2   = netip.MustParsePrefix("198.51.100.0/24")
	testNet3   = netip.MustParsePrefix("203.0.113.0/24")
	docV6      = netip.MustParsePrefix("2001:db8::/32")  // RFC 3849 documentation
	nat64      = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052: embeds an IPv4 address
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215 local-use NAT64
	sixToFour  = netip.MustParsePrefix("2002::/16")      // RFC 3056: embeds an IPv4 address
	teredo     = netip.MustParsePrefix("2001::/32")      // RFC 4380: embeds an (obfuscated) IPv4 address
	discardV6  = netip.MustParsePrefix("100::/64")       // RFC 6666 discard-only
	siteLocal  = netip.MustParsePrefix("fec0::/10")      // RFC 3879 deprecated site-local
)

// CheckAddr returns why a tenant server may not connect to ip, or nil when ip is a public
// unicast address. Refused: loopback, private (RFC 1918, IPv6 ULA fc00::/7), link-local
// (169.254.0.0/16 with the cloud metadata address 169.254.169.254, fe80::/10),
// unspecified, multicast, CGNAT 100.64.0.0/10, 0.0.0.0/8, 192.0.0.0/24, 198.18.0.0/15,
// 240.0.0.0/4 (with broadcast), the documentation ranges, IPv6 site-local and discard prefixes, and every IPv6 form
// that carries an IPv4 address (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d,
// NAT64 64:ff9b::/96 and 64:ff9b:1::/48, 6to4 2002::/16, Teredo 2001::/32), which are
// refused whatever the IPv4 address inside, since which host they reach depends on the
// network's translators. An IPv6 zone is refused too.
func CheckAddr(ip netip.Addr) error {
	if !ip.IsValid() {
		return errors.New("not a valid IP address")
	}
	if ip.Zone() != "" {
		return fmt.Errorf("%s has an IPv6 zone: a scoped address is never public", ip)
	}
	if ip.Is4In6() {
		if err := CheckAddr(ip.Unmap()); err != nil {
			return fmt.Errorf("IPv4-mapped %s: %w", ip, err)
		}
		return fmt.Errorf("%s is an IPv4-mapped IPv6 address; connect to the IPv4 address itself", ip)
	}
	switch {
	case ip.IsLoopback():
		return fmt.Errorf("%s is a loopback address", ip)
	case ip.IsUnspecified():
		return fmt.Errorf("%s is the unspecified address", ip)
	case ip.Is4() && ip == netip.AddrFrom4([4]byte{169, 254, 169, 254}):
		return fmt.Errorf("%s is the cloud metadata address (link-local)", ip)
	case ip.IsLinkLocalUnicast():
		return fmt.Errorf("%s is a link-local address", ip)
	case ip.IsMulticast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast():
		return fmt.Errorf("%s is a multicast address", ip)
	case ip.IsPrivate():
		return fmt.Errorf("%s is a private address (RFC 1918 or IPv6 ULA)", ip)
	}
	if ip.Is4() {
		for _, p := range []struct {
			prefix netip.Prefix
			what   string
		}{
			{cgnat, "carrier-grade NAT (100.64.0.0/10)"},
			{thisNet, `"this network" (0.0.0.0/8)`},
			{ietfV4, "IETF protocol assignments (192.0.0.0/24)"},
			{benchmark, "benchmarking (198.18.0.0/15)"},
			{reservedV4, "reserved or broadcast (240.0.0.0/4)"},
			{testNet1, "documentation (192.0.2.0/24)"},
			{testNet2, "documentation (198.51.100.0/24)"},
			{testNet3, "documentation (203.0.113.0/24)"},
		} {
			if p.prefix.Contains(ip) {
				return fmt.Errorf("%s is a %s address", ip, p.what)
			}
		}
		return nil
	}
	b := ip.As16()
	if b == [16]byte{} || (b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7]|b[8]|b[9]|b[10]|b[11]) == 0 {
		return fmt.Errorf("%s is an IPv4-compatible IPv6 address", ip)
	}
	for _, p := range []struct {
		prefix netip.Prefix
		what   string
	}{
		{nat64, "NAT64 (64:ff9b::/96) address embedding an IPv4 address"},
		{nat64Local, "local-use NAT64 (64:ff9b:1::/48) address"},
		{sixToFour, "6to4 (2002::/16) address embedding an IPv4 address"},
		{teredo, "Teredo (2001::/32) address embedding an IPv4 address"},
		{discardV6, "discard-only (100::/64) address"},
		{siteLocal, "deprecated site-local (fec0::/10) address"},
		{docV6, "documentation (2001:db8::/32) address"},
	} {
		if p.prefix.Contains(ip) {
			return fmt.Errorf("%s is a %s", ip, p.what)
		}
	}
	return nil
}
