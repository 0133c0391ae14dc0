-- name: nowMicros
(CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000)

-- name: invocationColumns
id, key, tenant, principal, session_id, run_id, step_number, call_id, tool, tool_version,
	tool_sha256, idempotency, idempotent_when, args, args_hash, origin_trust, argument_trust, mode, decision, status, reason_code,
	outcome, effect_sent_at, earlier_effect_sent_at, watermark_missing, lease_owner, lease_expires_at, attempt,
	suspended_at, resume_token, resolution, resolved_by, resolved_at, created_at, updated_at, workspace

-- name: wokenColumns
-- wokenColumns are what a fenced write returns: the row's tenant and key, the topics
-- of the in-process wake-ups its commit sends (wake.go).
tenant, key

-- name: fenced
-- fenced is the predicate of every write after a claim.
id = :id AND status = 'RUNNING' AND lease_owner = :owner AND attempt = :attempt AND suspended_at IS NULL

-- name: toolMatches
-- toolMatches is true when the row aliased t is a call of one of the tools in :tools,
-- a JSON array of {"name", "version", "sha256"} (store.ToolRefsJSON): the same tool
-- and version, and the same definition hash unless the row has none (recorded before
-- migration 004). It is the Claimable filter of the recovery statements (LIFE-1),
-- tested inside the statement that selects the rows, so a row of another tool is
-- never picked, counted against a limit or written.
EXISTS (SELECT 1 FROM json_each(:tools) AS ref
	WHERE ref.value ->> 'name' = t.tool AND ref.value ->> 'version' = t.tool_version
		AND (t.tool_sha256 = '' OR t.tool_sha256 = ref.value ->> 'sha256'))

-- name: ofTenant
-- ofTenant is Claimable.Tenant on the row aliased t: :claim_tenant '' is every tenant.
(:claim_tenant = '' OR t.tenant = :claim_tenant)

-- name: claimable
-- claimable is store.Claimable: :tools NULL is AllTools.
(:tools IS NULL OR {{toolMatches}}) AND {{ofTenant}}

-- name: expiredLease
-- expiredLease and retryable select the rows recovery acts on (the sweep, the
-- retryable list), on the row aliased t.
t.status = 'RUNNING' AND t.suspended_at IS NULL AND t.lease_expires_at < {{nowMicros}}

-- name: retryable
t.status = 'PENDING' AND (t.decision = 'allow'
	OR (t.decision = 'needs_approval' AND EXISTS (SELECT 1 FROM approvals AS a WHERE a.key = t.key AND a.approved)))

-- name: InvocationInsert
-- InvocationInsert returns what the database chose (the id, the times); the rest of
-- the row is what was inserted (insertedRow), not read back: every other column would
-- cost the call a name, a type and a copy (issue 20).
INSERT INTO tool_invocations (key, tenant, principal, session_id, run_id, step_number, call_id, tool, tool_version,
	tool_sha256, idempotency, idempotent_when, args, args_hash, origin_trust, argument_trust, mode, decision, status,
	reason_code, outcome, lease_owner, lease_expires_at, attempt, created_at, updated_at, workspace)
VALUES (:key, :tenant, :principal, :session_id, :run_id, :step_number, :call_id, :tool, :tool_version,
	:tool_sha256, :idempotency, :idempotent_when, :args, :args_hash, :origin_trust, :argument_trust, :mode, :decision, :status, :reason_code,
	:outcome, :lease_owner, {{nowMicros}} + :lease_us, :attempt, {{nowMicros}}, {{nowMicros}}, :workspace)
ON CONFLICT (key) DO NOTHING
RETURNING id, lease_expires_at, created_at, updated_at

-- name: InvocationGet
SELECT {{invocationColumns}} FROM tool_invocations WHERE id = :id

-- name: InvocationGetByKey
SELECT {{invocationColumns}} FROM tool_invocations WHERE key = :key

-- name: InvocationGetByResumeToken
SELECT {{invocationColumns}} FROM tool_invocations WHERE resume_token = :token

-- name: InvocationClaimIfPending
UPDATE tool_invocations
SET status = 'RUNNING', attempt = attempt + 1, lease_owner = :owner,
	lease_expires_at = {{nowMicros}} + :lease_us, updated_at = {{nowMicros}}
