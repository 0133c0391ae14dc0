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
    session_id text        PRIMARY KEY CHECK (session_id <> ''),
    tenant     text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Sessions in use keep their owner: the tenant of the session's first recorded call,
-- else the tenant its mode row carries.
INSERT INTO sessions (session_id, tenant, created_at)
SELECT DISTINCT ON (session_id) session_id, tenant, created_at FROM tool_invocations
WHERE session_id <> '' ORDER BY session_id, id;
INSERT INTO sessions (session_id, tenant, created_at)
SELECT session_id, tenant, updated_at FROM session_modes
ON CONFLICT (session_id) DO NOTHING;

ALTER TABLE session_modes DROP CONSTRAINT session_modes_pkey, ADD PRIMARY KEY (tenant, session_id);

CREATE TABLE session_catalogs (
    tenant     text        NOT NULL,
    session_id text        NOT NULL CHECK (session_id <> ''),
    pinned_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, session_id)
);

CREATE TABLE session_pins (
    tenant        text NOT NULL,
    session_id    text NOT NULL,
    tool          text NOT NULL CHECK (tool <> ''),
    schema_sha256 text NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, session_id, tool),
    FOREIGN KEY (tenant, session_id) REFERENCES session_catalogs (tenant, session_id)
);

DROP INDEX tool_invocations_breaker_idx;
CREATE INDEX tool_invocations_breaker_idx ON tool_invocations (tenant, run_id, args_hash);
