-- name: EventAppend
-- The events of invocations and of the catalog history are written by the triggers of
-- migration 003, in the transaction that writes the milestone; only the events no row
-- reports come through EventAppend. Not on a call's hot path.
INSERT INTO events (kind, tenant, session_id, run_id, invocation_id, step_number, call_id, tool, status,
	reason_code, mode, decision, idempotency, origin_trust, argument_trust, attempt, server_id, change, duration_us, at)
VALUES (@kind, @tenant, @session_id, @run_id, @invocation_id, @step_number, @call_id, @tool, @status,
	@reason_code, @mode, @decision, @idempotency, @origin_trust, @argument_trust, @attempt, @server_id, @change,
	@duration_us, now())
RETURNING id

-- name: EventList
-- EventList is store.EventFilter, in stream order. Only events of transactions
-- older than the statement's snapshot xmin are read: each of those transactions has
-- ended, and every transaction still to commit has a higher id, so no event can
-- later appear before the last (tx, id) returned (see store.EventCursor). A long
-- writing transaction delays the events after it; it never hides them.
SELECT tx, id, kind, tenant, session_id, run_id, invocation_id, step_number, call_id, tool, status,
	reason_code, mode, decision, idempotency, origin_trust, argument_trust, attempt, server_id, change, duration_us, at
FROM events
WHERE (tx, id) > (@after_tx, @after_id)
	AND tx < pg_snapshot_xmin(pg_current_snapshot())::text::bigint
	AND (@tenant::text = '' OR tenant = @tenant) AND (@session_id::text = '' OR session_id = @session_id)
	AND (@run_id::text = '' OR run_id = @run_id)
ORDER BY tx, id
LIMIT @lim

