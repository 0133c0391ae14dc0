package model

import "slices"

// TokenPrincipalSeparator joins an issuer's name and a token's id claim into the
// principal's id ([TokenPrincipalID]). No static or local id can hold it.
const TokenPrincipalSeparator = "/"

// TokenPrincipalID is the id of the principal a token of issuer proves: the issuer's
// name, "/", the id claim. Audit entries, approvals and policy rules (principal.id)
// see this id.
func TokenPrincipalID(issuerName, subject string) string {
	return issuerName + TokenPrincipalSeparator + subject
}

// Principals is principals.yaml (ID-1): static bearer tokens for small deployments, OIDC
// / JWT issuers, and local principals an operator names on the command line (stdio).
type Principals struct {
	File string
	// Resource is this server's resource identifier (RFC 9728 "resource"), "" for the
	// URL it is reached at.
	Resource string
	// AuthorizationServers are published in the protected-resource metadata; default:
	// the issuers.
	AuthorizationServers []string
	Tokens               []*StaticPrincipal
	Issuers              []*Issuer
	Local                []*StaticPrincipal // TokenSHA256 is empty
}

// Principal returns the declared principal (token or local) with the given id, or nil.
func (p *Principals) Principal(id string) *StaticPrincipal {
	if p == nil {
		return nil
	}
	for _, list := range [][]*StaticPrincipal{p.Tokens, p.Local} {
		for _, sp := range list {
			if sp.ID == id {
				return sp
			}
		}
	}
	return nil
}

// StaticPrincipal is a principal declared in the file: with a token digest (tokens) or
// without (local, for stdio and the operator's toolrun commands).
type StaticPrincipal struct {
	ID          string
	Tenant      string
	Scopes      []string
	TokenSHA256 string
}

// Issuer is a trusted OIDC/JWT issuer.
type Issuer struct {
	// Name is the issuer's namespace: the id of a principal its tokens prove is
	// Name + "/" + the id claim ([TokenPrincipalID]).
	Name     string
	Issuer   string
	Audience string
	// Tenant and Tenants bind the issuer to the tenants its tokens may speak for
	// (exactly one is set): Tenant is the one tenant of every principal it proves (the
	// token's tenant claim is not read); Tenants are the values the tenant claim
	// (TenantClaim) may take, any other is refused.
	Tenant  string
	Tenants []string
	// Exactly one of JWKSURL (fetched and cached) and KeyFile (a PEM public key, relative
	// to the spec root) is set.
	JWKSURL string
	KeyFile string
	// Claims name the claims that carry the principal's id, tenant and scopes.
	IDClaim, TenantClaim, ScopesClaim string
	// Algorithms allowed: never HMAC, never none.
	Algorithms []string
	// Console, when set, lets the issuer's people sign in to the reviewer's console
	// with the OAuth 2.0 authorization-code flow and PKCE (issue 18).
	Console *IssuerConsole
}

// AssertsTenant reports whether the issuer may speak for tenant.
func (is *Issuer) AssertsTenant(tenant string) bool {
	if is.Tenant != "" {
		return tenant == is.Tenant
	}
	return slices.Contains(is.Tenants, tenant)
}

// TenantNames are the tenants the issuer may speak for, in declaration order.
func (is *Issuer) TenantNames() []string {
	if is.Tenant != "" {
		return []string{is.Tenant}
	}
	out := make([]string, len(is.Tenants))
	copy(out, is.Tenants)
	return out
}

// IssuerConsole is an issuer's console: sign-in, the console as an OAuth client of the
// issuer. Its ID tokens must be signed by the issuer's keys and carry its client id as
// their audience.
type IssuerConsole struct {
	// ClientID is the console's client id at the issuer.
	ClientID string
	// ClientSecretEnv names the environment variable holding the client secret: the
	// console is then a confidential client. Empty: a public client, authenticated by
	// PKCE alone.
	ClientSecretEnv string
	// Scopes are requested at sign-in (default openid); see [IssuerConsole.ScopeNames].
	Scopes []string
	// RedirectURL is the console's callback as the issuer must send people back to it;
	// empty: the URL the console was reached at.
	RedirectURL string
}

// ScopeNames are the scopes the console requests: openid first, then the others.
func (c *IssuerConsole) ScopeNames() []string {
	out := []string{"openid"}
	for _, s := range c.Scopes {
		if s != "openid" {
			out = append(out, s)
		}
	}
	return out
}
