package identity

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/toolgen/toolgen/spec"
)

// jwksServer serves a key set it can rotate, counting the fetches.
type jwksServer struct {
	*httptest.Server
	fetches atomic.Int64
	mu      sync.Mutex
	keys    []jose.JSONWebKey
}

func newJWKSServer(t *testing.T) *jwksServer {
	s := &jwksServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		b, _ := json.Marshal(jose.JSONWebKeySet{Keys: s.keys})
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) publish(key *rsa.PrivateKey, kid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, jose.JSONWebKey{Key: &key.PublicKey, KeyID: kid, Algorithm: string(jose.RS256), Use: "sig"})
}

func signWithKid(t *testing.T, key *rsa.PrivateKey, kid, sub string) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(signer).Claims(jwt.Claims{Issuer: "https://login.example.com", Subject: sub, Audience: jwt.Audience{"toolgen"},
		Expiry: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now)}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestJWKS_RefetchRateLimitedPerIssuer (issue 14, finding 15): 100 unauthenticated
// requests with made-up key ids cost the issuer no fetch beyond the first; a key the
// issuer rotated in is picked up by the first token that names it once the window has
// passed (the clock is the key set's, moved by the test).
func TestJWKS_RefetchRateLimitedPerIssuer(t *testing.T) {
	srv := newJWKSServer(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	srv.publish(key, "k1")
	doc := "issuers:\n  - name: login\n    issuer: https://login.example.com\n    audience: toolgen\n    jwks_url: " + srv.URL + "/jwks\n    tenant: acme\n"
	p, diags := spec.LoadPrincipals("principals.yaml", "principals.yaml", []byte(doc))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	v, err := New(context.Background(), p.Model(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ks := v.issuers["https://login.example.com"].keys
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	ks.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	ctx := context.Background()
	if got, _, err := v.Verify(ctx, signWithKid(t, key, "k1", "ana")); err != nil || got.ID != "login/ana" {
		t.Fatalf("a token of the published key: %+v, %v", got, err)
	}
	if n := srv.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches for the first token, want 1", n)
	}
	attacker, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			_, _, err := v.Verify(ctx, signWithKid(t, attacker, "kid-"+strings.Repeat("x", i%7)+rand.Text(), "mallory"))
			if !errors.Is(err, auth.ErrInvalidToken) || !strings.Contains(err.Error(), "unknown signing key") {
				t.Errorf("a token of an unknown key: %v", err)
			}
		})
	}
	wg.Wait()
	if n := srv.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches after 100 tokens with unknown key ids inside the window, want 1", n)
	}

	// The issuer rotates in k2. Inside the window its tokens wait; after it, the first
	// one fetches once and verifies.
	rotated, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	srv.publish(rotated, "k2")
	if _, _, err := v.Verify(ctx, signWithKid(t, rotated, "k2", "ana")); !errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("the rotated key inside the window: %v, want refused without a fetch", err)
	}
	advance(JWKSRefetchInterval)
	if got, _, err := v.Verify(ctx, signWithKid(t, rotated, "k2", "ana")); err != nil || got.ID != "login/ana" {
		t.Fatalf("the rotated key after the window: %+v, %v", got, err)
	}
	for range 20 {
		v.Verify(ctx, signWithKid(t, attacker, "kid-"+rand.Text(), "mallory"))
	}
	if n := srv.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2 (one per window)", n)
	}
	// The cached keys keep verifying without a fetch.
	if _, _, err := v.Verify(ctx, signWithKid(t, key, "k1", "ana")); err != nil {
		t.Fatal(err)
	}
	if n := srv.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches after a cached key, want 2", n)
	}
}

// A failed fetch counts too: an issuer that is down is not asked again per request.
func TestJWKS_FailedFetchIsRateLimitedToo(t *testing.T) {
	var fetches atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	ks := newJWKSKeySet(context.Background(), srv.URL, []string{"RS256"})
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	for range 50 {
		if _, err := ks.VerifySignature(context.Background(), signWithKid(t, key, "k", "x")); err == nil {
			t.Fatal("verified against a key set that could not be fetched")
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Fatalf("%d fetches of a failing JWKS, want 1", n)
	}
}
