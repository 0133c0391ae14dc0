package store

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ValidateLease reports whether owner and lease can take a lease (ErrInvalid if not).
func ValidateLease(owner string, lease time.Duration) error {
	if owner == "" || lease <= 0 {
		return fmt.Errorf("%w: a lease needs an owner and a positive duration", ErrInvalid)
	}
	return nil
}

// MinSecretBytes is the shortest deployment secret a store keeps.
const MinSecretBytes = 16

// ValidateDeploymentSecret reports whether name and candidate can be stored as a
// deployment secret (ErrInvalid if not).
func ValidateDeploymentSecret(name string, candidate []byte) error {
	if name == "" || len(candidate) < MinSecretBytes {
		return fmt.Errorf("%w: a deployment secret needs a name and at least %d bytes", ErrInvalid, MinSecretBytes)
	}
	return nil
}

// ValidateResolution reports whether resolution and by record a review (ErrInvalid if not).
func ValidateResolution(resolution, by string, outcome json.RawMessage) error {
	if resolution != ResolutionHappened && resolution != ResolutionDidNotHappen {
		return fmt.Errorf("%w: resolution %q (want %s or %s)", ErrInvalid, resolution, ResolutionHappened, ResolutionDidNotHappen)
	}
	if by == "" {
		return fmt.Errorf("%w: resolution without a resolver", ErrInvalid)
	}
	if resolution == ResolutionHappened && len(outcome) == 0 {
		return fmt.Errorf("%w: a resolution as happened records the outcome a retry is answered", ErrInvalid)
	}
	return validJSON("outcome", outcome)
}

// ValidateSuspension reports whether a suspension has a resume token and a JSON
// outcome or none (ErrInvalid if not).
func ValidateSuspension(resumeToken string, outcome json.RawMessage) error {
	if resumeToken == "" {
		return fmt.Errorf("%w: suspension without a resume token", ErrInvalid)
	}
	return validJSON("outcome", outcome)
}

// RefusalKeySuffix marks the key of a refusal row: a refusal is recorded under a key
// of its own (the call's key, this, a unique tail), so it never occupies the call's
// key and is never replayed (SES-2); drivers use it to tell refusal rows apart.
const RefusalKeySuffix = ":refused:"

// SweptFromRows pairs each row a sweep reclaimed with the decision its new status
// records: PENDING is a retry, FAILED the crash-loop bound, UNCERTAIN uncertain.
func SweptFromRows(rows []*Invocation) []Swept {
	out := make([]Swept, 0, len(rows))
	for _, inv := range rows {
		d := SweepUncertain
		switch inv.Status {
		case StatusPending:
			d = SweepRetry
		case StatusFailed:
			d = SweepFailed
		}
		out = append(out, Swept{Invocation: inv, Decision: d})
	}
	return out
}

// ToolRefsJSON encodes refs as the one parameter the drivers' recovery statements
// read: a JSON array of {"name", "version", "sha256"} objects, "[]" for none. Both
// drivers match rows against this one encoding (SQLite with json_each, PostgreSQL
// with jsonb_to_recordset), so a driver binds a worker's tools without building SQL.
func ToolRefsJSON(refs []ToolRef) string {
	type ref struct {
		Name    string `json:"name"`
		Version int    `json:"version"`
		SHA256  string `json:"sha256"`
	}
	out := make([]ref, len(refs))
	for i, r := range refs {
		out[i] = ref(r)
	}
	b, _ := json.Marshal(out) // strings and ints: cannot fail
	return string(b)
}

// ToolsParam is c as the drivers bind it: nil (SQL NULL, no filter) for AllTools,
// otherwise ToolRefsJSON of c.Tools. Call c.Validate first.
func (c Claimable) ToolsParam() any {
	if c.AllTools {
		return nil
	}
	return ToolRefsJSON(c.Tools)
}

// ValidateToolRefs reports whether every ref has a name (ErrInvalid if not): a ref
// without one would match the rows of a nameless tool.
func ValidateToolRefs(refs []ToolRef) error {
	for _, t := range refs {
		if t.Name == "" {
			return fmt.Errorf("%w: a tool reference without a name", ErrInvalid)
		}
	}
	return nil
}

// ValidateDecisionAudit reports whether audit may be written with the decision a
// (ErrInvalid if not): the audit entry of a decision is the decision's tenant's.
func ValidateDecisionAudit(a Approval, audit *AuditEntry) error {
	if audit != nil && audit.Tenant != a.Tenant {
		return fmt.Errorf("%w: the audit entry of tenant %q for a decision in tenant %q", ErrInvalid, audit.Tenant, a.Tenant)
	}
	return nil
}

// Validate reports whether e can be applied (ErrInvalid if not).
func (e PinEpoch) Validate() error {
	if e.Prefix == "" {
		return fmt.Errorf("%w: a forced epoch needs a tool prefix", ErrInvalid)
	}
	for _, p := range e.Pins {
		if !strings.HasPrefix(p.Tool, e.Prefix) {
			return fmt.Errorf("%w: pin %q is outside the epoch's prefix %q", ErrInvalid, p.Tool, e.Prefix)
		}
	}
	return ValidatePins(e.Pins)
}

// ValidatePins reports whether pins name each tool once, none empty (ErrInvalid if not).
func ValidatePins(pins []ToolPin) error {
	seen := make(map[string]bool, len(pins))
	for _, p := range pins {
		if p.Tool == "" {
			return fmt.Errorf("%w: a pin without a tool", ErrInvalid)
		}
		if seen[p.Tool] {
			return fmt.Errorf("%w: tool %q pinned twice", ErrInvalid, p.Tool)
		}
		seen[p.Tool] = true
	}
	return nil
}

// PinsJSON encodes pins as the one parameter the drivers' pin statements read: a JSON
// array of {"tool", "sha256"} objects ("[]" for none), as ToolRefsJSON does for tools.
func PinsJSON(pins []ToolPin) string {
	type pin struct {
		Tool   string `json:"tool"`
		SHA256 string `json:"sha256"`
	}
	out := make([]pin, len(pins))
	for i, p := range pins {
		out[i] = pin(p)
	}
	b, _ := json.Marshal(out) // strings only: cannot fail
	return string(b)
}

// SortedPins returns a copy of pins in tool order, the order every driver reads them in.
func SortedPins(pins []ToolPin) []ToolPin {
	out := slices.Clone(pins)
	if out == nil {
		out = []ToolPin{}
	}
	slices.SortFunc(out, func(a, b ToolPin) int { return strings.Compare(a.Tool, b.Tool) })
	return out
}
