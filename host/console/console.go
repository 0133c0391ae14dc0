package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolgen/toolgen/internal/events"
	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// Path is where the console is mounted; every page is below it.
const Path = "/console"

// Errors the Operator returns (wrapped; test with errors.Is): the console answers them
// 404, 403 and 409.
var (
	ErrNotFound     = errors.New("no such invocation in your tenant")
	ErrSelfDecision = errors.New("another principal must decide it")
	ErrMissingScope = errors.New("you do not hold the approving scope")
	ErrNotPending   = errors.New("the call no longer waits for this")
)

// Operator is the operator service as the console uses it (HOST-2): every list, read
// and decision of the console goes through it, so tenant visibility, the approving
// scope, "never the caller" and the audit entry of each decision are its rules, the
// same as the command line's.
type Operator interface {
	Approvals(ctx context.Context, actor runtime.Principal) ([]*store.Invocation, error)
	Uncertain(ctx context.Context, actor runtime.Principal) ([]*store.Invocation, error)
	Invocation(ctx context.Context, actor runtime.Principal, id int64) (*store.Invocation, error)
	Decide(ctx context.Context, actor runtime.Principal, id int64, approve bool, reason string) error
	Resolve(ctx context.Context, actor runtime.Principal, id int64, happened bool, reason string) error
	Audit(ctx context.Context, actor runtime.Principal, f AuditFilter) ([]AuditLine, error)
	HoldReason(ctx context.Context, actor runtime.Principal, inv *store.Invocation) (HoldReason, bool, error)
	// ApprovalOf is the decision recorded on a held call, if one was made.
	ApprovalOf(ctx context.Context, actor runtime.Principal, inv *store.Invocation) (*store.Approval, bool, error)
}

// AuditFilter selects audit lines; every empty field is "any".
type AuditFilter struct {
	SessionID, RunID, Tool, Mode, Decision, Kind string
}

// AuditLine is one line of the audit timeline (the operator service's AuditLine).
type AuditLine struct {
	At         time.Time
	Kind       string
	Mode       string
	Principal  string
	SessionID  string
	RunID      string
	Tool       string
	Status     string
	Reason     string
	Decision   string
	Invocation int64 // 0: the entry is about no invocation
	Detail     json.RawMessage
	// Script is the invocation id of the script run (sandbox.run_script) this call was
	// made by, and Ordinal its ordinal there; 0 for a call no script made. Such lines
	// follow their script's line.
	Script  int64
	Ordinal int
}

// HoldReason is why a call was held (the pipeline's held audit entry).
type HoldReason struct {
	Cause, Rule, Why string
	At               time.Time
}

// Auth says how people sign in. Exactly one of Local and VerifyToken is set.
type Auth struct {
	// Local, without principals.yaml, is the principal every visitor acts as (the
	// host's operator): the handler serves loopback only, and there is no sign-in.
	Local func() (runtime.Principal, error)
	// VerifyToken verifies a token of principals.yaml (a static token, or a JWT of an
	// issuer) for the sign-in form.
	VerifyToken func(ctx context.Context, token string) (runtime.Principal, error)
	// Issuers are the issuers people sign in with (authorization code + PKCE), and
	// VerifyIDToken verifies the ID token one of them returned.
	Issuers       []Issuer
	VerifyIDToken func(ctx context.Context, issuer, rawIDToken, nonce string) (runtime.Principal, time.Time, error)
	// Getenv reads a client secret's environment variable (default os.Getenv).
	Getenv func(string) string
}

// Issuer is an OIDC issuer of the sign-in page.
type Issuer struct {
	Name     string // principals.yaml's name of the issuer
	URL      string // its iss: discovery starts at URL/.well-known/openid-configuration
	ClientID string
	// ClientSecretEnv names the variable holding the secret of a confidential client;
	// empty for a public client.
	ClientSecretEnv string
	Scopes          []string
	RedirectURL     string // "": the URL the console is reached at
}

// Defaults of Options.
const (
	DefaultMaxSessions     = 10000
	DefaultSessionIdle     = time.Hour
	DefaultSessionLifetime = 12 * time.Hour
	// MaxStreamsPerSession bounds the live streams one session holds open (tabs).
	MaxStreamsPerSession = 8
)

