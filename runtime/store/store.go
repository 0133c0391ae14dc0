package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/toolgen/toolgen/vocab"
)

// Status is an invocation's status. Suspension is not a status (RT-11): a suspended row
// stays RUNNING with SuspendedAt set, and the sweep excludes it by predicate.
type Status string

const (
	StatusPending     Status = "PENDING"
	StatusRunning     Status = "RUNNING"
	StatusSucceeded   Status = "SUCCEEDED"
	StatusFailed      Status = "FAILED"
	StatusDenied      Status = "DENIED"
	StatusUnavailable Status = "UNAVAILABLE"
	StatusUncertain   Status = "UNCERTAIN"
)

// Terminal reports whether a row in this status is settled: step 8 returns its
// recorded outcome instead of executing. UNCERTAIN counts: it is never re-executed.
func (s Status) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusDenied, StatusUnavailable, StatusUncertain:
		return true
	}
	return false
}

// Idempotency classes the sweep reads (the spec's idempotency field, recorded per row):
// vocab's stable strings, which the drivers' SQL spells too.
const (
	IdempotencyIdempotent              = string(vocab.Idempotent)
	IdempotencyConditionallyIdempotent = string(vocab.ConditionallyIdempotent)
	IdempotencyNonIdempotent           = string(vocab.NonIdempotent)
)

// Decisions of step 6 (POL-1) that the store reads (vocab's).
const (
	DecisionAllow         = string(vocab.DecisionAllow)
	DecisionDeny          = string(vocab.DecisionDeny)
	DecisionNeedsApproval = string(vocab.DecisionNeedsApproval)
)

// Reason codes the store itself writes (they are entries of runtime/reasons.yaml).
const (
	ReasonCrashLoop             = "crash_loop"
	ReasonEffectMayHaveHappened = "effect_may_have_happened"
)

// Resolutions of an UNCERTAIN row (vocab's).
const (
	ResolutionHappened     = string(vocab.ResolutionHappened)
	ResolutionDidNotHappen = string(vocab.ResolutionDidNotHappen)
)

// Errors every driver returns (wrapped or not; test with errors.Is).
var (
	// ErrNotFound: no row matches.
	ErrNotFound = errors.New("store: not found")
	// ErrLeaseLost: the fenced write matched no row — the lease was reclaimed, the
	// attempt is stale or the row is no longer RUNNING. The caller must stop before
	// any effect.
	ErrLeaseLost = errors.New("store: lease lost")
	// ErrConflict: a state transition that is not allowed from the row's current state.
	ErrConflict = errors.New("store: conflict")
	// ErrInvalid: the parameters describe no valid write (a RUNNING insert without an
	// owner, a settlement to a non-terminal status, an unknown resolution, ...). Nothing
	// was written; it is a bug in the caller.
	ErrInvalid = errors.New("store: invalid argument")
)

// Invocation is one persisted call (ST-4, the tool_invocations row).
type Invocation struct {
	ID          int64
	Key         string // idempotency key (RT-5), hex; unique
	Tenant      string
	Principal   string
	SessionID   string
	RunID       string
	Step        int
	CallID      string
	Tool        string
	ToolVersion int
	// ToolSHA256 is the definition hash (schema_sha256) of the tool the call was
	// recorded with: recovery re-runs a call only on a worker that has registered the
	// same definition (LIFE-1). "" on rows recorded before migration 004.
	ToolSHA256     string
	Idempotency    string // the tool's class when the call was recorded
	IdempotentWhen *bool  // conditionally_idempotent only: did idempotent_when hold for these args (step 6)
	Args           json.RawMessage
	ArgsHash       string // hash of (tool, canonical args): the breaker's "identical call" (RT-8)
	OriginTrust    string
	ArgumentTrust  string
	Mode           string // the active protocol mode (WF-5)
	Decision       string // allow | deny | needs_approval (POL-1)
	Status         Status
	ReasonCode     string
	Outcome        json.RawMessage // the recorded outcome returned at step 8
	EffectSentAt   *time.Time      // the watermark of the current attempt
	// EarlierEffectSentAt is the first watermark of an earlier attempt, kept when the
	// sweep retried the row and cleared EffectSentAt: the effect may have been sent
	// since then (idempotent retries only). Nil if no earlier attempt marked.
	EarlierEffectSentAt *time.Time
	// WatermarkMissing flags a watermark-requiring call that returned without marking (RT-13).
	WatermarkMissing bool
	LeaseOwner       string // the fence's owner; kept on settle, cleared when the sweep reclaims
	LeaseExpiresAt   *time.Time
	Attempt          int // number of claims so far (a RUNNING insert is the first)
	SuspendedAt      *time.Time
	ResumeToken      string
	ResolvedBy       string     // who resolved an UNCERTAIN row, and how
	Resolution       string     // happened | did_not_happen
	ResolvedAt       *time.Time // when it was resolved (database clock)
	CreatedAt        time.Time
	UpdatedAt        time.Time
	// Workspace is the absolute workspace root the call was made in: recovery re-runs
	// the call there, never in the recovering process's own (issue 14, finding 12). ""
	// when the call had none, and on rows recorded before migration 007.
	Workspace string
}

