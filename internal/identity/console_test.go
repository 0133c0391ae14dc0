package identity_test

import (
	"context"
	"errors"
	"testing"
	"testing/fstest"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/toolgen/toolgen/internal/identity"
	"github.com/toolgen/toolgen/spec"
)

func signID(t *testing.T, is *testIssuer, c idClaims) string {
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

type idClaims struct {
	claims
	Nonce string `json:"nonce,omitempty"`
}

// TestVerifyIDToken (issue 18): the console's ID tokens verify only with the issuer's
// key, its iss, the console's client id as audience (an API token for the resource's
// audience does not sign anyone in), and the nonce of the sign-in; the principal is the
// issuer's NAME/subject in the tenant the binding allows.
func TestVerifyIDToken(t *testing.T) {
	is := newIssuer(t)
	doc := `issuers:
  - name: login
    issuer: ` + issuerURL + `
    audience: ` + audience + `
    key_file: keys/login.pem
    tenants: [acme, beta]
    console: {client_id: toolgen-console}
  - name: api-only
    issuer: https://api.example.com
    audience: ` + audience + `
    key_file: keys/login.pem
    tenant: acme
`
	p, diags := spec.LoadPrincipals("principals.yaml", "principals.yaml", []byte(doc))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	v, err := identity.New(context.Background(), p.Model(), fstest.MapFS{"keys/login.pem": {Data: is.pubPEM}})
	if err != nil {
		t.Fatal(err)
	}
	if got := v.ConsoleIssuers(); len(got) != 1 || got[0].Name != "login" || got[0].Console.ClientID != "toolgen-console" {
		t.Fatalf("ConsoleIssuers = %+v", got)
	}
	ok := idClaims{claims: valid(), Nonce: "n-1"}
	ok.Audience = jwt.Audience{"toolgen-console"}
	ctx := context.Background()
	pr, exp, err := v.VerifyIDToken(ctx, "login", signID(t, is, ok), "n-1")
	if err != nil || pr.ID != "login/ana" || pr.Tenant != "acme" || exp.IsZero() {
		t.Fatalf("valid ID token: %+v %v %v", pr, exp, err)
	}
	apiToken := ok
	apiToken.Audience = jwt.Audience{audience}
	otherTenant := ok
	otherTenant.Tenant = "globex"
	for name, c := range map[string]struct {
		issuer, token, nonce string
	}{
		"the API audience":      {"login", signID(t, is, apiToken), "n-1"},
		"another nonce":         {"login", signID(t, is, ok), "n-2"},
		"no nonce":              {"login", signID(t, is, ok), ""},
		"an issuer w/o console": {"api-only", signID(t, is, ok), "n-1"},
		"a tenant not bound":    {"login", signID(t, is, otherTenant), "n-1"},
		"signed by another key": {"login", signID(t, newIssuer(t), ok), "n-1"},
	} {
		if _, _, err := v.VerifyIDToken(ctx, c.issuer, c.token, c.nonce); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("%s: %v, want an invalid token", name, err)
		}
	}
}
