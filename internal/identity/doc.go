// Package identity establishes who is calling (ID-1): it verifies a bearer token against
// the operator's principals.yaml — a static token by its SHA-256, compared in constant
// time, or a JWT from a trusted OIDC issuer, verified with github.com/coreos/go-oidc/v3
// (signature by the issuer's JWKS or a configured public key, iss, aud, exp, nbf;
// asymmetric algorithms only, so "alg: none" and an HMAC token signed with the public key
// are refused) — and maps it to a runtime.Principal (id, tenant, scopes).
//
// It adapts the verifier to the go-sdk's auth.RequireBearerToken, so the MCP endpoint is
// an OAuth resource server (RFC 9728 metadata, 401 with WWW-Authenticate), and recovers
// the principal from the request's auth.TokenInfo.
//
// A token is never logged, stored or put in an error: errors say which check failed.
//
// identity imports runtime (the Principal type), spec and the go-sdk's auth package. It
// must never import a store driver, the MCP server or client packages, codegen or cmd.
package identity