// Fence identifies one attempt of one invocation by one worker. Every write after a
// claim is conditioned on it: WHERE id = ? AND status = 'RUNNING' AND lease_owner = ?
// AND attempt = ? AND suspended_at IS NULL.
type Fence struct {
	ID      int64
	Owner   string
	Attempt int
}

// Fence returns the fence of the row's current attempt.
func (inv *Invocation) Fence() Fence {
	return Fence{ID: inv.ID, Owner: inv.LeaseOwner, Attempt: inv.Attempt}
}

// Sweep defaults, used for zero fields of SweepParams.
const (
	DefaultSweepLimit  = 100
	DefaultMaxAttempts = 5
)

// ToolRef names one tool definition a worker has registered: the rows recovery may
// claim on that worker (LIFE-1). A row matches when its tool and tool_version are
// Name and Version and its tool_sha256 is SHA256 (or "", a row recorded before the
// hash was).
type ToolRef struct {
	Name    string
	Version int
	SHA256  string
}

// Generation is the part of a derived call id's latest row that call identity decides
// from (PriorCalls.Latest): the row's columns of the same names. Not the whole row:
// every call with a derived id reads it, and 36 columns cost the call more than the
// read itself (issue 20).
type Generation struct {
	ID                                int64
	CallID                            string
	Status                            Status
	EffectSentAt, EarlierEffectSentAt *time.Time
	UpdatedAt                         time.Time
}

// PriorCallsParams selects what one call reads of the calls recorded before it
// (Invocations.InvocationPriorCalls): its tenant's run, step and arguments hash, and
// CallIDBase, the call id when it was derived (SES-2), "" when the caller named it.
//
// Key is for a named call only: its idempotency key, when the call may be recorded
// once (a read, InsertRecordOnce) and so would otherwise read that key apart before
// it runs. A derived call's key is not known before its generation is decided, so
// Key and CallIDBase are never both set (ErrInvalid).
type PriorCallsParams struct {
	Tenant, RunID string
	Step          int
	ArgsHash      string
	CallIDBase    string
	Key           string
}

// PriorCalls is what the pipeline reads of the calls before one call, in one
// statement, before it decides anything (steps 4 and 5): the breaker's counter and,
// for a derived call id, its latest generation, or for a named read, whether its key
// is taken. The counter and the generation are read together because they walk the
// same index range, (tenant, run_id, args_hash), and every call needs the counter:
// for a call whose id was derived, as most MCP clients' calls are, that is a
// statement less on SQLite and a round trip less on PostgreSQL than reading them
// apart (issue 20), and the two are read at one instant; the key is a probe of its
// unique index in the same statement, for the same reason.
type PriorCalls struct {
	Breaker BreakerCounts
	// Latest is the latest generation of a derived call id when HasLatest; the zero
	// Generation when there is none yet or the call id was not derived.
	Latest    Generation
	HasLatest bool
	// KeyTaken reports whether a row with PriorCallsParams.Key exists, whatever its
	// status: false when Key is "". It is read with the counter, at step 4; a row
	// recorded with that key afterwards is met by the insert (ON CONFLICT), as one
	// recorded while the call ran always was.
	KeyTaken bool
}

// Claimable says whose rows a recovery operation (the sweep, the retryable list) may
// touch. A worker never decides for a tool it cannot run, so the pipeline always
// passes Tools; AllTools is for a caller that knows it speaks for every tool on the
// store (the conformance suite, a single-tool test). The zero value is ErrInvalid.
type Claimable struct {
	Tools    []ToolRef
	AllTools bool
	// Tenant, when set, narrows the rows to that tenant's: the recovery an operator of
	// one tenant runs never decides, re-runs or counts another tenant's calls (SEC-3;
	// issue 14, finding 12). "" is every tenant (a host's own maintenance).
	Tenant string
}

// Validate reports whether c says whose rows may be touched (ErrInvalid if not).
func (c Claimable) Validate() error {
	if !c.AllTools && len(c.Tools) == 0 {
		return fmt.Errorf("%w: a recovery operation needs the worker's tools (or AllTools)", ErrInvalid)
	}
	if c.AllTools && len(c.Tools) > 0 {
		return fmt.Errorf("%w: both Tools and AllTools", ErrInvalid)
	}
	for _, t := range c.Tools {
		if t.Name == "" {
			return fmt.Errorf("%w: a tool reference without a name", ErrInvalid)
		}
	}
	return nil
}

