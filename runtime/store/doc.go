// Package store is the persistence port of the runtime pipeline (DESIGN.md section 6):
// one interface, [Store], implemented by one package per database (store/sqlite, the
// embedded default, and store/postgres for many workers), and one conformance suite,
// storetest, that every driver passes — the shape of River's riverdriver.
//
// Operations are named subject first, with their guard in the name
// (InvocationSettleIfLeased), and each is exactly one commit, so the pipeline's commit
// count per call is the number of write operations it calls. Every write after a
// claim carries a [Fence] (id, lease owner, attempt): a zombie worker whose lease was
// reclaimed affects nothing. A write whose acknowledgement was lost is retried with
// the same token and recognised as already applied ("did my own write land?").
//
// Times that decide leases come from the database clock, never the caller's.
//
// Decisions the contract fixes (each is tested by storetest on every driver):
//
//   - The sweep clears lease_owner and the lease of every row it reclaims, so an old
//     fence never matches again; a settle keeps lease_owner and attempt as the record
//     of the fence that settled.
//   - A retry clears the watermark (effect_sent_at and its token) so the next attempt
//     sets its own; the first cleared watermark stays in EarlierEffectSentAt.
//   - The crash-loop bound (SweepParams.MaxAttempts) applies to every retry decision,
//     with or without a watermark: a call runs at most MaxAttempts times.
//   - The watermark also needs an unexpired lease; settling does not (an expired but
//     unreclaimed attempt may still record what happened). Renewal never revives an
//     expired lease.
//   - Suspension (RT-11) keeps the row RUNNING, releases its lease and takes it out of
//     the worker's hands: fenced writes, renewal and the sweep all skip it. Resume
//     settles it by token and keeps suspended_at as history.
//   - Resolving an UNCERTAIN row keeps it UNCERTAIN and records the resolution, so
//     step 8 and the breaker still see it; it leaves the review queue.
//   - An approval can be recorded only for an existing invocation of the same tenant.
//   - Recovery is confined to the caller's tools (LIFE-1): the sweep and the retryable
//     list consider only rows whose tool, tool_version and tool_sha256 match a
//     [ToolRef] of [Claimable] (a row without a hash, recorded before migration 004,
//     matches by name and version), tested in the statement that selects the rows, so
//     a row of another tool is neither changed, locked nor counted against the limit.
//     A zero Claimable is ErrInvalid; AllTools is an explicit opt-in. What is left is
//     counted by InvocationCountUnclaimable, never settled.
//   - The audit entry of an approval or a review is written in the same commit as the
//     decision (HOST-2): a refused decision (ErrNotFound, ErrConflict, ErrInvalid)
//     writes neither, and an entry of another tenant refuses the decision.
//   - A session id belongs to the first tenant that claims it, atomically and for ever
//     (SessionClaim); every other session-keyed table — modes, pinned catalogs — is
//     keyed by (tenant, session id), so another tenant's row of the same id is another
//     session's (SES-1). A session's catalog is written once: the first writer wins and
//     every later one is handed the first one's pins; only a forced epoch rewrites pins.
//   - The breaker's counts are one tenant's (InvocationPriorCalls takes the tenant):
//     rows of another tenant in a run of the same id never count.
//
// Besides [Store], a driver may implement the role [Waker] (wake.go): waiters (the
// approval hold, the event stream, the catalog watcher) subscribe to a [Topic] and are
// woken when a write of it commits, reading the store at a long fallback interval
// instead of polling it; a consumer asks for the role with [WakerOf] and polls as
// before when the store has none.
//
// # Roles
//
// The port is split into role interfaces, the shape of River's riverdriver
// (Driver, Executor, Listener), and each consumer asks for the roles it uses:
//
//   - [Invocations]: the rows of calls, their leases, fenced writes and recovery
//     (the pipeline, the sweep, a worker's retries).
//   - [Reviews]: the decisions people make — approvals of held calls and the review
//     of UNCERTAIN rows (the approval service, the console).
//   - [Audit]: the append-only audit log (protocol's WF-1 records, the upstream's
//     refusals, the device gateway).
//   - [CatalogHistory]: the upstream catalog's drift log (mcp/upstream).
//   - [Events]: the event stream (the SSE handler, the console, the notifier).
//   - [Sessions]: session ownership, modes and pinned catalogs (the registry's pins,
//     the protocol's modes).
//   - [DeploymentSecrets]: the secrets every host on one store shares.
//   - [Tasks] and [MCPSessions]: the Tasks extension and the session-based MCP
//     transport; both drivers implement them, a wrapper may not, so they are asked
//     for by type assertion, as [Waker] is (through [WakerOf]).
//
// [Store] composes the roles every driver implements, with Close: what a host opens
// and what a wrapper (a fault injector, a counting store) wraps. A consumer that
// needs two roles names both (runtime.ApprovalStore, console.NotifierStore,
// upstream.Store), never Store.
//
// # Constructors for the only valid writes
//
// A new row is built by the one constructor of its first status, never by filling a
// struct whose fields matter only for some statuses: [InsertPending] and [InsertHeld]
// (PENDING, attempt 0), [InsertRunning] (RUNNING under an owner's lease, attempt 1:
// steps 7 and 10 fused), [InsertSettled] (a terminal row: a denial) and
// [InsertRecordOnce] (the terminal row of a record-once read, which a driver may
// commit without waiting for the disk). Each takes a [Call], the facts the row
// records whatever its status. Terminal writes take a [Settlement], built by
// [SettleSucceeded], [SettleFailed], [SettleDenied], [SettleUnavailable] or
// [SettleUncertain] (and [Settlement.WithWatermarkMissing] for RT-13). What cannot be
// built is refused by Validate in every driver alike (ErrInvalid).
//
// # Time in tests
//
// A driver opened with a [Clock] (sqlite.WithClock, postgres.WithClock) runs its
// statements on the database clock plus the clock's offset, so the conformance suite
// expires leases, idles sessions and ages cancellations by advancing it, never by
// sleeping; see Clock for why the database stays the source of time.
//
// store must never import runtime, spec, codegen or mcp: it knows rows, not tools.
package store