WHERE id = :id AND status = 'PENDING'
RETURNING {{invocationColumns}}

-- name: InvocationMarkEffectSentIfLeased
-- The lost-ack case is in the predicate: a retry with the same token matches again.
UPDATE tool_invocations
SET effect_sent_at = COALESCE(effect_sent_at, {{nowMicros}}), effect_token = :token, updated_at = {{nowMicros}}
WHERE {{fenced}} AND lease_expires_at > {{nowMicros}}
	AND (effect_sent_at IS NULL OR effect_token = :token)
RETURNING {{wokenColumns}}

-- name: InvocationFenceHolds
-- InvocationFenceHolds tells a lost lease from a foreign token after a zero-row watermark.
SELECT EXISTS (SELECT 1 FROM tool_invocations WHERE {{fenced}} AND lease_expires_at > {{nowMicros}})

-- name: InvocationSettleIfLeased
UPDATE tool_invocations
SET status = :status, reason_code = :reason_code, outcome = :outcome, watermark_missing = :watermark_missing,
	lease_expires_at = NULL, updated_at = {{nowMicros}}
WHERE {{fenced}}
RETURNING {{wokenColumns}}

-- name: InvocationReleaseIfLeased
UPDATE tool_invocations
SET status = 'PENDING', lease_owner = NULL, lease_expires_at = NULL,
	earlier_effect_sent_at = COALESCE(earlier_effect_sent_at, effect_sent_at),
	effect_sent_at = NULL, effect_token = NULL, updated_at = {{nowMicros}}
WHERE {{fenced}}
RETURNING {{wokenColumns}}

-- name: InvocationReleasedAt
-- InvocationReleasedAt is the release's lost-ack check.
SELECT EXISTS (SELECT 1 FROM tool_invocations WHERE id = :id AND status = 'PENDING' AND attempt = :attempt)

-- name: InvocationSettledByFence
-- InvocationSettledByFence is the settle's lost-ack check: settled by this fence, same status.
SELECT EXISTS (SELECT 1 FROM tool_invocations
	WHERE id = :id AND status = :status AND lease_owner = :owner AND attempt = :attempt AND suspended_at IS NULL)

-- name: InvocationSuspendIfLeased
UPDATE tool_invocations
SET suspended_at = {{nowMicros}}, resume_token = :resume_token, outcome = :outcome,
	lease_expires_at = NULL, updated_at = {{nowMicros}}
WHERE {{fenced}}
RETURNING {{wokenColumns}}

-- name: InvocationSuspendedByFence
-- InvocationSuspendedByFence is the suspend's lost-ack check.
SELECT EXISTS (SELECT 1 FROM tool_invocations
	WHERE id = :id AND status = 'RUNNING' AND lease_owner = :owner AND attempt = :attempt
		AND suspended_at IS NOT NULL AND resume_token = :resume_token)

-- name: InvocationResumeTokenTaken
SELECT EXISTS (SELECT 1 FROM tool_invocations WHERE resume_token = :resume_token)

-- name: InvocationResume
UPDATE tool_invocations
SET status = :status, reason_code = :reason_code, outcome = :outcome, watermark_missing = :watermark_missing,
	updated_at = {{nowMicros}}
WHERE resume_token = :resume_token AND status = 'RUNNING' AND suspended_at IS NOT NULL
RETURNING {{invocationColumns}}

-- name: InvocationRenewLeases
UPDATE tool_invocations
SET lease_expires_at = {{nowMicros}} + :lease_us, updated_at = {{nowMicros}}
WHERE lease_owner = :owner AND status = 'RUNNING' AND suspended_at IS NULL AND lease_expires_at > {{nowMicros}}
  AND id IN (SELECT value FROM json_each(:ids))

