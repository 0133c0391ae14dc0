package console

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// signinView is the sign-in page's data.
type signinView struct {
	Token   bool     // the token form is offered
	Issuers []string // names of the issuers offered
	Next    string
	Message string
}

func (c *Console) signinPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	next := localPath(r.URL.Query().Get("next"))
	if c.current(w, r) != nil {
		if next == "" {
			next = Path + "/held"
		}
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	c.renderSignin(w, r, http.StatusOK, next, "")
}

func (c *Console) renderSignin(w http.ResponseWriter, r *http.Request, code int, next, msg string) {
	v := signinView{Token: c.o.Auth.VerifyToken != nil, Next: next, Message: msg}
	for _, is := range c.o.Auth.Issuers {
		v.Issuers = append(v.Issuers, is.Name)
	}
	// The form's CSRF token, before there is a session: a cookie only this site can
	// read or set (SameSite=Strict), echoed in the form (double submit).
	tok := randomToken()
	sec := secure(r)
	http.SetCookie(w, &http.Cookie{Name: cookieName(signinCookie, sec), Value: tok, Path: "/", HttpOnly: true,
		Secure: sec, SameSite: http.SameSiteStrictMode, MaxAge: int(loginTTL / time.Second)})
	c.render(w, r, code, "signin", pageData{Title: "Sign in", CSRF: tok, Body: v})
}

