// Package names is the registry name grammar (SPEC-1) and the reserved adapter domains
// (SPEC-2), in one place for the build-time checker (spec) and the run-time registry
// (runtime, RT-15), which must agree and must not import each other.
//
// It imports nothing of this module.
package names

import (
	"fmt"
	"regexp"
	"strings"
)

// Segment is the grammar of one dot-separated part of a registry name, and of argument
// names, server ids, mode and protocol names: lower_snake_case with no leading,
// trailing or double underscore.
var Segment = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// MaxBytes bounds a registry name. The wire name replaces "." with "__", so a 64-byte
// name stays within the 128 characters real MCP clients accept.
const MaxBytes = 64

// ReservedDomains belong to adapters (MCP, devices, sandboxes): a builtin cannot be
// named in one, so no configuration can shadow a builtin such as workspace.write_text.
var ReservedDomains = []string{"device", "mcp", "sandbox"}

// AdapterBuiltins are the tools of toolgen's own adapters that are specified in
// toolgen's tools/ like a builtin, and generated like one, yet named in a reserved
// domain: the sandbox's script runner. A host registers them through
// runtime.Registry.RegisterAdapter, which forces their output trust (RT-6); the
// registry's Register refuses them like every reserved name.
var AdapterBuiltins = []string{"sandbox.run_script"}

// AdapterBuiltin reports whether name is one of AdapterBuiltins.
func AdapterBuiltin(name string) bool {
	for _, b := range AdapterBuiltins {
		if b == name {
			return true
		}
	}
	return false
}

// Check returns why name is not a valid registry name, or "".
func Check(name string) string {
	if len(name) > MaxBytes {
		return fmt.Sprintf("is %d bytes long; names are at most %d bytes", len(name), MaxBytes)
	}
	parts := strings.Split(name, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return "must have two or three dot-separated segments (domain.name or mcp.server.name)"
	}
	for _, p := range parts {
		if !Segment.MatchString(p) {
			return fmt.Sprintf("has segment %q; each segment is lower_snake_case: [a-z][a-z0-9]*(_[a-z0-9]+)*", p)
		}
	}
	return ""
}

// Domain returns the first segment of name.
func Domain(name string) string {
	d, _, _ := strings.Cut(name, ".")
	return d
}

// Reserved reports whether name is in an adapter domain.
func Reserved(name string) bool {
	d := Domain(name)
	for _, r := range ReservedDomains {
		if d == r {
			return true
		}
	}
	return false
}

// Wire is the name served to MCP clients: dots become "__", a bijection because a
// segment never contains "__" (SPEC-1).
func Wire(name string) string { return strings.ReplaceAll(name, ".", "__") }

// FromWire inverts Wire.
func FromWire(wire string) string { return strings.ReplaceAll(wire, "__", ".") }
