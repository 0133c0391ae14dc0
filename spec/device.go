package spec

import (
	"path"
	"regexp"
	"strings"

	"github.com/toolgen/toolgen/internal/names"
)

var deviceKeys = []string{"device_id", "description", "tenant", "token_sha256", "classification", "allow_tools"}

// tokenSHA256 is a SHA-256 digest in lower-case hex: the only form of a device's token a
// spec file may hold.
var tokenSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// DeviceDomain is the registry domain of device tools: device.{device_id}.{tool}.
const DeviceDomain = "device"

// Device is one devices/*.yaml file (DEV-2): a machine of a user's that dials the
// gateway and serves MCP tools over that connection.
type Device struct {
	File        string
	DeviceID    string
	Description string
	// Tenant is the tenant the device belongs to (required): its tools exist for that
	// tenant's principals only — another tenant's call is unknown_tool and its
	// tools/list leaves them out (ID-2) — and its connection's audit entries and events
	// are that tenant's.
	Tenant string
	// TokenSHA256 is the SHA-256 (lower-case hex) of the device's bearer token. The
	// token itself is never in a file.
	TokenSHA256 string
	// AllowTools are the remote tool names the device may serve; nil: every tool it
	// lists. A listed name the device does not offer is not an error.
	AllowTools []Ref
	// Server is the device as the MCP client adapter sees it: an operator-configured
	// server named by the device id, with the device's classification (every missing
	// field at its most restrictive value, as for servers) and no transport: the
	// device dials in.
	Server *Server

	Positions // of the document's keys
}

// LoadDevice parses and checks one devices/*.yaml file (DEV-2).
func LoadDevice(rel, display string, data []byte) (*Device, Diagnostics) {
	var diags Diagnostics
	d := loadDevice(reporter{path: display, diags: &diags}, rel, data)
	return d, diags
}

func loadDevice(r reporter, rel string, data []byte) *Device {
	root := parseDocument(r, data)
	if root == nil {
		return nil
	}
	m := r.asMapping(root, "device", append(deviceKeys, "token")...)
	if m == nil {
		return nil
	}
	d := &Device{File: rel, Positions: Positions{m}}
	if m.has("token") {
		r.errorf(m.keyAt("token"), "DEV-2.token-in-file", "a device file must never hold the token itself: write token_sha256, the SHA-256 of the token in lower-case hex (sha256sum), and give the token to the device only")
	}
	if id, ok := m.requiredStr("device_id", "device"); ok {
		d.DeviceID = id
		switch {
		case !segment.MatchString(id):
			r.errorf(m.at("device_id"), "DEV-2.device-id", "device_id %q must be one lower_snake_case name segment: [a-z][a-z0-9]*(_[a-z0-9]+)*", id)
		case len(DeviceDomain)+len(id)+3 > names.MaxBytes:
			r.errorf(m.at("device_id"), "DEV-2.device-id-too-long", "device_id %q is too long: %s.%s.NAME must fit in %d bytes", id, DeviceDomain, id, names.MaxBytes)
		case path.Base(rel) != id+".yaml":
			r.errorf(m.at("device_id"), "DEV-2.file-name", "device %q must be in a file named %s, not %s", id, id+".yaml", path.Base(rel))
		}
	}
	d.Description, _ = m.str("description")
	// A device is a user's machine, holding that user's files: which tenant may call it
	// is not a default anybody should get by leaving a key out.
	if !m.has("tenant") {
		at := posOf(m.node)
		if m.has("device_id") {
			at = m.keyAt("device_id")
		}
		r.errorf(at, "DEV-2.tenant-missing", "a device names the tenant it belongs to (tenant: NAME): only that tenant's principals see and call its tools (ID-2)")
	} else if t, ok := m.requiredStr("tenant", "device"); ok {
		if !tenantName.MatchString(t) {
			r.errorf(m.at("tenant"), "DEV-2.tenant-name", "tenant %q must match %s", t, tenantName)
		} else {
			d.Tenant = t
		}
	}
	if sum, ok := m.requiredStr("token_sha256", "device"); ok {
		if !tokenSHA256.MatchString(sum) {
			r.errorf(m.at("token_sha256"), "DEV-2.token-sha256", "token_sha256 must be 64 lower-case hex digits (the SHA-256 of the token), found %d characters", len(sum))
		} else {
			d.TokenSHA256 = sum
		}
	}
	if m.has("allow_tools") {
		if list, ok := m.strList("allow_tools"); ok {
			seen := map[string]bool{}
			for _, t := range list {
				switch {
				case strings.TrimSpace(t.Name) == "":
					r.errorf(t.Pos, "DEV-2.allow-tools-empty-entry", "allow_tools entries are the device's remote tool names and cannot be empty")
				case seen[t.Name]:
					r.errorf(t.Pos, "DEV-2.allow-tools-duplicate", "tool %q is listed twice in allow_tools", t.Name)
				}
				seen[t.Name] = true
			}
			d.AllowTools = list // an empty list allows nothing
		}
	}
	d.Server = &Server{File: rel, ServerID: d.DeviceID, ConfiguredBy: "operator", Resources: "hide", Prompts: "hide", Positions: d.Positions}
	loadClassification(r, m, d.Server)
	return d
}
