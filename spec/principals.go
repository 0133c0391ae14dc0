package spec

import (
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/toolgen/toolgen/model"
)

// PrincipalsFile is the operator's file of principals (ID-1): how callers are
// recognised.
const PrincipalsFile = "principals.yaml"

var (
	principalsKeys = []string{"resource", "authorization_servers", "tokens", "issuers", "local"}
	tokenKeys      = []string{"id", "tenant", "scopes", "token_sha256", "description"}
	localKeys      = []string{"id", "tenant", "scopes", "description"}
	issuerKeys     = []string{"name", "issuer", "audience", "jwks_url", "key_file", "tenant", "tenants", "claims", "algorithms", "console"}
	consoleKeys    = []string{"client_id", "client_secret_env", "scopes", "redirect_url"}
	// envName is the name of an environment variable a spec names (a secret is never
	// in a spec file: the file names the variable that holds it).
	envName   = regexp.MustCompile(`^[A-Z_][A-Z0-9_]{0,127}$`)
	claimKeys = []string{"id", "tenant", "scopes"}
	// principalID is a principal's id: letters, digits and ._:@- (an e-mail address or
	// a subject claim fits), 1-128 bytes.
	principalID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@+-]{0,127}$`)
	// tenantName is a tenant: one lower-case name with - or _.
	tenantName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	// issuerName is an issuer's name, the namespace of its principals' ids
	// (NAME/subject): lower case, as short as a prefix should be.
	issuerName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)
	// SigningAlgorithms are the JWT algorithms an issuer may use: asymmetric only, so a
	// public key can never be used as an HMAC secret, and never "none".
	SigningAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)

// Principals is principals.yaml (ID-1): static bearer tokens for small deployments, OIDC
// / JWT issuers, and local principals an operator names on the command line (stdio).
type Principals struct {
	File string
	// Resource is this server's resource identifier (RFC 9728 "resource"), "" for the
	// URL it is reached at.
	Resource string
	// AuthorizationServers are published in the protected-resource metadata; default:
	// the issuers.
	AuthorizationServers []Ref
	Tokens               []*StaticPrincipal
	Issuers              []*Issuer
	Local                []*StaticPrincipal // TokenSHA256 is empty

	Positions // of the document's keys
}

// StaticPrincipal is a principal declared in the file: with a token digest (tokens) or
// without (local, for stdio and the operator's toolrun commands).
type StaticPrincipal struct {
	ID          string
	Tenant      string
	Scopes      []Ref
	TokenSHA256 string
	Pos         Pos // the entry
}

// Issuer is a trusted OIDC/JWT issuer.
type Issuer struct {
	// Name is the issuer's namespace: the id of a principal its tokens prove is
	// Name + "/" + the id claim (TokenPrincipalID), which can never equal a static or
	// local id (those have no "/"), nor a principal of another issuer.
	Name     string
	Issuer   string
	Audience string
	// Tenant and Tenants bind the issuer to the tenants its tokens may speak for
	// (exactly one is set): Tenant is the one tenant of every principal it proves (the
	// token's tenant claim is not read); Tenants are the values the tenant claim
	// (TenantClaim) may take, any other is refused. An identity provider of one tenant
	// can therefore never mint a principal of another.
	Tenant  string
	Tenants []Ref
	// Exactly one of JWKSURL (fetched and cached) and KeyFile (a PEM public key, relative
	// to the spec root) is set.
	JWKSURL string
	KeyFile string
	// Claims name the claims that carry the principal's id (default "sub"), tenant
	// (default "tenant") and scopes (default "scope": a space-separated string, or a
	// list of strings).
	IDClaim, TenantClaim, ScopesClaim string
	// Algorithms allowed (default RS256 and ES256); never HMAC, never none.
	Algorithms []string
	// Console, when set, lets the issuer's people sign in to the reviewer's console
	// (/console) with the OAuth 2.0 authorization-code flow and PKCE (issue 18).
	Console   *IssuerConsole
	Pos       Pos
	Positions // of the entry's keys
}

// ConsoleCallbackPath is where the issuer sends a person back to the console after
// sign-in: an issuer's console.redirect_url must name this path.
const ConsoleCallbackPath = "/console/auth/callback"

// IssuerConsole is an issuer's console: sign-in, the console as an OAuth client of the
// issuer. Its ID tokens must be signed by the issuer's keys and carry its client id as
// their audience; the principal they prove is mapped exactly as a bearer token's (the
// issuer's claims, tenant binding and NAME/subject id).
type IssuerConsole struct {
	// ClientID is the console's client id at the issuer.
	ClientID string
	// ClientSecretEnv names the environment variable holding the client secret: the
	// console is then a confidential client (client_secret_basic at the token
	// endpoint). Empty: a public client, authenticated by PKCE alone.
	ClientSecretEnv string
	// Scopes are requested at sign-in (default openid); openid is always among them.
	Scopes []Ref
	// RedirectURL is the console's callback as the issuer must send people back to it
	// (an absolute URL whose path is ConsoleCallbackPath); empty: the URL the console
	// was reached at.
	RedirectURL string
	Pos         Pos
	Positions   // of the block's keys
}

// ScopeNames are the scopes the console requests: openid first, then the others.
func (c *IssuerConsole) ScopeNames() []string {
	out := []string{"openid"}
	for _, s := range c.Scopes {
		if s.Name != "openid" {
			out = append(out, s.Name)
		}
	}
	return out
}

// LoadPrincipals parses principals.yaml.
func LoadPrincipals(rel, display string, data []byte) (*Principals, Diagnostics) {
	var diags Diagnostics
	p := loadPrincipals(reporter{path: display, diags: &diags}, rel, data)
	return p, diags
}

func loadPrincipals(r reporter, rel string, data []byte) *Principals {
	root := parseDocument(r, data)
	if root == nil {
		return nil
	}
	m := r.asMapping(root, "principals", principalsKeys...)
	if m == nil {
		return nil
	}
	p := &Principals{File: rel, Positions: Positions{m}}
	if v, ok := m.str("resource"); ok {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			r.errorf(m.at("resource"), "ID-1.resource-url", "resource %q must be an absolute http(s) URL", v)
		} else {
			p.Resource = v
		}
	}
	if m.has("authorization_servers") {
		if list, ok := m.strList("authorization_servers"); ok {
			for _, a := range list {
				if u, err := url.Parse(a.Name); err != nil || u.Scheme != "https" || u.Host == "" {
					r.errorf(a.Pos, "ID-1.authorization-server-url", "authorization server %q must be an https URL", a.Name)
				}
			}
			p.AuthorizationServers = list
		}
	}
	ids := map[string]Pos{}
	static := func(key string, keys []string, withToken bool) []*StaticPrincipal {
		if !m.has(key) {
			return nil
		}
		n := m.get(key)
		if n.Kind != yaml.SequenceNode {
			r.errorf(posOf(n), "schema.not-a-list", "%s must be a list, found %s", key, kindName(n))
			return nil
		}
		var out []*StaticPrincipal
		for _, e := range n.Content {
			em := r.asMapping(e, key+" entry", keys...)
			if em == nil {
				continue
			}
			sp := &StaticPrincipal{Pos: posOf(e)}
			if id, ok := em.requiredStr("id", key+" entry"); ok {
				switch {
				case !principalID.MatchString(id):
					r.errorf(em.at("id"), "ID-1.principal-id", "principal id %q must match %s", id, principalID)
				case ids[id] != (Pos{}):
					r.errorf(em.at("id"), "ID-1.principal-duplicate", "principal %q is declared twice (first at line %d)", id, ids[id].Line)
				default:
					ids[id] = em.at("id")
				}
				sp.ID = id
			}
			if t, ok := em.requiredStr("tenant", key+" entry"); ok {
				if !tenantName.MatchString(t) {
					r.errorf(em.at("tenant"), "ID-1.tenant-name", "tenant %q must match %s", t, tenantName)
				}
				sp.Tenant = t
			}
			if em.has("scopes") {
				if scopes, ok := em.strList("scopes"); ok {
					for _, sc := range scopes {
						if !scopePattern.MatchString(sc.Name) {
							r.errorf(sc.Pos, "ID-1.scope-grammar", "scope %q must match %s", sc.Name, scopePattern)
						}
						if sc.Name == UnclassifiedScope {
							r.errorf(sc.Pos, "ID-1.scope-never-granted", "scope %q is never granted: it marks unclassified servers and devices", sc.Name)
						}
					}
					sp.Scopes = scopes
				}
			}
			if withToken {
				if sum, ok := em.requiredStr("token_sha256", key+" entry"); ok {
					if !tokenSHA256.MatchString(sum) {
						r.errorf(em.at("token_sha256"), "ID-1.token-sha256", "token_sha256 must be 64 lower-case hex digits (the SHA-256 of the token), never the token")
					}
					sp.TokenSHA256 = sum
				}
			}
			out = append(out, sp)
		}
		return out
	}
	p.Tokens = static("tokens", tokenKeys, true)
	p.Local = static("local", localKeys, false)
	if m.has("issuers") {
		n := m.get("issuers")
		if n.Kind != yaml.SequenceNode {
			r.errorf(posOf(n), "schema.not-a-list", "issuers must be a list, found %s", kindName(n))
		} else {
			names, urls := map[string]Pos{}, map[string]Pos{}
			for _, e := range n.Content {
				is := loadIssuer(r, e)
				if is == nil {
					continue
				}
				// Tokens are routed to an issuer by their iss claim, and principal ids
				// are namespaced by the issuer's name: both must be unique.
				if first, dup := names[is.Name]; dup && is.Name != "" {
					r.errorf(is.Pos, "ID-1.issuer-name-duplicate", "issuer name %s is declared twice (first at line %d)", is.Name, first.Line)
				} else {
					names[is.Name] = is.Pos
				}
				if first, dup := urls[is.Issuer]; dup && is.Issuer != "" {
					r.errorf(is.Pos, "ID-1.issuer-duplicate", "issuer %s is declared twice (first at line %d)", is.Issuer, first.Line)
				} else {
					urls[is.Issuer] = is.Pos
				}
				p.Issuers = append(p.Issuers, is)
			}
		}
	}
	return p
}

func loadIssuer(r reporter, n *yaml.Node) *Issuer {
	m := r.asMapping(n, "issuer", issuerKeys...)
	if m == nil {
		return nil
	}
	is := &Issuer{Pos: posOf(n), Positions: Positions{m}, IDClaim: "sub", TenantClaim: "tenant", ScopesClaim: "scope", Algorithms: []string{"RS256", "ES256"}}
	if v, ok := m.requiredStr("name", "issuer"); ok {
		if !issuerName.MatchString(v) {
			r.errorf(m.at("name"), "ID-1.issuer-name", "issuer name %q must match %s: it prefixes the ids of the principals the issuer proves (NAME/subject)", v, issuerName)
		}
		is.Name = v
	}
	if v, ok := m.requiredStr("issuer", "issuer"); ok {
		if u, err := url.Parse(v); err != nil || u.Scheme != "https" && !(u.Scheme == "http" && loopbackHost(u.Hostname())) || u.Host == "" {
			r.errorf(m.at("issuer"), "ID-1.issuer-url", "issuer %q must be an https URL (http only on loopback, for tests)", v)
		}
		is.Issuer = v
	}
	is.Audience, _ = m.requiredStr("audience", "issuer")
	jwks, hasJWKS := m.str("jwks_url")
	key, hasKey := m.str("key_file")
	switch {
	case hasJWKS == hasKey:
		r.errorf(posOf(n), "ID-1.issuer-key-source", "an issuer needs exactly one of jwks_url and key_file")
	case hasJWKS:
		if u, err := url.Parse(jwks); err != nil || u.Scheme != "https" && !(u.Scheme == "http" && loopbackHost(u.Hostname())) || u.Host == "" {
			r.errorf(m.at("jwks_url"), "ID-1.jwks-url", "jwks_url %q must be an https URL (http only on loopback, for tests)", jwks)
		}
		is.JWKSURL = jwks
	default:
		if key == "" || path.IsAbs(key) || strings.HasPrefix(path.Clean(key), "..") {
			r.errorf(m.at("key_file"), "ID-1.key-file-path", "key_file %q must be a path inside the spec root", key)
		}
		is.KeyFile = key
	}
	loadIssuerTenants(r, m, n, is)
	if m.has("claims") {
		if cm := r.asMapping(m.get("claims"), "claims", claimKeys...); cm != nil {
			for key, dst := range map[string]*string{"id": &is.IDClaim, "tenant": &is.TenantClaim, "scopes": &is.ScopesClaim} {
				if v, ok := cm.str(key); ok {
					if v == "" {
						r.errorf(cm.at(key), "ID-1.claim-empty", "claims.%s cannot be empty", key)
					}
					*dst = v
				}
			}
			if cm.has("tenant") && is.Tenant != "" {
				r.errorf(cm.at("tenant"), "ID-1.tenant-claim-unread", "claims.tenant is not read: the issuer is bound to the one tenant %s (use tenants: [...] to take the tenant from the claim)", is.Tenant)
			}
		}
	}
	if m.has("console") {
		is.Console = loadIssuerConsole(r, m.get("console"))
	}
	if m.has("algorithms") {
		if algs, ok := m.strList("algorithms"); ok {
			is.Algorithms = nil
			for _, a := range algs {
				if !slices.Contains(SigningAlgorithms, a.Name) {
					r.errorf(a.Pos, "ID-1.algorithm", "algorithm %q is not accepted: use one of %s (asymmetric only; never none or HMAC)", a.Name, strings.Join(SigningAlgorithms, ", "))
					continue
				}
				is.Algorithms = append(is.Algorithms, a.Name)
			}
		}
	}
	return is
}

// consoleScope is a scope the console may request at an issuer (RFC 6749 scope-token
// characters, bounded).
var consoleScope = regexp.MustCompile(`^[\x21\x23-\x5b\x5d-\x7e]{1,128}$`)

func loadIssuerConsole(r reporter, n *yaml.Node) *IssuerConsole {
	m := r.asMapping(n, "console", consoleKeys...)
	if m == nil {
		return nil
	}
	c := &IssuerConsole{Pos: posOf(n), Positions: Positions{m}}
	if v, ok := m.requiredStr("client_id", "console"); ok {
		if !consoleScope.MatchString(v) {
			r.errorf(m.at("client_id"), "ID-1.client-id", "client_id %q must be printable ASCII without spaces, quotes or backslashes", v)
		}
		c.ClientID = v
	}
	if v, ok := m.str("client_secret_env"); ok {
		if !envName.MatchString(v) {
			r.errorf(m.at("client_secret_env"), "ID-1.client-secret-env", "client_secret_env %q must name an environment variable (%s): the secret itself is never in a spec file", v, envName)
		}
		c.ClientSecretEnv = v
	}
	if m.has("scopes") {
		if list, ok := m.strList("scopes"); ok {
			seen := map[string]bool{}
			for _, s := range list {
				switch {
				case !consoleScope.MatchString(s.Name):
					r.errorf(s.Pos, "ID-1.console-scope", "scope %q must be printable ASCII without spaces, quotes or backslashes", s.Name)
				case seen[s.Name]:
					r.errorf(s.Pos, "ID-1.console-scope-duplicate", "scope %s is listed twice", s.Name)
				}
				seen[s.Name] = true
			}
			c.Scopes = list
		}
	}
	if v, ok := m.str("redirect_url"); ok {
		u, err := url.Parse(v)
		switch {
		case err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
			u.Scheme != "https" && !(u.Scheme == "http" && loopbackHost(u.Hostname())):
			r.errorf(m.at("redirect_url"), "ID-1.redirect-url", "redirect_url %q must be an absolute https URL without user, query or fragment (http only on loopback, for tests)", v)
		case u.Path != ConsoleCallbackPath:
			r.errorf(m.at("redirect_url"), "ID-1.redirect-path", "redirect_url %q must have the path %s, where the console receives the issuer's answer", v, ConsoleCallbackPath)
		}
		c.RedirectURL = v
	}
	return c
}

// loadIssuerTenants reads the issuer's tenant binding: exactly one of tenant (one
// tenant, the claim is not read) and tenants (the values the tenant claim may take).
func loadIssuerTenants(r reporter, m *mapping, n *yaml.Node, is *Issuer) {
	hasOne, hasMany := m.has("tenant"), m.has("tenants")
	switch {
	case !hasOne && !hasMany:
		r.errorf(posOf(n), "ID-1.issuer-tenant-missing", "an issuer must be bound to the tenants it may speak for: tenant: NAME (every principal it proves is of that tenant), or tenants: [NAME, ...] (the values its tenant claim may take)")
		return
	case hasOne && hasMany:
		r.errorf(m.at("tenants"), "ID-1.issuer-tenant-both", "an issuer has tenant or tenants, not both")
		return
	case hasOne:
		if t, ok := m.str("tenant"); ok {
			if !tenantName.MatchString(t) {
				r.errorf(m.at("tenant"), "ID-1.tenant-name", "tenant %q must match %s", t, tenantName)
			}
			is.Tenant = t
		}
		return
	}
	list, ok := m.strList("tenants")
	if !ok {
		return
	}
	if len(list) == 0 {
		r.errorf(m.at("tenants"), "ID-1.issuer-tenants-empty", "tenants cannot be empty: an issuer that may speak for no tenant proves no one")
	}
	seen := map[string]bool{}
	for _, t := range list {
		switch {
		case !tenantName.MatchString(t.Name):
			r.errorf(t.Pos, "ID-1.tenant-name", "tenant %q must match %s", t.Name, tenantName)
		case seen[t.Name]:
			r.errorf(t.Pos, "ID-1.issuer-tenant-duplicate", "tenant %s is listed twice", t.Name)
		}
		seen[t.Name] = true
	}
	is.Tenants = list
}

// AssertsTenant reports whether the issuer may speak for tenant.
func (is *Issuer) AssertsTenant(tenant string) bool {
	if is.Tenant != "" {
		return tenant == is.Tenant
	}
	return slices.ContainsFunc(is.Tenants, func(r Ref) bool { return r.Name == tenant })
}

// TenantNames are the tenants the issuer may speak for, in declaration order.
func (is *Issuer) TenantNames() []string {
	if is.Tenant != "" {
		return []string{is.Tenant}
	}
	out := make([]string, len(is.Tenants))
	for i, t := range is.Tenants {
		out[i] = t.Name
	}
	return out
}

// TokenPrincipalSeparator joins an issuer's name and a token's id claim into the
// principal's id (TokenPrincipalID). No static or local id can hold it.
const TokenPrincipalSeparator = model.TokenPrincipalSeparator

// TokenPrincipalID is the id of the principal a token of issuer proves: the issuer's
// name, "/", the id claim. Audit entries, approvals and policy rules (principal.id)
// see this id.
func TokenPrincipalID(issuerName, subject string) string {
	return model.TokenPrincipalID(issuerName, subject)
}

func loopbackHost(h string) bool {
	return h == "localhost" || h == "127.0.0.1" || h == "::1"
}
