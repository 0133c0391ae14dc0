package protocol

import (
	"slices"
	"strings"

	"github.com/toolgen/toolgen/model"
)

// Protocol is a checked protocol: its modes and the tools each holds. [FromModel] makes
// one of the model spec produced for a spec root without findings (internal/protocolload
// loads and refuses), so a Protocol has passed WF-1/WF-2.
type Protocol struct {
	name    string
	initial string
	modes   []mode // declaration order
}

type mode struct {
	name  string
	tools []string // as declared: tool names and mcp.<server>.* patterns
}

// FromModel is the protocol of m, which must have passed toolgen's checks: the caller
// loaded the spec root and found no finding (WF-1 and WF-2 are checked over every tool
// spec and server classification, which m does not hold).
func FromModel(m *model.Protocol) *Protocol {
	p := &Protocol{name: m.Name, initial: m.InitialMode}
	for _, md := range m.Modes {
		p.modes = append(p.modes, mode{name: md.Name, tools: slices.Clone(md.Tools)})
	}
	return p
}

// Name is the protocol's name.
func (p *Protocol) Name() string { return p.name }

// InitialMode is the mode a session starts in (WF-4's last resort).
func (p *Protocol) InitialMode() string { return p.initial }

// Modes lists the mode names in declaration order.
func (p *Protocol) Modes() []string {
	out := make([]string, len(p.modes))
	for i, m := range p.modes {
		out[i] = m.name
	}
	return out
}

// HasMode reports whether name is one of the protocol's modes.
func (p *Protocol) HasMode(name string) bool { return p.mode(name) != nil }

// ModeTools lists the tool references mode declares, as written (names and
// mcp.<server>.* patterns); nil for an unknown mode.
func (p *Protocol) ModeTools(name string) []string {
	if m := p.mode(name); m != nil {
		return slices.Clone(m.tools)
	}
	return nil
}

// Holds reports whether mode exposes tool (WF-3): the mode lists the tool, or an
// mcp.<server>.* pattern that covers it. An unknown mode holds nothing.
func (p *Protocol) Holds(modeName, tool string) bool {
	m := p.mode(modeName)
	if m == nil {
		return false
	}
	for _, ref := range m.tools {
		if refHolds(ref, tool) {
			return true
		}
	}
	return false
}

func (p *Protocol) mode(name string) *mode {
	for i := range p.modes {
		if p.modes[i].name == name {
			return &p.modes[i]
		}
	}
	return nil
}

// refHolds is the membership rule spec's WF-1 check uses (spec/check.go holds): a
// reference is a tool name, or a pattern ending in * that covers every name with the
// pattern's prefix. spec checks that the only patterns are mcp.<server>.*, so the
// prefix always ends in "." and never crosses a server.
func refHolds(ref, tool string) bool {
	if ref == tool {
		return true
	}
	prefix, ok := strings.CutSuffix(ref, "*")
	return ok && strings.HasPrefix(tool, prefix)
}