-- name: InvocationSweep
-- InvocationSweep is RT-4 in one statement: pick up to :limit expired leases,
-- decide each from its recorded facts, and reclaim it (clearing the fence).
UPDATE tool_invocations
SET status = swept.next_status,
	reason_code = CASE swept.next_status
		WHEN 'UNCERTAIN' THEN 'effect_may_have_happened'
		WHEN 'FAILED' THEN 'crash_loop'
		ELSE reason_code END,
	earlier_effect_sent_at = CASE WHEN swept.next_status = 'PENDING'
		THEN COALESCE(earlier_effect_sent_at, effect_sent_at) ELSE earlier_effect_sent_at END,
	effect_sent_at = CASE WHEN swept.next_status = 'PENDING' THEN NULL ELSE effect_sent_at END,
	effect_token = CASE WHEN swept.next_status = 'PENDING' THEN NULL ELSE effect_token END,
	lease_owner = NULL,
	lease_expires_at = NULL,
	updated_at = {{nowMicros}}
FROM (
	SELECT id AS swept_id,
		CASE
			WHEN effect_sent_at IS NOT NULL
				AND NOT (idempotency = 'idempotent'
					OR (idempotency = 'conditionally_idempotent' AND idempotent_when IS 1))
				THEN 'UNCERTAIN'
			WHEN attempt >= :max_attempts THEN 'FAILED'
			ELSE 'PENDING'
		END AS next_status
	FROM tool_invocations AS t
	WHERE {{expiredLease}} AND {{claimable}}
	ORDER BY lease_expires_at, id
	LIMIT :limit
) AS swept
WHERE tool_invocations.id = swept.swept_id
RETURNING {{invocationColumns}}

-- name: InvocationListRetryable
SELECT {{invocationColumns}} FROM tool_invocations AS t
WHERE {{retryable}} AND {{claimable}}
ORDER BY id
LIMIT :limit

-- name: InvocationUnsuspendDecided
-- InvocationUnsuspendDecided gives back the rows suspended until an approval now
-- decided (resume token 'approval:' || held key (64 hex digits) || ':' || own key):
-- PENDING, for a re-run.
UPDATE tool_invocations
SET status = 'PENDING', suspended_at = NULL, resume_token = NULL, lease_owner = NULL, lease_expires_at = NULL,
	earlier_effect_sent_at = COALESCE(earlier_effect_sent_at, effect_sent_at),
	effect_sent_at = NULL, effect_token = NULL, updated_at = {{nowMicros}}
WHERE id IN (
	SELECT t.id FROM tool_invocations AS t
	WHERE t.status = 'RUNNING' AND t.suspended_at IS NOT NULL AND substr(t.resume_token, 1, 9) = 'approval:'
		AND EXISTS (SELECT 1 FROM approvals AS a WHERE a.key = substr(t.resume_token, 10, 64) AND a.tenant = t.tenant)
		AND {{claimable}}
	ORDER BY t.id
	LIMIT :limit)
RETURNING {{invocationColumns}}

-- name: InvocationCountUnclaimable
-- InvocationCountUnclaimable counts the rows the sweep or the retryable list
-- would act on that :tools (never NULL here) does not match, split by whether a
-- tool of the row's name is among them (a changed definition) or not. Two
-- branches, so each reaches its rows through its own partial index.
SELECT
	count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM json_each(:tools) AS ref WHERE ref.value ->> 'name' = t.tool)),
	count(*) FILTER (WHERE EXISTS (SELECT 1 FROM json_each(:tools) AS ref WHERE ref.value ->> 'name' = t.tool))
FROM (
	SELECT t.tool, t.tool_version, t.tool_sha256 FROM tool_invocations AS t WHERE {{expiredLease}} AND {{ofTenant}}
	UNION ALL
	SELECT t.tool, t.tool_version, t.tool_sha256 FROM tool_invocations AS t WHERE {{retryable}} AND {{ofTenant}}
) AS t
WHERE NOT {{toolMatches}}

-- name: InvocationListUncertain
SELECT {{invocationColumns}} FROM tool_invocations
WHERE status = 'UNCERTAIN' AND resolution = '' AND (:tenant = '' OR tenant = :tenant)
ORDER BY id

