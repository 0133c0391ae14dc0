package identity

import (
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/toolgen/toolgen/internal/textsafe"
	"github.com/toolgen/toolgen/model"
	"github.com/toolgen/toolgen/runtime"
)

// ErrInvalidToken is every verification failure; it wraps auth.ErrInvalidToken, so the
// go-sdk's middleware answers 401.
var ErrInvalidToken = fmt.Errorf("%w", auth.ErrInvalidToken)

// MaxTokenBytes bounds a token: larger ones are refused before any parsing.
const MaxTokenBytes = 16 << 10

// Verifier verifies bearer tokens against a principals file. It is safe for concurrent use.
type Verifier struct {
	static  []staticToken
	issuers map[string]*issuer
	local   map[string]runtime.Principal
}

type staticToken struct {
	digest    [sha256.Size]byte
	principal runtime.Principal
}

type issuer struct {
	conf     *model.Issuer
	verifier *oidc.IDTokenVerifier
	keys     *jwksKeySet // nil for a key_file issuer
	// console verifies the ID tokens of console sign-in (audience: the console's
	// client id); nil when the issuer has no console block.
	console *oidc.IDTokenVerifier
}

// New builds the verifier of p. Key files are read from root (the spec root). A JWKS
// URL is fetched when a token of that issuer first needs it, and again when a token
// names a key it does not hold — at most once per JWKSRefetchInterval per issuer.
func New(ctx context.Context, p *model.Principals, root fs.FS) (*Verifier, error) {
	v := &Verifier{issuers: map[string]*issuer{}, local: map[string]runtime.Principal{}}
	if p == nil {
		return v, nil
	}
	for _, t := range p.Tokens {
		b, err := hex.DecodeString(t.TokenSHA256)
		if err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("principal %s: token_sha256 is not a SHA-256 digest", t.ID)
		}
		v.static = append(v.static, staticToken{digest: [sha256.Size]byte(b), principal: principalOf(t)})
	}
	for _, l := range p.Local {
		v.local[l.ID] = principalOf(l)
	}
	for _, is := range p.Issuers {
		var keys oidc.KeySet
		var remote *jwksKeySet
		if is.JWKSURL != "" {
			remote = newJWKSKeySet(ctx, is.JWKSURL, is.Algorithms)
			keys = remote
		} else {
			pub, err := readPublicKey(root, is.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("issuer %s: %w", is.Issuer, err)
			}
			keys = &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{pub}}
		}
		v.issuers[is.Issuer] = &issuer{conf: is, keys: remote, verifier: oidc.NewVerifier(is.Issuer, keys, &oidc.Config{
			ClientID: is.Audience, SupportedSigningAlgs: slices.Clone(is.Algorithms),
		})}
		if is.Console != nil {
			v.issuers[is.Issuer].console = oidc.NewVerifier(is.Issuer, keys, &oidc.Config{
				ClientID: is.Console.ClientID, SupportedSigningAlgs: slices.Clone(is.Algorithms),
			})
		}
	}
	return v, nil
}

func principalOf(sp *model.StaticPrincipal) runtime.Principal {
	return runtime.Principal{ID: sp.ID, Tenant: sp.Tenant, Scopes: append([]string{}, sp.Scopes...)}
}

