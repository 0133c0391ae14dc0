package spec

import (
	"regexp"

	"gopkg.in/yaml.v3"
)

var (
	policyKeys = []string{"egress", "rules"}
	ruleKeys   = []string{"name", "description", "tools", "approve_when", "deny_when", "allow_when"}
	// RuleEffects maps a rule's condition key to its effect.
	ruleConditions = []struct{ key, effect string }{
		{"approve_when", "approve"}, {"deny_when", "deny"}, {"allow_when", "allow"},
	}
	hostPattern = regexp.MustCompile(`^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
)

// LoadPolicy parses policy.yaml (POL-2). Tool references and CEL are checked by [Check].
func LoadPolicy(rel, display string, data []byte) (*Policy, Diagnostics) {
	var diags Diagnostics
	p := loadPolicy(reporter{path: display, diags: &diags}, rel, data)
	return p, diags
}

func loadPolicy(r reporter, rel string, data []byte) *Policy {
	root := parseDocument(r, data)
	if root == nil {
		return nil
	}
	m := r.asMapping(root, "policy", policyKeys...)
	if m == nil {
		return nil
	}
	lines := splitLines(data)
	p := &Policy{File: rel, Positions: Positions{m}}
	if m.has("egress") {
		if em := r.asMapping(m.get("egress"), "egress", "allow"); em != nil {
			if hosts, ok := em.strList("allow"); ok {
				for _, h := range hosts {
					if !hostPattern.MatchString(h.Name) {
						r.errorf(h.Pos, "POL-2.egress-host", "egress host %q must be a lower-case host name, optionally starting with \"*.\" for its subdomains", h.Name)
						continue
					}
					p.EgressAllow = append(p.EgressAllow, h)
				}
			}
		}
	}
	if !m.has("rules") {
		return p
	}
	rules := m.get("rules")
	if rules.Kind != yaml.SequenceNode {
		r.errorf(posOf(rules), "schema.not-a-list", "rules must be a list, found %s", kindName(rules))
		return p
	}
	seen := map[string]Pos{}
	for _, rn := range rules.Content {
		rm := r.asMapping(rn, "policy rule", ruleKeys...)
		if rm == nil {
			continue
		}
		rule := &Rule{Pos: posOf(rn), Positions: Positions{rm}}
		if name, ok := rm.requiredStr("name", "policy rule"); ok {
			rule.Name = name
			if !ruleName.MatchString(name) {
				r.errorf(rm.at("name"), "POL-2.rule-name", "rule name %q must be lower-case words joined by - or _", name)
			}
			if first, dup := seen[name]; dup {
				r.errorf(rm.at("name"), "POL-2.rule-name-duplicate", "rule name %q is used twice (first at line %d)", name, first.Line)
			}
			seen[name] = rm.at("name")
		}
		rm.str("description")
		if tools, ok := rm.strList("tools"); ok {
			if len(tools) == 0 {
				r.errorf(rm.at("tools"), "POL-2.tools-empty", "tools must list at least one tool; leave it out to match every tool")
			}
			rule.Tools = tools
		}
		n := 0
		for _, c := range ruleConditions {
			if rm.has(c.key) {
				n++
				if n == 1 {
					rule.Effect, rule.When = c.effect, exprOf(rm, c.key, "POL-2", lines)
				}
			}
		}
		if n != 1 {
			r.errorf(rule.Pos, "POL-2.rule-condition-count", "a policy rule must have exactly one of approve_when, deny_when or allow_when, found %d", n)
		}
		p.Rules = append(p.Rules, rule)
	}
	return p
}

var ruleName = regexp.MustCompile(`^[a-z][a-z0-9]*([-_][a-z0-9]+)*$`)