-- name: InvocationResolveUncertain
-- InvocationResolveUncertain: happened -> SUCCEEDED with :outcome; did_not_happen
-- -> PENDING, retryable, the watermark moved to earlier_effect_sent_at, no lease.
UPDATE tool_invocations
SET resolution = :resolution, resolved_by = :resolved_by, resolved_at = {{nowMicros}}, updated_at = {{nowMicros}},
	status = CASE :resolution WHEN 'happened' THEN 'SUCCEEDED' ELSE 'PENDING' END,
	outcome = CASE :resolution WHEN 'happened' THEN :outcome ELSE outcome END,
	earlier_effect_sent_at = CASE :resolution WHEN 'happened' THEN earlier_effect_sent_at
		ELSE coalesce(earlier_effect_sent_at, effect_sent_at) END,
	effect_sent_at = CASE :resolution WHEN 'happened' THEN effect_sent_at END,
	lease_owner = CASE :resolution WHEN 'happened' THEN lease_owner END,
	lease_expires_at = CASE :resolution WHEN 'happened' THEN lease_expires_at END
WHERE id = :id AND status = 'UNCERTAIN' AND resolution = '' AND (:tenant IS NULL OR tenant = :tenant)
RETURNING {{invocationColumns}}

-- name: InvocationExists
-- InvocationExists: the row exists (in :tenant, unless NULL).
SELECT EXISTS (SELECT 1 FROM tool_invocations WHERE id = :id AND (:tenant IS NULL OR tenant = :tenant))

-- name: breakerCounts
-- breakerCounts are the columns of store.BreakerCounts over the rows of one call's
-- identical calls in its tenant's run: all of them, the denied, and whether one is
-- UNCERTAIN and unresolved. Every statement of a call's prior calls reads them.
count(*) AS total, count(*) FILTER (WHERE status = 'DENIED') AS denied,
	count(*) FILTER (WHERE status = 'UNCERTAIN' AND resolution = '') > 0 AS uncertain

-- name: InvocationBreakerCounts
-- InvocationBreakerCounts: the breaker's counts of a call's identical calls in the
-- run, the prior calls of a call that named its call id (store.BreakerCounts).
SELECT {{breakerCounts}}
FROM tool_invocations
WHERE tenant = :tenant AND run_id = :run_id AND args_hash = :args_hash

-- name: InvocationBreakerCountsAndKey
-- InvocationBreakerCountsAndKey: the breaker's counts (breakerCounts), and whether a
-- row has the key :key: the prior calls of a named call that may be recorded once
-- (a read), which would otherwise read its key apart before it runs (issue 20).
SELECT {{breakerCounts}},
	EXISTS (SELECT 1 FROM tool_invocations WHERE key = :key)
FROM tool_invocations
WHERE tenant = :tenant AND run_id = :run_id AND args_hash = :args_hash

-- name: InvocationPriorCalls
-- InvocationPriorCalls: the prior calls of a call whose id :base was derived: the
-- breaker's counts (breakerCounts), and the latest row of the id's generations
-- (base, base-1, base-2, ...), refusal rows excluded, NULLs when there is none. Both
-- through the breaker's index. The columns of store.BreakerCounts, then of
-- store.Generation.
SELECT b.total, b.denied, b.uncertain,
	g.id, g.call_id, g.status, g.effect_sent_at, g.earlier_effect_sent_at, g.updated_at
FROM (SELECT {{breakerCounts}}
	FROM tool_invocations
	WHERE tenant = :tenant AND run_id = :run_id AND args_hash = :args_hash) AS b
LEFT JOIN (SELECT id, call_id, status, effect_sent_at, earlier_effect_sent_at, updated_at FROM tool_invocations
	WHERE tenant = :tenant AND run_id = :run_id AND args_hash = :args_hash AND step_number = :step
		AND (call_id = :base OR substr(call_id, 1, length(:base) + 1) = :base || '-')
		AND instr(key, ':refused:') = 0
	ORDER BY id DESC
	LIMIT 1) AS g ON 1

-- name: ApprovalDecide
-- ApprovalDecide inserts only for an invocation of the tenant, and only once.
INSERT INTO approvals (key, tenant, approved, decided_by, reason, decided_at)
SELECT key, tenant, :approved, :decided_by, :reason, {{nowMicros}}
FROM tool_invocations WHERE key = :key AND tenant = :tenant
ON CONFLICT (key) DO NOTHING

