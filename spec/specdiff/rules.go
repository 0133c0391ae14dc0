package specdiff

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/toolgen/toolgen/spec"
)

// Rule is one row of the rule table (see the package documentation, which lists the
// same rules with what fires them).
type Rule struct {
	Name     string
	Severity Severity
	// Kinds are what a finding of the rule can be about: tool, server, device, protocol, policy.
	Kinds []string
}

// Rules is the rule table, in the order of the package documentation. A rule's name and
// severity never change: CI configurations and `acknowledge` entries name them.
var Rules = []Rule{
	{"IDEMPOTENCY_LOOSENED", Weakens, []string{"tool", "server", "device"}},
	{"IDEMPOTENT_WHEN_CHANGED", Weakens, []string{"tool"}},
	{"SIDE_EFFECT_LOWERED", Weakens, []string{"tool", "server", "device"}},
	{"RISK_LOWERED", Weakens, []string{"tool", "server", "device"}},
	{"SCOPE_REMOVED", Weakens, []string{"tool", "server", "device"}},
	{"OUTPUT_TRUST_RAISED", Weakens, []string{"tool"}},
	{"APPROVAL_WHEN_REMOVED", Weakens, []string{"tool"}},
	{"APPROVAL_WHEN_CHANGED", Weakens, []string{"tool"}},
	{"PARALLEL_SAFE_ENABLED", Weakens, []string{"tool"}},
	{"CONFERS_APPROVAL_DISABLED", Weakens, []string{"tool"}},
	{"MODE_TOOL_ADDED", Weakens, []string{"protocol"}},
	{"EXCLUSIVE_TOOL_DROPPED", Weakens, []string{"protocol"}},
	{"SERVER_TO_TENANT", Weakens, []string{"server"}},
	{"SERVER_TO_STDIO", Weakens, []string{"server"}},
	{"DEVICE_TOOLS_ALLOWED", Weakens, []string{"device"}},
	{"DEVICE_TENANT_CHANGED", Weakens, []string{"device"}},
	{"POLICY_RULE_REMOVED", Weakens, []string{"policy"}},
	{"POLICY_RULE_CHANGED", Weakens, []string{"policy"}},
	{"POLICY_ALLOW_RULE_ADDED", Weakens, []string{"policy"}},
	{"EGRESS_HOST_ADDED", Weakens, []string{"policy"}},
	{"BOUND_REMOVED", Weakens, []string{"tool"}},
	{"WORKSPACE_PATH_REMOVED", Weakens, []string{"tool"}},
	{"ISSUER_ADDED", Weakens, []string{"issuer"}},
	{"ISSUER_TENANTS_WIDENED", Weakens, []string{"issuer"}},
	{"ISSUER_CHANGED", Weakens, []string{"issuer"}},
	{"CONSOLE_SIGNIN_ADDED", Weakens, []string{"issuer"}},
	{"WEBHOOK_ADDED", Weakens, []string{"webhook"}},
	{"WEBHOOK_DESTINATION_CHANGED", Weakens, []string{"webhook"}},
	{"WEBHOOK_TENANTS_WIDENED", Weakens, []string{"webhook"}},
	{"WEBHOOK_UNSIGNED", Weakens, []string{"webhook"}},
	{"CONSOLE_URL_CHANGED", Weakens, []string{"notifications"}},
	{"TOOL_REMOVED", Breaking, []string{"tool"}},
	{"ARG_REMOVED", Breaking, []string{"tool"}},
	{"ARG_TYPE_CHANGED", Breaking, []string{"tool"}},
	{"ARG_NEWLY_REQUIRED", Breaking, []string{"tool"}},
	{"ENUM_VALUE_REMOVED", Breaking, []string{"tool"}},
	{"VERSION_NOT_BUMPED", Breaking, []string{"tool"}},
	{"ARG_BOUND", Breaking, []string{"tool"}},
	{"SERVER_CLASSIFICATION_DEFAULTED", Info, []string{"server", "device"}},
	{"EXCLUSIVE_DECLARATION_DROPPED", Info, []string{"protocol"}},
	{"TOOL_ADDED", Info, []string{"tool"}},
	{"TOOL_CHANGED", Info, []string{"tool"}},
	{"ACKNOWLEDGEMENT_STALE", Info, []string{"tool"}},
	{"SERVER_ADDED", Info, []string{"server"}},
	{"SERVER_REMOVED", Info, []string{"server"}},
	{"SERVER_CHANGED", Info, []string{"server"}},
	{"DEVICE_ADDED", Info, []string{"device"}},
	{"DEVICE_REMOVED", Info, []string{"device"}},
	{"DEVICE_CHANGED", Info, []string{"device"}},
	{"PROTOCOL_ADDED", Info, []string{"protocol"}},
	{"PROTOCOL_REMOVED", Info, []string{"protocol"}},
	{"MODE_ADDED", Info, []string{"protocol"}},
	{"MODE_REMOVED", Info, []string{"protocol"}},
	{"MODE_TOOL_REMOVED", Info, []string{"protocol"}},
	{"PROTOCOL_CHANGED", Info, []string{"protocol"}},
	{"POLICY_RULE_ADDED", Info, []string{"policy"}},
	{"POLICY_ALLOW_RULE_REMOVED", Info, []string{"policy"}},
	{"EGRESS_HOST_REMOVED", Info, []string{"policy"}},
	{"ISSUER_REMOVED", Info, []string{"issuer"}},
	{"CONSOLE_SIGNIN_REMOVED", Info, []string{"issuer"}},
	{"WEBHOOK_REMOVED", Info, []string{"webhook"}},
	{"WEBHOOK_CHANGED", Info, []string{"webhook"}},
}

