package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"

	"github.com/toolgen/toolgen/internal/cellang"
	"github.com/toolgen/toolgen/vocab"
)

// Policy is step 6 of the pipeline (POL-1): allow, deny or needs_approval.

// Verdicts of a [Decision], as recorded in the invocation row: vocab's decisions.
const (
	VerdictAllow         = string(vocab.DecisionAllow)
	VerdictDeny          = string(vocab.DecisionDeny)
	VerdictNeedsApproval = string(vocab.DecisionNeedsApproval)
)

// Effects of a [PolicyRule] (policy.yaml's approve_when, deny_when and allow_when).
const (
	PolicyApprove = "approve"
	PolicyDeny    = "deny"
	PolicyAllow   = "allow"
)

// Principal is who is calling (ID-1), as policy sees it.
type Principal struct {
	ID, Tenant string
	Scopes     []string
	// Claims are the verified token's string claims, for arguments bound to
	// principal.claims.NAME (SPEC-4); nil when the caller was not authenticated by a
	// token.
	Claims map[string]string
}

// PolicyRule is one operator rule of policy.yaml (POL-2).
type PolicyRule struct {
	Name string
	// Tools limits the rule to these tools; empty means every tool. An entry is a tool
	// name or an mcp.<server>.* pattern, which matches every tool of that server.
	Tools []string
	// Effect is approve, deny or allow.
	Effect string
	// When is the rule's CEL condition (see [CompilePolicyRule]).
	When string
	// ArgsSchema is the input schema of the one tool the rule names when toolgen
	// checked When with args typed by that tool (spec.Rule.ArgsTool): When is compiled
	// with the same typed args. Nil: args is map(string, dyn), as it was at build time.
	// It is ignored unless Tools names exactly one tool.
	ArgsSchema []byte
}

// Policy is a compiled set of operator rules. The zero value and nil have no rules.
// It is safe for concurrent use.
type Policy struct {
	deny, approve, allow []*policyRule
}

type policyRule struct {
	name     string
	all      bool     // no tools listed
	exact    []string // tool names
	prefixes []string // "mcp.<server>." of each mcp.<server>.* pattern
	expr     *BoolExpr
}

// hasRules reports whether p has any operator rule (a rule may read the arguments).
func (p *Policy) hasRules() bool {
	return p != nil && len(p.deny)+len(p.approve)+len(p.allow) > 0
}

func (r *policyRule) matches(tool string) bool {
	if r.all || slices.Contains(r.exact, tool) {
		return true
	}
	for _, p := range r.prefixes {
		if strings.HasPrefix(tool, p) {
			return true
		}
	}
	return false
}

