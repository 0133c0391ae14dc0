DROP INDEX tool_invocations_breaker_idx;
CREATE INDEX tool_invocations_breaker_idx ON tool_invocations (run_id, args_hash);
DROP TABLE session_pins;
DROP TABLE session_catalogs;
-- Back to one mode per session id: of the rows of several tenants, the latest stays.
DELETE FROM session_modes m USING session_modes o
WHERE o.session_id = m.session_id AND (o.updated_at, o.tenant) > (m.updated_at, m.tenant);
ALTER TABLE session_modes DROP CONSTRAINT session_modes_pkey, ADD PRIMARY KEY (session_id);
DROP TABLE sessions;
