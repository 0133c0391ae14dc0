package device

import "testing"

func TestOutsideNamespace(t *testing.T) {
	domains := map[string]bool{"mcp": true, "device": true, "sandbox": true, "workspace": true}
	for name, want := range map[string]bool{
		"echo":                  false,
		"read_file":             false,
		"Workspace.Write_Text":  true,
		"workspace__write_text": true,
		"mcp.fs.write":          true,
		"MCP__fs__write":        true,
		"device.other.x":        true,
		"device__other__x":      true,
		"device.lab.echo":       false, // its own namespace, repeated
		"device__lab__echo":     false,
		"notes.search":          false, // not a domain anyone has
		"workspace_write":       false, // one segment
		"sandbox":               false,
		"sandbox.":              true,
		"device.lab":            true, // not the own prefix with its dot: device domain
	} {
		if got := outsideNamespace(name, "lab", domains); got != want {
			t.Errorf("outsideNamespace(%q) = %v, want %v", name, got, want)
		}
	}
}
