package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// The writes that record a row, and the terminal writes of an attempt, are built by
// constructors, one per valid write, as River's riverdriver builds its
// JobSetStateIfRunningParams (JobSetStateCompleted, JobSetStateErrorRetryable, ...):
// a caller names the write it means and passes what that write needs, so an
// impossible one — an owner on a PENDING row, a lease on a settled one, a settled
// insert that claims a missing watermark — cannot be built.

// Call is what a row records about the call itself: the facts of steps 1 to 6,
// whatever the row's first status. Every field is kept as given.
type Call struct {
	Key, Tenant, Principal, SessionID, RunID string
	Step                                     int
	CallID, Tool                             string
	ToolVersion                              int
	ToolSHA256                               string // the definition hash (Invocation.ToolSHA256)
	Idempotency                              string
	IdempotentWhen                           *bool
	Args                                     json.RawMessage
	ArgsHash                                 string
	OriginTrust, ArgumentTrust, Mode         string
	Decision                                 string
	Workspace                                string // Invocation.Workspace
}

// InsertParams records a new invocation (Invocations.InvocationInsert): a [Call] and
// the row's first status. Build it with [InsertPending], [InsertHeld],
// [InsertRunning], [InsertSettled] or [InsertRecordOnce]; the zero value (and anything
// not built by one of them) is ErrInvalid. The Call's fields may be read and changed
// after construction (a refusal row takes a key of its own); the status and what only
// that status carries may not.
type InsertParams struct {
	Call
	kind    insertKind
	status  Status
	settled Settlement    // terminal inserts only
	owner   string        // RUNNING only
	lease   time.Duration // RUNNING only
	relaxed bool          // InsertRecordOnce only
}

// insertKind is the constructor that built an InsertParams.
type insertKind uint8

const (
	insertNone insertKind = iota // the zero value: ErrInvalid
	insertPending
	insertRunning
	insertSettled
)

// InsertPending records c PENDING, with the decision c records: a held call (decision
// needs_approval, which [InsertHeld] writes) or an allowed call left for a later claim
// (InvocationClaimIfPending; the retryable list offers it as it does a swept retry).
// Attempt is 0.
func InsertPending(c Call) InsertParams {
	return InsertParams{Call: c, kind: insertPending, status: StatusPending}
}

// InsertHeld records c PENDING with decision needs_approval: step 7 of a call that
// waits for an approval (POL-3), which a later claim runs once it is approved.
func InsertHeld(c Call) InsertParams {
	c.Decision = DecisionNeedsApproval
	return InsertPending(c)
}

// InsertRunning records c RUNNING under owner's lease (db-now + lease), attempt 1:
// steps 7 and 10 fused in one insert, as no approval can intervene. ErrInvalid without
// an owner or a positive lease.
func InsertRunning(c Call, owner string, lease time.Duration) InsertParams {
	return InsertParams{Call: c, kind: insertRunning, status: StatusRunning, owner: owner, lease: lease}
}

// InsertSettled records c already settled as s (a denial, recorded under a key of its
// own; a terminal row of any status a caller records without running it). Attempt is
// 0 and the row has no lease. ErrInvalid if s is not terminal or marks a missing
// watermark (a row that never ran never had one to miss).
func InsertSettled(c Call, s Settlement) InsertParams {
	return InsertParams{Call: c, kind: insertSettled, status: s.Status, settled: s}
}

// InsertRecordOnce is InsertSettled for the terminal row of a record-once call (an
// idempotent none/read call, RT-3), recorded after it ran: losing it to a power
// failure or a crash of the database server — never to a crash of the process that
// made the call — only means the read runs again when the caller retries, exactly as
// if it had crashed before step 13. A driver may then commit without waiting for the
// disk (SQLite: this one commit with synchronous=NORMAL; PostgreSQL: this one
// transaction with synchronous_commit off; in both the next durable commit makes it
// durable too). A driver that cannot relax one commit writes it as InsertSettled does.
func InsertRecordOnce(c Call, s Settlement) InsertParams {
	p := InsertSettled(c, s)
	p.relaxed = true
	return p
}

// Status is the row's first status.
func (p InsertParams) Status() Status { return p.status }

// Lease returns the owner and duration of a RUNNING insert's lease ("" and 0 for
// any other).
func (p InsertParams) Lease() (owner string, lease time.Duration) { return p.owner, p.lease }

// Attempt is the row's first attempt: 1 for a RUNNING insert (its claim), 0 otherwise.
func (p InsertParams) Attempt() int {
	if p.kind == insertRunning {
		return 1
	}
	return 0
}

// Settlement is what a terminal insert records (the zero Settlement for the others).
func (p InsertParams) Settlement() Settlement { return p.settled }

// Relaxed reports whether the insert may commit without waiting for the disk
// ([InsertRecordOnce]).
func (p InsertParams) Relaxed() bool { return p.relaxed }