// Options configure New.
type Options struct {
	Operator Operator
	// Store is read for the live stream (the store-backed events) and nothing else.
	Store store.Events
	Auth  Auth
	// ApprovalHold is how long a held call's caller waits before it is answered
	// approval_pending (the page shows when that is).
	ApprovalHold time.Duration
	// MaxSessions bounds the sessions held in memory (default DefaultMaxSessions): past
	// it, the least recently used session ends.
	MaxSessions int
	// SessionIdle ends a session unused that long (default DefaultSessionIdle);
	// SessionLifetime ends every session that long after sign-in (default
	// DefaultSessionLifetime).
	SessionIdle, SessionLifetime time.Duration
	// HTTPClient reaches the issuers (discovery, token endpoint); default: a client
	// with a 15 s timeout.
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// Console is the console's HTTP handler. Close it when done.
type Console struct {
	o        Options
	mux      *http.ServeMux
	sessions *sessions
	logins   *logins
	events   *events.Handler
	pages    pages
	oidc     *oidcClients
	tail     tailCursor

	streamsMu sync.Mutex
	streams   map[string]int // open live streams per session
}

// New returns the console.
func New(o Options) (*Console, error) {
	if o.Operator == nil || o.Store == nil {
		return nil, errors.New("console: an operator service and a store are required")
	}
	if (o.Auth.Local == nil) == (o.Auth.VerifyToken == nil) {
		return nil, errors.New("console: exactly one of Auth.Local and Auth.VerifyToken")
	}
	if len(o.Auth.Issuers) > 0 && o.Auth.VerifyIDToken == nil {
		return nil, errors.New("console: issuers without Auth.VerifyIDToken")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ApprovalHold <= 0 {
		o.ApprovalHold = runtime.DefaultApprovalHold
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 15 * time.Second}
	}
	pg, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{o: o, pages: pg, streams: map[string]int{},
		sessions: newSessions(o.MaxSessions, o.SessionIdle, o.SessionLifetime),
		logins:   newLogins(), oidc: newOIDCClients(o.Auth, o.HTTPClient)}
	c.tail.st = o.Store
	c.events, err = events.NewHandler(events.Options{Store: o.Store, Logger: o.Logger.With("component", "console-events"),
		TenantOf: func(r *http.Request) (string, bool) {
			s := c.sessions.fromRequest(r)
			if s == nil {
				return "", false
			}
			return s.principal.Tenant, true
		}})
	if err != nil {
		return nil, err
	}
	c.routes()
	return c, nil
}

// Close ends the live streams.
func (c *Console) Close() { c.events.Close() }

func (c *Console) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET "+Path+"/{$}", c.home)
	m.HandleFunc("GET "+Path+"/held", c.page(c.held))
	m.HandleFunc("GET "+Path+"/uncertain", c.page(c.uncertain))
	m.HandleFunc("GET "+Path+"/audit", c.page(c.audit))
	m.HandleFunc("GET "+Path+"/invocations/{id}", c.page(c.invocation))
	m.HandleFunc("POST "+Path+"/invocations/{id}/decide", c.form(c.decide))
	m.HandleFunc("POST "+Path+"/invocations/{id}/resolve", c.form(c.resolve))
	m.HandleFunc("GET "+Path+"/signin", c.signinPage)
	m.HandleFunc("POST "+Path+"/signin", c.signinToken)
	m.HandleFunc("GET "+Path+"/auth/login", c.oidcLogin)
	m.HandleFunc("GET "+Path+"/auth/callback", c.oidcCallback)
	m.HandleFunc("POST "+Path+"/signout", c.form(c.signout))
	m.HandleFunc("GET "+Path+"/events", c.live)
	m.HandleFunc("GET "+Path+"/static/{file}", serveStatic)
	m.HandleFunc(Path+"/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, nil, http.StatusNotFound, "There is no such page.")
	})
	c.mux = m
}

// ServeHTTP serves the console, with the headers every response carries.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if r.URL.Path == Path {
		http.Redirect(w, r, Path+"/", http.StatusSeeOther)
		return
	}
	c.mux.ServeHTTP(w, r)
}

