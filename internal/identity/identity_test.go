package identity_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/toolgen/toolgen/internal/identity"
	"github.com/toolgen/toolgen/spec"
)

const (
	issuerURL   = "https://login.example.com"
	audience    = "toolgen"
	staticToken = "static-token-for-ci-bot"
)

// testIssuer is an issuer whose RSA key the test generates: its public key is the
// spec root's keys/login.pem.
type testIssuer struct {
	key    *rsa.PrivateKey
	pubPEM []byte
}

func newIssuer(t testing.TB) *testIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return &testIssuer{key: key, pubPEM: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})}
}

type claims struct {
	jwt.Claims
	Tenant string `json:"tenant,omitempty"`
	Scope  string `json:"scope,omitempty"`
}

func (is *testIssuer) sign(t testing.TB, c claims) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: is.key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func valid() claims {
	now := time.Now()
	return claims{Claims: jwt.Claims{Issuer: issuerURL, Subject: "ana", Audience: jwt.Audience{audience},
		Expiry: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute))},
		Tenant: "acme", Scope: "notes.read notes.write"}
}

func principalsFile(t testing.TB) *spec.Principals {
	t.Helper()
	sum := sha256.Sum256([]byte(staticToken))
	doc := `tokens:
  - {id: ci-bot, tenant: acme, scopes: [notes.read], token_sha256: ` + hex.EncodeToString(sum[:]) + `}
local:
  - {id: operator, tenant: acme, scopes: [review.approve]}
issuers:
  - name: login
    issuer: ` + issuerURL + `
    audience: ` + audience + `
    key_file: keys/login.pem
    tenants: [acme, beta]
`
	p, diags := spec.LoadPrincipals("principals.yaml", "principals.yaml", []byte(doc))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	return p
}

