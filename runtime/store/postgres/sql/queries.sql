-- name: invocationColumns
id, key, tenant, principal, session_id, run_id, step_number, call_id, tool, tool_version,
	tool_sha256, idempotency, idempotent_when, args, args_hash, origin_trust, argument_trust, mode, decision, status, reason_code,
	outcome, effect_sent_at, earlier_effect_sent_at, watermark_missing, lease_owner, lease_expires_at, attempt,
	suspended_at, resume_token, resolution, resolved_by, resolved_at, created_at, updated_at, workspace

-- name: fenced
-- fenced is the predicate of every write after a claim.
id = @id AND status = 'RUNNING' AND lease_owner = @owner AND attempt = @attempt AND suspended_at IS NULL

-- name: leaseEnd
-- leaseEnd is db-now + @lease_us microseconds (NULL if @lease_us is NULL).
now() + @lease_us::bigint * interval '1 microsecond'

-- name: toolMatches
-- toolMatches is true when the row aliased t is a call of one of the tools in @tools,
-- a JSON array of {"name", "version", "sha256"} (store.ToolRefsJSON): the same tool
-- and version, and the same definition hash unless the row has none (recorded before
-- migration 004). It is the Claimable filter of the recovery statements (LIFE-1),
-- tested inside the statement that selects the rows — in the sweep, below FOR UPDATE
-- SKIP LOCKED — so a row of another tool is never locked, counted against a limit or
-- written.
EXISTS (SELECT 1 FROM jsonb_to_recordset(@tools::jsonb) AS ref(name text, version integer, sha256 text)
	WHERE ref.name = t.tool AND ref.version = t.tool_version AND (t.tool_sha256 = '' OR t.tool_sha256 = ref.sha256))

-- name: ofTenant
-- ofTenant is Claimable.Tenant on the row aliased t: @claim_tenant '' is every tenant.
(@claim_tenant::text = '' OR t.tenant = @claim_tenant)

-- name: claimable
-- claimable is store.Claimable: @tools NULL is AllTools.
(@tools::jsonb IS NULL OR {{toolMatches}}) AND {{ofTenant}}

-- name: expiredLease
-- expiredLease and retryable select the rows recovery acts on (the sweep, the
-- retryable list), on the row aliased t.
t.status = 'RUNNING' AND t.suspended_at IS NULL AND t.lease_expires_at < now()

-- name: retryable
t.status = 'PENDING' AND (t.decision = 'allow'
	OR (t.decision = 'needs_approval' AND EXISTS (SELECT 1 FROM approvals AS a WHERE a.key = t.key AND a.approved)))

-- name: insertedColumns
-- insertedColumns are the columns InvocationInsert and InvocationInsertRelaxed write
-- from their parameters, then created_at and updated_at.
key, tenant, principal, session_id, run_id, step_number, call_id, tool, tool_version,
	tool_sha256, idempotency, idempotent_when, args, args_hash, origin_trust, argument_trust, mode, decision, status,
	reason_code, outcome, lease_owner, lease_expires_at, attempt, workspace, created_at, updated_at

-- name: insertedValues
-- insertedValues are the values of insertedColumns but the two times.
@key, @tenant, @principal, @session_id, @run_id, @step_number, @call_id, @tool, @tool_version,
	@tool_sha256, @idempotency, @idempotent_when, @args, @args_hash, @origin_trust, @argument_trust, @mode, @decision, @status, @reason_code,
	@outcome, @lease_owner, {{leaseEnd}}, @attempt, @workspace

-- name: InvocationInsert
INSERT INTO tool_invocations ({{insertedColumns}})
VALUES ({{insertedValues}}, now(), now())
ON CONFLICT (key) DO NOTHING
RETURNING id, lease_expires_at, created_at, updated_at

-- name: InvocationInsertRelaxed
-- InvocationInsertRelaxed is InvocationInsert committed without waiting for the WAL's
-- flush (store.InsertParams.Relaxed: the record-once row of an idempotent read, whose
-- loss would only mean the read runs again). set_config(..., true) sets
-- synchronous_commit for the statement's own transaction, which commits right after
-- it, and never for the connection's later statements; the CTE runs because the row's
-- created_at reads it (now() is the transaction's start either way). A crash of the
-- server loses at most the last few hundred milliseconds of such rows (the WAL
-- writer's delay, three times over), a crash of the client none; a later synchronous
-- commit makes them durable too, as the WAL is flushed in order.
WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true))
INSERT INTO tool_invocations ({{insertedColumns}})
VALUES ({{insertedValues}}, (SELECT now() FROM relaxed), now())
ON CONFLICT (key) DO NOTHING
RETURNING id, lease_expires_at, created_at, updated_at

