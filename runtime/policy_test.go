package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func mustPolicy(t testing.TB, rules ...PolicyRule) *Policy {
	t.Helper()
	p, err := NewPolicy(rules)
	if err != nil {
		t.Fatalf("NewPolicy: %v", err)
	}
	return p
}

func spec(name string, se SideEffect, risk Risk, scopes ...string) *ToolSpec {
	return &ToolSpec{Name: name, Version: 1, Kind: KindAction, SideEffect: se, Risk: risk, RequiredScopes: scopes}
}

func TestPolicyDecide(t *testing.T) {
	ctx := context.Background()
	alice := Principal{ID: "alice", Tenant: "prod", Scopes: []string{"repo:read", "repo:write"}}

	denyProdUntrustedWrites := PolicyRule{Name: "no-untrusted-writes-in-prod", Effect: PolicyDeny,
		When: "side_effect == 'write' && trust == 'external_untrusted' && principal.tenant == 'prod'"}
	approveRelease := PolicyRule{Name: "merge-needs-second-reviewer", Tools: []string{"review.merge"}, Effect: PolicyApprove,
		When: "args.branch.startsWith('release/')"}
	allowAll := PolicyRule{Name: "allow-all", Effect: PolicyAllow, When: "true"}
	allowDocs := PolicyRule{Name: "allow-docs", Tools: []string{"workspace.write_text"}, Effect: PolicyAllow,
		When: "args.path.startsWith('docs/')"}
	denyGH := PolicyRule{Name: "no-github-deletes", Tools: []string{"mcp.github.*"}, Effect: PolicyDeny,
		When: "tool.endsWith('delete_repo')"}
	denyEverything := PolicyRule{Name: "deny-everything", Effect: PolicyDeny, When: "true"}
	approveEverything := PolicyRule{Name: "approve-everything", Effect: PolicyApprove, When: "true"}
	// Rules whose evaluation fails at run time: a missing field, a non-bool value.
	denyBroken := PolicyRule{Name: "deny-broken", Effect: PolicyDeny, When: "args.nope == 1"}
	approveBroken := PolicyRule{Name: "approve-broken", Effect: PolicyApprove, When: "args.flag"}
	allowBroken := PolicyRule{Name: "allow-broken", Effect: PolicyAllow, When: "args.nope == 1"}
	whenForce := mustTool(t, "has(args.force) && args.force")
	whenBroken := mustTool(t, "args.nope > 1")

	read := spec("workspace.read_text", SideEffectRead, RiskLow, "repo:read")
	write := spec("workspace.write_text", SideEffectWrite, RiskMedium, "repo:write")
	writeLow := spec("workspace.touch", SideEffectWrite, RiskLow)
	readMedium := spec("web.fetch", SideEffectRead, RiskMedium)
	readHigh := spec("secrets.read", SideEffectRead, RiskHigh)
	merge := spec("review.merge", SideEffectWrite, RiskHigh, "repo:write")
	critical := spec("infra.destroy", SideEffectWrite, RiskCritical)
	ghDelete := spec("mcp.github.delete_repo", SideEffectWrite, RiskMedium)
	ghxDelete := spec("mcp.githubx.delete_repo", SideEffectWrite, RiskMedium)
	unknownRisk := spec("x.unknown_risk", SideEffectRead, "severe")
	unknownEffect := spec("x.unknown_effect", "mutate", RiskMedium)
	noRisk := spec("x.no_risk", SideEffectNone, "")
	anyone := spec("x.anyone", SideEffectRead, RiskLow) // no scopes required

	type row struct {
		name    string
		rules   []PolicyRule
		in      DecisionInput
		verdict string
		reason  string
		rule    string
		why     string // a substring of Why
	}
	in := func(s *ToolSpec, origin, arg Trust, args map[string]any) DecisionInput {
		return DecisionInput{Spec: s, Principal: alice, InMode: true, OriginTrust: origin, ArgumentTrust: arg, Args: args}
	}
	with := func(d DecisionInput, f func(*DecisionInput)) DecisionInput { f(&d); return d }
	U, S, T, X := TrustUser, TrustSystem, TrustTool, TrustExternalUntrusted

	rows := []row{
		// 1. Missing scope: first, whatever else holds.
		{"missing scope", nil, with(in(read, U, U, nil), func(d *DecisionInput) { d.Principal.Scopes = nil }),
			VerdictDeny, "missing_scope", "", "missing scope repo:read"},
		{"missing scope beats not in mode and allow rules", []PolicyRule{allowAll},
			with(in(merge, U, U, nil), func(d *DecisionInput) { d.Principal.Scopes = []string{"repo:read"}; d.InMode = false }),
			VerdictDeny, "missing_scope", "", "repo:write"},
		{"every required scope is needed", nil,
			with(in(spec("a.b", SideEffectRead, RiskLow, "s1", "s2"), U, U, nil), func(d *DecisionInput) { d.Principal.Scopes = []string{"s1"} }),
			VerdictDeny, "missing_scope", "", "missing scope s2"},
		// 2. Not in mode.
		{"not in mode", []PolicyRule{allowAll}, with(in(read, U, U, nil), func(d *DecisionInput) { d.InMode = false }),
			VerdictDeny, "not_in_mode", "", ""},
		{"not in mode beats a deny rule", []PolicyRule{denyEverything}, with(in(read, U, U, nil), func(d *DecisionInput) { d.InMode = false }),
			VerdictDeny, "not_in_mode", "", ""},
		// 3. Operator deny rules.
		{"deny rule", []PolicyRule{denyProdUntrustedWrites}, in(write, U, X, map[string]any{"path": "a"}),
			VerdictDeny, "policy_denied", "no-untrusted-writes-in-prod", "denies"},
		{"deny rule sees min trust", []PolicyRule{denyProdUntrustedWrites}, in(write, X, U, nil),
			VerdictDeny, "policy_denied", "no-untrusted-writes-in-prod", ""},
		{"an unknown trust label is external_untrusted to rules", []PolicyRule{{Name: "u", Effect: PolicyDeny, When: "trust == 'external_untrusted'"}},
			in(read, "bogus", U, nil), VerdictDeny, "policy_denied", "u", ""},
		{"deny rule not matching", []PolicyRule{denyProdUntrustedWrites}, in(write, U, U, nil), VerdictAllow, "", "", ""},
		{"deny beats approval and allow", []PolicyRule{allowAll, approveEverything, denyEverything}, in(critical, U, U, nil),
			VerdictDeny, "policy_denied", "deny-everything", ""},
		{"deny rule limited to a server pattern", []PolicyRule{denyGH}, in(ghDelete, U, U, nil),
			VerdictDeny, "policy_denied", "no-github-deletes", ""},
		{"server pattern does not match another server", []PolicyRule{denyGH}, in(ghxDelete, U, U, nil), VerdictAllow, "", "", ""},
		{"deny rule limited to other tools", []PolicyRule{{Name: "d", Tools: []string{"review.merge"}, Effect: PolicyDeny, When: "true"}},
			in(read, U, U, nil), VerdictAllow, "", "", ""},
		{"erroring deny rule denies", []PolicyRule{denyBroken}, in(read, U, U, map[string]any{}),
			VerdictDeny, "policy_denied", "deny-broken", "could not be evaluated"},
		{"first deny rule in order decides", []PolicyRule{denyBroken, denyEverything}, in(read, U, U, nil),
			VerdictDeny, "policy_denied", "deny-broken", ""},
		// 4. Approvals nothing waives.
		{"approve rule", []PolicyRule{approveRelease, allowAll}, in(merge, U, U, map[string]any{"branch": "release/1.2"}),
			VerdictNeedsApproval, "", "merge-needs-second-reviewer", "requires approval"},
		{"approve rule not holding", []PolicyRule{approveRelease}, in(merge, U, U, map[string]any{"branch": "main"}),
			VerdictAllow, "", "", ""},
		{"approve rule on another tool", []PolicyRule{approveRelease}, in(read, U, U, map[string]any{"branch": "release/1"}),
			VerdictAllow, "", "", ""},
		{"erroring approve rule requires approval", []PolicyRule{approveBroken, allowAll}, in(read, U, U, map[string]any{"flag": "yes"}),
			VerdictNeedsApproval, "", "approve-broken", "could not be evaluated"},
		{"approval_when holds", []PolicyRule{allowAll},
			with(in(write, U, U, map[string]any{"force": true}), func(d *DecisionInput) { d.ApprovalWhen = whenForce }),
			VerdictNeedsApproval, "", "", "approval_when holds"},
		{"approval_when does not hold", nil,
			with(in(write, U, U, map[string]any{"force": false}), func(d *DecisionInput) { d.ApprovalWhen = whenForce }),
			VerdictAllow, "", "", ""},
		{"approval_when with no args", nil,
			with(in(write, U, U, nil), func(d *DecisionInput) { d.ApprovalWhen = whenForce }),
			VerdictAllow, "", "", ""},
		{"erroring approval_when requires approval", []PolicyRule{allowAll},
			with(in(read, U, U, map[string]any{}), func(d *DecisionInput) { d.ApprovalWhen = whenBroken }),
			VerdictNeedsApproval, "", "", "approval_when could not be evaluated"},
		{"risk critical", []PolicyRule{allowAll}, in(critical, S, S, nil), VerdictNeedsApproval, "", "", "risk critical"},
		{"unknown risk counts as critical", []PolicyRule{allowAll}, in(unknownRisk, S, S, nil),
			VerdictNeedsApproval, "", "", "counted as critical"},
		{"missing risk counts as critical", nil, in(noRisk, S, S, nil), VerdictNeedsApproval, "", "", "counted as critical"},
		// 5. Trust- and risk-based approvals, and their waiver.
		{"high risk, user trust", nil, in(readHigh, U, U, nil), VerdictAllow, "", "", ""},
		{"high risk, system and user", nil, in(readHigh, S, U, nil), VerdictAllow, "", "", ""},
		{"high risk, tool origin", nil, in(readHigh, T, U, nil), VerdictNeedsApproval, "", "", "risk high and trust tool"},
		{"high risk, untrusted arguments", nil, in(readHigh, U, X, nil), VerdictNeedsApproval, "", "", "trust external_untrusted"},
		{"high risk, unknown trust label", nil, in(readHigh, U, "bogus", nil), VerdictNeedsApproval, "", "", ""},
		{"high risk, empty trust labels", nil, in(readHigh, "", "", nil), VerdictNeedsApproval, "", "", ""},
		{"high risk waived by an allow rule", []PolicyRule{allowAll}, in(readHigh, T, T, nil),
			VerdictAllow, "", "allow-all", "waives the approval for risk high"},
		{"write, medium, untrusted arguments", nil, in(write, U, X, map[string]any{"path": "src/a"}),
			VerdictNeedsApproval, "", "", "side effect write, risk medium and external_untrusted arguments"},
		{"write, medium, tool-labelled arguments", nil, in(write, T, T, nil), VerdictAllow, "", "", ""},
		{"write, low, untrusted arguments", nil, in(writeLow, X, X, nil), VerdictAllow, "", "", ""},
		{"read, medium, untrusted arguments", nil, in(readMedium, X, X, nil), VerdictAllow, "", "", ""},
		{"write, high, untrusted", nil, in(merge, U, X, nil), VerdictNeedsApproval, "", "", "risk high"},
		{"unknown side effect counts as write", nil, in(unknownEffect, U, X, nil),
			VerdictNeedsApproval, "", "", "counted as write"},
		{"write waived by a matching allow rule", []PolicyRule{allowDocs}, in(write, U, X, map[string]any{"path": "docs/x.md"}),
			VerdictAllow, "", "allow-docs", "waives"},
		{"allow rule not holding waives nothing", []PolicyRule{allowDocs}, in(write, U, X, map[string]any{"path": "src/x.go"}),
			VerdictNeedsApproval, "", "", ""},
		{"erroring allow rule waives nothing", []PolicyRule{allowBroken}, in(write, U, X, map[string]any{}),
			VerdictNeedsApproval, "", "", "allow-broken could not be evaluated, so it waives nothing"},
		{"next allow rule after an erroring one", []PolicyRule{allowBroken, allowAll}, in(write, U, X, map[string]any{}),
			VerdictAllow, "", "allow-all", ""},
		{"erroring allow rule not needed", []PolicyRule{allowBroken}, in(read, U, X, nil), VerdictAllow, "", "", ""},
		// 6. Allow.
		{"plain read", nil, in(read, X, X, nil), VerdictAllow, "", "", ""},
		{"nil policy", nil, in(read, U, U, nil), VerdictAllow, "", "", ""},
		// Bounds the build assumed: a rule is not evaluated beyond them, and fails closed.
		{"too many scopes, deny rule", []PolicyRule{{Name: "d", Effect: PolicyDeny, When: "false"}},
			with(in(anyone, U, U, nil), func(d *DecisionInput) { d.Principal.Scopes = manyScopes(PolicyMaxScopes + 1) }),
			VerdictDeny, "policy_denied", "d", "scopes"},
		{"too long a tenant, approve rule", []PolicyRule{{Name: "a", Effect: PolicyApprove, When: "false"}},
			with(in(anyone, U, U, nil), func(d *DecisionInput) { d.Principal.Tenant = strings.Repeat("é", PolicyMaxPrincipalLength+1) }),
			VerdictNeedsApproval, "", "a", "principal.tenant"},
		{"within bounds", []PolicyRule{{Name: "d", Effect: PolicyDeny, When: "size(principal.scopes) > 1000"}},
			with(in(anyone, U, U, nil), func(d *DecisionInput) {
				d.Principal.Scopes = manyScopes(PolicyMaxScopes)
				d.Principal.ID = strings.Repeat("é", PolicyMaxPrincipalLength) // 512 bytes, 256 code points
			}),
			VerdictAllow, "", "", ""},
		{"a long unknown risk is evaluated with the cost limit", []PolicyRule{{Name: "r", Effect: PolicyDeny, When: "size(risk) > 50"}},
			in(spec("x.long_risk", SideEffectRead, Risk(strings.Repeat("x", 100))), U, U, nil),
			VerdictDeny, "policy_denied", "r", ""},
		{"bounds do not matter without rules", nil,
			with(in(anyone, U, U, nil), func(d *DecisionInput) { d.Principal.Scopes = manyScopes(PolicyMaxScopes + 1) }),
			VerdictAllow, "", "", ""},
		// Principal variables.
		{"principal variables", []PolicyRule{{Name: "p", Effect: PolicyDeny,
			When: "principal.id == 'alice' && 'repo:write' in principal.scopes && principal.tenant == 'prod'"}},
			in(read, U, U, nil), VerdictDeny, "policy_denied", "p", ""},
		{"principal without scopes", []PolicyRule{{Name: "p", Effect: PolicyDeny, When: "size(principal.scopes) == 0"}},
			with(in(writeLow, U, U, nil), func(d *DecisionInput) { d.Principal.Scopes = nil }),
			VerdictDeny, "policy_denied", "p", ""},
		{"policy sees tool, risk and side effect", []PolicyRule{{Name: "p", Effect: PolicyApprove,
			When: "tool == 'workspace.write_text' && risk == 'medium' && side_effect == 'write' && trust == 'tool'"}},
			in(write, T, U, nil), VerdictNeedsApproval, "", "p", ""},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			var p *Policy
			if r.rules != nil {
				p = mustPolicy(t, r.rules...)
			}
			d, err := p.Decide(ctx, r.in)
			if err != nil {
				t.Fatalf("Decide: %v", err)
			}
			if d.Verdict != r.verdict || d.ReasonCode != r.reason || d.Rule != r.rule || !strings.Contains(d.Why, r.why) {
				t.Fatalf("Decide = %+v\nwant verdict %q reason %q rule %q why containing %q", d, r.verdict, r.reason, r.rule, r.why)
			}
			if d.Verdict == VerdictDeny && d.ReasonCode == "" {
				t.Fatalf("a denial without a reason code: %+v", d)
			}
			if d.Verdict != VerdictDeny && d.ReasonCode != "" {
				t.Fatalf("a reason code on %s: %+v", d.Verdict, d)
			}
		})
	}
}