// signinToken exchanges a token of principals.yaml for a session.
func (c *Console) signinToken(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if c.o.Auth.VerifyToken == nil {
		c.fail(w, r, nil, http.StatusNotFound, "There is no token sign-in here.")
		return
	}
	if why := crossSite(r); why != "" {
		c.fail(w, r, nil, http.StatusForbidden, "Refused: "+why+".")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxFormBytes)
	if err := r.ParseForm(); err != nil {
		c.fail(w, r, nil, http.StatusBadRequest, "The form could not be read.")
		return
	}
	next := localPath(r.PostForm.Get("next"))
	ck, err := r.Cookie(cookieName(signinCookie, secure(r)))
	if err != nil || ck.Value == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(r.PostForm.Get("csrf"))) != 1 {
		c.renderSignin(w, r, http.StatusForbidden, next, "The sign-in form expired or was not this site's. Try again.")
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	p, err := c.o.Auth.VerifyToken(r.Context(), token)
	if err != nil {
		// The error names the failed check, never the token; the page says less.
		c.o.Logger.Info("console: a token sign-in failed", "err", err)
		c.renderSignin(w, r, http.StatusUnauthorized, next, "That token is not one of this server's.")
		return
	}
	c.sessions.create(w, r, p, "token", time.Time{})
	if next == "" {
		next = Path + "/held"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) signout(w http.ResponseWriter, r *http.Request, s *session) {
	c.sessions.end(w, r, s)
	if c.o.Auth.Local != nil {
		// Without principals.yaml there is no one else to be: the next page makes a
		// new session for the operator.
		http.Redirect(w, r, Path+"/held", http.StatusSeeOther)
		return
	}
	c.renderSignin(w, r, http.StatusOK, "", "You are signed out.")
}

// oidcClients discovers each issuer's endpoints once (OpenID Connect Discovery) and
// keeps its OAuth client.
type oidcClients struct {
	auth   Auth
	client *http.Client
	mu     sync.Mutex
	known  map[string]*oidcClient
	failed map[string]time.Time // the last failed discovery of an issuer
}

type oidcClient struct {
	is       Issuer
	endpoint oauth2.Endpoint
}

func newOIDCClients(a Auth, client *http.Client) *oidcClients {
	return &oidcClients{auth: a, client: client, known: map[string]*oidcClient{}, failed: map[string]time.Time{}}
}

// discoveryRetry is how long a failed discovery is not tried again for the issuer.
const discoveryRetry = 30 * time.Second

// get returns issuer name's client, discovering its endpoints the first time.
func (o *oidcClients) get(ctx context.Context, name string) (*oidcClient, error) {
	var is *Issuer
	for i := range o.auth.Issuers {
		if o.auth.Issuers[i].Name == name {
			is = &o.auth.Issuers[i]
		}
	}
	if is == nil {
		return nil, errors.New("no such issuer")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if c, ok := o.known[name]; ok {
		return c, nil
	}
	// Anyone can start a sign-in: a discovery that failed is not tried again for a
	// while, so unauthenticated requests cannot make the console hammer the issuer.
	if at, ok := o.failed[name]; ok && time.Since(at) < discoveryRetry {
		return nil, errors.New("discovery failed recently")
	}
	ep, err := o.discover(ctx, is.URL)
	if err != nil {
		o.failed[name] = time.Now()
		return nil, err
	}
	c := &oidcClient{is: *is, endpoint: ep}
	o.known[name] = c
	return c, nil
}

// discover reads issuer's OpenID Provider metadata. Its issuer must be issuer itself
// (OpenID Connect Discovery 4.3), and its endpoints https (http only on loopback).
func (o *oidcClients) discover(ctx context.Context, issuer string) (oauth2.Endpoint, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(issuer, "/")+"/.well-known/openid-configuration", nil)
	if err != nil {
		return oauth2.Endpoint{}, err
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return oauth2.Endpoint{}, fmt.Errorf("discovery: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return oauth2.Endpoint{}, fmt.Errorf("discovery: %s", resp.Status)
	}
	var m struct {
		Issuer   string   `json:"issuer"`
		Auth     string   `json:"authorization_endpoint"`
		Token    string   `json:"token_endpoint"`
		Methods  []string `json:"code_challenge_methods_supported"`
		AuthMeth []string `json:"token_endpoint_auth_methods_supported"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m); err != nil {
		return oauth2.Endpoint{}, fmt.Errorf("discovery: %w", err)
	}
	if m.Issuer != issuer {
		return oauth2.Endpoint{}, errors.New("discovery: the metadata names another issuer")
	}
	for _, e := range []string{m.Auth, m.Token} {
		u, err := url.Parse(e)
		if err != nil || u.Host == "" || u.Scheme != "https" && !(u.Scheme == "http" && loopbackName(u.Hostname())) {
			return oauth2.Endpoint{}, fmt.Errorf("discovery: endpoint %q is not https", e)
		}
	}
	return oauth2.Endpoint{AuthURL: m.Auth, TokenURL: m.Token}, nil
}

func loopbackName(h string) bool { return h == "localhost" || h == "127.0.0.1" || h == "::1" }

// config is the issuer's OAuth 2.0 client for a sign-in reaching the console at r.
func (c *Console) config(oc *oidcClient, r *http.Request) *oauth2.Config {
	redirect := oc.is.RedirectURL
	if redirect == "" {
		redirect = scheme(r) + "://" + r.Host + Path + "/auth/callback"
	}
	ep := oc.endpoint
	conf := &oauth2.Config{ClientID: oc.is.ClientID, Endpoint: ep, RedirectURL: redirect, Scopes: oc.is.Scopes}
	if oc.is.ClientSecretEnv != "" {
		getenv := c.o.Auth.Getenv
		if getenv == nil {
			getenv = os.Getenv
		}
		conf.ClientSecret = getenv(oc.is.ClientSecretEnv)
		conf.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
	} else {
		conf.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	}
	return conf
}

// oidcLogin starts the authorization-code flow with PKCE: a fresh state (bound to this
// browser by a cookie), nonce and code verifier, then off to the issuer.
func (c *Console) oidcLogin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	name := r.URL.Query().Get("issuer")
	oc, err := c.oidc.get(r.Context(), name)
	if err != nil {
		c.o.Logger.Warn("console: sign-in with an issuer", "issuer", name, "err", err)
		c.renderSignin(w, r, http.StatusBadGateway, "", "That issuer cannot be reached for sign-in now; try again later.")
		return
	}
	conf := c.config(oc, r)
	state, nonce, verifier := randomToken(), randomToken(), oauth2.GenerateVerifier()
	c.logins.add(state, &pendingLogin{issuer: oc.is.Name, verifier: verifier, nonce: nonce, redirect: conf.RedirectURL,
		next: localPath(r.URL.Query().Get("next")), created: time.Now()})
	sec := secure(r)
	// Lax, not Strict: the issuer's answer is a navigation from another site, and
	// this cookie must come with it.
	http.SetCookie(w, &http.Cookie{Name: cookieName(loginCookie, sec), Value: state, Path: "/", HttpOnly: true,
		Secure: sec, SameSite: http.SameSiteLaxMode, MaxAge: int(loginTTL / time.Second)})
	http.Redirect(w, r, conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("nonce", nonce)), http.StatusSeeOther)
}

// oidcCallback is the issuer's answer: the state must be this browser's sign-in; the
// code is exchanged with the verifier; the ID token must verify, with the nonce.
func (c *Console) oidcCallback(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	q := r.URL.Query()
	state := q.Get("state")
	sec := secure(r)
	ck, err := r.Cookie(cookieName(loginCookie, sec))
	http.SetCookie(w, &http.Cookie{Name: cookieName(loginCookie, sec), Value: "", Path: "/", HttpOnly: true,
		Secure: sec, SameSite: http.SameSiteLaxMode, MaxAge: -1})
	if err != nil || state == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(state)) != 1 {
		c.renderSignin(w, r, http.StatusForbidden, "", "That sign-in was not started in this browser. Start again.")
		return
	}
	pl, ok := c.logins.take(state)
	if !ok {
		c.renderSignin(w, r, http.StatusForbidden, "", "That sign-in expired. Start again.")
		return
	}
	if e := q.Get("error"); e != "" {
		// The issuer's words are not shown: they are another system's text.
		c.renderSignin(w, r, http.StatusUnauthorized, "", "The issuer did not sign you in.")
		return
	}
	oc, err := c.oidc.get(r.Context(), pl.issuer)
	if err != nil {
		c.renderSignin(w, r, http.StatusBadGateway, "", "That issuer cannot be reached for sign-in now; try again later.")
		return
	}
	conf := c.config(oc, r)
	conf.RedirectURL = pl.redirect
	ctx := context.WithValue(r.Context(), oauth2.HTTPClient, c.o.HTTPClient)
	tok, err := conf.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(pl.verifier))
	if err != nil {
		c.o.Logger.Warn("console: the issuer's token endpoint refused the code", "issuer", pl.issuer, "err", err)
		c.renderSignin(w, r, http.StatusUnauthorized, "", "The issuer did not confirm the sign-in. Start again.")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	p, exp, err := c.o.Auth.VerifyIDToken(r.Context(), pl.issuer, raw, pl.nonce)
	if err != nil {
		c.o.Logger.Warn("console: an ID token was refused", "issuer", pl.issuer, "err", err)
		c.renderSignin(w, r, http.StatusUnauthorized, "", "The issuer's answer did not verify. Start again.")
		return
	}
	c.sessions.create(w, r, p, pl.issuer, exp)
	next := pl.next
	if next == "" {
		next = Path + "/held"
	}
	// A page, not a redirect: this response ends a navigation that began on the
	// issuer's site, and a browser sends no SameSite=Strict cookie along a redirect of
	// it. The page's own navigation is same-site, so the session cookie goes with it.
	c.render(w, r, http.StatusOK, "signedin", pageData{Title: "Signed in", Refresh: next, Body: next})
}
