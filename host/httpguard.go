package host

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/toolgen/toolgen/internal/identity"
)

// MetricsScope is the scope a principal of principals.yaml needs to read MetricsPath.
// The exposition covers the whole process — every tenant's tools and outcomes — so grant
// it to the operator's monitoring, not to a tenant's agents.
const MetricsScope = "metrics.read"

// Defaults of HTTPConfig.
const (
	DefaultMaxConnections             = 1024
	DefaultMaxConnectionsPerPrincipal = 64
	DefaultReadHeaderTimeout          = 10 * time.Second
	DefaultBodyTimeout                = 60 * time.Second
	DefaultWriteTimeout               = 60 * time.Second
	DefaultIdleTimeout                = 120 * time.Second
)

// HTTPConfig holds the line of the HTTP server against the network (SEC-2, SEC-3):
// which Host names it answers to, how many connections it holds, and how long a client
// may take. Every field has a default; a negative number or duration switches that
// limit off (for a server behind a proxy that enforces its own).
type HTTPConfig struct {
	// AllowedHosts are the host names (optionally host:port; "*.example.com" for any
	// subdomain of example.com, not itself) the handler answers to besides loopback ones
	// and IP literals, with the host of principals.yaml's resource added: the names
	// clients reach this server by. A request whose Host (or
	// Origin, when it has one) names anything else is refused 403 before any endpoint
	// sees it: that is what a DNS-rebinding page sends. On a loopback listener only
	// loopback names and these are accepted (not other IP literals).
	AllowedHosts []string
	// MaxConnections caps the connections Serve holds open at once (default
	// DefaultMaxConnections); a connection over the cap is answered 503 and closed at
	// once, so the process never runs out of file descriptors. Connections handed over
	// to the device channel leave the count (one per device).
	MaxConnections int
	// MaxConnectionsPerPrincipal caps the requests one verified principal (or, without
	// principals.yaml, the local principal) has in flight at once, on every endpoint
	// behind authentication (default DefaultMaxConnectionsPerPrincipal). Over the cap a
	// request is answered 429 and its connection closed, so one principal's slow
	// requests cannot take the connections others need. Keep it well below
	// MaxConnections.
	MaxConnectionsPerPrincipal int
	// ReadHeaderTimeout bounds reading a request's header (Serve; default
	// DefaultReadHeaderTimeout).
	ReadHeaderTimeout time.Duration
	// BodyTimeout bounds reading a request's body, from the end of its header (default
	// DefaultBodyTimeout); a body still arriving then fails and its connection closes.
	BodyTimeout time.Duration
	// WriteTimeout bounds each write of a response to the client (default
	// DefaultWriteTimeout): a stream (the event stream, an MCP SSE response, a call
	// held for approval) lives as long as its client keeps reading, but a client that
	// stops reading is cut.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long Serve keeps an idle keep-alive connection (default
	// DefaultIdleTimeout).
	IdleTimeout time.Duration
}

// limit is n, or def when n is zero; a negative n is "no limit" (0).
func limit[T int | time.Duration](n, def T) T {
	switch {
	case n == 0:
		return def
	case n < 0:
		return 0
	}
	return n
}

// guard puts the checks every endpoint shares in front of next: Host and Origin, then
// the body and write deadlines.
func (h *Host) guard(next http.Handler) (http.Handler, error) {
	check, err := h.hostCheck(h.deadlines(next))
	if err != nil {
		return nil, err
	}
	return check, nil
}

