package console_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// TestOIDCSignIn (issue 18): the authorization-code flow with PKCE against an issuer on
// loopback, over plain HTTP clients: the sign-in works once, in the browser that began
// it; a forged or replayed answer, an answer for another browser, and a wrong client
// secret do not sign anyone in.
func TestOIDCSignIn(t *testing.T) {
	issuer := newTestIssuer(t, "toolgen-console", clientSecret)
	t.Setenv(clientSecretEnv, clientSecret)
	s := serve(t, newDeployment(t, principalsYAML(issuer.url), ""), "")

	// begin starts a sign-in in b and has the issuer answer for olga: the callback URL.
	begin := func(b *browser) string {
		t.Helper()
		code, body, hdr := b.do(http.MethodGet, s.base+"/console/auth/login?issuer=login", nil, nil)
		auth := hdr.Get("Location")
		if code != http.StatusSeeOther || !strings.HasPrefix(auth, issuer.url+"/authorize?") {
			t.Fatalf("login: %d %s\n%.500s", code, auth, body)
		}
		u, _ := url.Parse(auth)
		q := u.Query()
		if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") == "" ||
			q.Get("redirect_uri") != s.base+"/console/auth/callback" || !strings.Contains(q.Get("scope"), "openid") {
			t.Fatalf("the authorization request lacks PKCE, a nonce or the callback: %s", auth)
		}
		// The issuer's page, then its answer.
		code, _, hdr = b.do(http.MethodPost, issuer.url+"/authorize", url.Values{"q": {u.RawQuery}, "sub": {"olga"}}, nil)
		if code != http.StatusFound {
			t.Fatalf("the issuer: %d", code)
		}
		return hdr.Get("Location")
	}

	b := newBrowser(t)
	cb := begin(b)
	code, body, _ := b.do(http.MethodGet, cb, nil, nil)
	if code != http.StatusOK || !strings.Contains(body, `http-equiv="refresh"`) {
		t.Fatalf("callback: %d\n%.1000s", code, body)
	}
	if _, held := b.get(s.base + "/console/held"); !strings.Contains(held, "login/olga") {
		t.Fatalf("after the callback the held page does not name login/olga")
	}
	// The same answer again (a replay): the sign-in was used.
	if code, _, _ := b.do(http.MethodGet, cb, nil, nil); code != http.StatusForbidden {
		t.Errorf("a replayed answer: %d, want 403", code)
	}

	// An answer delivered to another browser (login CSRF): not signed in there.
	victim, attacker := newBrowser(t), newBrowser(t)
	cb = begin(attacker)
	if code, _, _ := victim.do(http.MethodGet, cb, nil, nil); code != http.StatusForbidden {
		t.Errorf("another browser's answer: %d, want 403", code)
	}
	if code, _ := victim.get(s.base + "/console/held"); code != http.StatusSeeOther {
		t.Errorf("the victim is signed in: %d", code)
	}

	// A forged state.
	b = newBrowser(t)
	cb = begin(b)
	forged := strings.Replace(cb, "state=", "state=x", 1)
	if code, _, _ := b.do(http.MethodGet, forged, nil, nil); code != http.StatusForbidden {
		t.Errorf("a forged state: %d, want 403", code)
	}

	// A wrong client secret: the issuer refuses the code, nobody is signed in.
	t.Setenv(clientSecretEnv, "not the secret")
	b = newBrowser(t)
	cb = begin(b)
	if code, _, _ := b.do(http.MethodGet, cb, nil, nil); code != http.StatusUnauthorized {
		t.Errorf("a wrong client secret: %d, want 401", code)
	}
	if code, _ := b.get(s.base + "/console/held"); code != http.StatusSeeOther {
		t.Errorf("signed in with a wrong client secret: %d", code)
	}
}

