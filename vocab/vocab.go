package vocab

import (
	"fmt"
	"slices"
	"strings"
)

// SideEffect is what a tool may do to the world.
type SideEffect string

const (
	SideEffectNone  SideEffect = "none"
	SideEffectRead  SideEffect = "read"
	SideEffectWrite SideEffect = "write"
)

// SideEffects are the side effects, from the least to the most restrictive.
func SideEffects() []SideEffect { return []SideEffect{SideEffectNone, SideEffectRead, SideEffectWrite} }

// ParseSideEffect is the side effect named s.
func ParseSideEffect(s string) (SideEffect, error) { return parse("side_effect", s, SideEffects()) }

// Rank orders side effects by what they may do: none 0, read 1, write 2. An unknown
// value ranks as write.
func (s SideEffect) Rank() int { return rank(s, SideEffects()) }

// Idempotency is the recovery class of a tool: it decides what recovery may retry (RT-4).
type Idempotency string

const (
	Idempotent              Idempotency = "idempotent"
	ConditionallyIdempotent Idempotency = "conditionally_idempotent"
	NonIdempotent           Idempotency = "non_idempotent"
)

// Idempotencies are the classes, from the least to the most restrictive.
func Idempotencies() []Idempotency {
	return []Idempotency{Idempotent, ConditionallyIdempotent, NonIdempotent}
}

// ParseIdempotency is the class named s.
func ParseIdempotency(s string) (Idempotency, error) { return parse("idempotency", s, Idempotencies()) }

// Rank orders classes by restriction: idempotent 0, conditionally_idempotent 1,
// non_idempotent 2. An unknown value ranks as non_idempotent.
func (i Idempotency) Rank() int { return rank(i, Idempotencies()) }

// NeedsWatermark reports whether calls of this class must mark the effect before it is
// sent (GEN-2): every class but idempotent, and an unknown one.
func (i Idempotency) NeedsWatermark() bool { return i != Idempotent }

// RetrySafe reports whether a call of this class whose effect may have been sent can be
// run again without asking anyone: only an idempotent one. A conditionally_idempotent
// call is retry-safe only when its condition held for its arguments, which the class
// alone does not say.
func (i Idempotency) RetrySafe() bool { return i == Idempotent }

// RetrySafeWhen is RT-4's rule for one call whose effect may have been sent: it may run
// again without asking anyone when its class is idempotent, or conditionally_idempotent
// and its idempotent_when held for its arguments (idempotentWhen true; nil: not
// evaluated). Otherwise the sweep sends it to review (UNCERTAIN). The stores' sweep
// statements say the same in SQL; runtime/store/storetest holds them to this function.
func (i Idempotency) RetrySafeWhen(idempotentWhen *bool) bool {
	return i == Idempotent || i == ConditionallyIdempotent && idempotentWhen != nil && *idempotentWhen
}

// Risk is a tool's risk level; policy uses it for approvals (POL-1).
type Risk string

const (
	RiskLow      Risk = "low"
	RiskMedium   Risk = "medium"
	RiskHigh     Risk = "high"
	RiskCritical Risk = "critical"
)

// Risks are the risk levels, from the lowest.
func Risks() []Risk { return []Risk{RiskLow, RiskMedium, RiskHigh, RiskCritical} }

// ParseRisk is the risk named s.
func ParseRisk(s string) (Risk, error) { return parse("risk", s, Risks()) }

// Rank orders risks: low 0, medium 1, high 2, critical 3. An unknown value ranks as
// critical.
func (r Risk) Rank() int { return rank(r, Risks()) }

// Trust is a provenance label. Labels are ordered system > user > tool >
// external_untrusted (RT-6).
type Trust string

const (
	TrustSystem            Trust = "system"
	TrustUser              Trust = "user"
	TrustTool              Trust = "tool"
	TrustExternalUntrusted Trust = "external_untrusted"
)

// Trusts are the labels, from the most trusted.
func Trusts() []Trust { return []Trust{TrustSystem, TrustUser, TrustTool, TrustExternalUntrusted} }

// ParseTrust is the label named s.
func ParseTrust(s string) (Trust, error) { return parse("trust", s, Trusts()) }

// Rank orders labels: a higher rank is more trusted (system 3, user 2, tool 1,
// external_untrusted 0). An unknown label ranks lowest, the same as external_untrusted,
// so an unrecognised value can never raise trust.
func (t Trust) Rank() int {
	switch t {
	case TrustSystem:
		return 3
	case TrustUser:
		return 2
	case TrustTool:
		return 1
	default:
		return 0
	}
}

// MinTrust returns the less trusted of a and b. An unknown label counts as
// external_untrusted.
func MinTrust(a, b Trust) Trust {
	if a.Rank() == 0 || b.Rank() == 0 {
		return TrustExternalUntrusted
	}
	if a.Rank() <= b.Rank() {
		return a
	}
	return b
}

// Decision is the verdict of the policy step (POL-1), as an invocation row records it.
type Decision string

const (
	DecisionAllow         Decision = "allow"
	DecisionDeny          Decision = "deny"
	DecisionNeedsApproval Decision = "needs_approval"
)

// Decisions are the verdicts.
func Decisions() []Decision { return []Decision{DecisionAllow, DecisionDeny, DecisionNeedsApproval} }

// ParseDecision is the verdict named s.
func ParseDecision(s string) (Decision, error) { return parse("decision", s, Decisions()) }

// Resolution is a reviewer's answer about an UNCERTAIN call: did its effect happen?
type Resolution string

const (
	ResolutionHappened     Resolution = "happened"
	ResolutionDidNotHappen Resolution = "did_not_happen"
)

// Resolutions are the answers.
func Resolutions() []Resolution { return []Resolution{ResolutionHappened, ResolutionDidNotHappen} }

// ParseResolution is the answer named s.
func ParseResolution(s string) (Resolution, error) { return parse("resolution", s, Resolutions()) }

// Strings are the stable strings of values, in order: for messages and for checks
// that take strings.
func Strings[T ~string](values []T) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

// parse is the value of values spelt s, or an error naming what is accepted.
func parse[T ~string](what, s string, values []T) (T, error) {
	if slices.Contains(values, T(s)) {
		return T(s), nil
	}
	return "", fmt.Errorf("%s %q: want one of %s", what, s, strings.Join(Strings(values), ", "))
}

// rank is v's index in values, ordered from the least restrictive; an unknown v ranks
// as the last, the most restrictive.
func rank[T ~string](v T, values []T) int {
	if i := slices.Index(values, v); i >= 0 {
		return i
	}
	return len(values) - 1
}
