package upstream

import (
	"fmt"
	"strings"

	"github.com/toolgen/toolgen/internal/names"
)

// Domain is the registry domain of the tools of an MCP server (SPEC-2); DeviceDomain
// that of a device's tools (DEV-1), which this package registers too.
const (
	Domain       = "mcp"
	DeviceDomain = "device"
)

// digitPrefix is put in front of a normalized name that starts with a digit: a SPEC-1
// segment starts with a letter.
const digitPrefix = "t_"

// emptyName is the normalized form of a remote name that has no character in [A-Za-z0-9]
// at all. Two such names of one server collide and are both dropped, like any collision.
const emptyName = "tool"

// NameBudget is the number of bytes the last segment of mcp.{serverID}.{name} may use
// under the SPEC-1 length limit ([names.MaxBytes]); it is below 1 when serverID is too
// long to name any tool.
func NameBudget(serverID string) int {
	return domainBudget(Domain, serverID)
}

func domainBudget(domain, id string) int {
	return names.MaxBytes - len(domain) - len(id) - 2
}

// NormalizeName maps a remote MCP tool (or prompt) name to one SPEC-1 segment of at most
// maxBytes bytes (MCP-1):
//
//   - ASCII letters are lower-cased; only ASCII is case-folded, so the result never
//     depends on the Unicode tables of a Go release (same input, same name, forever);
//   - every run of characters outside [a-z0-9] becomes one "_", and leading and
//     trailing "_" are trimmed;
//   - a name starting with a digit is prefixed with "t_";
//   - the result is cut to maxBytes bytes (it is ASCII, so any cut is clean) and
//     trailing "_" are trimmed again;
//   - a name with no letter or digit at all becomes "tool".
//
// The result passes [names.Segment] whenever maxBytes >= 1; for maxBytes < 1 it is "".
// NormalizeName is deterministic and total: it never panics, whatever the input.
func NormalizeName(remote string, maxBytes int) string {
	if maxBytes < 1 {
		return ""
	}
	var b strings.Builder
	b.Grow(min(len(remote), maxBytes+len(digitPrefix)))
	pendingSep := false
	for i := 0; i < len(remote); i++ {
		c := remote[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') {
			if pendingSep && b.Len() > 0 {
				b.WriteByte('_')
			}
			pendingSep = false
			if b.Len() == 0 && '0' <= c && c <= '9' {
				b.WriteString(digitPrefix)
			}
			b.WriteByte(c)
			if b.Len() > maxBytes {
				break // the rest would be cut anyway
			}
			continue
		}
		pendingSep = true
	}
	s := b.String()
	if s == "" {
		s = emptyName
	}
	if len(s) > maxBytes {
		s = s[:maxBytes]
	}
	return strings.TrimRight(s, "_")
}

// ToolName is the registry name of a remote tool of server serverID:
// mcp.{serverID}.{NormalizeName(remote)}, cut to the SPEC-1 budget. It fails only when
// serverID itself is not a valid segment or leaves no room for a name.
func ToolName(serverID, remote string) (string, error) {
	return DomainToolName(Domain, serverID, remote)
}

// DomainToolName is ToolName in another adapter domain: device.{deviceID}.{name} for
// the tools of a device (DEV-1), which go through this package too.
func DomainToolName(domain, id, remote string) (string, error) {
	what := "server_id"
	if domain != Domain {
		what = domain + "_id"
	}
	if !names.Segment.MatchString(id) {
		return "", fmt.Errorf("upstream: %s %q is not a lower_snake_case segment (SPEC-7)", what, id)
	}
	budget := domainBudget(domain, id)
	if budget < 1 {
		return "", fmt.Errorf("upstream: %s %q is too long: %s.%s.NAME cannot fit in %d bytes", what, id, domain, id, names.MaxBytes)
	}
	name := domain + "." + id + "." + NormalizeName(remote, budget)
	if why := names.Check(name); why != "" { // cannot happen; checked so a bug is an error, not a bad registration
		return "", fmt.Errorf("upstream: normalized name %q %s", name, why)
	}
	return name, nil
}