// SweepParams bounds one recovery pass. Zero fields take the defaults, except
// Claimable, which is required.
type SweepParams struct {
	Limit int // rows per pass
	// MaxAttempts bounds crash loops: a reclaimed row whose decision would be retry but
	// that has already been claimed MaxAttempts times ends FAILED with reason_code
	// crash_loop instead. A call therefore runs at most MaxAttempts times.
	MaxAttempts int
	// Claimable restricts the sweep to rows of the worker's tools: a row of any other
	// tool, or of another definition of one, is not decided, not locked and not
	// changed — it is left for a worker that has its tool (LIFE-1).
	Claimable
}

// WithDefaults returns p with zero (or negative) fields set to the defaults.
func (p SweepParams) WithDefaults() SweepParams {
	if p.Limit <= 0 {
		p.Limit = DefaultSweepLimit
	}
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	return p
}

// RetryableParams selects the PENDING rows a worker may claim now (see
// Invocations.InvocationListRetryable).
type RetryableParams struct {
	Limit int // <= 0: no limit
	Claimable
}

// Unclaimable counts the rows recovery would act on now — RUNNING and unsuspended with
// an expired lease, or PENDING and claimable — that a worker left alone because they
// are not its tools' (Invocations.InvocationCountUnclaimable).
type Unclaimable struct {
	// NotRegistered: the row's tool is not among the worker's tools at all.
	NotRegistered int
	// DefinitionChanged: the worker has a tool of that name, but at another version or
	// definition hash, so running it would run other code than the call recorded.
	DefinitionChanged int
}

// Swept is one row the sweep reclaimed and what it decided (RT-4).
type Swept struct {
	Invocation *Invocation // the row after the sweep
	// Decision is retry (back to PENDING, same key, attempt kept; the next claim
	// increments it), uncertain, or failed (crash loop bound reached).
	Decision string
}

// Sweep decisions.
const (
	SweepRetry     = "retry"
	SweepUncertain = "uncertain"
	SweepFailed    = "failed"
)

// BreakerCounts are the breaker's one counter, read from the rows of a run (RT-8).
type BreakerCounts struct {
	Total     int  // identical calls recorded in the run
	Denied    int  // of which denied
	Uncertain bool // one of them is UNCERTAIN and not yet resolved by a person
}

// ToolPin is one entry of a session's pinned catalog (MCP-7): a tool's registry name
// and the definition hash (schema_sha256) the session first saw.
type ToolPin struct {
	Tool   string
	SHA256 string
}

// PinEpoch is a forced epoch as the store applies it (Sessions.SessionPinsForceEpoch).
type PinEpoch struct {
	// Prefix selects the re-pinned tools ("mcp.SERVER."): required.
	Prefix string
	// Pins are the current definitions of the tools under Prefix; each must start with it.
	Pins []ToolPin
	// Tenant, when set, is the only tenant whose sessions receive Pins (a tenant's own
	// server): the other sessions only lose the prefix's pins, which they never had.
	Tenant string
}

// AwaitApprovalPrefix starts the resume token of a row suspended until an approval is
// decided (AwaitApprovalToken).
const AwaitApprovalPrefix = "approval:"

// AwaitApprovalToken is the resume token of the row whose key is own, suspended until
// the approval of the held call whose key is held is decided (an orchestration script
// torn down at that call; Invocations.InvocationUnsuspendDecided). Both keys are
// idempotency keys, 64 hex digits (RT-5): the store reads held back as the 64
// characters after the prefix. own makes the token unique when several rows wait for
// the same call.
func AwaitApprovalToken(held, own string) string {
	return AwaitApprovalPrefix + held + ":" + own
}

// AwaitedApproval returns the key of the held call a resume token made by
// AwaitApprovalToken waits for; false for any other token.
func AwaitedApproval(token string) (string, bool) {
	rest, ok := strings.CutPrefix(token, AwaitApprovalPrefix)
	if !ok || len(rest) < 65 || rest[64] != ':' {
		return "", false
	}
	return rest[:64], true
}

// Approval is a persisted decision on one held invocation (POL-3).
type Approval struct {
	Key       string // the invocation's idempotency key
	Tenant    string // must be the invocation's tenant
	Approved  bool
	DecidedBy string
	Reason    string
	DecidedAt time.Time // set by the store (database clock)
}

// AuditEntry is one line of the audit log (WF-5).
type AuditEntry struct {
	ID        int64
	Tenant    string
	Kind      string // tool_call, wf1_violation, dispatch_request, approval, resolve, ...
	Principal string
	SessionID string
	Mode      string
	Tool      string
	Key       string
	Detail    json.RawMessage
	At        time.Time // set by the store (database clock)
}