// NewPolicy checks and compiles every rule. Rule names must be unique and non-empty;
// the error names every rule that failed.
func NewPolicy(rules []PolicyRule) (*Policy, error) {
	p := &Policy{}
	var errs []error
	seen := map[string]bool{}
	for i, r := range rules {
		label := fmt.Sprintf("policy rule %q", r.Name)
		if r.Name == "" {
			label = fmt.Sprintf("policy rule #%d", i+1)
			errs = append(errs, fmt.Errorf("%s: has no name", label))
		} else if seen[r.Name] {
			errs = append(errs, fmt.Errorf("%s: the name is used twice", label))
		}
		seen[r.Name] = true
		cr := &policyRule{name: r.Name, all: len(r.Tools) == 0}
		for _, t := range r.Tools {
			switch {
			case t == "":
				errs = append(errs, fmt.Errorf("%s: empty tool name", label))
			case strings.Contains(t, "*"):
				server, isPattern := strings.CutSuffix(strings.TrimPrefix(t, "mcp."), ".*")
				if !strings.HasPrefix(t, "mcp.") || !isPattern || server == "" || strings.ContainsAny(server, ".*") {
					errs = append(errs, fmt.Errorf("%s: tool %q: the only pattern is mcp.<server>.*", label, t))
					continue
				}
				cr.prefixes = append(cr.prefixes, strings.TrimSuffix(t, "*"))
			default:
				cr.exact = append(cr.exact, t)
			}
		}
		var args *ArgTypes
		if len(cr.exact) == 1 && len(r.Tools) == 1 && r.ArgsSchema != nil {
			var err error
			if args, err = newArgTypes(cr.exact[0], r.ArgsSchema); err != nil {
				errs = append(errs, fmt.Errorf("%s: args schema: %w", label, err))
			}
		}
		expr, err := CompilePolicyRule(r.When, args)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s_when: %w", label, r.Effect, err))
		}
		cr.expr = expr
		switch r.Effect {
		case PolicyDeny:
			p.deny = append(p.deny, cr)
		case PolicyApprove:
			p.approve = append(p.approve, cr)
		case PolicyAllow:
			p.allow = append(p.allow, cr)
		default:
			errs = append(errs, fmt.Errorf("%s: effect %q is not approve, deny or allow", label, r.Effect))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// DecisionInput is what step 6 decides on.
type DecisionInput struct {
	Spec      *ToolSpec
	Principal Principal
	// InMode reports whether the tool is exposed in the session's active protocol mode.
	InMode                     bool
	OriginTrust, ArgumentTrust Trust
	// Args are the call's arguments, decoded for CEL ([DecodeCELArgs], [ArgTypes]).
	Args map[string]any
	// ApprovalWhen is the spec's approval_when, compiled; nil when it has none.
	ApprovalWhen *BoolExpr
}

// Decision is the outcome of step 6.
type Decision struct {
	Verdict string // allow | deny | needs_approval
	// ReasonCode is set for deny: missing_scope, not_in_mode or policy_denied.
	ReasonCode string
	// Rule names the operator rule that decided: the deny rule, the approve rule, or
	// the allow rule that waived an approval. Empty when no rule decided.
	Rule string
	// Why says, for an operator and the audit log, what decided: "missing scope
	// repo:write", "risk critical", "rule x requires approval", or the error of a rule
	// that could not be evaluated. It is never shown to the model as the platform's
	// words (the reason table is, RT-7).
	Why string
	// Cause classifies a needs_approval verdict (one of the Hold* constants): which
	// check of POL-1 held the call. Empty for allow and deny.
	Cause string
}

// Causes of a needs_approval verdict (Decision.Cause): the policy rule, the spec's
// condition, or the cell of the risk x trust matrix that held the call. The pipeline
// records the cause, the rule and Why in the call's "held" audit entry, which the
// console shows the reviewer.
const (
	HoldPolicyRule     = "policy_rule"     // an operator approve rule (Rule names it)
	HoldApprovalWhen   = "approval_when"   // the spec's approval_when
	HoldRiskCritical   = "risk_critical"   // risk critical (or unknown)
	HoldRiskTrust      = "risk_high_trust" // risk high and trust below user
	HoldUntrustedWrite = "untrusted_write" // a write of risk >= medium with external_untrusted arguments
)

// Decide applies POL-1 to one call. Deny beats approval beats allow; the first check
// that holds decides, in this order:
//
//  1. a scope of Spec.RequiredScopes the principal lacks -> deny missing_scope;
//  2. !InMode -> deny not_in_mode;
//  3. an operator deny rule matches -> deny policy_denied (Rule set);
//  4. an operator approve rule matches (Rule set), the spec's approval_when holds, or
//     risk is critical -> needs_approval; none of these can be waived;
//  5. risk is high and trust (min(origin_trust, argument_trust)) is below user, or
//     side_effect is write, risk is at least medium and argument_trust is
//     external_untrusted -> needs_approval, unless an operator allow rule matches,
//     which waives exactly these two (allow, Rule set to the allow rule);
//  6. otherwise allow.
//
// Rules are evaluated in declaration order within their effect; a rule applies only to
// the tools it lists. Unknown values fail closed: an unknown risk counts as critical,
// an unknown side effect as write, an unknown trust label as external_untrusted.
//
// A rule that cannot be evaluated (a runtime error, the cost budget exceeded, a
// non-bool value) fails closed for its own effect, and its error is in Why: an
// erroring deny rule denies (policy_denied, Rule set); an erroring approve rule, or
// an erroring approval_when, requires approval; an erroring allow rule waives
// nothing, and the next allow rule is tried. The same holds when the call's values
// exceed the bounds the build assumed for the policy variables (the PolicyMax*
// constants): no rule is evaluated on them, and each matching rule fails closed.
//
// Decide returns an error only when in.Spec is nil or ctx is done: a call whose
// context ended was not decided, and the pipeline reports it as canceled or timed
// out rather than as denied.
func (p *Policy) Decide(ctx context.Context, in DecisionInput) (Decision, error) {
	spec := in.Spec
	if spec == nil {
		return Decision{}, errors.New("runtime: policy decision without a tool spec")
	}
	for _, s := range spec.RequiredScopes {
		if !slices.Contains(in.Principal.Scopes, s) {
			return Decision{Verdict: VerdictDeny, ReasonCode: "missing_scope", Why: "missing scope " + s}, nil
		}
	}
	if !in.InMode {
		return Decision{Verdict: VerdictDeny, ReasonCode: "not_in_mode", Why: "tool not in the active mode"}, nil
	}
	if p == nil {
		p = &Policy{}
	}

	trust := normTrust(MinTrust(in.OriginTrust, in.ArgumentTrust))
	ev := &ruleEvaluator{ctx: ctx, spec: spec, in: &in, trust: trust}

	// 3. Deny rules.
	if r, err := ev.first(p.deny); err != nil {
		if ctx.Err() != nil {
			return Decision{}, fmt.Errorf("runtime: policy rule %s: %w", r.name, err)
		}
		return Decision{Verdict: VerdictDeny, ReasonCode: "policy_denied", Rule: r.name,
			Why: fmt.Sprintf("rule %s could not be evaluated, so it denies: %v", r.name, err)}, nil
	} else if r != nil {
		return Decision{Verdict: VerdictDeny, ReasonCode: "policy_denied", Rule: r.name, Why: "rule " + r.name + " denies"}, nil
	}

	// 4. Approvals nothing waives.
	if r, err := ev.first(p.approve); err != nil {
		if ctx.Err() != nil {
			return Decision{}, fmt.Errorf("runtime: policy rule %s: %w", r.name, err)
		}
		return Decision{Verdict: VerdictNeedsApproval, Rule: r.name, Cause: HoldPolicyRule,
			Why: fmt.Sprintf("rule %s could not be evaluated, so it requires approval: %v", r.name, err)}, nil
	} else if r != nil {
		return Decision{Verdict: VerdictNeedsApproval, Rule: r.name, Cause: HoldPolicyRule, Why: "rule " + r.name + " requires approval"}, nil
	}
	if in.ApprovalWhen != nil {
		ok, err := in.ApprovalWhen.eval(ctx, &argsActivation{args: in.Args}, true)
		if err != nil {
			if ctx.Err() != nil {
				return Decision{}, fmt.Errorf("runtime: approval_when: %w", err)
			}
			return Decision{Verdict: VerdictNeedsApproval, Cause: HoldApprovalWhen,
				Why: fmt.Sprintf("approval_when could not be evaluated, so it requires approval: %v", err)}, nil
		}
		if ok {
			return Decision{Verdict: VerdictNeedsApproval, Cause: HoldApprovalWhen, Why: "approval_when holds"}, nil
		}
	}
	risk := spec.Risk.Rank() // an unknown risk ranks as critical
	if risk >= RiskCritical.Rank() {
		why := "risk critical"
		if spec.Risk != RiskCritical {
			why = fmt.Sprintf("unknown risk %q, counted as critical", spec.Risk)
		}
		return Decision{Verdict: VerdictNeedsApproval, Cause: HoldRiskCritical, Why: why}, nil
	}

	// 5. Approvals an allow rule waives.
	var why, cause string
	switch {
	case risk >= RiskHigh.Rank() && trust.Rank() < TrustUser.Rank():
		why, cause = fmt.Sprintf("risk high and trust %s is below user", trust), HoldRiskTrust
	case spec.SideEffect != SideEffectNone && spec.SideEffect != SideEffectRead && risk >= RiskMedium.Rank() &&
		in.ArgumentTrust.Rank() == TrustExternalUntrusted.Rank():
		se := "write"
		if spec.SideEffect != SideEffectWrite {
			se = fmt.Sprintf("unknown side effect %q (counted as write)", spec.SideEffect)
		}
		why, cause = fmt.Sprintf("side effect %s, risk %s and external_untrusted arguments", se, spec.Risk), HoldUntrustedWrite
	default:
		return Decision{Verdict: VerdictAllow}, nil
	}
	// An allow rule that cannot be evaluated waives nothing: the next one is tried.
	var failed []string
	for _, r := range p.allow {
		if !r.matches(spec.Name) {
			continue
		}
		ok, err := ev.eval(r)
		if err == nil {
			if ok {
				return Decision{Verdict: VerdictAllow, Rule: r.name, Why: "rule " + r.name + " waives the approval for " + why}, nil
			}
			continue
		}
		if ctx.Err() != nil {
			return Decision{}, fmt.Errorf("runtime: policy rule %s: %w", r.name, err)
		}
		failed = append(failed, fmt.Sprintf("rule %s could not be evaluated, so it waives nothing: %v", r.name, err))
	}
	if len(failed) > 0 {
		why += "; " + strings.Join(failed, "; ")
	}
	return Decision{Verdict: VerdictNeedsApproval, Cause: cause, Why: why}, nil
}

// ruleEvaluator evaluates operator rules for one call. The activation (and the check
// of the call's values against the bounds the build assumed) is built when the first
// rule is evaluated: a call no rule applies to pays for neither.
type ruleEvaluator struct {
	ctx       context.Context
	spec      *ToolSpec
	in        *DecisionInput
	trust     Trust
	act       *policyActivation
	boundsWhy string
}

// first returns the first rule of rules, in declaration order, that applies to the
// tool and either holds (err nil) or cannot be evaluated (err set); nil when none.
func (e *ruleEvaluator) first(rules []*policyRule) (*policyRule, error) {
	for _, r := range rules {
		if !r.matches(e.spec.Name) {
			continue
		}
		ok, err := e.eval(r)
		if err != nil || ok {
			return r, err
		}
	}
	return nil, nil
}

func (e *ruleEvaluator) eval(r *policyRule) (bool, error) {
	if e.act == nil {
		e.act = &policyActivation{
			tool:       e.spec.Name,
			risk:       string(e.spec.Risk),
			sideEffect: string(e.spec.SideEffect),
			trust:      string(e.trust),
			principal:  e.in.Principal,
			args:       e.in.Args,
		}
		e.boundsWhy = policyBounds(e.spec.Name, &e.act.principal)
	}
	if e.boundsWhy != "" {
		return false, errors.New(e.boundsWhy)
	}
	return r.expr.eval(e.ctx, e.act, len(e.act.risk) <= cellang.PolicyMaxLabelLength && len(e.act.sideEffect) <= cellang.PolicyMaxLabelLength)
}

// policyBounds says which value exceeds the bounds the build assumed, or "".
func policyBounds(tool string, pr *Principal) string {
	tooLong := func(s string, max int) bool { return len(s) > max && utf8.RuneCountInString(s) > max }
	switch {
	case tooLong(tool, PolicyMaxToolNameLength):
		return fmt.Sprintf("the tool name is longer than %d characters", PolicyMaxToolNameLength)
	case tooLong(pr.ID, PolicyMaxPrincipalLength):
		return fmt.Sprintf("principal.id is longer than %d characters", PolicyMaxPrincipalLength)
	case tooLong(pr.Tenant, PolicyMaxPrincipalLength):
		return fmt.Sprintf("principal.tenant is longer than %d characters", PolicyMaxPrincipalLength)
	case len(pr.Scopes) > PolicyMaxScopes:
		return fmt.Sprintf("the principal has %d scopes, more than %d", len(pr.Scopes), PolicyMaxScopes)
	}
	for _, s := range pr.Scopes {
		if tooLong(s, PolicyMaxPrincipalLength) {
			return fmt.Sprintf("a scope of the principal is longer than %d characters", PolicyMaxPrincipalLength)
		}
	}
	return ""
}

// policyActivation binds a policy rule's variables without building a map per call.
type policyActivation struct {
	tool, risk, sideEffect, trust string
	principal                     Principal
	args                          map[string]any
	// Built on first use.
	toolVal      any
	principalMap map[string]any
}

func (a *policyActivation) ResolveName(name string) (any, bool) {
	switch name {
	case "tool":
		if a.toolVal == nil {
			a.toolVal = types.String(a.tool)
		}
		return a.toolVal, true
	case "risk":
		return celString(a.risk), true
	case "side_effect":
		return celString(a.sideEffect), true
	case "trust":
		return celString(a.trust), true
	case "args":
		if a.args == nil {
			return emptyArgs, true
		}
		return a.args, true
	case "principal":
		if a.principalMap == nil {
			scopes := a.principal.Scopes
			if scopes == nil {
				scopes = []string{}
			}
			a.principalMap = map[string]any{"id": a.principal.ID, "tenant": a.principal.Tenant, "scopes": scopes}
		}
		return a.principalMap, true
	}
	return nil, false
}

func (a *policyActivation) Parent() interpreter.Activation { return nil }

// celStrings holds the values risk, side_effect and trust usually take, converted to
// CEL once: resolving them then allocates nothing.
var celStrings = func() map[string]any {
	m := map[string]any{}
	for _, s := range []string{
		string(RiskLow), string(RiskMedium), string(RiskHigh), string(RiskCritical),
		string(SideEffectNone), string(SideEffectRead), string(SideEffectWrite),
		string(TrustSystem), string(TrustUser), string(TrustTool), string(TrustExternalUntrusted),
	} {
		m[s] = types.String(s)
	}
	return m
}()

func celString(s string) any {
	if v, ok := celStrings[s]; ok {
		return v
	}
	return types.String(s)
}
