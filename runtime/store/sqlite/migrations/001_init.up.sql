-- 001_init: the four tables of ST-4. Times are INTEGER microseconds since the Unix
-- epoch, always written from SQLite's clock inside the statement.

CREATE TABLE tool_invocations (
    id                     INTEGER PRIMARY KEY AUTOINCREMENT,
    key                    TEXT    NOT NULL UNIQUE CHECK (key <> ''),
    tenant                 TEXT    NOT NULL DEFAULT '',
    principal              TEXT    NOT NULL DEFAULT '',
    session_id             TEXT    NOT NULL DEFAULT '',
    run_id                 TEXT    NOT NULL DEFAULT '',
    step_number            INTEGER NOT NULL DEFAULT 0,
    call_id                TEXT    NOT NULL DEFAULT '',
    tool                   TEXT    NOT NULL DEFAULT '',
    tool_version           INTEGER NOT NULL DEFAULT 0,
    idempotency            TEXT    NOT NULL DEFAULT '',
    idempotent_when        INTEGER CHECK (idempotent_when IN (0, 1)),
    args                   TEXT    CHECK (args IS NULL OR json_valid(args)),
    args_hash              TEXT    NOT NULL DEFAULT '',
    origin_trust           TEXT    NOT NULL DEFAULT '',
    argument_trust         TEXT    NOT NULL DEFAULT '',
    mode                   TEXT    NOT NULL DEFAULT '',
    decision               TEXT    NOT NULL DEFAULT '',
    status                 TEXT    NOT NULL CHECK (status IN
                               ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'DENIED', 'UNAVAILABLE', 'UNCERTAIN')),
    reason_code            TEXT    NOT NULL DEFAULT '',
    outcome                TEXT    CHECK (outcome IS NULL OR json_valid(outcome)),
    -- the watermark of the current attempt, and the token that wrote it (lost-ack check)
    effect_sent_at         INTEGER,
    effect_token           TEXT,
    -- the first watermark of an attempt the sweep retried
    earlier_effect_sent_at INTEGER,
    watermark_missing      INTEGER NOT NULL DEFAULT 0 CHECK (watermark_missing IN (0, 1)),
    -- the fence: lease_owner + attempt; NULL owner once the sweep reclaimed the row
    lease_owner            TEXT,
    lease_expires_at       INTEGER,
    attempt                INTEGER NOT NULL DEFAULT 0,
    suspended_at           INTEGER,
    resume_token           TEXT,
    resolution             TEXT    NOT NULL DEFAULT '' CHECK (resolution IN ('', 'happened', 'did_not_happen')),
    resolved_by            TEXT    NOT NULL DEFAULT '',
    resolved_at            INTEGER,
    created_at             INTEGER NOT NULL,
    updated_at             INTEGER NOT NULL,
    -- a RUNNING row is leased, or suspended
    CHECK (status <> 'RUNNING' OR (lease_owner IS NOT NULL AND attempt >= 1
                                   AND (lease_expires_at IS NOT NULL OR suspended_at IS NOT NULL))),
    CHECK (resolution = '' OR status = 'UNCERTAIN')
) STRICT;

-- the sweep (RT-4): expired leases of unsuspended RUNNING rows
CREATE INDEX tool_invocations_sweep_idx ON tool_invocations (status, lease_expires_at)
    WHERE status = 'RUNNING' AND suspended_at IS NULL;
-- the breaker (RT-8): identical calls of a run
CREATE INDEX tool_invocations_breaker_idx ON tool_invocations (run_id, args_hash);
-- lease renewal: a worker's RUNNING rows
CREATE INDEX tool_invocations_lease_owner_idx ON tool_invocations (lease_owner)
    WHERE status = 'RUNNING';
CREATE UNIQUE INDEX tool_invocations_resume_token_idx ON tool_invocations (resume_token)
    WHERE resume_token IS NOT NULL;
CREATE INDEX tool_invocations_pending_idx ON tool_invocations (id)
    WHERE status = 'PENDING';
-- the review queue: unresolved UNCERTAIN rows (few), in id order
CREATE INDEX tool_invocations_review_idx ON tool_invocations (id)
    WHERE status = 'UNCERTAIN' AND resolution = '';

CREATE TABLE approvals (
    key        TEXT    PRIMARY KEY REFERENCES tool_invocations (key),
    tenant     TEXT    NOT NULL DEFAULT '',
    approved   INTEGER NOT NULL CHECK (approved IN (0, 1)),
    decided_by TEXT    NOT NULL CHECK (decided_by <> ''),
    reason     TEXT    NOT NULL DEFAULT '',
    decided_at INTEGER NOT NULL
) STRICT;

CREATE TABLE audit_log (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant     TEXT    NOT NULL DEFAULT '',
    kind       TEXT    NOT NULL,
    principal  TEXT    NOT NULL DEFAULT '',
    session_id TEXT    NOT NULL DEFAULT '',
    mode       TEXT    NOT NULL DEFAULT '',
    tool       TEXT    NOT NULL DEFAULT '',
    key        TEXT    NOT NULL DEFAULT '',
    detail     TEXT    CHECK (detail IS NULL OR json_valid(detail)),
    at         INTEGER NOT NULL
) STRICT;

CREATE INDEX audit_log_tenant_idx ON audit_log (tenant, id);

-- the audit log is append-only
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;

CREATE TABLE mcp_catalog_history (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    server_id TEXT    NOT NULL,
    tool      TEXT    NOT NULL DEFAULT '',
    change    TEXT    NOT NULL,
    sha256    TEXT    NOT NULL DEFAULT '',
    detail    TEXT    CHECK (detail IS NULL OR json_valid(detail)),
    at        INTEGER NOT NULL
) STRICT;

CREATE INDEX mcp_catalog_history_server_idx ON mcp_catalog_history (server_id, id);