// InvocationFilter selects rows for InvocationList. Every zero field is "any".
type InvocationFilter struct {
	Tenant    string
	SessionID string
	// AwaitingApproval keeps only held calls no one has decided yet: PENDING, decision
	// needs_approval, no approval recorded (the queue of toolrun approvals).
	AwaitingApproval bool
	AfterID          int64 // rows with id > AfterID (paging)
	Limit            int   // <= 0: no limit
}

// CatalogChange is one entry of mcp_catalog_history (MCP-7).
type CatalogChange struct {
	ID       int64
	ServerID string
	Tool     string
	Change   string // added | removed | changed | dropped_collision | dropped_invalid | list_changed | forced_epoch
	SHA256   string
	Detail   json.RawMessage
	At       time.Time // set by the store (database clock)
}

// Event kinds. The store writes the invocation and catalog kinds itself, in the same
// transaction as the write they report (triggers of migration 003), so no milestone is
// committed without its event and none costs an extra commit; the others are appended
// by code through EventAppend.
const (
	EventRecorded     = "recorded"      // a row was inserted (step 7)
	EventHeld         = "held"          // the row entered PENDING with decision needs_approval and no decision yet
	EventStarted      = "started"       // the row became RUNNING (a claim, or a RUNNING insert after recorded)
	EventEffectSent   = "effect_sent"   // the watermark was set
	EventReleased     = "released"      // RUNNING back to PENDING: a release, or a retry decided by the sweep
	EventSuspended    = "suspended"     // a control call was suspended (RT-11)
	EventSettled      = "settled"       // the row became SUCCEEDED, FAILED, DENIED or UNAVAILABLE
	EventUncertain    = "uncertain"     // the row became UNCERTAIN
	EventResolved     = "resolved"      // a person resolved an UNCERTAIN row
	EventCatalogDrift = "catalog_drift" // a row of mcp_catalog_history (MCP-7)
	// Appended by the device gateway (DEV-1..3).
	EventDeviceConnected    = "device_connected"
	EventDeviceDisconnected = "device_disconnected"
)

// Event is one entry of the event stream (EV-1): the classification of a milestone,
// never its payload. It has no field for arguments, results, remote text, error text
// or artifact contents, so no writer can put them in an event; the invocation row
// carries those, and InvocationID points at it.
type Event struct {
	Cursor        EventCursor // set by the store: the event's position in the stream
	Kind          string      // Event* (or a kind a later issue adds)
	Tenant        string
	SessionID     string
	RunID         string
	InvocationID  int64 // 0 for events of no invocation
	Step          int
	CallID        string
	Tool          string
	Status        string // the row's status after the milestone
	ReasonCode    string
	Mode          string
	Decision      string
	Idempotency   string
	OriginTrust   string
	ArgumentTrust string
	Attempt       int
	// Server is the upstream server of a catalog_drift event, or the device of a
	// device_* event (a device is an MCP server in reverse); Change is the catalog
	// change (added, removed, changed, ...).
	Server string
	Change string
	// Duration of a settled or uncertain event whose row was recorded before it
	// settled: from the record (created_at) to the settlement, by the database clock.
	// Nil when the row was inserted already settled (a denial, a record-once read).
	Duration *time.Duration
	At       time.Time // the database clock at the milestone (the row's updated_at)
}

// Validate reports whether e can be appended (ErrInvalid if not).
func (e Event) Validate() error {
	if e.Kind == "" || strings.TrimLeft(e.Kind, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
		// the kind is the SSE event name: one line, and a name a client can switch on
		return fmt.Errorf("%w: event kind %q (want lowercase letters, digits and _)", ErrInvalid, e.Kind)
	}
	if e.Duration != nil && *e.Duration < 0 {
		return fmt.Errorf("%w: event with a negative duration", ErrInvalid)
	}
	return nil
}

// EventCursor is a position in the event stream: events are read in (TX, ID) order.
// On SQLite writes are serialized, so the id order is the commit order and TX is 0.
// On PostgreSQL ids come from a sequence in the order transactions take them, not the
// order they commit; TX is the writing transaction's id, and EventList returns only
// events of transactions older than every transaction still running (the snapshot's
// xmin), so nothing can later appear before a cursor a reader already holds.
type EventCursor struct {
	TX int64
	ID int64
}

// String formats c as the SSE id: "ID" when TX is 0 (SQLite), "TX-ID" otherwise.
func (c EventCursor) String() string {
	if c.TX == 0 {
		return strconv.FormatInt(c.ID, 10)
	}
	return strconv.FormatInt(c.TX, 10) + "-" + strconv.FormatInt(c.ID, 10)
}

