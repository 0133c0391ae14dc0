package store

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func TestInsertConstructors_OnlyValidWrites(t *testing.T) {
	c := Call{Key: "k", Tenant: "acme", Decision: DecisionAllow}
	out := json.RawMessage(`{"ok":true}`)
	for name, tc := range map[string]struct {
		p        InsertParams
		status   Status
		attempt  int
		owner    string
		decision string
		relaxed  bool
		err      error
	}{
		"pending":          {p: InsertPending(c), status: StatusPending, decision: DecisionAllow},
		"held":             {p: InsertHeld(c), status: StatusPending, decision: DecisionNeedsApproval},
		"running":          {p: InsertRunning(c, "w", time.Minute), status: StatusRunning, attempt: 1, owner: "w", decision: DecisionAllow},
		"running no owner": {p: InsertRunning(c, "", time.Minute), status: StatusRunning, attempt: 1, err: ErrInvalid},
		"running no lease": {p: InsertRunning(c, "w", 0), status: StatusRunning, attempt: 1, owner: "w", err: ErrInvalid},
		"settled":          {p: InsertSettled(c, SettleDenied("denied", out)), status: StatusDenied, decision: DecisionAllow},
		"record once":      {p: InsertRecordOnce(c, SettleSucceeded(out)), status: StatusSucceeded, decision: DecisionAllow, relaxed: true},
		"settled pending":  {p: InsertSettled(c, Settlement{Status: StatusPending}), err: ErrInvalid},
		"settled running":  {p: InsertSettled(c, Settlement{Status: StatusRunning}), err: ErrInvalid},
		"settled missing":  {p: InsertSettled(c, SettleFailed("x", out).WithWatermarkMissing(true)), status: StatusFailed, err: ErrInvalid},
		"no constructor":   {p: InsertParams{Call: c}, err: ErrInvalid},
		"no key":           {p: InsertPending(Call{}), status: StatusPending, err: ErrInvalid},
	} {
		if err := tc.p.Validate(); !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
			t.Errorf("%s: Validate = %v, want %v", name, err, tc.err)
		}
		if tc.err != nil {
			continue
		}
		owner, _ := tc.p.Lease()
		if tc.p.Status() != tc.status || tc.p.Attempt() != tc.attempt || owner != tc.owner || tc.p.Decision != tc.decision ||
			tc.p.Relaxed() != tc.relaxed {
			t.Errorf("%s: status %s attempt %d owner %q decision %q relaxed %v", name, tc.p.Status(), tc.p.Attempt(), owner,
				tc.p.Decision, tc.p.Relaxed())
		}
	}
}