func manyScopes(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = "scope"
	}
	return s
}

// An allow rule waives only the trust- and risk-based approvals (POL-1).
func TestPolicyWaiverLimits(t *testing.T) {
	ctx := context.Background()
	p := mustPolicy(t, PolicyRule{Name: "allow-all", Effect: PolicyAllow, When: "true"})
	pr := Principal{ID: "bob", Scopes: []string{"s"}}
	for _, c := range []struct {
		name string
		in   DecisionInput
		want string
	}{
		{"missing scope", DecisionInput{Spec: spec("a.b", SideEffectRead, RiskLow, "other"), Principal: pr, InMode: true}, VerdictDeny},
		{"not in mode", DecisionInput{Spec: spec("a.b", SideEffectRead, RiskLow), Principal: pr}, VerdictDeny},
		{"critical", DecisionInput{Spec: spec("a.b", SideEffectRead, RiskCritical), Principal: pr, InMode: true,
			OriginTrust: TrustSystem, ArgumentTrust: TrustSystem}, VerdictNeedsApproval},
		{"approval_when", DecisionInput{Spec: spec("a.b", SideEffectRead, RiskLow), Principal: pr, InMode: true,
			ApprovalWhen: mustTool(t, "true")}, VerdictNeedsApproval},
		{"high and untrusted", DecisionInput{Spec: spec("a.b", SideEffectRead, RiskHigh), Principal: pr, InMode: true}, VerdictAllow},
		{"write, medium, untrusted", DecisionInput{Spec: spec("a.b", SideEffectWrite, RiskMedium), Principal: pr, InMode: true}, VerdictAllow},
	} {
		d, err := p.Decide(ctx, c.in)
		if err != nil || d.Verdict != c.want {
			t.Errorf("%s: %+v, %v; want %s", c.name, d, err, c.want)
		}
	}
	// An operator approve rule is not waived by an allow rule either.
	p = mustPolicy(t, PolicyRule{Name: "allow-all", Effect: PolicyAllow, When: "true"},
		PolicyRule{Name: "approve-all", Effect: PolicyApprove, When: "true"})
	d, err := p.Decide(ctx, DecisionInput{Spec: spec("a.b", SideEffectRead, RiskLow), Principal: pr, InMode: true})
	if err != nil || d.Verdict != VerdictNeedsApproval || d.Rule != "approve-all" {
		t.Errorf("approve rule with an allow rule: %+v, %v", d, err)
	}
}

