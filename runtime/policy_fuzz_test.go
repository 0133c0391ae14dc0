package runtime

import (
	"context"
	"strings"
	"testing"
)

// FuzzPolicyDecide checks POL-1 on any conditions, arguments, principal and tool: CEL
// compilation and evaluation and Decide never panic; Decide always gives one of the
// three verdicts; and deny beats approval beats allow. The policy has one rule of each
// effect (deny_when, approve_when, allow_when, each fuzzed and listing the tool, another
// tool, an mcp.<server>.* pattern or nothing) and the spec an approval_when. The verdict
// must be what evaluating each condition on its own gives when combined in POL-1's
// order, and adding a rule that always denies, or always requires approval, must turn
// the verdict as precedence says.
//
// sel packs the rest: bits 0-2 the risk, 3-4 the side effect, 5-6 and 7-8 the origin
// and argument trust, 9 not in mode, 10 a required scope, 11-16 which tools each rule
// lists.
//
//	go test -run XXX -fuzz FuzzPolicyDecide -fuzztime 60s ./runtime/
func FuzzPolicyDecide(f *testing.F) {
	type seed struct {
		deny, approve, allow, when string
		args                       string
		tool, id, tenant, scopes   string
		sel                        uint32
	}
	const write, high, untrustedArgs = 2 << 3, 2, 3 << 7
	for _, s := range []seed{
		{"side_effect == 'write' && trust == 'external_untrusted' && principal.tenant == 'prod'",
			"args.branch.startsWith('release/')", "'reader' in principal.scopes", "has(args.force) && args.force",
			`{"branch":"release/1.2","force":true}`, "review.merge", "alice", "prod", "reader,repo:write", write | high | untrustedArgs},
		{"false", "false", "true", "", `{}`, "workspace.write_text", "bob", "dev", "", write | 1 | untrustedArgs},
		{"args.nope == 1", "args.flag", "args.nope == 1", "args.nope > 1", `{"flag":"yes"}`, "mcp.github.delete_repo", "", "", "", 0x1ffff},
		{"tool.endsWith('delete_repo')", "risk == 'critical'", "principal.id == 'alice'", "args.count > 3",
			`{"count":5}`, "mcp.github.delete_repo", "alice", "prod", "a,b,c", 3 << 11},
		{"args.items.all(x, x > 0)", "args.items.exists(x, x > 100)", "size(args.items) < 3", "args.items.size() == 0",
			`{"items":[1,2,300]}`, "x.y", "p", "t", "s", 5 << 11},
		{"[1,2,3].map(x, [x, x, x, x]).map(y, y.map(z, string(z) + 'abc')).size() > 0", "true", "", "1 / 0 == 1",
			`{"a":1e400}`, "x.y", "", "", "", 7},
		{"principal.scopes.exists(s, s.matches('^repo:'))", "", "trust == 'user'", "'x' in args",
			`{"x":null}`, strings.Repeat("t", 200), strings.Repeat("p", 300), "", "a", 0x2a5},
		{"risk == 'severe'", "side_effect == 'mutate'", "true", "", `[]`, "x.unknown", "", "", "", 5 | 3<<3},
		{"false", "args.count > 3", "false", "args.count > 9", `{"count":5}`, "demo.echo", "alice", "prod", "demo.write", 1<<10 | 1<<13},
		{"false", "false", "false", "false", `{"count":5}`, "demo.echo", "alice", "prod", "", 1 << 3},
		{"false", "false", "tool == 'mcp.gh.x'", "", `{}`, "mcp.gh.x", "", "", "", high | 3<<5 | 3<<15},
	} {
		f.Add(s.deny, s.approve, s.allow, s.when, []byte(s.args), s.tool, s.id, s.tenant, s.scopes, s.sel)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, denyWhen, approveWhen, allowWhen, approvalWhen string, rawArgs []byte, tool, id, tenant, scopes string, sel uint32) {
		risks := []Risk{RiskLow, RiskMedium, RiskHigh, RiskCritical, "", "severe", RiskLow, RiskMedium}
		effects := []SideEffect{SideEffectNone, SideEffectRead, SideEffectWrite, "mutate"}
		trusts := []Trust{TrustSystem, TrustUser, TrustTool, TrustExternalUntrusted}
		spec := &ToolSpec{Name: tool, Version: 1, Kind: KindAction,
			Risk: risks[sel&7], SideEffect: effects[sel>>3&3]}
		if sel>>10&1 == 1 {
			spec.RequiredScopes = []string{"demo.write"}
		}
		pr := Principal{ID: id, Tenant: tenant}
		if scopes != "" {
			pr.Scopes = strings.Split(scopes, ",")
		}
		args, err := DecodeCELArgs(rawArgs)
		if err != nil {
			args = nil
		}
		in := DecisionInput{Spec: spec, Principal: pr, InMode: sel>>9&1 == 0,
			OriginTrust: trusts[sel>>5&3], ArgumentTrust: trusts[sel>>7&3], Args: args}
		if e, err := CompileToolExpr(approvalWhen, nil); err == nil {
			in.ApprovalWhen = e
		}

		// One rule per effect whose condition compiles; a condition that does not must
		// make NewPolicy fail (and not panic).
		var rules []PolicyRule
		var applies []bool
		var exprs []*BoolExpr
		for i, r := range []PolicyRule{
			{Name: "fuzz-deny", Effect: PolicyDeny, When: denyWhen},
			{Name: "fuzz-approve", Effect: PolicyApprove, When: approveWhen},
			{Name: "fuzz-allow", Effect: PolicyAllow, When: allowWhen},
		} {
			e, err := CompilePolicyRule(r.When, nil)
			if err != nil {
				if _, perr := NewPolicy([]PolicyRule{r}); perr == nil {
					t.Fatalf("CompilePolicyRule(%q) fails (%v) but NewPolicy accepts the rule", r.When, err)
				}
				continue
			}
			var ok bool
			r.Tools, ok = fuzzRuleTools(tool, sel>>(11+2*i)&3)
			rules = append(rules, r)
			applies = append(applies, ok)
			exprs = append(exprs, e)
		}
		p, err := NewPolicy(rules)
		if err != nil {
			t.Fatalf("NewPolicy: %v", err)
		}
		got, err := p.Decide(ctx, in)
		if err != nil {
			t.Fatalf("Decide: %v", err)
		}
		if again, _ := p.Decide(ctx, in); again != got {
			t.Fatalf("Decide is not deterministic: %+v then %+v", got, again)
		}

		// The oracle: POL-1 from the conditions evaluated one by one.
		vars := map[string]any{
			"tool": tool, "risk": string(spec.Risk), "side_effect": string(spec.SideEffect),
			"trust":     string(normTrust(MinTrust(in.OriginTrust, in.ArgumentTrust))),
			"principal": map[string]any{"id": pr.ID, "tenant": pr.Tenant, "scopes": nonNil(pr.Scopes)},
			"args":      nonNilArgs(args),
		}
		outOfBounds := policyBounds(tool, &pr) != ""
		// fires: true when the rule matches and holds; failed when it could not be evaluated.
		fires := func(effect string) (name string, holds, failed bool) {
			for i, r := range rules {
				if r.Effect != effect || !applies[i] {
					continue
				}
				if outOfBounds {
					return r.Name, false, true
				}
				ok, err := exprs[i].Eval(ctx, vars)
				return r.Name, ok && err == nil, err != nil
			}
			return "", false, false
		}
		want := Decision{Verdict: VerdictAllow}
		denyName, denyHolds, denyFailed := fires(PolicyDeny)
		approveName, approveHolds, approveFailed := fires(PolicyApprove)
		allowName, allowHolds, _ := fires(PolicyAllow)
		trust := normTrust(MinTrust(in.OriginTrust, in.ArgumentTrust))
		risk := spec.Risk.Rank()
		switch {
		case missingScope(spec, pr):
			want = Decision{Verdict: VerdictDeny, ReasonCode: "missing_scope"}
		case !in.InMode:
			want = Decision{Verdict: VerdictDeny, ReasonCode: "not_in_mode"}
		case denyHolds || denyFailed:
			want = Decision{Verdict: VerdictDeny, ReasonCode: "policy_denied", Rule: denyName}
		case approveHolds || approveFailed:
			want = Decision{Verdict: VerdictNeedsApproval, Rule: approveName}
		case in.ApprovalWhen != nil && approvalHolds(ctx, in.ApprovalWhen, args):
			want = Decision{Verdict: VerdictNeedsApproval}
		case risk >= RiskCritical.Rank():
			want = Decision{Verdict: VerdictNeedsApproval}
		case risk >= RiskHigh.Rank() && trust.Rank() < TrustUser.Rank(),
			spec.SideEffect != SideEffectNone && spec.SideEffect != SideEffectRead && risk >= RiskMedium.Rank() &&
				in.ArgumentTrust == TrustExternalUntrusted:
			want = Decision{Verdict: VerdictNeedsApproval}
			if allowHolds {
				want = Decision{Verdict: VerdictAllow, Rule: allowName}
			}
		}
		if got.Verdict != want.Verdict || got.ReasonCode != want.ReasonCode || got.Rule != want.Rule {
			t.Fatalf("Decide = %+v, want verdict %q, reason %q, rule %q\nrules %+v\nvars %v", got, want.Verdict, want.ReasonCode, want.Rule, rules, vars)
		}
		if got.Verdict != VerdictAllow && got.Why == "" {
			t.Fatalf("Decide = %+v: a deny or an approval without a why", got)
		}

		// Precedence as a property: a deny rule that always holds denies whatever the
		// other rules say; an approve rule that always holds requires approval unless
		// something denies.
		withDeny := append(append([]PolicyRule(nil), rules...), PolicyRule{Name: "always-deny", Effect: PolicyDeny, When: "true"})
		pd, err := NewPolicy(withDeny)
		if err != nil {
			t.Fatalf("NewPolicy with an always-deny rule: %v", err)
		}
		if d, err := pd.Decide(ctx, in); err != nil || d.Verdict != VerdictDeny {
			t.Fatalf("with a deny rule that always holds: %+v, %v", d, err)
		}
		withApprove := append(append([]PolicyRule(nil), rules...), PolicyRule{Name: "always-approve", Effect: PolicyApprove, When: "true"})
		pa, err := NewPolicy(withApprove)
		if err != nil {
			t.Fatalf("NewPolicy with an always-approve rule: %v", err)
		}
		d, err := pa.Decide(ctx, in)
		switch {
		case err != nil:
			t.Fatalf("with an approve rule that always holds: %v", err)
		case got.Verdict == VerdictDeny && (d.Verdict != VerdictDeny || d.ReasonCode != got.ReasonCode || d.Rule != got.Rule):
			t.Fatalf("adding an approve rule changed a deny %+v into %+v", got, d)
		case got.Verdict != VerdictDeny && d.Verdict != VerdictNeedsApproval:
			t.Fatalf("an approve rule that always holds gave %+v (without it: %+v)", d, got)
		}
	})
}

