package spec

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// check applies the rules that need more than one file: unique names and Go
// identifiers (SPEC-1), CEL (SPEC-5), tenant egress (SPEC-7), tool references (SPEC-8,
// POL-2) and exclusivity (WF-1, WF-2). References resolve against the tree's own tools
// and the builtins it does not shadow (toolFiles are its tools/*.yaml files).
func check(tree *Tree, disp func(string) string, diags *Diagnostics, toolFiles []string, builtins []*Tool) {
	rep := func(file string) reporter { return reporter{path: disp(file), diags: diags} }

	byName := map[string]*Tool{}
	for _, t := range tree.Tools {
		if t.Name == "" {
			continue
		}
		if first, dup := byName[t.Name]; dup {
			rep(t.File).errorf(t.At("name"), "SPEC-1.duplicate-tool", "tool %s is declared twice (also in %s)", t.Name, disp(first.File))
			continue
		}
		byName[t.Name] = t
		checkToolCEL(rep(t.File), t)
	}
	checkGoIdents(tree, rep, disp)
	scope := newToolScope(tree, byName, toolFiles, builtins)
	tree.scope = scope

	servers := map[string]*Server{}
	for _, s := range tree.Servers {
		if s.ServerID != "" {
			servers[s.ServerID] = s
		}
		if s.ConfiguredBy == "tenant" && s.HTTP != nil {
			u, err := url.Parse(s.HTTP.URL)
			if err != nil || u.Hostname() == "" {
				continue
			}
			var allow []Ref
			if tree.Policy != nil {
				allow = tree.Policy.EgressAllow
			}
			if !HostAllowed(u.Hostname(), allow) {
				rep(s.File).errorf(s.HTTP.URLPos, "SPEC-7.egress-not-allowed", "tenant server host %q is not in the egress allowlist (policy.yaml egress.allow)", u.Hostname())
			}
		}
	}

	devices := map[string]*Server{}
	for _, d := range tree.Devices {
		if d.DeviceID != "" {
			devices[d.DeviceID] = d.Server
		}
	}

	known := func(r reporter, ref Ref, what string) bool {
		why := resolveToolRef(ref.Name, scope, servers, devices)
		if why == "" {
			return true
		}
		msg := fmt.Sprintf("%s names unknown tool %q: %s", what, ref.Name, why)
		if s := closest(ref.Name, scope.names()); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		r.errorf(ref.Pos, ruleFor(what)+".unknown-tool", "%s", msg)
		return false
	}

	protoNames := map[string]bool{}
	for _, p := range tree.Protocols {
		r := rep(p.File)
		if protoNames[p.Name] {
			r.errorf(p.At("name"), "SPEC-8.duplicate-protocol", "protocol %s is declared twice", p.Name)
		}
		protoNames[p.Name] = true
		for _, m := range p.Modes {
			for _, ref := range m.Tools {
				known(r, ref, "mode "+m.Name)
			}
		}
		for _, ref := range p.ExclusiveTools {
			if !strings.HasSuffix(ref.Name, ".*") {
				known(r, ref, "exclusive_tools")
			} else {
				r.errorf(ref.Pos, "SPEC-8.exclusive-pattern", "exclusive_tools names tools one by one; %q is a pattern", ref.Name)
			}
		}
		checkWF1(r, p, scope.all(tree.Tools), disp)
	}

	if pol := tree.Policy; pol != nil {
		r := rep(pol.File)
		for _, rule := range pol.Rules {
			for _, ref := range rule.Tools {
				known(r, ref, "policy rule "+rule.Name)
			}
		}
		checkPolicyCEL(r, pol, scope.lookup)
	}
	tree.ReferencedBuiltins = scope.referenced()
}

func ruleFor(what string) string {
	if strings.HasPrefix(what, "policy") {
		return "POL-2"
	}
	return "SPEC-8"
}

// resolveToolRef says why name does not name a tool, or "". A name is a tool of the
// tree or an embedded builtin it does not shadow, mcp.<server>.<tool> / mcp.<server>.*
// for a classified server, or device.<device>.<tool> / device.<device>.* for a device
// of devices/ (the tools of servers and devices are only known at run time).
func resolveToolRef(name string, scope *toolScope, servers, devices map[string]*Server) string {
	if scope.resolve(name) != nil {
		return ""
	}
	if file, ok := scope.broken[name]; ok {
		return fmt.Sprintf("%s shadows the builtin of that name but does not declare it; fix its findings", file)
	}
	parts := strings.Split(name, ".")
	if len(parts) == 3 && (parts[0] == "mcp" || parts[0] == DeviceDomain) {
		if parts[0] == "mcp" {
			if _, ok := servers[parts[1]]; !ok {
				return fmt.Sprintf("no server %q is classified in servers/", parts[1])
			}
		} else if _, ok := devices[parts[1]]; !ok {
			return fmt.Sprintf("no device %q is declared in %s/", parts[1], DevicesDir)
		}
		if parts[2] == "*" || segment.MatchString(parts[2]) {
			return ""
		}
		return "the tool segment must be lower_snake_case or *"
	}
	if why := CheckName(name); why != "" {
		return "a tool name " + why
	}
	return fmt.Sprintf("there is no %s/%s.yaml and no builtin tool of that name", ToolsDir, name)
}

