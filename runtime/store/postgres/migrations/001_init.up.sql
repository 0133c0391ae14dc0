-- 001_init: the four tables of ST-4. Lease times come from now() inside each statement.

CREATE TABLE tool_invocations (
    id                     bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key                    text        NOT NULL UNIQUE CHECK (key <> ''),
    tenant                 text        NOT NULL DEFAULT '',
    principal              text        NOT NULL DEFAULT '',
    session_id             text        NOT NULL DEFAULT '',
    run_id                 text        NOT NULL DEFAULT '',
    step_number            integer     NOT NULL DEFAULT 0,
    call_id                text        NOT NULL DEFAULT '',
    tool                   text        NOT NULL DEFAULT '',
    tool_version           integer     NOT NULL DEFAULT 0,
    idempotency            text        NOT NULL DEFAULT '',
    idempotent_when        boolean,
    args                   json,       -- json, not jsonb: the bytes come back as written
    args_hash              text        NOT NULL DEFAULT '',
    origin_trust           text        NOT NULL DEFAULT '',
    argument_trust         text        NOT NULL DEFAULT '',
    mode                   text        NOT NULL DEFAULT '',
    decision               text        NOT NULL DEFAULT '',
    status                 text        NOT NULL CHECK (status IN
                               ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'DENIED', 'UNAVAILABLE', 'UNCERTAIN')),
    reason_code            text        NOT NULL DEFAULT '',
    outcome                json,
    -- the watermark of the current attempt, and the token that wrote it (lost-ack check)
    effect_sent_at         timestamptz,
    effect_token           text,
    -- the first watermark of an attempt the sweep retried
    earlier_effect_sent_at timestamptz,
    watermark_missing      boolean     NOT NULL DEFAULT false,
    -- the fence: lease_owner + attempt; NULL owner once the sweep reclaimed the row
    lease_owner            text,
    lease_expires_at       timestamptz,
    attempt                integer     NOT NULL DEFAULT 0,
    suspended_at           timestamptz,
    resume_token           text,
    resolution             text        NOT NULL DEFAULT '' CHECK (resolution IN ('', 'happened', 'did_not_happen')),
    resolved_by            text        NOT NULL DEFAULT '',
    resolved_at            timestamptz,
    created_at             timestamptz NOT NULL,
    updated_at             timestamptz NOT NULL,
    -- a RUNNING row is leased, or suspended
    CHECK (status <> 'RUNNING' OR (lease_owner IS NOT NULL AND attempt >= 1
                                   AND (lease_expires_at IS NOT NULL OR suspended_at IS NOT NULL))),
    CHECK (resolution = '' OR status = 'UNCERTAIN')
);

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
    key        text        PRIMARY KEY REFERENCES tool_invocations (key),
    tenant     text        NOT NULL DEFAULT '',
    approved   boolean     NOT NULL,
    decided_by text        NOT NULL CHECK (decided_by <> ''),
    reason     text        NOT NULL DEFAULT '',
    decided_at timestamptz NOT NULL
);

CREATE TABLE audit_log (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant     text        NOT NULL DEFAULT '',
    kind       text        NOT NULL,
    principal  text        NOT NULL DEFAULT '',
    session_id text        NOT NULL DEFAULT '',
    mode       text        NOT NULL DEFAULT '',
    tool       text        NOT NULL DEFAULT '',
    key        text        NOT NULL DEFAULT '',
    detail     json,
    at         timestamptz NOT NULL
);

CREATE INDEX audit_log_tenant_idx ON audit_log (tenant, id);

-- the audit log is append-only
CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only';
END
$$;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

CREATE TABLE mcp_catalog_history (
    id        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    server_id text        NOT NULL,
    tool      text        NOT NULL DEFAULT '',
    change    text        NOT NULL,
    sha256    text        NOT NULL DEFAULT '',
    detail    json,
    at        timestamptz NOT NULL
);

CREATE INDEX mcp_catalog_history_server_idx ON mcp_catalog_history (server_id, id);