// ParseEventCursor parses what String formats ("" and "0" are the start of the
// stream). ErrInvalid for anything else.
func ParseEventCursor(s string) (EventCursor, error) {
	if s == "" {
		return EventCursor{}, nil
	}
	txs, ids, hasTX := strings.Cut(s, "-")
	if !hasTX {
		txs, ids = "0", s
	}
	tx, err1 := strconv.ParseInt(txs, 10, 64)
	id, err2 := strconv.ParseInt(ids, 10, 64)
	if err1 != nil || err2 != nil || tx < 0 || id < 0 || (hasTX && txs != strconv.FormatInt(tx, 10)) ||
		ids != strconv.FormatInt(id, 10) {
		return EventCursor{}, fmt.Errorf("%w: event id %q (want ID or TX-ID, decimal)", ErrInvalid, s)
	}
	return EventCursor{TX: tx, ID: id}, nil
}

// Less orders cursors as the stream does.
func (c EventCursor) Less(o EventCursor) bool {
	return c.TX < o.TX || (c.TX == o.TX && c.ID < o.ID)
}

// EventFilter selects events for EventList. Every zero field is "any".
type EventFilter struct {
	Tenant    string
	SessionID string
	RunID     string
	After     EventCursor // events strictly after this cursor
	Limit     int         // <= 0: no limit
}

// The store is split into role interfaces, River's Driver/Executor/Listener shape:
// each consumer asks for the roles it uses ([Invocations], [Reviews], [Audit],
// [CatalogHistory], [Events], [Sessions], [DeploymentSecrets], and the optional roles
// [Tasks], [MCPSessions] and [Waker]), and [Store] composes the roles every driver
// implements, for the code that wires a store up (a host, the pipeline, a wrapper).
//
// Every method that writes is exactly one transaction (one commit), whatever it
// returns; the others only read. Every role is safe for concurrent use by many
// goroutines and, for drivers that support it, many processes. A limit <= 0 on a list
// method means no limit.

