package vocab

import (
	"slices"
	"testing"
)

// The stable strings are the ones the YAML, the catalog, the stores and the SQL hold:
// changing one is a migration, never a rename.
func TestStableStrings(t *testing.T) {
	for _, c := range []struct {
		got, want []string
	}{
		{Strings(SideEffects()), []string{"none", "read", "write"}},
		{Strings(Idempotencies()), []string{"idempotent", "conditionally_idempotent", "non_idempotent"}},
		{Strings(Risks()), []string{"low", "medium", "high", "critical"}},
		{Strings(Trusts()), []string{"system", "user", "tool", "external_untrusted"}},
		{Strings(Decisions()), []string{"allow", "deny", "needs_approval"}},
		{Strings(Resolutions()), []string{"happened", "did_not_happen"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%v, want %v", c.got, c.want)
		}
	}
}

func TestParse_KnownRoundTrips_UnknownIsAnError(t *testing.T) {
	for _, s := range Strings(Risks()) {
		if r, err := ParseRisk(s); err != nil || string(r) != s {
			t.Errorf("ParseRisk(%q) = %q, %v", s, r, err)
		}
	}
	if _, err := ParseRisk("Critical"); err == nil || err.Error() != `risk "Critical": want one of low, medium, high, critical` {
		t.Errorf("ParseRisk(Critical): %v", err)
	}
	if _, err := ParseSideEffect(""); err == nil {
		t.Error("ParseSideEffect(\"\") is no error")
	}
	if d, err := ParseDecision("needs_approval"); err != nil || d != DecisionNeedsApproval {
		t.Errorf("ParseDecision: %q, %v", d, err)
	}
	if r, err := ParseResolution("did_not_happen"); err != nil || r != ResolutionDidNotHappen {
		t.Errorf("ParseResolution: %q, %v", r, err)
	}
	if _, err := ParseTrust("root"); err == nil {
		t.Error("ParseTrust(root) is no error")
	}
	if i, err := ParseIdempotency("conditionally_idempotent"); err != nil || i != ConditionallyIdempotent {
		t.Errorf("ParseIdempotency: %q, %v", i, err)
	}
}

// An unknown value ranks on the safe side: the most restrictive class, side effect and
// risk, the least trust.
func TestRank_UnknownIsTheSafeSide(t *testing.T) {
	if SideEffect("delete").Rank() != SideEffectWrite.Rank() || SideEffectNone.Rank() >= SideEffectRead.Rank() {
		t.Error("side effect ranks")
	}
	if Idempotency("mostly").Rank() != NonIdempotent.Rank() || Idempotent.Rank() >= ConditionallyIdempotent.Rank() {
		t.Error("idempotency ranks")
	}
	if Risk("extreme").Rank() != RiskCritical.Rank() || RiskLow.Rank() != 0 || RiskHigh.Rank() != 2 {
		t.Error("risk ranks")
	}
	if Trust("root").Rank() != TrustExternalUntrusted.Rank() || TrustSystem.Rank() <= TrustUser.Rank() || TrustUser.Rank() <= TrustTool.Rank() {
		t.Error("trust ranks")
	}
	if MinTrust(TrustUser, TrustTool) != TrustTool || MinTrust(TrustSystem, "root") != TrustExternalUntrusted {
		t.Error("MinTrust")
	}
}

func TestRetrySafeAndWatermark(t *testing.T) {
	for _, c := range []struct {
		i                    Idempotency
		retrySafe, watermark bool
	}{
		{Idempotent, true, false},
		{ConditionallyIdempotent, false, true},
		{NonIdempotent, false, true},
		{"mostly", false, true},
	} {
		if c.i.RetrySafe() != c.retrySafe || c.i.NeedsWatermark() != c.watermark {
			t.Errorf("%s: RetrySafe %v NeedsWatermark %v", c.i, c.i.RetrySafe(), c.i.NeedsWatermark())
		}
	}
}

func TestRetrySafeWhen(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		i    Idempotency
		when *bool
		want bool
	}{
		{Idempotent, nil, true},
		{ConditionallyIdempotent, &yes, true},
		{ConditionallyIdempotent, &no, false},
		{ConditionallyIdempotent, nil, false},
		{NonIdempotent, &yes, false},
		{"", &yes, false},
	} {
		if got := c.i.RetrySafeWhen(c.when); got != c.want {
			t.Errorf("%q.RetrySafeWhen(%v) = %v, want %v", c.i, c.when, got, c.want)
		}
	}
}
