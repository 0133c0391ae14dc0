package postgres

import (
	"embed"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/toolgen/toolgen/runtime/internal/sqlfile"
)

// SQL of the PostgreSQL driver, in the .sql files of sql/ (read by sqlfile: a section
// per statement, fragments included as {{name}}). Parameters are written @name for
// readability (and runtime/bench reads these files, @names included, to build its
// pgbench scripts); the var blocks compile each statement once into $n SQL (see
// compile). Times come from now() inside the statement (the database clock); each
// statement runs in its own transaction, so now() is the statement's time. A store
// opened WithClock runs its statements with now() shifted by the clock's offset
// (clock.go).

//go:embed sql/*.sql
var sqlFiles embed.FS

// queries are the sections of sql/*.sql, read once.
var queries = sqlfile.MustLoad(sqlFiles, "sql/*.sql")

var (
	invocationInsertSQL                 = queries.Get("InvocationInsert")
	invocationInsertRelaxedSQL          = queries.Get("InvocationInsertRelaxed")
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
)

// query is a statement of this file with its @names replaced by $1, $2, ...: callers
// pass its arguments positionally, in the order of the names given to compile.
// Binding by name (pgx.NamedArgs) would rewrite the SQL on every call, tens of
// allocations and a scan of the whole statement each time. A distinct type, so that
// an uncompiled constant cannot be run by mistake (PostgreSQL would read @name as
// the absolute-value operator applied to a column).
type query struct{ sql string }

var namedParam = regexp.MustCompile(`@[a-z_][a-z0-9_]*`)

// compile numbers the parameters of sql in the order of names, the order callers
// pass them in. It panics (at init) unless sql uses exactly the names given.
func compile(sql string, names ...string) query {
	used := make([]bool, len(names))
	out := namedParam.ReplaceAllStringFunc(sql, func(m string) string {
		i := slices.Index(names, m[1:])
		if i < 0 {
			panic(fmt.Sprintf("postgres: parameter %s missing from the names %v of %q", m, names, sql))
		}
		used[i] = true
		return "$" + strconv.Itoa(i+1)
	})
	if i := slices.Index(used, false); i >= 0 {
		panic(fmt.Sprintf("postgres: %q has no parameter @%s", sql, names[i]))
	}
	return query{out}
}

// auditParams are the names of auditValues, in the order auditArgs passes them.
var auditParams = []string{"audit_tenant", "audit_kind", "audit_principal", "audit_session_id", "audit_mode",
	"audit_tool", "audit_key", "audit_detail"}

// insertedParams are the names of insertedValues, in the order InvocationInsert passes them.
var insertedParams = []string{"key", "tenant", "principal", "session_id", "run_id",
	"step_number", "call_id", "tool", "tool_version", "tool_sha256", "idempotency", "idempotent_when", "args", "args_hash",
	"origin_trust", "argument_trust", "mode", "decision", "status", "reason_code", "outcome",
	"lease_owner", "lease_us", "attempt", "workspace"}

// The statements, compiled; each list of names is the order of the arguments.
var (
	invocationInsert           = compile(invocationInsertSQL, insertedParams...)
	invocationInsertRelaxed    = compile(invocationInsertRelaxedSQL, insertedParams...)
	invocationGet              = compile(invocationGetSQL, "id")
	invocationGetByKey         = compile(invocationGetByKeySQL, "key")
	invocationGetByResumeToken = compile(invocationGetByResumeTokenSQL, "token")
	invocationClaimIfPending   = compile(invocationClaimIfPendingSQL, "id", "owner", "lease_us")

	// The fenced statements take the fence (id, owner, attempt) first.
	invocationMarkEffectSentIfLeased = compile(invocationMarkEffectSentIfLeasedSQL, "id", "owner", "attempt", "token")
	invocationFenceHolds             = compile(invocationFenceHoldsSQL, "id", "owner", "attempt")
	invocationSettleIfLeased         = compile(invocationSettleIfLeasedSQL, "id", "owner", "attempt",
		"status", "reason_code", "outcome", "watermark_missing")
	invocationReleaseIfLeased = compile(invocationReleaseIfLeasedSQL, "id", "owner", "attempt")
	invocationReleasedAt      = compile(invocationReleasedAtSQL, "id", "attempt")
	invocationSettledByFence  = compile(invocationSettledByFenceSQL, "id", "owner", "attempt", "status")
	invocationSuspendIfLeased = compile(invocationSuspendIfLeasedSQL, "id", "owner", "attempt",
		"resume_token", "outcome")
	invocationSuspendedByFence = compile(invocationSuspendedByFenceSQL, "id", "owner", "attempt", "resume_token")

	invocationResumeTokenTaken = compile(invocationResumeTokenTakenSQL, "resume_token")
	invocationResume           = compile(invocationResumeSQL, "resume_token",
		"status", "reason_code", "outcome", "watermark_missing")
	invocationRenewLeases      = compile(invocationRenewLeasesSQL, "owner", "lease_us", "ids")
	invocationSweep            = compile(invocationSweepSQL, "limit", "max_attempts", "tools", "claim_tenant")
	invocationListRetryable    = compile(invocationListRetryableSQL, "limit", "tools", "claim_tenant")
	invocationUnsuspendDecided = compile(invocationUnsuspendDecidedSQL, "limit", "tools", "claim_tenant")
	invocationCountUnclaimable = compile(invocationCountUnclaimableSQL, "tools", "claim_tenant")
	invocationListUncertain    = compile(invocationListUncertainSQL, "tenant")
	invocationResolveUncertain = compile(invocationResolveUncertainSQL, append([]string{"id", "resolution", "resolved_by",
		"outcome", "with_audit"}, auditParams...)...)
	invocationExists              = compile(invocationExistsSQL, "id", "tenant")
	invocationBreakerCounts       = compile(invocationBreakerCountsSQL, "tenant", "run_id", "args_hash")
	invocationBreakerCountsAndKey = compile(invocationBreakerCountsAndKeySQL, "tenant", "run_id", "args_hash", "key")
	invocationPriorCalls          = compile(invocationPriorCallsSQL, "tenant", "run_id", "args_hash", "step", "base")

	approvalDecide = compile(approvalDecideSQL, append([]string{"key", "tenant", "approved", "decided_by", "reason",
		"with_audit"}, auditParams...)...)
	approvalExists = compile(approvalExistsSQL, "key")
	approvalGet    = compile(approvalGetSQL, "key")

	auditAppend = compile(auditAppendSQL, "tenant", "kind", "principal", "session_id", "mode", "tool", "key", "detail")
	auditList   = compile(auditListSQL, "after_id", "tenant", "limit")

	catalogHistoryAppend = compile(catalogHistoryAppendSQL, "server_id", "tool", "change", "sha256", "detail")
	catalogHistoryList   = compile(catalogHistoryListSQL, "server_id")
)

var deploymentSecretGetOrCreate = compile(queries.Get("DeploymentSecretGetOrCreate"), "name", "secret")
