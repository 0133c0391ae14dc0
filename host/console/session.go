package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/toolgen/toolgen/internal/lru"
	"github.com/toolgen/toolgen/runtime"
)

// Cookie names. A cookie set over https takes the __Host- prefix: the browser then
// accepts it only from this host, Secure, for the whole path — a sibling domain cannot
// plant one.
const (
	sessionCookie = "toolgen-console"
	signinCookie  = "toolgen-console-signin" // the sign-in form's CSRF token, before a session exists
	loginCookie   = "toolgen-console-login"  // binds an OIDC sign-in's state to this browser
)

func cookieName(base string, secure bool) string {
	if secure {
		return "__Host-" + base
	}
	return base
}

// session is one signed-in visitor. It lives in this process's memory only (see
// sessions): a restart, or another process behind the same name, knows nothing of it.
type session struct {
	key       string // the hash of the cookie's value: the map key
	principal runtime.Principal
	via       string // how the visitor signed in: token, an issuer's name, or local
	host      string // the Host the session was made on: it works there only
	csrf      string
	created   time.Time
	expires   time.Time // created + lifetime, or the ID token's expiry, whichever is first

	mu       sync.Mutex
	lastSeen time.Time
}

func (s *session) csrfOK(v string) bool {
	return v != "" && subtle.ConstantTimeCompare([]byte(v), []byte(s.csrf)) == 1
}

// sessions holds the console's sessions in memory, at most max, least recently used
// out first. Why memory and not the store: a session is cheap to make again (sign in),
// the store offers no table for people's sessions, and a session that lives nowhere but
// in the process that made it cannot be replayed against another process or outlive a
// restart — which also ends every session when principals.yaml changes (it is read at
// start). Behind several replicas the console therefore needs sticky routing.
type sessions struct {
	cache    *lru.Cache[string, *session]
	idle     time.Duration
	lifetime time.Duration
}

func newSessions(max int, idle, lifetime time.Duration) *sessions {
	if max <= 0 {
		max = DefaultMaxSessions
	}
	if idle <= 0 {
		idle = DefaultSessionIdle
	}
	if lifetime <= 0 {
		lifetime = DefaultSessionLifetime
	}
	return &sessions{cache: lru.New[string, *session](max), idle: idle, lifetime: lifetime}
}

func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func hashKey(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}

// create starts a session for p made on r's Host and sets its cookie; expires, when
// not zero, ends it earlier than the lifetime (an ID token's expiry).
func (ss *sessions) create(w http.ResponseWriter, r *http.Request, p runtime.Principal, via string, expires time.Time) *session {
	now := time.Now()
	value := randomToken()
	s := &session{key: hashKey(value), principal: p, via: via, host: strings.ToLower(r.Host), csrf: randomToken(),
		created: now, lastSeen: now, expires: now.Add(ss.lifetime)}
	if !expires.IsZero() && expires.Before(s.expires) {
		s.expires = expires
	}
	ss.cache.Add(s.key, s)
	sec := secure(r)
	http.SetCookie(w, &http.Cookie{Name: cookieName(sessionCookie, sec), Value: value, Path: "/", HttpOnly: true,
		Secure: sec, SameSite: http.SameSiteStrictMode, Expires: s.expires})
	return s
}

// fromRequest returns the live session r's cookie names, or nil: none, unknown, ended
// (idle, past its lifetime), or made on another Host.
func (ss *sessions) fromRequest(r *http.Request) *session {
	ck, err := r.Cookie(cookieName(sessionCookie, secure(r)))
	if err != nil || len(ck.Value) > 128 {
		return nil
	}
	s, ok := ss.cache.Get(hashKey(ck.Value))
	if !ok {
		return nil
	}
	now := time.Now()
	if !strings.EqualFold(s.host, r.Host) {
		// A cookie is sent to whatever a name resolves to; a session works only on
		// the name it was made on.
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.After(s.expires) || now.Sub(s.lastSeen) > ss.idle {
		ss.cache.Remove(s.key)
		return nil
	}
	s.lastSeen = now
	return s
}

// end ends r's session and clears its cookie.
func (ss *sessions) end(w http.ResponseWriter, r *http.Request, s *session) {
	ss.cache.Remove(s.key)
	sec := secure(r)
	http.SetCookie(w, &http.Cookie{Name: cookieName(sessionCookie, sec), Value: "", Path: "/", HttpOnly: true,
		Secure: sec, SameSite: http.SameSiteStrictMode, MaxAge: -1})
}

// current is the visitor's session; without principals.yaml a visitor without one is
// given one, as the host's operator (the handler serves loopback only then).
func (c *Console) current(w http.ResponseWriter, r *http.Request) *session {
	if s := c.sessions.fromRequest(r); s != nil {
		return s
	}
	if c.o.Auth.Local == nil || r.Method != http.MethodGet {
		return nil
	}
	p, err := c.o.Auth.Local()
	if err != nil {
		c.o.Logger.Error("console: the local operator principal", "err", err)
		return nil
	}
	return c.sessions.create(w, r, p, "local", time.Time{})
}

// onLoopback reports whether r arrived on a loopback address of this machine.
func onLoopback(r *http.Request) bool {
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || la == nil {
		return false
	}
	host, _, err := net.SplitHostPort(la.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// secure reports whether the visitor reached the console over https — directly, or
// through a proxy (any address but loopback is taken to be one: a console served on a
// network is put behind TLS) — so its cookies must be Secure.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") || !onLoopback(r)
}

func scheme(r *http.Request) string {
	if secure(r) {
		return "https"
	}
	return "http"
}

func queryEscape(s string) string { return url.QueryEscape(s) }

// localPath returns next when it is a path of the console (never another site: an
// open redirect would let a link sign a person in and send them anywhere), else "".
func localPath(next string) string {
	if !strings.HasPrefix(next, Path+"/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n\t") {
		return ""
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" {
		return ""
	}
	return next
}

// pendingLogin is an OIDC sign-in between the redirect to the issuer and its answer.
type pendingLogin struct {
	issuer   string
	verifier string // the PKCE code verifier
	nonce    string
	redirect string // the redirect_uri sent
	next     string
	created  time.Time
}

// logins holds the sign-ins under way, by state: at most maxPendingLogins, each for
// loginTTL, used once. Anyone can start a sign-in, so this is bounded (SEC-2).
type logins struct {
	cache *lru.Cache[string, *pendingLogin]
}

const (
	maxPendingLogins = 1024
	loginTTL         = 10 * time.Minute
)

func newLogins() *logins { return &logins{cache: lru.New[string, *pendingLogin](maxPendingLogins)} }

func (l *logins) add(state string, p *pendingLogin) { l.cache.Add(state, p) }

// take returns and forgets the sign-in of state, if it is still fresh.
func (l *logins) take(state string) (*pendingLogin, bool) {
	p, ok := l.cache.Get(state)
	if !ok {
		return nil, false
	}
	l.cache.Remove(state)
	return p, time.Since(p.created) < loginTTL
}