// holds reports whether a mode's reference covers tool name (an mcp.<server>.* pattern
// covers every tool of that server).
func holds(ref, name string) bool {
	if ref == name {
		return true
	}
	prefix, ok := strings.CutSuffix(ref, "*")
	return ok && strings.HasPrefix(name, prefix)
}

// checkWF1 fails only when an exclusive tool is held by more than one mode (ADR 017).
// The finding is reported at the reference of the second holding mode and names the
// tool and every holding mode, sorted. Its rule is WF-1 when the protocol declared the
// tool exclusive and WF-2 when the tool is exclusive by default or because its spec
// confers approval: declaring fewer never removes those.
func checkWF1(r reporter, p *Protocol, tools []*Tool, disp func(string) string) {
	set := p.ExclusiveSet(tools)
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		var modes []string
		var second Pos
		for _, m := range p.Modes {
			for _, ref := range m.Tools {
				if holds(ref.Name, name) {
					modes = append(modes, m.Name)
					if len(modes) == 2 {
						second = ref.Pos
					}
					break
				}
			}
		}
		if len(modes) < 2 {
			continue
		}
		slices.Sort(modes)
		ex := set[name]
		var why []string
		rule := "WF-2"
		if ex.Declared {
			why = append(why, "declared in exclusive_tools")
			rule = "WF-1"
		}
		if ex.Default {
			why = append(why, "exclusive by default")
		}
		if ex.ConfersApproval {
			why = append(why, "confers_approval in "+specOf(tools, name, disp))
		}
		r.errorf(second, rule, "exclusive tool %s is held by %d modes (%s): an exclusive tool belongs to exactly one mode (%s)",
			name, len(modes), strings.Join(modes, ", "), strings.Join(why, "; "))
	}
}

// specOf names where the spec of tool name is written: a file of the tree, or the
// embedded builtin.
func specOf(tools []*Tool, name string, disp func(string) string) string {
	for _, t := range tools {
		if t.Name == name {
			if t.Builtin {
				return "the builtin spec " + t.File
			}
			return disp(t.File)
		}
	}
	return name
}

// checkGoIdents reports generated Go identifiers that two spec locations would both
// define (SPEC-1), once per pair of locations and at both of them. Nothing is renamed
// to make a clash go away.
func checkGoIdents(tree *Tree, rep func(string) reporter, disp func(string) string) {
	type site struct {
		tool *Tool
		pos  Pos
		what string
	}
	type pair struct{ a, b site }
	pkg := map[string]goIdent{}
	clashes := map[pair][]string{}
	var order []pair
	for _, t := range tree.Tools {
		if t.Name == "" || CheckName(t.Name) != "" {
			continue
		}
		idents, structs := t.idents()
		for _, id := range idents {
			first, dup := pkg[id.name]
			if !dup {
				pkg[id.name] = id
				continue
			}
			if first.tool == id.tool && first.pos == id.pos && first.what == id.what {
				continue
			}
			k := pair{site{first.tool, first.pos, first.what}, site{id.tool, id.pos, id.what}}
			if _, seen := clashes[k]; !seen {
				order = append(order, k)
			}
			clashes[k] = append(clashes[k], id.name)
		}
		owners := make([]string, 0, len(structs))
		for o := range structs {
			owners = append(owners, o)
		}
		slices.Sort(owners)
		for _, owner := range owners {
			seen := map[string]goIdent{}
			for _, f := range structs[owner] {
				if first, dup := seen[f.name]; dup {
					for _, p := range [][2]goIdent{{first, f}, {f, first}} {
						rep(t.File).errorf(p[0].pos, "SPEC-1.go-field-collision", "%s and %s both become Go field %s.%s; rename one of them",
							p[0].what, p[1].what, owner, f.name)
					}
					continue
				}
				seen[f.name] = f
			}
		}
	}
	for _, k := range order {
		names := clashes[k]
		slices.Sort(names)
		list := strings.Join(names, ", ")
		if len(names) > 3 {
			list = fmt.Sprintf("%s and %d more", strings.Join(names[:3], ", "), len(names)-3)
		}
		for _, s := range [][2]site{{k.a, k.b}, {k.b, k.a}} {
			here, there := s[0], s[1]
			tp := there.pos.orStart()
			rep(here.tool.File).errorf(here.pos, "SPEC-1.go-ident-collision", "%s of %s generates the same Go identifiers as %s of %s at %s:%d:%d (%s); rename one of them",
				here.what, here.tool.Name, there.what, there.tool.Name, disp(there.tool.File), tp.Line, tp.Col, list)
		}
	}
}
