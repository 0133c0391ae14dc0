package runtime

import "github.com/toolgen/toolgen/vocab"

// Trust labels at step 3 of the pipeline (RT-6, ADR-0021 decision 11). Labels are never
// raised by looking at content: every function here can only keep or lower a label,
// and every unknown or missing label counts as external_untrusted (fail closed).

// OriginTrust is the origin_trust of a call: the least trusted label over the context
// items present in the request that produced it ("was untrusted content in the
// room"). An unknown label counts as external_untrusted.
//
// With no items at all the result is external_untrusted, not user: an empty list
// cannot be told apart from a caller that did not say what was in the room, and a
// guess in the trusting direction would remove approvals that POL-1 requires.
// A caller that knows the request held only, say, the user's own message passes
// that item.
func OriginTrust(items []Trust) Trust {
	if len(items) == 0 {
		return TrustExternalUntrusted
	}
	t := items[0]
	for _, it := range items[1:] {
		t = MinTrust(t, it)
	}
	return normTrust(t)
}

// ParseTrust returns the label s names exactly ("system", "user", "tool" or
// "external_untrusted"). Anything else, including "" and other spellings such as
// "User", is external_untrusted: an argument whose provenance is unknown stays
// external_untrusted.
func ParseTrust(s string) Trust {
	if t, err := vocab.ParseTrust(s); err == nil {
		return t
	}
	return TrustExternalUntrusted
}

// LowerOnly returns the trust of a result whose spec declares output_trust ceiling
// and whose tool asked for requested (RT-1): requested when it is lower than the
// ceiling, the ceiling otherwise. An empty requested label means the tool asked for
// nothing, and the ceiling applies; any other unknown label is external_untrusted. An
// unknown ceiling is external_untrusted too.
func LowerOnly(ceiling, requested Trust) Trust {
	if requested == "" {
		return normTrust(ceiling)
	}
	return normTrust(MinTrust(ceiling, requested))
}

// normTrust returns t, or external_untrusted when t is not a known label. (MinTrust
// returns an unknown label as it is when it is the lower one.)
func normTrust(t Trust) Trust {
	if t.Rank() == 0 {
		return TrustExternalUntrusted
	}
	return t
}