// page serves a page to a signed-in visitor; anyone else is sent to the sign-in page.
func (c *Console) page(fn func(w http.ResponseWriter, r *http.Request, s *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := c.current(w, r)
		if s == nil {
			http.Redirect(w, r, Path+"/signin?next="+queryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		fn(w, r, s)
	}
}

// MaxFormBytes bounds a form's body.
const MaxFormBytes = 64 << 10

// form serves a post of a signed-in visitor that carries the session's CSRF token.
func (c *Console) form(fn func(w http.ResponseWriter, r *http.Request, s *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if why := crossSite(r); why != "" {
			c.fail(w, r, nil, http.StatusForbidden, "Refused: "+why+".")
			return
		}
		s := c.sessions.fromRequest(r)
		if s == nil {
			c.fail(w, r, nil, http.StatusForbidden, "Refused: you are not signed in (or your session ended). Sign in and try again.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxFormBytes)
		if err := r.ParseForm(); err != nil {
			c.fail(w, r, s, http.StatusBadRequest, "The form could not be read.")
			return
		}
		if !s.csrfOK(r.PostForm.Get("csrf")) {
			c.fail(w, r, s, http.StatusForbidden, "Refused: the form's CSRF token is missing or not this session's. Reload the page and try again.")
			return
		}
		fn(w, r, s)
	}
}

// crossSite says why a state-changing request is not the console's own page posting,
// or "". The Host and Origin check in front of every endpoint already refuses an Origin
// the server does not answer to; this also refuses another of its names, and a post a
// browser marks as cross-site.
func crossSite(r *http.Request) string {
	if v := r.Header.Get("Sec-Fetch-Site"); v == "cross-site" || v == "same-site" {
		return "the browser says this form was posted from another site"
	}
	switch o := r.Header.Get("Origin"); o {
	case "":
	case "null":
		return "the form was posted from an opaque origin"
	default:
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return "the form was posted from another origin"
		}
	}
	return ""
}

// home sends a visitor to the held calls, or to sign in.
func (c *Console) home(w http.ResponseWriter, r *http.Request) {
	if c.current(w, r) == nil {
		http.Redirect(w, r, Path+"/signin", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, Path+"/held", http.StatusSeeOther)
}

// invocationID reads the {id} of the path.
func invocationID(r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	return id, err == nil && id > 0
}

// status maps an operator error to an HTTP status and the words the page shows.
func status(err error) (int, string) {
	switch {
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound, "There is no such call in your tenant."
	case errors.Is(err, ErrSelfDecision):
		return http.StatusForbidden, "You made this call: another principal must decide it."
	case errors.Is(err, ErrMissingScope):
		return http.StatusForbidden, "You do not hold the scope approvals.decide, which deciding a held call needs."
	case errors.Is(err, ErrNotPending):
		return http.StatusConflict, "The call no longer waits for this: someone decided it, or it moved on. Reload to see where it is."
	}
	return http.StatusInternalServerError, "Something went wrong; the operator's log says what."
}

// reasonOf reads a decision's reason: trimmed, at most 1,000 bytes of valid UTF-8.
func reasonOf(r *http.Request) string {
	s := strings.TrimSpace(r.PostForm.Get("reason"))
	if len(s) > 1000 {
		s = s[:1000]
	}
	return strings.ToValidUTF8(s, "")
}

func (c *Console) decide(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := invocationID(r)
	if !ok {
		c.fail(w, r, s, http.StatusNotFound, "There is no such call in your tenant.")
		return
	}
	var approve bool
	switch r.PostForm.Get("decision") {
	case "approve":
		approve = true
	case "deny":
	default:
		c.fail(w, r, s, http.StatusBadRequest, "Choose approve or deny.")
		return
	}
	if err := c.o.Operator.Decide(r.Context(), s.principal, id, approve, reasonOf(r)); err != nil {
		code, msg := status(err)
		if code == http.StatusInternalServerError {
			c.o.Logger.Error("console: decide", "invocation", id, "err", err)
		}
		c.fail(w, r, s, code, msg)
		return
	}
	done := "denied"
	if approve {
		done = "approved"
	}
	http.Redirect(w, r, fmt.Sprintf("%s/held?done=%s&id=%d", Path, done, id), http.StatusSeeOther)
}

func (c *Console) resolve(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := invocationID(r)
	if !ok {
		c.fail(w, r, s, http.StatusNotFound, "There is no such call in your tenant.")
		return
	}
	var happened bool
	switch r.PostForm.Get("resolution") {
	case store.ResolutionHappened:
		happened = true
	case store.ResolutionDidNotHappen:
	default:
		c.fail(w, r, s, http.StatusBadRequest, "Choose happened or did not happen.")
		return
	}
	if err := c.o.Operator.Resolve(r.Context(), s.principal, id, happened, reasonOf(r)); err != nil {
		code, msg := status(err)
		if code == http.StatusInternalServerError {
			c.o.Logger.Error("console: resolve", "invocation", id, "err", err)
		}
		c.fail(w, r, s, code, msg)
		return
	}
	done := "resolved-happened"
	if !happened {
		done = "resolved-not-happened"
	}
	http.Redirect(w, r, fmt.Sprintf("%s/uncertain?done=%s&id=%d", Path, done, id), http.StatusSeeOther)
}

// live is the store-backed event stream of the visitor's tenant (EV-1: classification
// only), for the pages' live updates; at most MaxStreamsPerSession per session.
func (c *Console) live(w http.ResponseWriter, r *http.Request) {
	s := c.sessions.fromRequest(r)
	if s == nil {
		http.Error(w, "console: not signed in", http.StatusUnauthorized)
		return
	}
	c.streamsMu.Lock()
	if c.streams[s.key] >= MaxStreamsPerSession {
		c.streamsMu.Unlock()
		http.Error(w, "console: this session has the most live streams it may hold open", http.StatusTooManyRequests)
		return
	}
	c.streams[s.key]++
	c.streamsMu.Unlock()
	defer func() {
		c.streamsMu.Lock()
		if c.streams[s.key]--; c.streams[s.key] <= 0 {
			delete(c.streams, s.key)
		}
		c.streamsMu.Unlock()
	}()
	// The tenant is the session's; no other filter is taken from the query.
	q := r.URL.Query()
	for k := range q {
		if k != "last_event_id" {
			q.Del(k)
		}
	}
	r.URL.RawQuery = q.Encode()
	c.events.ServeHTTP(w, r)
}
