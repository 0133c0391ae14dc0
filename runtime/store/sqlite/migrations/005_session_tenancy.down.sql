DROP INDEX tool_invocations_breaker_idx;
CREATE INDEX tool_invocations_breaker_idx ON tool_invocations (run_id, args_hash);
DROP TABLE session_pins;
DROP TABLE session_catalogs;
-- Back to one mode per session id: of the rows of several tenants, the latest stays.
CREATE TABLE session_modes_002 (
    session_id TEXT    PRIMARY KEY CHECK (session_id <> ''),
    tenant     TEXT    NOT NULL DEFAULT '',
    mode       TEXT    NOT NULL CHECK (mode <> ''),
    updated_at INTEGER NOT NULL
) STRICT;
INSERT INTO session_modes_002 (session_id, tenant, mode, updated_at)
SELECT session_id, tenant, mode, updated_at FROM session_modes ORDER BY updated_at
ON CONFLICT (session_id) DO UPDATE SET tenant = excluded.tenant, mode = excluded.mode, updated_at = excluded.updated_at;
DROP TABLE session_modes;
ALTER TABLE session_modes_002 RENAME TO session_modes;
DROP TABLE sessions;
