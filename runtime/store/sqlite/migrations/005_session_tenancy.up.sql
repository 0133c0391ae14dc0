-- 005_session_tenancy: a session belongs to one tenant, and every session-keyed table
-- is keyed by (tenant, session id) (SES-1, issue 14 findings 4 and 7).
--
--   sessions          who owns each session id: the first tenant to use it, for ever.
--   session_modes     re-keyed from session id to (tenant, session id), rows kept.
--   session_catalogs  the sessions of a tenant that pinned a catalog (MCP-7), and when;
--   session_pins      the pinned tools of each: name and definition hash. Persisted, so
--                     a restarted or second process serves the same pinned catalog.
--   breaker index     now (tenant, run_id, args_hash): the breaker counts one tenant's calls.

CREATE TABLE sessions (
    session_id TEXT    PRIMARY KEY CHECK (session_id <> ''),
    tenant     TEXT    NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;

-- Sessions in use keep their owner: the tenant of the session's first recorded call,
-- else the tenant its mode row carries.
INSERT INTO sessions (session_id, tenant, created_at)
SELECT session_id, tenant, created_at FROM tool_invocations t
WHERE session_id <> '' AND id = (SELECT min(id) FROM tool_invocations f WHERE f.session_id = t.session_id);
INSERT INTO sessions (session_id, tenant, created_at)
SELECT session_id, tenant, updated_at FROM session_modes WHERE true
ON CONFLICT (session_id) DO NOTHING;

-- SQLite cannot change a primary key in place: copy every row into the new shape.
CREATE TABLE session_modes_005 (
    tenant     TEXT    NOT NULL DEFAULT '',
    session_id TEXT    NOT NULL CHECK (session_id <> ''),
    mode       TEXT    NOT NULL CHECK (mode <> ''),
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, session_id)
) STRICT;
INSERT INTO session_modes_005 (tenant, session_id, mode, updated_at)
SELECT tenant, session_id, mode, updated_at FROM session_modes;
DROP TABLE session_modes;
ALTER TABLE session_modes_005 RENAME TO session_modes;

CREATE TABLE session_catalogs (
    tenant     TEXT    NOT NULL,
    session_id TEXT    NOT NULL CHECK (session_id <> ''),
    pinned_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant, session_id)
) STRICT, WITHOUT ROWID;

CREATE TABLE session_pins (
    tenant        TEXT NOT NULL,
    session_id    TEXT NOT NULL,
    tool          TEXT NOT NULL CHECK (tool <> ''),
    schema_sha256 TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, session_id, tool),
    FOREIGN KEY (tenant, session_id) REFERENCES session_catalogs (tenant, session_id)
) STRICT, WITHOUT ROWID;

DROP INDEX tool_invocations_breaker_idx;
CREATE INDEX tool_invocations_breaker_idx ON tool_invocations (tenant, run_id, args_hash);
