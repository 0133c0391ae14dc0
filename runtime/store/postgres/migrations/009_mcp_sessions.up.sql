-- 009_mcp_sessions: the Streamable HTTP sessions of the session-based MCP revisions
-- (2025-11-25 and earlier), so that any replica on the store serves a request of a
-- session another replica opened (SES-1, issue 16): the owner tenant, the verified
-- user, the negotiated version and the go-sdk's session state (initialize parameters,
-- log level). A session ends on DELETE (ended_at) or when unused for the idle
-- timeout (last_seen_at, read by the server). A new table: existing rows are untouched.
CREATE TABLE mcp_sessions (
    session_id       text        PRIMARY KEY CHECK (session_id <> ''),
    tenant           text        NOT NULL CHECK (tenant <> ''),
    user_id          text        NOT NULL DEFAULT '',
    protocol_version text        NOT NULL DEFAULT '',
    state            json        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    last_seen_at     timestamptz NOT NULL DEFAULT now(),
    ended_at         timestamptz
);

-- The notifications/cancelled a process received for a request another process runs
-- (the request id as JSON); the running process reads them. Kept for an hour.
CREATE TABLE mcp_cancellations (
    id         bigserial   PRIMARY KEY,
    session_id text        NOT NULL CHECK (session_id <> ''),
    request_id text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX mcp_cancellations_created ON mcp_cancellations (created_at);