// fuzzRuleTools is the tools list of a fuzzed rule, selected by sel, and whether the
// rule applies to tool: every tool; the tool itself; another tool; or the
// mcp.<server>.* pattern of tool's server (a pattern of no server when tool is not an
// MCP tool).
func fuzzRuleTools(tool string, sel uint32) ([]string, bool) {
	switch sel {
	case 1:
		if tool == "" || strings.Contains(tool, "*") {
			return nil, true
		}
		return []string{tool}, true
	case 2:
		return []string{"zz.other"}, tool == "zz.other"
	case 3:
		server, _, ok := strings.Cut(strings.TrimPrefix(tool, "mcp."), ".")
		if !strings.HasPrefix(tool, "mcp.") || !ok || server == "" || strings.Contains(server, "*") {
			return []string{"mcp.nomatch.*"}, strings.HasPrefix(tool, "mcp.nomatch.")
		}
		return []string{"mcp." + server + ".*"}, true
	}
	return nil, true
}

func missingScope(spec *ToolSpec, pr Principal) bool {
	for _, s := range spec.RequiredScopes {
		found := false
		for _, have := range pr.Scopes {
			found = found || have == s
		}
		if !found {
			return true
		}
	}
	return false
}

// approvalHolds is approval_when as POL-1 reads it: true when it holds or cannot be
// evaluated.
func approvalHolds(ctx context.Context, e *BoolExpr, args map[string]any) bool {
	ok, err := e.Eval(ctx, map[string]any{"args": nonNilArgs(args)})
	return ok || err != nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilArgs(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