-- name: InvocationGet
SELECT {{invocationColumns}} FROM tool_invocations WHERE id = @id

-- name: InvocationGetByKey
SELECT {{invocationColumns}} FROM tool_invocations WHERE key = @key

-- name: InvocationGetByResumeToken
SELECT {{invocationColumns}} FROM tool_invocations WHERE resume_token = @token

-- name: InvocationClaimIfPending
UPDATE tool_invocations
SET status = 'RUNNING', attempt = attempt + 1, lease_owner = @owner, lease_expires_at = {{leaseEnd}}, updated_at = now()
WHERE id = @id AND status = 'PENDING'
RETURNING {{invocationColumns}}

-- name: InvocationMarkEffectSentIfLeased
-- The lost-ack case is in the predicate: a retry with the same token matches again.
UPDATE tool_invocations
SET effect_sent_at = COALESCE(effect_sent_at, now()), effect_token = @token, updated_at = now()
WHERE {{fenced}} AND lease_expires_at > now()
	AND (effect_sent_at IS NULL OR effect_token = @token)

-- name: InvocationFenceHolds
-- InvocationFenceHolds tells a lost lease from a foreign token after a zero-row watermark.
SELECT EXISTS (SELECT 1 FROM tool_invocations WHERE {{fenced}} AND lease_expires_at > now())

-- name: InvocationSettleIfLeased
UPDATE tool_invocations
SET status = @status, reason_code = @reason_code, outcome = @outcome, watermark_missing = @watermark_missing,
	lease_expires_at = NULL, updated_at = now()
WHERE {{fenced}}

-- name: InvocationReleaseIfLeased
UPDATE tool_invocations
SET status = 'PENDING', lease_owner = NULL, lease_expires_at = NULL,
	earlier_effect_sent_at = COALESCE(earlier_effect_sent_at, effect_sent_at),
	effect_sent_at = NULL, effect_token = NULL, updated_at = now()
WHERE {{fenced}}

-- name: InvocationReleasedAt
-- InvocationReleasedAt is the release's lost-ack check.
SELECT EXISTS (SELECT 1 FROM tool_invocations WHERE id = @id AND status = 'PENDING' AND attempt = @attempt)

-- name: InvocationSettledByFence
-- InvocationSettledByFence is the settle's lost-ack check: settled by this fence, same status.
SELECT EXISTS (SELECT 1 FROM tool_invocations
	WHERE id = @id AND status = @status AND lease_owner = @owner AND attempt = @attempt AND suspended_at IS NULL)

-- name: InvocationSuspendIfLeased
UPDATE tool_invocations
SET suspended_at = now(), resume_token = @resume_token, outcome = @outcome, lease_expires_at = NULL, updated_at = now()
WHERE {{fenced}}

-- name: InvocationSuspendedByFence
-- InvocationSuspendedByFence is the suspend's lost-ack check.
SELECT EXISTS (SELECT 1 FROM tool_invocations
	WHERE id = @id AND status = 'RUNNING' AND lease_owner = @owner AND attempt = @attempt
		AND suspended_at IS NOT NULL AND resume_token = @resume_token)

-- name: InvocationResumeTokenTaken
SELECT EXISTS (SELECT 1 FROM tool_invocations WHERE resume_token = @resume_token)

-- name: InvocationResume
UPDATE tool_invocations
SET status = @status, reason_code = @reason_code, outcome = @outcome, watermark_missing = @watermark_missing,
	updated_at = now()
WHERE resume_token = @resume_token AND status = 'RUNNING' AND suspended_at IS NOT NULL
RETURNING {{invocationColumns}}

-- name: InvocationRenewLeases
UPDATE tool_invocations
SET lease_expires_at = {{leaseEnd}}, updated_at = now()
WHERE lease_owner = @owner AND status = 'RUNNING' AND suspended_at IS NULL AND lease_expires_at > now()
  AND id = ANY(@ids)

-- name: InvocationSweep
-- InvocationSweep is RT-4 in one statement (ST-3): lock up to @limit expired
-- leases that no other sweeper holds, decide each from its recorded facts, and
-- reclaim it (clearing the fence).
WITH swept AS (
	SELECT id AS swept_id,
		CASE
			WHEN effect_sent_at IS NOT NULL
				AND NOT (idempotency = 'idempotent'
					OR (idempotency = 'conditionally_idempotent' AND idempotent_when IS TRUE))
				THEN 'UNCERTAIN'
			WHEN attempt >= @max_attempts THEN 'FAILED'
			ELSE 'PENDING'
		END AS next_status
	FROM tool_invocations AS t
	WHERE {{expiredLease}} AND {{claimable}}
	ORDER BY lease_expires_at, id
	LIMIT @limit
	FOR UPDATE SKIP LOCKED
)
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
	updated_at = now()