// Invocations is the role of the pipeline and of recovery: the tool_invocations rows
// (ST-4), their leases and their fenced writes.
//
// A fenced write (the ...IfLeased methods) matches its row only WHERE id = ? AND
// status = 'RUNNING' AND lease_owner = ? AND attempt = ? AND suspended_at IS NULL;
// matching nothing is ErrLeaseLost, except where a method names its lost-ack case.
// All times that decide leases come from the store's clock (the database clock; see
// package doc), never the caller's.
type Invocations interface {
	// InvocationInsert records a new invocation (step 7, fused with step 10 for
	// InsertRunning: lease_expires_at = db-now + lease, attempt 1). If the key already
	// exists nothing is written and the existing row is returned with inserted false
	// (step 8 then decides). ErrInvalid for parameters p.Validate refuses (not built by
	// a constructor, RUNNING without an owner or a positive lease, a settled insert to a
	// non-terminal status).
	InvocationInsert(ctx context.Context, p InsertParams) (inv *Invocation, inserted bool, err error)
	// InvocationGet and InvocationGetByKey read one row; ErrNotFound if there is none.
	InvocationGet(ctx context.Context, id int64) (*Invocation, error)
	InvocationGetByKey(ctx context.Context, key string) (*Invocation, error)
	// InvocationGetByResumeToken reads the row a suspended control call was given
	// resume token for (RT-11); ErrNotFound if there is none.
	InvocationGetByResumeToken(ctx context.Context, resumeToken string) (*Invocation, error)
	// InvocationClaimIfPending moves a PENDING row to RUNNING for owner with a lease
	// (db-now + lease), incrementing the attempt (step 10 after a hold, or a retry after
	// the sweep). Of concurrent claimers exactly one wins; the others get ErrConflict,
	// as does any claim of a row that is not PENDING. ErrNotFound if there is no row.
	InvocationClaimIfPending(ctx context.Context, id int64, owner string, lease time.Duration) (*Invocation, error)
	// InvocationMarkEffectSentIfLeased durably sets the watermark (effect_sent_at) and
	// records token with it. Besides the fence it requires an unexpired lease
	// (lease_expires_at > db-now): a worker whose lease ran out must not start an
	// effect. Lost ack: retried with the same token it succeeds again (the first
	// effect_sent_at is kept), so "did my own write land?" is answered by the row.
	// ErrConflict if the row already carries another token under the same fence;
	// ErrLeaseLost if the fence or the lease does not hold. The commit survives power
	// loss, not only process death.
	InvocationMarkEffectSentIfLeased(ctx context.Context, f Fence, token string) error
	// InvocationSettleIfLeased writes the terminal status and outcome (step 13) and
	// releases the lease; lease_owner and attempt stay as the record of the settling
	// fence. Lost ack: if the row is already terminal (not via resume) with this fence
	// and the same status, it succeeds without writing. ErrLeaseLost otherwise;
	// ErrInvalid if s.Status is not terminal.
	InvocationSettleIfLeased(ctx context.Context, f Fence, s Settlement) error
	// InvocationReleaseIfLeased gives a RUNNING call back for a retry: PENDING again,
	// lease cleared, decision kept, its watermark (if any) moved to
	// EarlierEffectSentAt. The pipeline calls it when an attempt ended with a
	// retryable outcome and no effect in doubt (the watermark could not be recorded, a
	// timeout before the watermark, ...): the next claim, by a caller's retry with the
	// same key or by recovery, runs the call again. Retried after a lost
	// acknowledgement it succeeds if the row is PENDING at the fence's attempt.
	// ErrLeaseLost otherwise.
	InvocationReleaseIfLeased(ctx context.Context, f Fence) error
	// InvocationSuspendIfLeased marks a RUNNING control call suspended (RT-11): it sets
	// suspended_at, the resume token and the outcome so far, and releases the lease;
	// the row stays RUNNING, and the sweep, lease renewal and every fenced write ignore
	// it from now on. Lost ack: succeeds if the row is already suspended with this
	// token under this fence. ErrConflict if another row holds the token.
	InvocationSuspendIfLeased(ctx context.Context, f Fence, resumeToken string, outcome json.RawMessage) error
	// InvocationResume settles a suspended row by its resume token, exactly as a settle
	// would; suspended_at is kept as history, so a resumed row is terminal with
	// SuspendedAt set. ErrNotFound for an unknown token, ErrConflict if the row is no
	// longer suspended (already resumed), ErrInvalid if s.Status is not terminal.
	InvocationResume(ctx context.Context, resumeToken string, s Settlement) (*Invocation, error)
	// InvocationRenewLeases sets lease_expires_at = db-now + lease on the rows of ids
	// that are RUNNING, unsuspended, leased by owner and whose lease has not yet
	// expired: one statement per interval, however many calls are in flight. ids are
	// the calls the worker is executing now: a row it holds but no longer executes (a
	// write after its claim failed, a claim whose acknowledgement was lost) is not
	// renewed, so its lease runs out and the sweep decides for it. An expired lease is
	// never revived: the sweep may already be deciding for it. No ids, no statement.
	// Returns the number of rows renewed.
	InvocationRenewLeases(ctx context.Context, owner string, ids []int64, lease time.Duration) (int, error)
	// InvocationSweep reclaims up to p.Limit RUNNING, unsuspended rows whose lease
	// expired (by the database clock) and classifies each from its recorded facts (RT-4),
	// in one statement:
	//   - watermark set, and neither idempotent nor conditionally_idempotent with
	//     IdempotentWhen true -> UNCERTAIN, reason_code effect_may_have_happened;
	//   - otherwise (no watermark, or a watermark on a call that is safe to repeat)
	//     -> retry: PENDING, same key, attempt kept, watermark cleared (remembered in
	//     EarlierEffectSentAt) so the next attempt sets its own;
	//   - but a retry of a row already claimed p.MaxAttempts times -> FAILED,
	//     reason_code crash_loop.
	// Every reclaimed row loses its lease_owner and lease, so the old fence can never
	// match again. Safe under concurrent sweepers: each row is reclaimed by exactly one.
	// Only rows p.Claimable matches are considered: the others are neither changed nor
	// locked. Rows are returned in id order. ErrInvalid for an invalid Claimable.
	InvocationSweep(ctx context.Context, p SweepParams) ([]Swept, error)
	// InvocationListRetryable lists PENDING rows that may be claimed now: decision
	// allow (swept retries) or an approved hold (decision needs_approval with an
	// approval that approved it), oldest first, of the tools p.Claimable matches.
	// ErrInvalid for an invalid Claimable.
	InvocationListRetryable(ctx context.Context, p RetryableParams) ([]*Invocation, error)
	// InvocationUnsuspendDecided gives back, for a re-run, up to p.Limit suspended rows
	// that wait for an approval (resume token AwaitApprovalToken(held, own)) now decided,
	// approved or denied, in the row's tenant: an orchestration script torn down at a
	// held call (RT-11, RT-12). Each becomes PENDING again, its suspended_at, resume
	// token and lease cleared, decision and attempt kept, its watermark (if any) moved
	// to EarlierEffectSentAt — a row InvocationListRetryable lists and a claim runs.
	// Oldest first, of the tools p.Claimable matches, in one statement: of concurrent
	// callers each row goes to exactly one, which gets it in the returned rows (as
	// written, in id order). A row whose approval is undecided is left suspended.
	// ErrInvalid for an invalid Claimable.
	InvocationUnsuspendDecided(ctx context.Context, p RetryableParams) ([]*Invocation, error)
	// InvocationCountUnclaimable counts the rows the sweep or the retryable list would
	// act on now if tools were every tool, but which tools do not match: what a worker
	// with these tools leaves for another (the recovery report's "skipped"), of tenant
	// ("" for every tenant). It reads only.
	InvocationCountUnclaimable(ctx context.Context, tools []ToolRef, tenant string) (Unclaimable, error)
	// InvocationPriorCalls reads, in one statement, what a call decides from of the
	// calls recorded before it (PriorCalls):
	//   - Breaker: the breaker's counter for one identical call in a run of a tenant,
	//     the rows of p's tenant, run and arguments hash, whatever their step or call
	//     id. Only rows of that tenant count (SEC-3), so another tenant's calls in a
	//     run of the same id neither trip the breaker nor can be detected through it.
	//   - Latest, when p.CallIDBase is not "": the latest row of that derived call id
	//     (SES-2), of p's tenant, run, step and arguments hash, with call id
	//     p.CallIDBase or p.CallIDBase-N (a later generation), refusal rows excluded
	//     (they are recorded under keys of their own). HasLatest is false when there
	//     is none.
	//   - KeyTaken, when p.Key is not "": whether any row has that key.
	// ErrInvalid when p sets both CallIDBase and Key. It reads only.
	InvocationPriorCalls(ctx context.Context, p PriorCallsParams) (PriorCalls, error)
	// InvocationList lists the rows f selects, in id order (toolrun's approvals queue
	// and audit view). It reads only.
	InvocationList(ctx context.Context, f InvocationFilter) ([]*Invocation, error)
}