// Row is the row p inserts but for what the database chooses — ID, LeaseExpiresAt,
// CreatedAt and UpdatedAt, which the drivers' insert returns — with copies of p's
// JSON, so that a driver answers an insert without reading back the columns it
// wrote (issue 20); the conformance suite holds the answer to a read of the row
// (Insert_ReturnsTheRowAsRead). Empty JSON is NULL (nil), as a column holds it.
func (p InsertParams) Row() *Invocation {
	inv := &Invocation{
		Key: p.Key, Tenant: p.Tenant, Principal: p.Principal, SessionID: p.SessionID, RunID: p.RunID,
		Step: p.Step, CallID: p.CallID, Tool: p.Tool, ToolVersion: p.ToolVersion, ToolSHA256: p.ToolSHA256,
		Idempotency: p.Idempotency, Args: cloneJSON(p.Args), ArgsHash: p.ArgsHash,
		OriginTrust: p.OriginTrust, ArgumentTrust: p.ArgumentTrust, Mode: p.Mode, Decision: p.Decision,
		Status: p.status, ReasonCode: p.settled.ReasonCode, Outcome: cloneJSON(p.settled.Outcome),
		LeaseOwner: p.owner, Attempt: p.Attempt(), Workspace: p.Workspace,
	}
	if p.IdempotentWhen != nil {
		held := *p.IdempotentWhen
		inv.IdempotentWhen = &held
	}
	return inv
}

// cloneJSON is a copy of raw, nil when it is empty.
func cloneJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	return append(json.RawMessage(nil), raw...)
}

// Validate reports whether p describes a valid insert (ErrInvalid if not). Drivers
// call it before writing, so every driver refuses the same parameters.
func (p InsertParams) Validate() error {
	switch {
	case p.kind == insertNone:
		return fmt.Errorf("%w: insert parameters not built by a constructor (InsertPending, InsertRunning, ...)", ErrInvalid)
	case p.Key == "":
		return fmt.Errorf("%w: insert without a key", ErrInvalid)
	}
	if err := validJSON("arguments", p.Args); err != nil {
		return err
	}
	switch {
	case p.kind == insertPending:
		return nil
	case p.kind == insertRunning:
		if p.owner == "" || p.lease <= 0 {
			return fmt.Errorf("%w: a RUNNING insert needs an owner and a positive lease", ErrInvalid)
		}
		return nil
	}
	if err := p.settled.Validate(); err != nil {
		return err
	}
	if p.settled.WatermarkMissing {
		return fmt.Errorf("%w: a row inserted settled never ran under a lease, so it cannot miss a watermark", ErrInvalid)
	}
	return nil
}

// Settlement is the terminal write of an attempt (step 13, InvocationSettleIfLeased,
// InvocationResume, InvocationCancelPending) or of a terminal insert. Every field
// means something for every terminal status, so it stays a plain struct; the
// constructors below name the settlements callers write, and Validate refuses a
// non-terminal status.
type Settlement struct {
	Status     Status // a terminal status
	ReasonCode string
	Outcome    json.RawMessage
	// WatermarkMissing flags a watermark-requiring call that returned without
	// marking (RT-13); only the settlement of an attempt can carry it.
	WatermarkMissing bool
}

// SettleSucceeded settles a call that succeeded with outcome.
func SettleSucceeded(outcome json.RawMessage) Settlement {
	return Settlement{Status: StatusSucceeded, Outcome: outcome}
}

// SettleFailed settles a call that failed for reason.
func SettleFailed(reason string, outcome json.RawMessage) Settlement {
	return Settlement{Status: StatusFailed, ReasonCode: reason, Outcome: outcome}
}

// SettleDenied settles a call refused for reason (a denial at step 6, a breaker, a
// client's cancellation of a held call).
func SettleDenied(reason string, outcome json.RawMessage) Settlement {
	return Settlement{Status: StatusDenied, ReasonCode: reason, Outcome: outcome}
}

// SettleUnavailable settles a call whose tool could not be reached for reason.
func SettleUnavailable(reason string, outcome json.RawMessage) Settlement {
	return Settlement{Status: StatusUnavailable, ReasonCode: reason, Outcome: outcome}
}

// SettleUncertain settles a call whose effect may have happened (RT-4): it goes to
// the review queue and is never re-executed.
func SettleUncertain(reason string, outcome json.RawMessage) Settlement {
	return Settlement{Status: StatusUncertain, ReasonCode: reason, Outcome: outcome}
}

// WithWatermarkMissing returns s flagging a watermark-requiring call that returned
// without marking (RT-13).
func (s Settlement) WithWatermarkMissing(missing bool) Settlement {
	s.WatermarkMissing = missing
	return s
}

// Validate reports whether s is a terminal settlement with a JSON outcome or none
// (ErrInvalid if not).
func (s Settlement) Validate() error {
	if !s.Status.Terminal() {
		return fmt.Errorf("%w: settlement with non-terminal status %q", ErrInvalid, s.Status)
	}
	return validJSON("outcome", s.Outcome)
}

// validJSON refuses raw unless it is empty (NULL) or one JSON value. The drivers store
// arguments and outcomes as given, and rely on this rather than on a check of their
// own (SQLite parsed each into JSONB on every write, a sixth of a read call's insert:
// issue 20); json.Valid only scans.
func validJSON(what string, raw json.RawMessage) error {
	if len(raw) > 0 && !json.Valid(raw) {
		return fmt.Errorf("%w: %s: not JSON", ErrInvalid, what)
	}
	return nil
}