func newVerifier(t testing.TB, is *testIssuer) *identity.Verifier {
	t.Helper()
	v, err := identity.New(context.Background(), principalsFile(t).Model(), fstest.MapFS{"keys/login.pem": {Data: is.pubPEM}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestVerify(t *testing.T) {
	is := newIssuer(t)
	v := newVerifier(t, is)
	ctx := context.Background()

	p, exp, err := v.Verify(ctx, is.sign(t, valid()))
	if err != nil || p.ID != "login/ana" || p.Tenant != "acme" || strings.Join(p.Scopes, " ") != "notes.read notes.write" || exp.IsZero() {
		t.Fatalf("valid JWT: %+v, %v, %v", p, exp, err)
	}
	p, exp, err = v.Verify(ctx, staticToken)
	if err != nil || p.ID != "ci-bot" || p.Tenant != "acme" || !exp.IsZero() {
		t.Fatalf("static token: %+v, %v, %v", p, exp, err)
	}
	if p, ok := v.Local("operator"); !ok || p.Tenant != "acme" {
		t.Fatalf("local principal: %+v %v", p, ok)
	}
	// A static token's principal is not local: acting as it needs its token.
	if p, ok := v.Local("ci-bot"); ok {
		t.Fatalf("Local(ci-bot) = %+v: a token principal acted without its token", p)
	}
	beta := valid()
	beta.Tenant = "beta"
	if p, _, err := v.Verify(ctx, is.sign(t, beta)); err != nil || p.Tenant != "beta" || p.ID != "login/ana" {
		t.Fatalf("a token of the issuer's other tenant: %+v, %v", p, err)
	}

	expired := valid()
	expired.Expiry = jwt.NewNumericDate(time.Now().Add(-time.Hour))
	wrongAud := valid()
	wrongAud.Audience = jwt.Audience{"someone-else"}
	wrongIss := valid()
	wrongIss.Issuer = "https://evil.example.com"
	noTenant := valid()
	noTenant.Tenant = ""
	otherTenant := valid()
	otherTenant.Tenant = "globex" // not one of the issuer's tenants
	newline := valid()
	newline.Subject = "ana\n2026-01-01T00:00:00Z  approval  -  root"
	escape := valid()
	escape.Subject = "ana\x1b[1A\x1b[2K"
	space := valid()
	space.Subject = "ana smith"
	long := valid()
	long.Subject = strings.Repeat("a", identity.MaxSubjectBytes+1)
	other := newIssuer(t)

	good := is.sign(t, valid())
	parts := strings.Split(good, ".")
	b64 := base64.RawURLEncoding.EncodeToString
	none := b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
	// HS256 signed with the issuer's public key as the HMAC secret: the classic
	// algorithm-confusion attack.
	hsHead := b64([]byte(`{"alg":"HS256","typ":"JWT"}`))
	mac := hmac.New(sha256.New, is.pubPEM)
	mac.Write([]byte(hsHead + "." + parts[1]))
	hs := hsHead + "." + parts[1] + "." + b64(mac.Sum(nil))

	for name, tok := range map[string]string{
		"empty":                     "",
		"garbage":                   "garbage",
		"garbage with dots":         "a.b.c",
		"alg none":                  none,
		"HS256 with the public key": hs,
		"expired":                   is.sign(t, expired),
		"wrong audience":            is.sign(t, wrongAud),
		"wrong issuer":              is.sign(t, wrongIss),
		"signed by another key":     other.sign(t, valid()),
		"no tenant claim":           is.sign(t, noTenant),
		"a tenant not the issuer's": is.sign(t, otherTenant),
		"subject with a newline":    is.sign(t, newline),
		"subject with escapes":      is.sign(t, escape),
		"subject with a space":      is.sign(t, space),
		"subject too long":          is.sign(t, long),
		"payload swapped":           parts[0] + "." + strings.Split(is.sign(t, wrongAud), ".")[1] + "." + parts[2],
		"static token, one off":     staticToken + "x",
		"oversized":                 strings.Repeat("a", identity.MaxTokenBytes+1),
	} {
		_, _, err := v.Verify(ctx, tok)
		if !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("%s: err = %v, want an invalid token", name, err)
		}
		if tok != "" && len(tok) > 8 && strings.Contains(err.Error(), tok) {
			t.Errorf("%s: the error repeats the token", name)
		}
		if strings.ContainsAny(err.Error(), "\n\x1b") || strings.Contains(err.Error(), "globex") {
			t.Errorf("%s: the error repeats a claim: %q", name, err)
		}
	}
}

func TestTokenVerifierCarriesThePrincipal(t *testing.T) {
	is := newIssuer(t)
	tv := newVerifier(t, is).TokenVerifier()
	ti, err := tv(context.Background(), staticToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := identity.PrincipalFrom(ti)
	if !ok || p.ID != "ci-bot" || p.Tenant != "acme" {
		t.Fatalf("principal %+v %v", p, ok)
	}
	if _, err := tv(context.Background(), "nope", nil); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("bad token: %v", err)
	}
}

// FuzzVerify: any Authorization header value (the bearer part of it) either fails
// verification or is one of the tokens the test issued; nothing panics.
func FuzzVerify(f *testing.F) {
	is := newIssuer(f)
	v := newVerifier(f, is)
	good := is.sign(f, valid())
	f.Add(good)
	f.Add(staticToken)
	f.Add("Bearer " + good)
	f.Add("a.b.c")
	f.Add(strings.Replace(good, ".", "..", 1))
	parts := strings.Split(good, ".")
	f.Add(base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + parts[1] + ".")
	f.Add(parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"`+issuerURL+`","sub":"x","tenant":"acme","aud":"toolgen","exp":99999999999}`)) + "." + parts[2])
	f.Fuzz(func(t *testing.T, header string) {
		token, _ := strings.CutPrefix(header, "Bearer ")
		p, _, err := v.Verify(context.Background(), token)
		if err != nil {
			if !errors.Is(err, auth.ErrInvalidToken) {
				t.Fatalf("error %v does not wrap ErrInvalidToken", err)
			}
			return
		}
		if token == staticToken {
			return
		}
		// Accepted as a JWT: its signature must verify with the issuer's key and its
		// claims be the issued ones.
		parsed, perr := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256})
		var c claims
		if perr != nil || parsed.Claims(&is.key.PublicKey, &c) != nil || c.Subject != "ana" || p.ID != "login/ana" {
			t.Fatalf("accepted a token that does not verify: %q", token)
		}
	})
}

// TestVerifyWithJWKS: an issuer configured by jwks_url: its keys are fetched from the
// URL (go-oidc's remote key set), and a token signed by another key is refused.
func TestVerifyWithJWKS(t *testing.T) {
	is := newIssuer(t)
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &is.key.PublicKey, Algorithm: string(jose.RS256), Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(jwks)
	}))
	defer srv.Close()
	doc := "issuers:\n  - name: login\n    issuer: " + issuerURL + "\n    audience: " + audience + "\n    jwks_url: " + srv.URL + "/jwks\n    tenant: acme\n"
	p, diags := spec.LoadPrincipals("principals.yaml", "principals.yaml", []byte(doc))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	v, err := identity.New(context.Background(), p.Model(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := v.Verify(context.Background(), is.sign(t, valid()))
	if err != nil || got.ID != "login/ana" || got.Tenant != "acme" || got.Claims["tenant"] != "acme" {
		t.Fatalf("JWKS-verified token: %+v, %v", got, err)
	}
	if _, _, err := v.Verify(context.Background(), newIssuer(t).sign(t, valid())); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("a token of another key: %v", err)
	}
}

// TestVerify_OneTenantIssuer: an issuer bound to one tenant makes every principal it
// proves a principal of that tenant, whatever its tokens claim (issue 14, finding 6),
// and its principals' ids are namespaced by its name, so a token whose subject is
// another issuer's principal, or a static or local id, never becomes that principal.
func TestVerify_OneTenantIssuer(t *testing.T) {
	acme, beta := newIssuer(t), newIssuer(t)
	doc := `local:
  - {id: a-op, tenant: acme, scopes: [approvals.decide]}
issuers:
  - name: acme-login
    issuer: https://login.acme.example
    audience: toolgen
    key_file: keys/acme.pem
    tenant: acme
  - name: beta-login
    issuer: https://login.beta.example
    audience: toolgen
    key_file: keys/beta.pem
    tenant: beta
`
	p, diags := spec.LoadPrincipals("principals.yaml", "principals.yaml", []byte(doc))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	v, err := identity.New(context.Background(), p.Model(), fstest.MapFS{"keys/acme.pem": {Data: acme.pubPEM}, "keys/beta.pem": {Data: beta.pubPEM}})
	if err != nil {
		t.Fatal(err)
	}
	// beta's identity provider mints a token for acme's approver, claiming acme.
	forged := valid()
	forged.Issuer, forged.Subject, forged.Tenant, forged.Scope = "https://login.beta.example", "a-op", "acme", "approvals.decide"
	got, _, err := v.Verify(context.Background(), beta.sign(t, forged))
	if err != nil {
		t.Fatal(err)
	}
	if got.Tenant != "beta" || got.ID != "beta-login/a-op" {
		t.Fatalf("beta's token for a-op of acme: %+v, want beta-login/a-op of tenant beta", got)
	}
	real := forged
	real.Issuer = "https://login.acme.example"
	if got, _, err := v.Verify(context.Background(), acme.sign(t, real)); err != nil || got.ID != "acme-login/a-op" || got.Tenant != "acme" {
		t.Fatalf("acme's own token: %+v, %v", got, err)
	}
	// The issuers' keys are not interchangeable.
	if _, _, err := v.Verify(context.Background(), beta.sign(t, real)); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("beta's key signing acme's issuer: %v", err)
	}
}
