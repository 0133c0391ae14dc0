package spec

import (
	"path"
	"slices"
)

var protocolKeys = []string{"name", "description", "initial_mode", "modes", "exclusive_tools"}

// LoadProtocol parses one protocols/*.yaml file. Tool references and WF-1 are checked by
// [Check], which knows every tool and server.
func LoadProtocol(rel, display string, data []byte) (*Protocol, Diagnostics) {
	var diags Diagnostics
	p := loadProtocol(reporter{path: display, diags: &diags}, rel, data)
	return p, diags
}

func loadProtocol(r reporter, rel string, data []byte) *Protocol {
	root := parseDocument(r, data)
	if root == nil {
		return nil
	}
	m := r.asMapping(root, "protocol", protocolKeys...)
	if m == nil {
		return nil
	}
	p := &Protocol{File: rel, Positions: Positions{m}}
	if name, ok := m.requiredStr("name", "protocol"); ok {
		p.Name = name
		switch {
		case !segment.MatchString(name):
			r.errorf(m.at("name"), "SPEC-8.protocol-name", "protocol name %q must be lower_snake_case: [a-z][a-z0-9]*(_[a-z0-9]+)*", name)
		case path.Base(rel) != name+".yaml":
			r.errorf(m.at("name"), "SPEC-8.file-name", "protocol %q must be in a file named %s, not %s", name, name+".yaml", path.Base(rel))
		}
	}
	m.str("description")
	if !m.has("modes") {
		r.errorf(posOf(root), "SPEC-8.missing-key", "protocol is missing required key %q", "modes")
	} else if mm := r.asMapping(m.get("modes"), "modes"); mm != nil {
		if len(mm.order) == 0 {
			r.errorf(m.at("modes"), "SPEC-8.modes-empty", "a protocol must declare at least one mode")
		}
		for _, name := range mm.order {
			mode := &Mode{Name: name, Pos: mm.keyAt(name)}
			if !segment.MatchString(name) {
				r.errorf(mode.Pos, "SPEC-8.mode-name", "mode name %q must be lower_snake_case: [a-z][a-z0-9]*(_[a-z0-9]+)*", name)
			}
			if mdm := r.asMapping(mm.get(name), "mode "+name, "description", "tools"); mdm != nil {
				mode.Positions = Positions{mdm}
				mdm.str("description")
				if !mdm.has("tools") {
					r.errorf(mode.Pos, "SPEC-8.missing-key", "mode %s is missing required key %q", name, "tools")
				} else if tools, ok := mdm.strList("tools"); ok {
					seen := map[string]bool{}
					for _, t := range tools {
						if seen[t.Name] {
							r.errorf(t.Pos, "SPEC-8.mode-tool-duplicate", "mode %s lists %s twice", name, t.Name)
							continue
						}
						seen[t.Name] = true
						mode.Tools = append(mode.Tools, t)
					}
				}
			}
			p.Modes = append(p.Modes, mode)
		}
	}
	if !m.has("initial_mode") {
		r.errorf(posOf(root), "SPEC-8.missing-key", "protocol is missing required key %q", "initial_mode")
	} else if im, ok := m.str("initial_mode"); ok {
		p.InitialMode = Ref{Name: im, Pos: m.at("initial_mode")}
		if p.Modes != nil && p.Mode(im) == nil {
			r.errorf(p.InitialMode.Pos, "SPEC-8.initial-mode-unknown", "initial_mode %q is not one of the protocol's modes (%s)", im, joinModes(p.Modes))
		}
	}
	if refs, ok := m.strList("exclusive_tools"); ok {
		seen := map[string]bool{}
		for _, t := range refs {
			if seen[t.Name] {
				r.errorf(t.Pos, "SPEC-8.exclusive-duplicate", "exclusive_tools lists %s twice", t.Name)
				continue
			}
			seen[t.Name] = true
			p.ExclusiveTools = append(p.ExclusiveTools, t)
		}
	}
	return p
}

// Mode returns the mode named name, or nil.
func (p *Protocol) Mode(name string) *Mode {
	for _, m := range p.Modes {
		if m.Name == name {
			return m
		}
	}
	return nil
}

func joinModes(ms []*Mode) string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Name
	}
	slices.Sort(names)
	s := ""
	for i, n := range names {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s
}

// Exclusivity says why a tool is exclusive to one mode (WF-2).
type Exclusivity struct {
	Declared        bool // listed in exclusive_tools
	Default         bool // one of DefaultExclusiveTools
	ConfersApproval bool // its spec says confers_approval: true
}

// ExclusiveSet is the protocol's effective exclusive set: declared exclusive_tools, the
// defaults, and every tool of tools whose spec confers approval (WF-2). Declaring fewer
// never removes a default.
func (p *Protocol) ExclusiveSet(tools []*Tool) map[string]Exclusivity {
	set := map[string]Exclusivity{}
	for _, d := range DefaultExclusiveTools {
		e := set[d]
		e.Default = true
		set[d] = e
	}
	for _, t := range tools {
		if t.ConfersApproval {
			e := set[t.Name]
			e.ConfersApproval = true
			set[t.Name] = e
		}
	}
	for _, t := range p.ExclusiveTools {
		e := set[t.Name]
		e.Declared = true
		set[t.Name] = e
	}
	return set
}