func TestPolicyDecideErrors(t *testing.T) {
	p := mustPolicy(t, PolicyRule{Name: "d", Effect: PolicyDeny, When: "tool == 'x'"})
	if _, err := p.Decide(context.Background(), DecisionInput{}); err == nil {
		t.Error("Decide without a spec succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, err := p.Decide(ctx, DecisionInput{Spec: spec("a.b", SideEffectRead, RiskLow), InMode: true})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Decide with a done context = %+v, %v; want context.Canceled", d, err)
	}
}

func TestNewPolicyErrors(t *testing.T) {
	ok := PolicyRule{Name: "ok", Effect: PolicyDeny, When: "true"}
	for _, c := range []struct {
		rules []PolicyRule
		want  []string // substrings of the error
	}{
		{[]PolicyRule{{Effect: PolicyDeny, When: "true"}}, []string{"policy rule #1", "no name"}},
		{[]PolicyRule{ok, ok}, []string{`"ok"`, "used twice"}},
		{[]PolicyRule{{Name: "e", Effect: "block", When: "true"}}, []string{`"e"`, "effect"}},
		{[]PolicyRule{{Name: "w", Effect: PolicyDeny, When: ""}}, []string{`"w"`, "empty expression"}},
		{[]PolicyRule{{Name: "c", Effect: PolicyApprove, When: "tool =="}}, []string{`"c"`, "approve_when"}},
		{[]PolicyRule{{Name: "t", Effect: PolicyApprove, When: "1"}}, []string{`"t"`, "bool"}},
		{[]PolicyRule{{Name: "p1", Tools: []string{"review.*"}, Effect: PolicyDeny, When: "true"}}, []string{"p1", "mcp.<server>.*"}},
		{[]PolicyRule{{Name: "p2", Tools: []string{"*"}, Effect: PolicyDeny, When: "true"}}, []string{"p2"}},
		{[]PolicyRule{{Name: "p3", Tools: []string{"mcp.*"}, Effect: PolicyDeny, When: "true"}}, []string{"p3"}},
		{[]PolicyRule{{Name: "p4", Tools: []string{"mcp.a.b.*"}, Effect: PolicyDeny, When: "true"}}, []string{"p4"}},
		{[]PolicyRule{{Name: "p5", Tools: []string{"mcp.a*"}, Effect: PolicyDeny, When: "true"}}, []string{"p5"}},
		{[]PolicyRule{{Name: "p6", Tools: []string{""}, Effect: PolicyDeny, When: "true"}}, []string{"p6", "empty tool"}},
		// Every failing rule is named.
		{[]PolicyRule{{Name: "a", Effect: "x", When: "true"}, ok, {Name: "b", Effect: PolicyAllow, When: "("}}, []string{`"a"`, `"b"`}},
	} {
		_, err := NewPolicy(c.rules)
		if err == nil {
			t.Errorf("NewPolicy(%+v) succeeded", c.rules)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("NewPolicy(%+v): error %q does not mention %q", c.rules, err, w)
			}
		}
	}
	if p, err := NewPolicy(nil); err != nil || p == nil {
		t.Errorf("NewPolicy(nil) = %v, %v", p, err)
	}
	if _, err := NewPolicy([]PolicyRule{{Name: "m", Tools: []string{"mcp.github.*", "review.merge"}, Effect: PolicyAllow, When: "true"}}); err != nil {
		t.Errorf("valid tools: %v", err)
	}
}

