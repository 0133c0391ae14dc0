-- 002_session_modes: the protocol mode each session is in (WF-4), moved only by a
-- protocol.dispatch call through the pipeline. One row per session id.
CREATE TABLE session_modes (
    session_id TEXT    PRIMARY KEY CHECK (session_id <> ''),
    tenant     TEXT    NOT NULL DEFAULT '',
    mode       TEXT    NOT NULL CHECK (mode <> ''),
    updated_at INTEGER NOT NULL
) STRICT;

-- the audit view and toolrun's listings: one session's calls in id order
CREATE INDEX tool_invocations_session_idx ON tool_invocations (session_id, id);
