package model

import (
	"strings"

	"github.com/toolgen/toolgen/vocab"
)

// UnclassifiedScope is the scope an unclassified server's tools require: no principal
// may be granted it, so such a tool cannot run until the operator classifies the server.
const UnclassifiedScope = "toolgen.unclassified"

// Classification is what the operator declares about every tool of a server or device
// (SPEC-7, MCP-2): never what the server says of itself. A field the file left out holds
// its most restrictive value (write, critical, non_idempotent, [UnclassifiedScope]).
type Classification struct {
	SideEffect     vocab.SideEffect
	Risk           vocab.Risk
	Idempotency    vocab.Idempotency
	RequiredScopes []string
}

// Server is one servers/*.yaml classification (SPEC-7).
type Server struct {
	// File is the classification's path relative to the spec root: the Source of the
	// server's tools.
	File         string
	ServerID     string
	ConfiguredBy string // operator | tenant
	// Tenant is the tenant a tenant-configured server belongs to: only its principals
	// see and call the server's tools (ID-2). Empty for an operator's server.
	Tenant string
	// At most one transport is set; none for a device, which dials in.
	HTTP  *HTTPTransport
	Stdio *StdioTransport
	Classification
	Resources string // expose | hide
	Prompts   string // expose | hide
}

// HTTPTransport is a Streamable HTTP server.
type HTTPTransport struct {
	URL string
}

// StdioTransport is a subprocess server (operator only, MCP-4).
type StdioTransport struct {
	Command string
	Args    []string
	Env     map[string]string
}

// HostAllowed reports whether host matches one egress allowlist pattern (policy.yaml
// egress.allow): an exact host, or "*.example.org" for any subdomain of example.org
// (not example.org itself). Case and a trailing dot do not matter.
func HostAllowed(host string, allow []string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, a := range allow {
		p := strings.ToLower(a)
		if suffix, ok := strings.CutPrefix(p, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
		} else if host == p {
			return true
		}
	}
	return false
}