// TestOIDCPublicClient: an issuer's console without client_secret_env is a public
// client — PKCE alone, its id in the token request, no secret.
func TestOIDCPublicClient(t *testing.T) {
	issuer := newTestIssuer(t, "toolgen-console", "")
	principals := strings.Replace(principalsYAML(issuer.url), "      client_secret_env: "+clientSecretEnv+"\n", "", 1)
	if strings.Contains(principals, "client_secret_env") {
		t.Fatal("the principals still name a client secret")
	}
	s := serve(t, newDeployment(t, principals, ""), "")
	b := newBrowser(t)
	_, _, hdr := b.do(http.MethodGet, s.base+"/console/auth/login?issuer=login", nil, nil)
	u, _ := url.Parse(hdr.Get("Location"))
	_, _, hdr = b.do(http.MethodPost, issuer.url+"/authorize", url.Values{"q": {u.RawQuery}, "sub": {"olga"}}, nil)
	if code, body, _ := b.do(http.MethodGet, hdr.Get("Location"), nil, nil); code != http.StatusOK {
		t.Fatalf("callback: %d\n%.500s", code, body)
	}
	if _, held := b.get(s.base + "/console/held"); !strings.Contains(held, "login/olga") {
		t.Fatalf("the public client did not sign olga in")
	}
}

// TestSessionCookie: the session cookie is HttpOnly and SameSite=Strict; Secure, with
// the __Host- prefix, when the console is reached over https (here through a proxy that
// says so), and not on plain loopback.
func TestSessionCookie(t *testing.T) {
	s := serve(t, newDeployment(t, principalsYAML(""), ""), "")
	for _, c := range []struct {
		proto, name string
		secure      bool
	}{{"", "toolgen-console", false}, {"https", "__Host-toolgen-console", true}} {
		b := newBrowser(t)
		hdr := map[string]string{}
		if c.proto != "" {
			hdr["X-Forwarded-Proto"] = c.proto
		}
		_, page, h := b.do(http.MethodGet, s.base+"/console/signin", nil, hdr)
		m := csrfField.FindStringSubmatch(page)
		if m == nil {
			t.Fatal("no sign-in form")
		}
		var pre string
		for _, sc := range h.Values("Set-Cookie") {
			if strings.Contains(sc, "toolgen-console-signin=") {
				pre = sc[:strings.Index(sc, ";")]
			}
		}
		hdr["Cookie"] = pre
		hdr["Origin"] = s.base
		code, _, h := b.do(http.MethodPost, s.base+"/console/signin", url.Values{"csrf": {m[1]}, "token": {ritaToken}}, hdr)
		if code != http.StatusSeeOther {
			t.Fatalf("%s sign-in: %d", c.name, code)
		}
		var set string
		for _, sc := range h.Values("Set-Cookie") {
			if strings.HasPrefix(sc, c.name+"=") {
				set = sc
			}
		}
		if set == "" || !strings.Contains(set, "HttpOnly") || !strings.Contains(set, "SameSite=Strict") || !strings.Contains(set, "Path=/") ||
			strings.Contains(set, "Secure") != c.secure || strings.Contains(set, "Domain=") {
			t.Errorf("proto %q: Set-Cookie %q, want %s HttpOnly SameSite=Strict, Secure %v", c.proto, set, c.name, c.secure)
		}
	}
}

// TestLocalOperator (issue 18): without principals.yaml the console is the host's
// operator on loopback — no sign-in — and its decisions are the operator's.
func TestLocalOperator(t *testing.T) {
	s := serve(t, newDeployment(t, "", ""), "")
	if _, reason := call(t, s.agent(""), "demo.deploy", "c-local", map[string]any{"service": "web"}); reason != "approval_pending" {
		t.Fatalf("held: %s", reason)
	}
	id := s.heldID("default", "demo.deploy")
	b := newBrowser(t)
	b.origin = s.base
	code, held := b.get(s.base + "/console/held")
	if code != http.StatusOK || !strings.Contains(held, `<span class="principal" title="signed in via local">operator</span>`) {
		t.Fatalf("the held page without principals.yaml: %d\n%.1500s", code, held)
	}
	tok := b.csrf(s.base + "/console/held")
	if code, _, hdr := b.do(http.MethodPost, s.base+"/console/invocations/"+itoa(id)+"/decide", url.Values{"decision": {"approve"}, "csrf": {tok}}, nil); code != http.StatusSeeOther {
		t.Fatalf("approve: %d %s", code, hdr.Get("Location"))
	}
	if _, reason := call(t, s.agent(""), "demo.deploy", "c-local", map[string]any{"service": "web"}); reason != "" {
		t.Errorf("the retry after the operator's approval: %s", reason)
	}
	// No token sign-in without principals.yaml.
	if code, _, _ := b.do(http.MethodPost, s.base+"/console/signin", url.Values{"token": {"x"}}, nil); code != http.StatusNotFound {
		t.Errorf("token sign-in without principals.yaml: %d, want 404", code)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