func BenchmarkPolicyDecide(b *testing.B) {
	p := mustPolicy(b,
		PolicyRule{Name: "no-untrusted-writes-in-prod", Effect: PolicyDeny,
			When: "side_effect == 'write' && trust == 'external_untrusted' && principal.tenant == 'prod'"},
		PolicyRule{Name: "merge-needs-second-reviewer", Tools: []string{"review.merge"}, Effect: PolicyApprove,
			When: "args.branch.startsWith('release/')"},
	)
	in := DecisionInput{
		Spec:        spec("workspace.read_text", SideEffectRead, RiskLow, "repo:read"),
		Principal:   Principal{ID: "alice", Tenant: "prod", Scopes: []string{"repo:read"}},
		InMode:      true,
		OriginTrust: TrustUser, ArgumentTrust: TrustUser,
		Args: map[string]any{"path": "README.md"},
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		d, err := p.Decide(ctx, in)
		if err != nil || d.Verdict != VerdictAllow {
			b.Fatal(d, err)
		}
	}
}

func BenchmarkPolicyDecideNoRules(b *testing.B) {
	var p *Policy
	in := DecisionInput{
		Spec:      spec("workspace.read_text", SideEffectRead, RiskLow, "repo:read"),
		Principal: Principal{ID: "alice", Tenant: "prod", Scopes: []string{"repo:read"}},
		InMode:    true, OriginTrust: TrustUser, ArgumentTrust: TrustUser,
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if d, err := p.Decide(ctx, in); err != nil || d.Verdict != VerdictAllow {
			b.Fatal(d, err)
		}
	}
}

// A rule whose cost grows with args runs with cel-go's cost tracking.
func BenchmarkPolicyDecideCostTracked(b *testing.B) {
	p := mustPolicy(b, PolicyRule{Name: "no-secret-tags", Effect: PolicyDeny, When: "'secret' in args.tags"})
	in := DecisionInput{
		Spec:      spec("workspace.read_text", SideEffectRead, RiskLow),
		Principal: Principal{ID: "alice", Tenant: "prod"},
		InMode:    true, OriginTrust: TrustUser, ArgumentTrust: TrustUser,
		Args: map[string]any{"tags": []any{"a", "b", "c"}},
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if d, err := p.Decide(ctx, in); err != nil || d.Verdict != VerdictAllow {
			b.Fatal(d, err)
		}
	}
}
