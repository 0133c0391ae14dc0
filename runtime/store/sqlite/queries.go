package sqlite

import (
	"embed"

	"github.com/toolgen/toolgen/runtime/internal/sqlfile"
)

// SQL of the SQLite driver, in the .sql files of sql/ (read by sqlfile: a section
// per statement, fragments included as {{name}}). Parameters are named (:name); the
// statements every call runs (the record, call identity, the breaker) are prepared with
// ? in their place and bound by position (sqlfile.Positional, Store.prepare). Times
// are INTEGER microseconds since the Unix epoch from SQLite's own clock: the fragment
// nowMicros is stable within one statement ("now" is fixed per sqlite3_step) and has
// millisecond precision. A store opened WithClock runs its statements with nowMicros
// shifted by the clock's offset (clock.go).

//go:embed sql/*.sql
var sqlFiles embed.FS

// queries are the sections of sql/*.sql, read once.
var queries = sqlfile.MustLoad(sqlFiles, "sql/*.sql")

var (
	nowMicros                           = queries.Get("nowMicros")
	invocationInsertSQL                 = queries.Get("InvocationInsert")
	invocationGetSQL                    = queries.Get("InvocationGet")
	invocationGetByKeySQL               = queries.Get("InvocationGetByKey")
	invocationGetByResumeTokenSQL       = queries.Get("InvocationGetByResumeToken")
	invocationClaimIfPendingSQL         = queries.Get("InvocationClaimIfPending")
	invocationMarkEffectSentIfLeasedSQL = queries.Get("InvocationMarkEffectSentIfLeased")
	invocationFenceHoldsSQL             = queries.Get("InvocationFenceHolds")
	invocationSettleIfLeasedSQL         = queries.Get("InvocationSettleIfLeased")
	invocationReleaseIfLeasedSQL        = queries.Get("InvocationReleaseIfLeased")
	invocationReleasedAtSQL             = queries.Get("InvocationReleasedAt")
	invocationSettledByFenceSQL         = queries.Get("InvocationSettledByFence")
	invocationSuspendIfLeasedSQL        = queries.Get("InvocationSuspendIfLeased")
	invocationSuspendedByFenceSQL       = queries.Get("InvocationSuspendedByFence")
	invocationResumeTokenTakenSQL       = queries.Get("InvocationResumeTokenTaken")
	invocationResumeSQL                 = queries.Get("InvocationResume")
	invocationRenewLeasesSQL            = queries.Get("InvocationRenewLeases")
	invocationSweepSQL                  = queries.Get("InvocationSweep")
	invocationListRetryableSQL          = queries.Get("InvocationListRetryable")
	invocationUnsuspendDecidedSQL       = queries.Get("InvocationUnsuspendDecided")
	invocationCountUnclaimableSQL       = queries.Get("InvocationCountUnclaimable")
	invocationListUncertainSQL          = queries.Get("InvocationListUncertain")
	invocationResolveUncertainSQL       = queries.Get("InvocationResolveUncertain")
	invocationExistsSQL                 = queries.Get("InvocationExists")
	invocationBreakerCountsSQL          = queries.Get("InvocationBreakerCounts")
	invocationBreakerCountsAndKeySQL    = queries.Get("InvocationBreakerCountsAndKey")
	invocationPriorCallsSQL             = queries.Get("InvocationPriorCalls")
	approvalDecideSQL                   = queries.Get("ApprovalDecide")
	approvalExistsSQL                   = queries.Get("ApprovalExists")
	approvalGetSQL                      = queries.Get("ApprovalGet")
	auditAppendSQL                      = queries.Get("AuditAppend")
	auditListSQL                        = queries.Get("AuditList")
	catalogHistoryAppendSQL             = queries.Get("CatalogHistoryAppend")
	catalogHistoryListSQL               = queries.Get("CatalogHistoryList")
	invocationListSQL                   = queries.Get("InvocationList")
	sessionModeGetSQL                   = queries.Get("SessionModeGet")
	sessionModeSetSQL                   = queries.Get("SessionModeSet")
	eventAppendSQL                      = queries.Get("EventAppend")
	eventListSQL                        = queries.Get("EventList")
	deploymentSecretGetOrCreateSQL      = queries.Get("DeploymentSecretGetOrCreate")
)