func readPublicKey(root fs.FS, name string) (crypto.PublicKey, error) {
	if root == nil {
		return nil, errors.New("key_file needs the spec root")
	}
	data, err := fs.ReadFile(root, name)
	if err != nil {
		return nil, fmt.Errorf("key_file: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("key_file %s: no PEM block", name)
	}
	switch block.Type {
	case "PUBLIC KEY":
		return x509.ParsePKIXPublicKey(block.Bytes)
	case "CERTIFICATE":
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		return c.PublicKey, nil
	}
	return nil, fmt.Errorf("key_file %s: a %q PEM block; want PUBLIC KEY or CERTIFICATE (never a private key)", name, block.Type)
}

// Local returns the principal declared under local: with that id, for stdio and the
// operator's toolrun commands, where the operator names who acts without a proof. A
// static token's principal is not one (issue 14, finding 6): whoever acts as it shows
// its token, so naming a bot's id on the command line never borrows the bot's scopes.
func (v *Verifier) Local(id string) (runtime.Principal, bool) {
	p, ok := v.local[id]
	return p, ok
}

// Verify returns the principal token proves, and when the proof expires (zero for a
// static token). Every failure wraps ErrInvalidToken and never contains the token.
func (v *Verifier) Verify(ctx context.Context, token string) (runtime.Principal, time.Time, error) {
	if token == "" || len(token) > MaxTokenBytes {
		return runtime.Principal{}, time.Time{}, fmt.Errorf("%w: empty or oversized token", ErrInvalidToken)
	}
	if strings.Count(token, ".") == 2 && len(v.issuers) > 0 {
		return v.verifyJWT(ctx, token)
	}
	// Every digest is compared, in constant time, whatever matched: the time taken
	// does not tell how close a guess came or which entry it hit.
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range v.static {
		if subtle.ConstantTimeCompare(v.static[i].digest[:], sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return runtime.Principal{}, time.Time{}, fmt.Errorf("%w: unknown token", ErrInvalidToken)
	}
	return clone(v.static[found].principal), time.Time{}, nil
}

func (v *Verifier) verifyJWT(ctx context.Context, token string) (runtime.Principal, time.Time, error) {
	iss, err := unverifiedIssuer(token)
	if err != nil {
		return runtime.Principal{}, time.Time{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	is := v.issuers[iss]
	if is == nil {
		return runtime.Principal{}, time.Time{}, fmt.Errorf("%w: issuer not trusted", ErrInvalidToken)
	}
	idt, err := is.verifier.Verify(ctx, token)
	if err != nil {
		return runtime.Principal{}, time.Time{}, fmt.Errorf("%w: %s", ErrInvalidToken, why(err))
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return runtime.Principal{}, time.Time{}, fmt.Errorf("%w: claims: %v", ErrInvalidToken, err)
	}
	p, err := is.principal(claims)
	if err != nil {
		return runtime.Principal{}, time.Time{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	return p, idt.Expiry, nil
}

// why names the failed check without the token's content.
func why(err error) string {
	var exp *oidc.TokenExpiredError
	switch {
	case errors.As(err, &exp):
		return "token expired"
	case strings.Contains(err.Error(), "audience"):
		return "wrong audience"
	case strings.Contains(err.Error(), "issued by a different provider"):
		return "wrong issuer"
	case strings.Contains(err.Error(), errUnknownKey.Error()):
		return "unknown signing key"
	case strings.Contains(err.Error(), "signature"), strings.Contains(err.Error(), "signing"):
		return "signature not verified"
	}
	return "token not verified"
}

// MaxSubjectBytes bounds a token's id claim; with its issuer's name (at most 32 bytes)
// and the separator a token principal's id stays within the 256 bytes of an id.
const MaxSubjectBytes = 200

// principal maps verified claims to a principal (issue 14, findings 6 and 9):
//   - its id is the issuer's name, "/", the id claim: never equal to a static or local
//     principal's id (they hold no "/"), nor to another issuer's principal;
//   - the id claim is printable ASCII without spaces, at most MaxSubjectBytes: it is
//     printed in the audit view and the review queues, where a newline or an escape
//     sequence would forge or erase lines;
//   - its tenant is the issuer's bound tenant, or the tenant claim when it is one of
//     the issuer's tenants: an identity provider cannot speak for another tenant.
func (is *issuer) principal(claims map[string]any) (runtime.Principal, error) {
	sub, _ := claims[is.conf.IDClaim].(string)
	if sub == "" {
		return runtime.Principal{}, fmt.Errorf("the token has no %q claim", is.conf.IDClaim)
	}
	if err := textsafe.CheckID(sub, MaxSubjectBytes); err != nil {
		return runtime.Principal{}, fmt.Errorf("the token's %q claim %v", is.conf.IDClaim, err)
	}
	tenant := is.conf.Tenant
	if tenant == "" {
		tenant, _ = claims[is.conf.TenantClaim].(string)
		if tenant == "" {
			return runtime.Principal{}, fmt.Errorf("the token has no %q claim", is.conf.TenantClaim)
		}
		if !is.conf.AssertsTenant(tenant) {
			// The claim's value may be anything: it is not repeated.
			return runtime.Principal{}, fmt.Errorf("the token's %q claim names a tenant issuer %s does not speak for", is.conf.TenantClaim, is.conf.Name)
		}
	}
	p := runtime.Principal{ID: model.TokenPrincipalID(is.conf.Name, sub), Tenant: tenant, Scopes: []string{}, Claims: map[string]string{}}
	for k, v := range claims { // for arguments bound to principal.claims.NAME
		if s, ok := v.(string); ok {
			p.Claims[k] = s
		}
	}
	switch s := claims[is.conf.ScopesClaim].(type) {
	case string:
		p.Scopes = append(p.Scopes, strings.Fields(s)...)
	case []any:
		for _, x := range s {
			if str, ok := x.(string); ok && str != "" {
				p.Scopes = append(p.Scopes, str)
			}
		}
	}
	p.Scopes = slices.DeleteFunc(p.Scopes, func(s string) bool { return s == model.UnclassifiedScope })
	return p, nil
}

// unverifiedIssuer reads the iss claim of a JWT without verifying it: only to choose
// which issuer's verifier decides.
func unverifiedIssuer(token string) (string, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", errors.New("malformed JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", errors.New("malformed JWT payload")
	}
	var c struct {
		Iss string `json:"iss"`
	}
	if err := json.Unmarshal(payload, &c); err != nil || c.Iss == "" {
		return "", errors.New("JWT without an issuer")
	}
	return c.Iss, nil
}

func clone(p runtime.Principal) runtime.Principal {
	p.Scopes = slices.Clone(p.Scopes)
	return p
}

// extraPrincipal is the key of the verified principal in auth.TokenInfo.Extra.
const extraPrincipal = "io.toolgen/principal"

// TokenVerifier is the verifier in the form the go-sdk's auth.RequireBearerToken takes.
// The principal travels in the TokenInfo (see PrincipalFrom); a static token has no
// expiration, so the middleware must allow that (RequireBearerTokenOptions
// AllowMissingExpiration) — a JWT's expiry is checked here and again by the middleware.
func (v *Verifier) TokenVerifier() auth.TokenVerifier {
	return func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		p, exp, err := v.Verify(ctx, token)
		if err != nil {
			return nil, err
		}
		return &auth.TokenInfo{UserID: p.Tenant + "/" + p.ID, Scopes: slices.Clone(p.Scopes), Expiration: exp,
			Extra: map[string]any{extraPrincipal: p}}, nil
	}
}

// PrincipalFrom returns the principal a TokenVerifier put in ti.
func PrincipalFrom(ti *auth.TokenInfo) (runtime.Principal, bool) {
	if ti == nil {
		return runtime.Principal{}, false
	}
	p, ok := ti.Extra[extraPrincipal].(runtime.Principal)
	return clone(p), ok
}
