package runtime

import "testing"

func TestOriginTrust(t *testing.T) {
	for _, c := range []struct {
		items []Trust
		want  Trust
	}{
		{nil, TrustExternalUntrusted}, // no items: fail closed
		{[]Trust{}, TrustExternalUntrusted},
		{[]Trust{TrustSystem}, TrustSystem},
		{[]Trust{TrustSystem, TrustUser}, TrustUser},
		{[]Trust{TrustUser, TrustSystem, TrustTool}, TrustTool},
		{[]Trust{TrustUser, TrustExternalUntrusted, TrustSystem}, TrustExternalUntrusted},
		{[]Trust{"bogus"}, TrustExternalUntrusted},
		{[]Trust{TrustSystem, ""}, TrustExternalUntrusted},
		{[]Trust{"USER"}, TrustExternalUntrusted},
	} {
		if got := OriginTrust(c.items); got != c.want {
			t.Errorf("OriginTrust(%q) = %q, want %q", c.items, got, c.want)
		}
	}
}

func TestParseTrust(t *testing.T) {
	for in, want := range map[string]Trust{
		"system": TrustSystem, "user": TrustUser, "tool": TrustTool, "external_untrusted": TrustExternalUntrusted,
		"": TrustExternalUntrusted, "User": TrustExternalUntrusted, " user": TrustExternalUntrusted,
		"trusted": TrustExternalUntrusted, "system\x00": TrustExternalUntrusted,
	} {
		if got := ParseTrust(in); got != want {
			t.Errorf("ParseTrust(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLowerOnly(t *testing.T) {
	labels := []Trust{TrustSystem, TrustUser, TrustTool, TrustExternalUntrusted}
	for _, ceiling := range labels {
		if got := LowerOnly(ceiling, ""); got != ceiling {
			t.Errorf("LowerOnly(%q, \"\") = %q, want the ceiling", ceiling, got)
		}
		for _, req := range labels {
			got := LowerOnly(ceiling, req)
			if got.Rank() > ceiling.Rank() {
				t.Errorf("LowerOnly(%q, %q) = %q raises the label", ceiling, req, got)
			}
			want := req
			if req.Rank() > ceiling.Rank() {
				want = ceiling
			}
			if got != want {
				t.Errorf("LowerOnly(%q, %q) = %q, want %q", ceiling, req, got, want)
			}
		}
		if got := LowerOnly(ceiling, "bogus"); got != TrustExternalUntrusted {
			t.Errorf("LowerOnly(%q, bogus) = %q, want external_untrusted", ceiling, got)
		}
	}
	if got := LowerOnly("bogus", TrustSystem); got != TrustExternalUntrusted {
		t.Errorf("LowerOnly(bogus, system) = %q, want external_untrusted", got)
	}
	if got := LowerOnly("", ""); got != TrustExternalUntrusted {
		t.Errorf("LowerOnly(\"\", \"\") = %q, want external_untrusted", got)
	}
}
