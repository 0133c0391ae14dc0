-- MCP sessions (migration 009) and task cancellation (issue 16): store.MCPSessions and
-- store.Tasks.

-- name: MCPSessionCreate
-- created_at and last_seen_at are written as now(), as every statement's clock is.
INSERT INTO mcp_sessions (session_id, tenant, user_id, protocol_version, state, created_at, last_seen_at)
VALUES (@session_id, @tenant, @user_id, @protocol_version, @state::json, now(), now())

-- name: MCPSessionGet
-- A live session: not ended and, when @idle_us > 0, seen within it.
SELECT session_id, tenant, user_id, protocol_version, state, created_at, last_seen_at FROM mcp_sessions
WHERE session_id = @session_id AND ended_at IS NULL
	AND (@idle_us::bigint <= 0 OR last_seen_at > now() - make_interval(secs => @idle_us::bigint / 1e6))

-- name: MCPSessionTouch
UPDATE mcp_sessions SET last_seen_at = now(), state = COALESCE(@state::json, state)
WHERE session_id = @session_id AND tenant = @tenant AND ended_at IS NULL

-- name: MCPSessionEnd
UPDATE mcp_sessions SET ended_at = now()
WHERE session_id = @session_id AND tenant = @tenant AND ended_at IS NULL

-- name: MCPCancelRecord
-- Records a cancellation and forgets the old ones, in one statement.
WITH forget AS (
	DELETE FROM mcp_cancellations WHERE created_at < now() - make_interval(secs => @retention_us::bigint / 1e6)
)
INSERT INTO mcp_cancellations (session_id, request_id, created_at) VALUES (@session_id, @request_id, now())

-- name: MCPCancelsSince
SELECT id, session_id, request_id FROM mcp_cancellations
WHERE id > @after_id AND created_at >= now() - make_interval(secs => @max_age_us::bigint / 1e6)
ORDER BY id LIMIT @limit

-- name: InvocationCancelPending
-- Settles a PENDING row of the tenant and, when @with_audit, appends the audit entry
-- in the same statement (HOST-2).
WITH cancelled AS (
	UPDATE tool_invocations
	SET status = @status, reason_code = @reason_code, outcome = @outcome::json, updated_at = now()
	WHERE id = @id AND tenant = @tenant AND status = 'PENDING'
	RETURNING {{invocationColumns}}
), audit AS (
	INSERT INTO audit_log (tenant, kind, principal, session_id, mode, tool, key, detail, at)
	SELECT {{auditValues}} FROM cancelled WHERE @with_audit::boolean
)
SELECT {{invocationColumns}} FROM cancelled
