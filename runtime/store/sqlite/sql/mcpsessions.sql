-- name: MCPSessionCreate
INSERT INTO mcp_sessions (session_id, tenant, user_id, protocol_version, state, created_at, last_seen_at)
VALUES (:session_id, :tenant, :user_id, :protocol_version, :state, {{nowMicros}}, {{nowMicros}})

-- name: MCPSessionGet
-- A live session: not ended and, when :idle_us > 0, seen within it.
SELECT session_id, tenant, user_id, protocol_version, state, created_at, last_seen_at FROM mcp_sessions
WHERE session_id = :session_id AND ended_at IS NULL AND (:idle_us <= 0 OR last_seen_at > {{nowMicros}} - :idle_us)

-- name: MCPSessionTouch
UPDATE mcp_sessions SET last_seen_at = {{nowMicros}}, state = COALESCE(:state, state)
WHERE session_id = :session_id AND tenant = :tenant AND ended_at IS NULL

-- name: MCPSessionEnd
UPDATE mcp_sessions SET ended_at = {{nowMicros}}
WHERE session_id = :session_id AND tenant = :tenant AND ended_at IS NULL

-- name: MCPCancelRecord
-- McpCancelRecord records a cancellation; mcpCancelForgetSQL forgets the old ones
-- in the same transaction.
INSERT INTO mcp_cancellations (session_id, request_id, created_at) VALUES (:session_id, :request_id, {{nowMicros}})

-- name: MCPCancelForget
DELETE FROM mcp_cancellations WHERE created_at < {{nowMicros}} - :retention_us

-- name: MCPCancelsSince
SELECT id, session_id, request_id FROM mcp_cancellations
WHERE id > :after_id AND created_at >= {{nowMicros}} - :max_age_us
ORDER BY id LIMIT :limit

-- name: InvocationCancelPending
UPDATE tool_invocations
SET status = :status, reason_code = :reason_code, outcome = :outcome, updated_at = {{nowMicros}}
WHERE id = :id AND tenant = :tenant AND status = 'PENDING'
RETURNING {{invocationColumns}}

