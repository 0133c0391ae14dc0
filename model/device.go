package model

import "slices"

// Device is one devices/*.yaml file (DEV-2): a machine of a user's that dials the
// gateway and serves MCP tools over that connection.
type Device struct {
	File        string
	DeviceID    string
	Description string
	// Tenant is the tenant the device belongs to: its tools exist for that tenant's
	// principals only (ID-2), and its connection's audit entries and events are that
	// tenant's.
	Tenant string
	// TokenSHA256 is the SHA-256 (lower-case hex) of the device's bearer token. The
	// token itself is never in a file.
	TokenSHA256 string
	// AllowTools are the remote tool names the device may serve; nil: every tool it
	// lists, an empty non-nil list: none.
	AllowTools []string
	// Server is the device as the MCP client adapter sees it: an operator-configured
	// server named by the device id, with the device's classification and no
	// transport.
	Server *Server
}

// Allows reports whether the device may serve the remote tool name.
func (d *Device) Allows(remote string) bool {
	return d.AllowTools == nil || slices.Contains(d.AllowTools, remote)
}
