// Package identity establishes who is calling (ID-1): it verifies a bearer token against
// the operator's principals.yaml — a static token by its SHA-256, compared in constant
// time, or a JWT from a trusted OIDC issuer, verified with github.com/coreos/go-oidc/v3
// (signature by the issuer's JWKS or a configured public key, iss, aud, exp, nbf;
// asymmetric algorithms only, so "alg: none" and an HMAC token signed with the public key
// are refused) — and maps it to a runtime.Principal (id, tenant, scopes).
//
// Who may speak for whom (issue 14, findings 6, 9 and 15):
//   - every issuer is bound to the tenants it may assert (principals.yaml tenant: or
//     tenants:): an identity provider of one tenant never proves a principal of another;
//   - a token principal's id is the issuer's name, "/", the id claim (model.TokenPrincipalID),
//     so it can never equal a static or local principal's id or another issuer's;
//   - a token's id claim is printable ASCII without spaces, bounded: a newline or an
//     escape sequence in a subject never reaches a reviewer's terminal;
//   - [Verifier.Local] names local principals only: acting as a token's principal needs
//     the token;
//   - an issuer's JWKS is fetched at most once per JWKSRefetchInterval, so unauthenticated
//     requests naming unknown key ids cost the issuer nothing (jwks.go replaces go-oidc's
//     remote key set, which refetches on every miss).
//
// It adapts the verifier to the go-sdk's auth.RequireBearerToken, so the MCP endpoint is
// an OAuth resource server (RFC 9728 metadata, 401 with WWW-Authenticate), and recovers
// the principal from the request's auth.TokenInfo.
//
// A token is never logged, stored or put in an error: errors say which check failed.
//
// identity imports runtime (the Principal type), model (principals.yaml, which spec
// produces), internal/textsafe, go-jose and the go-sdk's auth package. It must never
// import spec, a store driver, the MCP server or client packages, codegen or cmd.
package identity
