package console_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// testIssuer is an OpenID provider on loopback, for the console's sign-in: discovery,
// an authorization endpoint with a sign-in page (one button per person), a token
// endpoint that checks the client's secret, the redirect URI and the PKCE verifier
// (S256), and the JWKS its RS256 ID tokens verify with. It serves on "localhost", so
// that a console on 127.0.0.1 is another site to the browser, as an issuer is.
type testIssuer struct {
	t        *testing.T
	srv      *httptest.Server
	url      string
	key      *rsa.PrivateKey
	clientID string
	secret   string
	tenant   string
	scope    string

	mu       sync.Mutex
	codes    map[string]issuedCode
	exchange int // token requests answered with an ID token
}

type issuedCode struct {
	sub, nonce, challenge, redirect string
}

func newTestIssuer(t *testing.T, clientID, secret string) *testIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &testIssuer{t: t, key: key, clientID: clientID, secret: secret, tenant: "acme", scope: "approvals.decide", codes: map[string]issuedCode{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	is.srv = httptest.NewUnstartedServer(is.mux())
	is.srv.Listener.Close()
	is.srv.Listener = ln
	is.srv.Start()
	t.Cleanup(is.srv.Close)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	is.url = "http://localhost:" + port
	return is
}

var issuerPage = template.Must(template.New("").Parse(`<!doctype html><html><head><title>Test issuer</title></head><body>
<h1>Test issuer</h1><form method="post" action="/authorize">
<input type="hidden" name="q" value="{{.}}">
<button id="as-olga" name="sub" value="olga">Sign in as olga</button>
</form></body></html>`))

func (is *testIssuer) mux() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{
			"issuer": is.url, "authorization_endpoint": is.url + "/authorize", "token_endpoint": is.url + "/token",
			"jwks_uri": is.url + "/jwks", "response_types_supported": []string{"code"},
			"subject_types_supported": []string{"public"}, "id_token_signing_alg_values_supported": []string{"RS256"},
			"code_challenge_methods_supported":      []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic"},
		})
	})
	m.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &is.key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	m.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("client_id") != is.clientID || q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" ||
			q.Get("code_challenge") == "" || q.Get("state") == "" || q.Get("nonce") == "" {
			http.Error(w, "bad authorization request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		issuerPage.Execute(w, r.URL.RawQuery)
	})
	m.HandleFunc("POST /authorize", func(w http.ResponseWriter, r *http.Request) {
		q, err := url.ParseQuery(r.PostFormValue("q"))
		if err != nil {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		code := base64.RawURLEncoding.EncodeToString([]byte(time.Now().String()))
		is.mu.Lock()
		is.codes[code] = issuedCode{sub: r.PostFormValue("sub"), nonce: q.Get("nonce"), challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri")}
		is.mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?code="+url.QueryEscape(code)+"&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
	})
	m.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if is.secret == "" { // a public client: its id in the form, no secret
			id, secret, ok = r.PostFormValue("client_id"), "", r.Header.Get("Authorization") == ""
		}
		if !ok || id != is.clientID || subtle.ConstantTimeCompare([]byte(secret), []byte(is.secret)) != 1 {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client"})
			return
		}
		is.mu.Lock()
		c, found := is.codes[r.PostFormValue("code")]
		delete(is.codes, r.PostFormValue("code"))
		is.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostFormValue("code_verifier")))
		if !found || r.PostFormValue("grant_type") != "authorization_code" || r.PostFormValue("redirect_uri") != c.redirect ||
			base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant"})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "opaque", "token_type": "Bearer", "expires_in": 3600,
			"id_token": is.idToken(c.sub, c.nonce)})
		is.mu.Lock()
		is.exchange++
		is.mu.Unlock()
	})
	return m
}

func (is *testIssuer) idToken(sub, nonce string) string {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: is.key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		is.t.Error(err)
		return ""
	}
	now := time.Now()
	tok, err := jwt.Signed(signer).Claims(map[string]any{
		"iss": is.url, "sub": sub, "aud": is.clientID, "exp": now.Add(time.Hour).Unix(), "iat": now.Unix(),
		"nonce": nonce, "tenant": is.tenant, "scope": is.scope,
	}).Serialize()
	if err != nil {
		is.t.Error(err)
	}
	return tok
}