// Reviews is the role of the people who decide: approvals of held calls (POL-3) and
// the review of UNCERTAIN rows (SES-2). Each decision commits with its audit entry.
type Reviews interface {
	// InvocationListUncertain is the review queue of one tenant ("" for all): UNCERTAIN
	// rows not yet resolved, oldest first.
	InvocationListUncertain(ctx context.Context, tenant string) ([]*Invocation, error)
	// InvocationResolveUncertain records a person's review: happened or did_not_happen,
	// by whom and when, and moves the row to what is now known (SES-2):
	//   - happened: SUCCEEDED, with outcome (the record of the confirmation), which
	//     step 8 then returns to a retry of the call;
	//   - did_not_happen: PENDING and retryable, its watermark cleared (kept in
	//     EarlierEffectSentAt) and its lease gone — exactly a call interrupted before
	//     its watermark, which the caller's retry or the next recovery pass runs, once,
	//     under the same key. outcome is ignored.
	// Either way the row leaves the review queue and no longer trips uncertain_repeat.
	// audit, when not nil, is appended in the same transaction (the review and its
	// audit entry commit together or not at all, HOST-2); its Tenant must be the row's,
	// else ErrNotFound and nothing is written. ErrConflict if the row is not UNCERTAIN
	// or already resolved, ErrNotFound if there is none, ErrInvalid for another
	// resolution, an empty by, or happened without an outcome.
	InvocationResolveUncertain(ctx context.Context, id int64, resolution, by string, outcome json.RawMessage, audit *AuditEntry) (*Invocation, error)
	// ApprovalDecide records an approval or denial of a held invocation (DecidedAt is
	// the database clock). The invocation must exist in a.Tenant, else ErrNotFound.
	// Deciding twice is ErrConflict. audit, when not nil, is appended in the same
	// transaction (HOST-2); its Tenant must be a.Tenant (ErrInvalid otherwise).
	ApprovalDecide(ctx context.Context, a Approval, audit *AuditEntry) error
	ApprovalGet(ctx context.Context, key string) (*Approval, error)
}

// Audit is the append-only audit log (WF-5).
type Audit interface {
	// AuditAppend appends one entry (the log is append-only) and returns its id; ids
	// increase. AuditList pages by id: entries with id > afterID of tenant ("" for
	// all), in id order.
	AuditAppend(ctx context.Context, e AuditEntry) (int64, error)
	AuditList(ctx context.Context, tenant string, afterID int64, limit int) ([]AuditEntry, error)
}