FROM swept
WHERE id = swept.swept_id AND status = 'RUNNING' AND suspended_at IS NULL
RETURNING {{invocationColumns}}

-- name: InvocationListRetryable
SELECT {{invocationColumns}} FROM tool_invocations AS t
WHERE {{retryable}} AND {{claimable}}
ORDER BY id
LIMIT @limit

-- name: InvocationUnsuspendDecided
-- InvocationUnsuspendDecided gives back the rows suspended until an approval now
-- decided (resume token 'approval:' || held key (64 hex digits) || ':' || own key):
-- PENDING, for a re-run. Rows another caller has locked are skipped.
WITH picked AS (
	SELECT t.id AS picked_id FROM tool_invocations AS t
	WHERE t.status = 'RUNNING' AND t.suspended_at IS NOT NULL AND substr(t.resume_token, 1, 9) = 'approval:'
		AND EXISTS (SELECT 1 FROM approvals AS a WHERE a.key = substr(t.resume_token, 10, 64) AND a.tenant = t.tenant)
		AND {{claimable}}
	ORDER BY t.id
	LIMIT @limit
	FOR UPDATE SKIP LOCKED
)
UPDATE tool_invocations
SET status = 'PENDING', suspended_at = NULL, resume_token = NULL, lease_owner = NULL, lease_expires_at = NULL,
	earlier_effect_sent_at = COALESCE(earlier_effect_sent_at, effect_sent_at),
	effect_sent_at = NULL, effect_token = NULL, updated_at = now()
FROM picked
WHERE id = picked.picked_id AND status = 'RUNNING' AND suspended_at IS NOT NULL
RETURNING {{invocationColumns}}

-- name: InvocationCountUnclaimable
-- InvocationCountUnclaimable counts the rows the sweep or the retryable list
-- would act on that @tools (never NULL here) does not match, split by whether a
-- tool of the row's name is among them (a changed definition) or not. Two
-- branches, so each reaches its rows through its own partial index.
SELECT
	count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM jsonb_to_recordset(@tools::jsonb) AS ref(name text)
		WHERE ref.name = t.tool)),
	count(*) FILTER (WHERE EXISTS (SELECT 1 FROM jsonb_to_recordset(@tools::jsonb) AS ref(name text)
		WHERE ref.name = t.tool))
FROM (
	SELECT t.tool, t.tool_version, t.tool_sha256 FROM tool_invocations AS t WHERE {{expiredLease}} AND {{ofTenant}}
	UNION ALL
	SELECT t.tool, t.tool_version, t.tool_sha256 FROM tool_invocations AS t WHERE {{retryable}} AND {{ofTenant}}
) AS t
WHERE NOT {{toolMatches}}

-- name: InvocationListUncertain
SELECT {{invocationColumns}} FROM tool_invocations
WHERE status = 'UNCERTAIN' AND resolution = '' AND (@tenant::text = '' OR tenant = @tenant)
ORDER BY id

-- name: InvocationResolveUncertain
-- InvocationResolveUncertain records the review and, when @with_audit, its
-- audit entry, in one statement: both commit or neither (HOST-2). With the entry
-- the review is confined to its tenant. A data-modifying WITH runs whether or not
-- the outer query reads it.
WITH resolved AS (
	UPDATE tool_invocations
	SET resolution = @resolution, resolved_by = @resolved_by, resolved_at = now(), updated_at = now(),
		status = CASE @resolution::text WHEN 'happened' THEN 'SUCCEEDED' ELSE 'PENDING' END,
		outcome = CASE @resolution::text WHEN 'happened' THEN @outcome::json ELSE outcome END,
		earlier_effect_sent_at = CASE @resolution::text WHEN 'happened' THEN earlier_effect_sent_at
			ELSE coalesce(earlier_effect_sent_at, effect_sent_at) END,
		effect_sent_at = CASE @resolution::text WHEN 'happened' THEN effect_sent_at END,
		lease_owner = CASE @resolution::text WHEN 'happened' THEN lease_owner END,
		lease_expires_at = CASE @resolution::text WHEN 'happened' THEN lease_expires_at END
	WHERE id = @id AND status = 'UNCERTAIN' AND resolution = ''
		AND (NOT @with_audit::boolean OR tenant = @audit_tenant::text)
	RETURNING {{invocationColumns}}
), audit AS (
	INSERT INTO audit_log (tenant, kind, principal, session_id, mode, tool, key, detail, at)
	SELECT {{auditValues}} FROM resolved WHERE @with_audit::boolean
)
SELECT {{invocationColumns}} FROM resolved