-- name: ApprovalExists
SELECT EXISTS (SELECT 1 FROM approvals WHERE key = :key)

-- name: ApprovalGet
SELECT key, tenant, approved, decided_by, reason, decided_at FROM approvals WHERE key = :key

-- name: AuditAppend
INSERT INTO audit_log (tenant, kind, principal, session_id, mode, tool, key, detail, at)
VALUES (:tenant, :kind, :principal, :session_id, :mode, :tool, :key, :detail, {{nowMicros}})
RETURNING id

-- name: AuditList
SELECT id, tenant, kind, principal, session_id, mode, tool, key, detail, at FROM audit_log
WHERE id > :after_id AND (:tenant = '' OR tenant = :tenant)
ORDER BY id
LIMIT :limit

-- name: CatalogHistoryAppend
INSERT INTO mcp_catalog_history (server_id, tool, change, sha256, detail, at)
VALUES (:server_id, :tool, :change, :sha256, :detail, {{nowMicros}})
RETURNING id

-- name: CatalogHistoryList
SELECT id, server_id, tool, change, sha256, detail, at FROM mcp_catalog_history
WHERE :server_id = '' OR server_id = :server_id
ORDER BY id

-- name: InvocationList
-- InvocationList is store.InvocationFilter: every condition is off when its
-- parameter is the zero value.
SELECT {{invocationColumns}} FROM tool_invocations
WHERE id > :after_id AND (:tenant = '' OR tenant = :tenant) AND (:session_id = '' OR session_id = :session_id)
	AND (:awaiting = 0 OR (status = 'PENDING' AND decision = 'needs_approval'
		AND NOT EXISTS (SELECT 1 FROM approvals a WHERE a.key = tool_invocations.key)))
ORDER BY id
LIMIT :limit

-- name: SessionModeGet
-- The session's mode is keyed by (tenant, session id) (migration 005): another
-- tenant's mode of the same id is another row.
SELECT mode FROM session_modes WHERE tenant = :tenant AND session_id = :session_id

-- name: SessionModeSet
INSERT INTO session_modes (tenant, session_id, mode, updated_at)
VALUES (:tenant, :session_id, :mode, {{nowMicros}})
ON CONFLICT (tenant, session_id) DO UPDATE SET mode = excluded.mode, updated_at = excluded.updated_at

-- name: EventAppend
-- EventAppend appends an event no row reports by itself (store.EventAppend).
INSERT INTO events (kind, tenant, session_id, run_id, invocation_id, step_number, call_id, tool, status,
	reason_code, mode, decision, idempotency, origin_trust, argument_trust, attempt, server_id, change, duration_us, at)
VALUES (:kind, :tenant, :session_id, :run_id, :invocation_id, :step_number, :call_id, :tool, :status,
	:reason_code, :mode, :decision, :idempotency, :origin_trust, :argument_trust, :attempt, :server_id, :change,
	:duration_us, {{nowMicros}})
RETURNING id

-- name: EventList
-- EventList is store.EventFilter: every condition is off when its parameter is
-- the zero value. Ids are in commit order (one writer at a time), so the cursor is
-- the id alone and the page is a range of the primary key.
SELECT {{eventColumns}} FROM events
WHERE id > :after_id AND (:tenant = '' OR tenant = :tenant) AND (:session_id = '' OR session_id = :session_id)
	AND (:run_id = '' OR run_id = :run_id)
ORDER BY id
LIMIT :limit

-- name: eventColumns
tx, id, kind, tenant, session_id, run_id, invocation_id, step_number, call_id, tool, status,
	reason_code, mode, decision, idempotency, origin_trust, argument_trust, attempt, server_id, change, duration_us, at

-- name: DeploymentSecretGetOrCreate
-- DeploymentSecretGetOrCreate stores a secret unless the name has one, and returns
-- the one stored: the no-op update on conflict makes RETURNING yield the existing row.
INSERT INTO deployment_secrets (name, secret, created_at) VALUES (:name, :secret, {{nowMicros}})
ON CONFLICT (name) DO UPDATE SET name = excluded.name
RETURNING secret

