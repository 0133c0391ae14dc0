package store

import (
	"fmt"
	"time"
)

// Validate reports whether p describes a valid insert (ErrInvalid if not). Drivers call
// it before writing, so every driver refuses the same parameters.
func (p InsertParams) Validate() error {
	switch {
	case p.Key == "":
		return fmt.Errorf("%w: insert without a key", ErrInvalid)
	case p.Status == StatusRunning && (p.Owner == "" || p.Lease <= 0):
		return fmt.Errorf("%w: a RUNNING insert needs an owner and a positive lease", ErrInvalid)
	case p.Status != StatusPending && p.Status != StatusRunning && !p.Status.Terminal():
		return fmt.Errorf("%w: insert with status %q", ErrInvalid, p.Status)
	}
	return nil
}

// Validate reports whether s is a terminal settlement (ErrInvalid if not).
func (s Settlement) Validate() error {
	if !s.Status.Terminal() {
		return fmt.Errorf("%w: settlement with non-terminal status %q", ErrInvalid, s.Status)
	}
	return nil
}

// ValidateLease reports whether owner and lease can take a lease (ErrInvalid if not).
func ValidateLease(owner string, lease time.Duration) error {
	if owner == "" || lease <= 0 {
		return fmt.Errorf("%w: a lease needs an owner and a positive duration", ErrInvalid)
	}
	return nil
}

// ValidateResolution reports whether resolution and by record a review (ErrInvalid if not).
func ValidateResolution(resolution, by string) error {
	if resolution != ResolutionHappened && resolution != ResolutionDidNotHappen {
		return fmt.Errorf("%w: resolution %q (want %s or %s)", ErrInvalid, resolution, ResolutionHappened, ResolutionDidNotHappen)
	}
	if by == "" {
		return fmt.Errorf("%w: resolution without a resolver", ErrInvalid)
	}
	return nil
}

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