// CheckAllowedHost returns why a value is not fit for HTTPConfig.AllowedHosts: it is a
// host name or IP address, optionally with a port, or "*." and a domain (any port) —
// not a URL (no scheme, path or user).
func CheckAllowedHost(v string) error {
	host := v
	if _, err := netip.ParseAddr(v); err == nil {
		return nil // an IPv6 address without brackets or port
	}
	if strings.ContainsAny(v, "/@ \t?#") {
		return fmt.Errorf("allowed host %q: want a host name or host:port, not a URL", v)
	}
	if strings.Contains(v, ":") && !strings.HasPrefix(v, "[") || strings.Contains(v, "]:") {
		h, port, err := net.SplitHostPort(v)
		if err != nil {
			return fmt.Errorf("allowed host %q: %w", v, err)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return fmt.Errorf("allowed host %q: port %q is not a port number", v, port)
		}
		if strings.HasPrefix(h, "*.") {
			return fmt.Errorf("allowed host %q: a \"*.\" entry matches every port; drop :%s", v, port)
		}
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	name := strings.TrimPrefix(host, "*.")
	if name == "" || !hostNamePattern.MatchString(strings.ToLower(name)) {
		return fmt.Errorf("allowed host %q: %q is not a host name (letters, digits, '-' and '.'; \"*.\" only in front)", v, host)
	}
	return nil
}

var hostNamePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$`)

// hostCheck refuses a request whose Host or Origin names a host this server does not
// answer to (SEC-3, issue 14 finding 11). A DNS-rebinding page reaches a server on
// this machine or a private network under the attacker's own name: the browser sends
// that name as Host, and an IP literal or a loopback name is never what it sends. The
// go-sdk's own check on MCPPath stays; this one covers every endpoint (the event
// stream, the metrics, the device channel, the metadata).
func (h *Host) hostCheck(next http.Handler) (http.Handler, error) {
	allowed := map[string]bool{}
	for _, a := range h.cfg.HTTP.AllowedHosts {
		if err := CheckAllowedHost(a); err != nil {
			return nil, fmt.Errorf("Config.HTTP.AllowedHosts: %w", err)
		}
		allowed[strings.ToLower(a)] = true
	}
	if p := h.tree.Principals; p != nil && p.Resource != "" {
		if u, err := url.Parse(p.Resource); err == nil && u.Host != "" {
			allowed[strings.ToLower(u.Host)] = true // with its port, if it names one
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		onLoopback := false
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil {
			onLoopback = loopbackAddr(la.String())
		}
		if !hostAllowed(r.Host, allowed, onLoopback) {
			http.Error(w, fmt.Sprintf("toolgen: Host %q is not a name this server answers to; add it with --allowed-host (Config.HTTP.AllowedHosts)", bound(r.Host)), http.StatusForbidden)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" {
			u, err := url.Parse(origin)
			if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || !hostAllowed(u.Host, allowed, onLoopback) {
				http.Error(w, fmt.Sprintf("toolgen: Origin %q is not a name this server answers to; add it with --allowed-host (Config.HTTP.AllowedHosts)", bound(origin)), http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	}), nil
}

// hostAllowed reports whether a Host (host or host:port) is one the server answers
// to: on the allowlist (as host:port, as the host alone, or under a "*." entry), a
// loopback name or address, or — when the request did not arrive on a loopback
// address — any IP literal.
func hostAllowed(hostport string, allowed map[string]bool, onLoopback bool) bool {
	hostport = strings.ToLower(hostport)
	if hostport == "" {
		return false
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if allowed[hostport] || allowed[host] {
		return true
	}
	for parent := host; ; {
		i := strings.IndexByte(parent, '.')
		if i < 0 {
			break
		}
		parent = parent[i+1:]
		if allowed["*."+parent] {
			return true
		}
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	return ip.Unmap().IsLoopback() || !onLoopback
}

// bound cuts a header value for an error message.
func bound(s string) string {
	const max = 128
	if len(s) > max {
		return strings.ToValidUTF8(s[:max], "") + "…"
	}
	return s
}

// deadlines bounds, per request, how long its body may take to arrive and how long each
// write of its response may wait for the client (SEC-2, issue 14 finding 8). They are
// per request, not http.Server's ReadTimeout and WriteTimeout, because those would end
// every event stream and every long MCP response after a fixed time; these let a
// stream live while its client reads. The read deadline is lifted once the body has
// been read (the server's background read of an idle stream must not time out).
func (h *Host) deadlines(next http.Handler) http.Handler {
	body := limit(h.cfg.HTTP.BodyTimeout, DefaultBodyTimeout)
	write := limit(h.cfg.HTTP.WriteTimeout, DefaultWriteTimeout)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if body > 0 && r.Body != nil && r.Body != http.NoBody {
			if err := rc.SetReadDeadline(time.Now().Add(body)); err == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		if write <= 0 {
			next.ServeHTTP(w, r)
			return
		}
		dw := &deadlineWriter{ResponseWriter: w, rc: rc, d: write}
		next.ServeHTTP(dw, r)
		if !dw.hijacked.Load() {
			// What the handler left buffered is written by the server after it returns.
			_ = rc.SetWriteDeadline(time.Now().Add(write))
		}
	})
}

// deadlineBody lifts the read deadline once the body has been read to its end.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// deadlineWriter renews the write deadline before each write and flush. A hijacked
// connection (the device channel) is the hijacker's: its deadlines are never touched.
type deadlineWriter struct {
	http.ResponseWriter
	rc       *http.ResponseController
	d        time.Duration
	hijacked atomic.Bool
}

func (w *deadlineWriter) renew() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.renew()
	return w.ResponseWriter.Write(p)
}

func (w *deadlineWriter) FlushError() error {
	w.renew()
	return w.rc.Flush()
}

func (w *deadlineWriter) Flush() { _ = w.FlushError() }

func (w *deadlineWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked.Store(true)
	return w.rc.Hijack()
}

// Unwrap lets http.ResponseController reach the server's writer for everything else.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// principalLimiter counts the requests each principal has in flight (SEC-2, issue 14
// finding 8). The map holds only principals with a request in flight, so it is bounded
// by the connections the server holds.
type principalLimiter struct {
	max   int
	local string // the key without principals.yaml: every caller is the local principal
	mu    sync.Mutex
	n     map[string]int
}

func (h *Host) newPrincipalLimiter() *principalLimiter {
	return &principalLimiter{max: limit(h.cfg.HTTP.MaxConnectionsPerPrincipal, DefaultMaxConnectionsPerPrincipal),
		local: h.localTenant() + "/" + h.principalID(), n: map[string]int{}}
}

// wrap counts next's requests per principal; it goes behind authentication, where the
// request carries its verified principal.
func (l *principalLimiter) wrap(next http.Handler) http.Handler {
	if l.max <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := l.local
		if p, ok := identity.PrincipalFrom(auth.TokenInfoFromContext(r.Context())); ok {
			key = p.Tenant + "/" + p.ID
		}
		if !l.acquire(key) {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Connection", "close") // the rest of its body is not read
			http.Error(w, fmt.Sprintf("toolgen: this principal has %d requests in flight, the most one principal may hold (--max-conns-per-principal); retry when one ends", l.max), http.StatusTooManyRequests)
			return
		}
		defer l.release(key)
		next.ServeHTTP(w, r)
	})
}

func (l *principalLimiter) acquire(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[key] >= l.max {
		return false
	}
	l.n[key]++
	return true
}

func (l *principalLimiter) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[key]--; l.n[key] <= 0 {
		delete(l.n, key)
	}
}

// connLimit holds the server to at most max connections (SEC-2, issue 14 finding 8),
// counted through http.Server.ConnState rather than by wrapping the listener, so a TLS
// listener's connections stay *tls.Conn to the server (r.TLS, ALPN). A connection over
// the cap is answered 503 and closed as it is accepted — before the server reads from
// it — so a client learns at once rather than waiting in the kernel's queue, and the
// process never reaches its file-descriptor limit. A hijacked connection (the device
// channel) leaves the count: it is the device gateway's, one per device.
type connLimit struct {
	max     int64
	open    atomic.Int64
	log     *slog.Logger
	refused atomic.Int64
	lastLog atomic.Int64 // unix seconds of the last refusal log line
}

// track is the server's ConnState hook; nil when there is no cap.
func newConnLimit(max int, log *slog.Logger) func(net.Conn, http.ConnState) {
	if max <= 0 {
		return nil
	}
	l := &connLimit{max: int64(max), log: log}
	return l.track
}

func (l *connLimit) track(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		if l.open.Add(1) > l.max {
			l.refuse(c)
		}
	case http.StateHijacked, http.StateClosed:
		l.open.Add(-1)
	}
}

const overCapacityBody = "toolgen: the server holds the most connections it may (--max-conns); retry.\n"

var overCapacity = fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\n"+
	"Content-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n\r\n%s", len(overCapacityBody), overCapacityBody)

// refuse answers and closes c. It runs in the server's accept loop, before anything
// reads c: a few bytes into a fresh socket's empty buffer do not block (the deadline
// guards it); a TLS connection would need a handshake first, so it is only closed.
func (l *connLimit) refuse(c net.Conn) {
	n := l.refused.Add(1)
	if now := time.Now().Unix(); l.lastLog.Load() < now-10 {
		l.lastLog.Store(now)
		l.log.Warn("connection refused: the server holds the most connections it may (--max-conns)", "max", l.max, "refused_total", n)
	}
	if _, isTLS := c.(*tls.Conn); !isTLS {
		_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = io.WriteString(c, overCapacity)
	}
	c.Close() // the server's read fails, and ConnState reports it closed
}
