package identity

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// JWKSRefetchInterval is the least time between two fetches of one issuer's JWKS
// (issue 14, finding 15). A token naming a key the cached set lacks triggers a fetch
// — that is how a key rotation is picked up — but only when the last fetch started
// at least this long ago; inside the window such a token is refused at once, without
// a request. Verification is unauthenticated work: without the limit every request
// with a made-up key id made the host fetch the issuer's keys, an amplifier against
// the identity provider and a cost to the host. A rotated key is therefore accepted
// at most this long after the previous fetch.
const JWKSRefetchInterval = 30 * time.Second

// Bounds of one JWKS fetch: the issuer is trusted, its network is not.
const (
	jwksFetchTimeout = 10 * time.Second
	maxJWKSBytes     = 1 << 20
)

// errUnknownKey is a token whose key is not in the issuer's set (after a fetch, or
// without one inside JWKSRefetchInterval).
var errUnknownKey = errors.New("the token's signing key is not among the issuer's keys")

// jwksKeySet is an issuer's remote key set (its jwks_url), an oidc.KeySet: go-oidc's
// own RemoteKeySet refetches on every unknown key id, which is what the limit is for.
// It is safe for concurrent use; concurrent misses share one fetch.
type jwksKeySet struct {
	url      string
	algs     []jose.SignatureAlgorithm
	client   *http.Client
	ctx      context.Context // the verifier's, for fetches that outlive a request
	interval time.Duration
	now      func() time.Time

	mu       sync.Mutex
	keys     []jose.JSONWebKey
	last     time.Time // when the last fetch started, successful or not
	inflight *jwksFetch
}

type jwksFetch struct {
	done chan struct{}
	keys []jose.JSONWebKey
	err  error
}

func newJWKSKeySet(ctx context.Context, url string, algs []string) *jwksKeySet {
	k := &jwksKeySet{url: url, client: &http.Client{Timeout: jwksFetchTimeout}, ctx: context.WithoutCancel(ctx),
		interval: JWKSRefetchInterval, now: time.Now}
	for _, a := range algs {
		k.algs = append(k.algs, jose.SignatureAlgorithm(a))
	}
	return k
}

// VerifySignature is oidc.KeySet's: it returns the payload of a JWT signed by one of
// the issuer's keys.
func (k *jwksKeySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(raw, k.algs) // a JWT is the compact serialization; a JSON-serialized JWS is not a token
	if err != nil {
		return nil, fmt.Errorf("malformed jwt: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a JWT has exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	k.mu.Lock()
	cached := k.keys
	k.mu.Unlock()
	if payload, ok := verifyWithKeys(jws, kid, cached); ok {
		return payload, nil
	}
	keys, err := k.refetch(ctx)
	if err != nil {
		return nil, err
	}
	if payload, ok := verifyWithKeys(jws, kid, keys); ok {
		return payload, nil
	}
	return nil, errUnknownKey
}

// verifyWithKeys verifies jws with the key named kid (any key when the token names
// none).
func verifyWithKeys(jws *jose.JSONWebSignature, kid string, keys []jose.JSONWebKey) ([]byte, bool) {
	for i := range keys {
		if kid != "" && keys[i].KeyID != kid {
			continue
		}
		if payload, err := jws.Verify(&keys[i]); err == nil {
			return payload, true
		}
	}
	return nil, false
}

// refetch fetches the key set unless a fetch started less than the interval ago (then
// errUnknownKey at once); a caller arriving during a fetch waits for it.
func (k *jwksKeySet) refetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	f := k.inflight
	if f == nil {
		if !k.last.IsZero() && k.now().Sub(k.last) < k.interval {
			k.mu.Unlock()
			return nil, fmt.Errorf("%w (the keys were fetched less than %s ago)", errUnknownKey, k.interval)
		}
		f = &jwksFetch{done: make(chan struct{})}
		k.inflight, k.last = f, k.now()
		go func() {
			keys, err := k.fetch()
			k.mu.Lock()
			if err == nil {
				k.keys = keys
			}
			k.inflight = nil
			k.mu.Unlock()
			f.keys, f.err = keys, err
			close(f.done)
		}()
	}
	k.mu.Unlock()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-f.done:
		return f.keys, f.err
	}
}

// fetch reads the key set: the public signing keys of a supported type; any other
// entry (a symmetric key, an unknown type, a key for encryption) is skipped.
func (k *jwksKeySet) fetch() ([]jose.JSONWebKey, error) {
	ctx, cancel := context.WithTimeout(k.ctx, jwksFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("jwks: fetch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jwks: fetch: %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("jwks: read: %w", err)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("jwks: more than %d bytes", maxJWKSBytes)
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range doc.Keys {
		var key jose.JSONWebKey
		if err := key.UnmarshalJSON(raw); err != nil || (key.Use != "" && key.Use != "sig") {
			continue
		}
		pub := key.Public()
		switch pub.Key.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
		default:
			continue
		}
		if pub.Algorithm != "" && !slices.Contains(k.algs, jose.SignatureAlgorithm(pub.Algorithm)) {
			continue
		}
		keys = append(keys, pub)
	}
	return keys, nil
}