// LookupRule returns the rule named name.
func LookupRule(name string) (Rule, bool) {
	i := slices.IndexFunc(Rules, func(r Rule) bool { return r.Name == name })
	if i < 0 {
		return Rule{}, false
	}
	return Rules[i], true
}

// Acknowledgeable reports whether a tool spec may list rule name in `acknowledge`: a
// weakens or breaking rule whose findings are about a tool, except TOOL_REMOVED (a
// removed tool has no spec left to carry the entry). An info finding never fails, so
// there is nothing to acknowledge.
func Acknowledgeable(name string) bool {
	r, ok := LookupRule(name)
	return ok && r.Severity != Info && slices.Contains(r.Kinds, "tool") && name != "TOOL_REMOVED"
}

// AcknowledgeableRules lists the names [Acknowledgeable] accepts, in table order.
func AcknowledgeableRules() []string {
	var out []string
	for _, r := range Rules {
		if Acknowledgeable(r.Name) {
			out = append(out, r.Name)
		}
	}
	return out
}

// CheckAcknowledgements reports every `acknowledge` entry of t's tools that names no
// rule a tool can acknowledge, at the entry, as diagnostics of rule "unknown-rule". The
// loader (package spec) checks the entries' grammar; which rules exist is known only
// here, and spec must not import this package.
func CheckAcknowledgements(t *spec.Tree) spec.Diagnostics {
	if t == nil {
		return nil
	}
	var out spec.Diagnostics
	for _, tool := range t.Tools {
		for _, a := range tool.Acknowledge {
			if Acknowledgeable(a.Name) {
				continue
			}
			var msg string
			if r, ok := LookupRule(a.Name); ok {
				why := "a removed tool has no spec left to carry it"
				switch {
				case !slices.Contains(r.Kinds, "tool"):
					why = fmt.Sprintf("its findings are about a %s, and a tool acknowledges only findings about itself", r.Kinds[0])
				case r.Severity == Info:
					why = "an info finding never fails, so there is nothing to acknowledge"
				}
				msg = fmt.Sprintf("acknowledge cannot name %s: %s", a.Name, why)
			} else {
				msg = fmt.Sprintf("acknowledge names unknown rule %q", a.Name)
				if s := spec.Closest(a.Name, AcknowledgeableRules()); s != "" {
					msg += fmt.Sprintf("; did you mean %s?", s)
				} else {
					msg += "; the rules a tool can acknowledge are " + strings.Join(AcknowledgeableRules(), ", ")
				}
			}
			out = append(out, spec.NewDiagnostic(displayPath(t, tool.File), a.Pos, "acknowledge.unknown-rule", msg))
		}
	}
	return out.Sorted()
}

// displayPath is file rel of tree t as the tree displays it.
func displayPath(t *spec.Tree, rel string) string {
	if t.Root != "" && t.Root != "." {
		return path.Join(strings.ReplaceAll(t.Root, "\\", "/"), rel)
	}
	return rel
}