// Sessions is the role of the session tables (SES-1, MCP-7): who owns a session id,
// its protocol mode and its pinned catalog, all keyed by (tenant, session id).
type Sessions interface {
	// SessionModeGet returns the current protocol mode (WF-4) of a tenant's session;
	// ErrNotFound if none was set. SessionModeSet records it (insert or update), one
	// commit; ErrInvalid for an empty session id or mode. Modes are keyed by (tenant,
	// session id) (SES-1): another tenant's mode of the same id is another row, never
	// read or overwritten.
	SessionModeGet(ctx context.Context, tenant, sessionID string) (string, error)
	SessionModeSet(ctx context.Context, tenant, sessionID, mode string) error

	// SessionClaim makes tenant the owner of session id sessionID if no tenant owns it
	// yet, and reports whether tenant owns it now (SES-1). The first claim wins,
	// atomically across handles, processes and restarts, and ownership never moves: a
	// later claim by another tenant is false, forever. It commits only when it records
	// a new owner. ErrInvalid for an empty session id.
	SessionClaim(ctx context.Context, tenant, sessionID string) (owned bool, err error)
	// SessionPinsGet reads the catalog a tenant's session pinned (MCP-7): pinned is
	// false, and pins nil, if it pinned none yet. Pins are in tool order.
	SessionPinsGet(ctx context.Context, tenant, sessionID string) (pins []ToolPin, pinned bool, err error)
	// SessionPinsCreate records pins as the session's catalog unless it already has
	// one, and returns the catalog it has now (in tool order): the first writer wins,
	// atomically across processes, and every later writer gets the first one's pins. An
	// empty pins is a catalog too (a session that pinned no tool keeps none). One
	// commit. ErrInvalid for an empty session id, a pin without a tool or two pins of
	// one tool.
	SessionPinsCreate(ctx context.Context, tenant, sessionID string, pins []ToolPin) ([]ToolPin, error)
	// SessionMint records a session id the server minted for a request that named
	// none (MCP-10, revision 2026-07-28 over HTTP), when a request first echoes it
	// (mcp/server): tenant as its owner and pins as its catalog, in one commit, and
	// nothing else is read or written. The id must be new
	// to the store: ErrConflict, with nothing written, if a tenant owns it or a catalog
	// is pinned under it. ErrInvalid as for SessionClaim and SessionPinsCreate.
	//
	// The commit is relaxed, as a record-once row's (InsertRecordOnce): it reaches the
	// database before SessionMint returns, and is made durable by the next durable
	// commit of the store. Only a crash of the machine, or of the database server, can
	// lose it, and then with every commit after it, so no record the store kept names
	// a session the store lost; the lost session's next request claims and pins it
	// again.
	SessionMint(ctx context.Context, tenant, sessionID string, pins []ToolPin) error
	// SessionPinsForceEpoch applies an operator's forced epoch (MCP-7) to every pinned
	// catalog on the store: the pins of the tools whose names start with e.Prefix are
	// replaced by e.Pins (restricted to e.Tenant's sessions when e.Tenant is set), the
	// others are kept. One commit; returns the number of catalogs that received
	// e.Pins. ErrInvalid for an empty prefix or a pin outside it.
	SessionPinsForceEpoch(ctx context.Context, e PinEpoch) (int, error)
}

// CatalogHistory is the log of upstream catalog changes (mcp_catalog_history, MCP-7).
type CatalogHistory interface {
	// CatalogHistoryAppend appends one catalog change; CatalogHistoryList lists those of
	// one server ("" for all) in id order.
	CatalogHistoryAppend(ctx context.Context, c CatalogChange) (int64, error)
	CatalogHistoryList(ctx context.Context, serverID string) ([]CatalogChange, error)
}

// Events is the event stream (EV-1).
type Events interface {
	// EventAppend appends an event that no row reports by itself (device_connected,
	// ...), one commit, and returns its id; the store sets its cursor and time. The
	// milestones of invocations and the catalog history need no call: the store
	// writes their events in the same transaction as the row. ErrInvalid for an event
	// without a kind.
	EventAppend(ctx context.Context, e Event) (int64, error)
	// EventList reads the events f selects, after f.After, in stream order ((TX, ID)):
	// only events whose transaction committed, and never one that a later call could
	// return before the last event of this one (see EventCursor), so paging with the
	// last cursor misses nothing. ErrInvalid for a cursor this driver never formats.
	EventList(ctx context.Context, f EventFilter) ([]Event, error)
}

// DeploymentSecrets keeps the secrets every host on one store shares (issue 14).
type DeploymentSecrets interface {
	// DeploymentSecretGetOrCreate returns the secret stored under name, storing
	// candidate first when there is none: every host on one store gets the same bytes,
	// whichever asked first (the key of the derived call ids, issue 14). One commit.
	// ErrInvalid for an empty name or a candidate shorter than MinSecretBytes.
	DeploymentSecretGetOrCreate(ctx context.Context, name string, candidate []byte) ([]byte, error)
}

// Store is every role a driver implements, and Close: what a host opens and hands
// out role by role. Tasks, MCPSessions and Waker are roles of their own that both
// drivers implement too, but a wrapper or a test double may not; ask for them by type
// assertion (a consumer that cannot get one degrades, as its doc says).
type Store interface {
	Invocations
	Reviews
	Audit
	Sessions
	CatalogHistory
	Events
	DeploymentSecrets

	Close() error
}

// Validate reports whether p selects one kind of call (ErrInvalid if not): a derived
// call id's key is decided from what the read returns, so it cannot be read with it.
func (p PriorCallsParams) Validate() error {
	if p.CallIDBase != "" && p.Key != "" {
		return fmt.Errorf("%w: prior calls of a derived call id (%q) take no key", ErrInvalid, p.CallIDBase)
	}
	return nil
}