-- name: InvocationExists
-- InvocationExists: the row exists (in @tenant, unless NULL).
SELECT EXISTS (SELECT 1 FROM tool_invocations WHERE id = @id AND (@tenant::text IS NULL OR tenant = @tenant))

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
WHERE tenant = @tenant AND run_id = @run_id AND args_hash = @args_hash

-- name: InvocationBreakerCountsAndKey
-- InvocationBreakerCountsAndKey: the breaker's counts (breakerCounts), and whether a
-- row has the key @key: the prior calls of a named call that may be recorded once
-- (a read), which would otherwise read its key apart before it runs (issue 20).
SELECT {{breakerCounts}},
	EXISTS (SELECT 1 FROM tool_invocations WHERE key = @key)
FROM tool_invocations
WHERE tenant = @tenant AND run_id = @run_id AND args_hash = @args_hash

-- name: InvocationPriorCalls
-- InvocationPriorCalls: the prior calls of a call whose id @base was derived: the
-- breaker's counts (breakerCounts), and the latest row of the id's generations
-- (base, base-1, base-2, ...), refusal rows excluded, NULLs when there is none. Both
-- through the breaker's index. The columns of store.BreakerCounts, then of
-- store.Generation.
SELECT b.total, b.denied, b.uncertain,
	g.id, g.call_id, g.status, g.effect_sent_at, g.earlier_effect_sent_at, g.updated_at
FROM (SELECT {{breakerCounts}}
	FROM tool_invocations
	WHERE tenant = @tenant AND run_id = @run_id AND args_hash = @args_hash) AS b
LEFT JOIN (SELECT id, call_id, status, effect_sent_at, earlier_effect_sent_at, updated_at FROM tool_invocations
	WHERE tenant = @tenant AND run_id = @run_id AND args_hash = @args_hash AND step_number = @step
		AND (call_id = @base OR left(call_id, length(@base::text) + 1) = @base::text || '-')
		AND strpos(key, ':refused:') = 0
	ORDER BY id DESC
	LIMIT 1) AS g ON true

-- name: auditValues
-- auditValues are the columns of an audit entry passed as @audit_* parameters (the
-- audit entry of a decision, HOST-2), then the database clock.
@audit_tenant::text, @audit_kind::text, @audit_principal::text, @audit_session_id::text,
		@audit_mode::text, @audit_tool::text, @audit_key::text, @audit_detail::json, now()

-- name: ApprovalDecide
-- ApprovalDecide inserts only for an invocation of the tenant, and only once,
-- and, when @with_audit, the decision's audit entry in the same statement: both
-- commit or neither (HOST-2). It returns whether the decision was recorded.
WITH decided AS (
	INSERT INTO approvals (key, tenant, approved, decided_by, reason, decided_at)
	SELECT key, tenant, @approved::boolean, @decided_by::text, @reason::text, now()
	FROM tool_invocations WHERE key = @key AND tenant = @tenant
	ON CONFLICT (key) DO NOTHING
	RETURNING key
), audit AS (
	INSERT INTO audit_log (tenant, kind, principal, session_id, mode, tool, key, detail, at)
	SELECT {{auditValues}} FROM decided WHERE @with_audit::boolean
)
SELECT EXISTS (SELECT 1 FROM decided)

-- name: ApprovalExists
SELECT EXISTS (SELECT 1 FROM approvals WHERE key = @key)

-- name: ApprovalGet
SELECT key, tenant, approved, decided_by, reason, decided_at FROM approvals WHERE key = @key

-- name: AuditAppend
INSERT INTO audit_log (tenant, kind, principal, session_id, mode, tool, key, detail, at)
VALUES (@tenant, @kind, @principal, @session_id, @mode, @tool, @key, @detail, now())
RETURNING id

-- name: AuditList
SELECT id, tenant, kind, principal, session_id, mode, tool, key, detail, at FROM audit_log
WHERE id > @after_id AND (@tenant::text = '' OR tenant = @tenant)
ORDER BY id
LIMIT @limit

-- name: CatalogHistoryAppend
INSERT INTO mcp_catalog_history (server_id, tool, change, sha256, detail, at)
VALUES (@server_id, @tool, @change, @sha256, @detail, now())
RETURNING id

-- name: CatalogHistoryList
SELECT id, server_id, tool, change, sha256, detail, at FROM mcp_catalog_history
WHERE @server_id::text = '' OR server_id = @server_id
ORDER BY id

-- name: DeploymentSecretGetOrCreate
-- Stores a secret unless the name has one, and returns the one stored: the no-op
-- update on conflict makes RETURNING yield the existing row (and locks it, so
-- concurrent creators agree).
INSERT INTO deployment_secrets (name, secret) VALUES (@name, @secret)
ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
RETURNING secret
