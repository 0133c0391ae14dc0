package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolgen/toolgen/runtime/store"
)

// ErrSelfApproval is returned when the principal deciding a held call is the one who
// made it (POL-3): an actor can never approve its own call.
var ErrSelfApproval = errors.New("runtime: a held call must be decided by a principal other than its caller")

// ErrNotHeld is returned when the key names no call that waits for an approval.
var ErrNotHeld = errors.New("runtime: no held call has this key")

// ApprovalStore is what DecideApproval asks of the store: the held call, and the
// decision on it.
type ApprovalStore interface {
	store.Invocations
	store.Reviews
}

// DecideApproval records an approval or denial of a held call (POL-3), by key, made by
// approver. It refuses a decision by the call's own principal, from another tenant, or
// on a call that is not held. The call's retry with the same key finds the decision at
// step 8 (or its waiting hold sees it). audit, when not nil, is the decision's audit
// entry: the store writes it in the decision's transaction, so a decision is never
// recorded without it nor it without the decision (HOST-2). Its tenant must be the
// call's.
func DecideApproval(ctx context.Context, st ApprovalStore, key string, approver Principal, approved bool, reason string, audit *store.AuditEntry) error {
	inv, err := st.InvocationGetByKey(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return ErrNotHeld
	}
	if err != nil {
		return fmt.Errorf("runtime: approval: %w", err)
	}
	switch {
	case inv.Tenant != approver.Tenant:
		return ErrNotHeld // another tenant's call is not visible, let alone decidable
	case inv.Status != store.StatusPending || inv.Decision != VerdictNeedsApproval:
		return ErrNotHeld
	case inv.Principal == approver.ID:
		return ErrSelfApproval
	}
	return st.ApprovalDecide(ctx, store.Approval{
		Key: key, Tenant: inv.Tenant, Approved: approved, DecidedBy: approver.ID, Reason: reason,
	}, audit)
}
