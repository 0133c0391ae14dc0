-- 003_events: the event stream (EV-1). An event carries the classification of a
-- milestone, never its payload: there is no column for arguments, outcomes, remote
-- text or catalog detail. The triggers below write the events of tool_invocations and
-- mcp_catalog_history in the statement (hence the transaction, hence the commit) that
-- writes the milestone: no extra commit, no code in the pipeline. Writes are serialized,
-- so id order is commit order: tx is always 0 here (PostgreSQL needs it).

CREATE TABLE events (
    id             INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused: a reader's cursor stays valid
    tx             INTEGER NOT NULL DEFAULT 0,
    kind           TEXT    NOT NULL CHECK (kind <> ''),
    tenant         TEXT    NOT NULL DEFAULT '',
    session_id     TEXT    NOT NULL DEFAULT '',
    run_id         TEXT    NOT NULL DEFAULT '',
    invocation_id  INTEGER,
    step_number    INTEGER NOT NULL DEFAULT 0,
    call_id        TEXT    NOT NULL DEFAULT '',
    tool           TEXT    NOT NULL DEFAULT '',
    status         TEXT    NOT NULL DEFAULT '',
    reason_code    TEXT    NOT NULL DEFAULT '',
    mode           TEXT    NOT NULL DEFAULT '',
    decision       TEXT    NOT NULL DEFAULT '',
    idempotency    TEXT    NOT NULL DEFAULT '',
    origin_trust   TEXT    NOT NULL DEFAULT '',
    argument_trust TEXT    NOT NULL DEFAULT '',
    attempt        INTEGER NOT NULL DEFAULT 0,
    server_id      TEXT    NOT NULL DEFAULT '', -- catalog_drift: the server; device_*: the device
    change         TEXT    NOT NULL DEFAULT '', -- catalog_drift: added, removed, changed, ...
    duration_us    INTEGER,                     -- settled, uncertain: created_at to the settlement
    at             INTEGER NOT NULL
) STRICT;

-- One INSERT per event the milestone may need, in stream order, each selecting nothing
-- when its condition does not hold (cheaper than one INSERT of a sorted UNION). A
-- condition must never yield a NULL kind: the CHECK would abort the milestone's write.

-- An insert reports recorded, then what the inserted status already is.
CREATE TRIGGER tool_invocations_events_insert AFTER INSERT ON tool_invocations
BEGIN
    INSERT INTO events (kind, tenant, session_id, run_id, invocation_id, step_number, call_id, tool, status,
        reason_code, mode, decision, idempotency, origin_trust, argument_trust, attempt, at)
    VALUES ('recorded', NEW.tenant, NEW.session_id, NEW.run_id, NEW.id, NEW.step_number, NEW.call_id, NEW.tool, NEW.status,
        NEW.reason_code, NEW.mode, NEW.decision, NEW.idempotency, NEW.origin_trust, NEW.argument_trust, NEW.attempt, NEW.updated_at);
    INSERT INTO events (kind, tenant, session_id, run_id, invocation_id, step_number, call_id, tool, status,
        reason_code, mode, decision, idempotency, origin_trust, argument_trust, attempt, at)
    SELECT CASE NEW.status WHEN 'PENDING' THEN 'held' WHEN 'RUNNING' THEN 'started' WHEN 'UNCERTAIN' THEN 'uncertain'
            ELSE 'settled' END, -- SUCCEEDED, FAILED, DENIED, UNAVAILABLE (the status CHECK)
        NEW.tenant, NEW.session_id, NEW.run_id, NEW.id, NEW.step_number, NEW.call_id, NEW.tool, NEW.status,
        NEW.reason_code, NEW.mode, NEW.decision, NEW.idempotency, NEW.origin_trust, NEW.argument_trust, NEW.attempt, NEW.updated_at
    WHERE NEW.status <> 'PENDING' OR NEW.decision = 'needs_approval';
END;

-- An update reports each milestone it crossed: the watermark, the status it moved to,
-- a new hold, a suspension, a resolution. Lease renewals (lease_expires_at only) do not
-- fire it at all, and the WHEN clause skips updates that cross nothing (a watermark
-- retried after a lost acknowledgement).
CREATE TRIGGER tool_invocations_events_update
AFTER UPDATE OF status, effect_sent_at, suspended_at, resolution ON tool_invocations
WHEN OLD.status <> NEW.status OR (OLD.effect_sent_at IS NULL AND NEW.effect_sent_at IS NOT NULL)
    OR (OLD.suspended_at IS NULL AND NEW.suspended_at IS NOT NULL) OR OLD.resolution <> NEW.resolution
BEGIN
    INSERT INTO events (kind, tenant, session_id, run_id, invocation_id, step_number, call_id, tool, status,
        reason_code, mode, decision, idempotency, origin_trust, argument_trust, attempt, at)
    SELECT 'effect_sent', NEW.tenant, NEW.session_id, NEW.run_id, NEW.id, NEW.step_number, NEW.call_id, NEW.tool, NEW.status,
        NEW.reason_code, NEW.mode, NEW.decision, NEW.idempotency, NEW.origin_trust, NEW.argument_trust, NEW.attempt, NEW.updated_at
    WHERE OLD.effect_sent_at IS NULL AND NEW.effect_sent_at IS NOT NULL;
    -- released (RUNNING back to PENDING), started, settled or uncertain; settled and
    -- uncertain carry the time from the record to the settlement
    INSERT INTO events (kind, tenant, session_id, run_id, invocation_id, step_number, call_id, tool, status,
        reason_code, mode, decision, idempotency, origin_trust, argument_trust, attempt, duration_us, at)
    SELECT CASE NEW.status WHEN 'PENDING' THEN 'released' WHEN 'RUNNING' THEN 'started'
            WHEN 'UNCERTAIN' THEN 'uncertain' ELSE 'settled' END,
        NEW.tenant, NEW.session_id, NEW.run_id, NEW.id, NEW.step_number, NEW.call_id, NEW.tool, NEW.status,
        NEW.reason_code, NEW.mode, NEW.decision, NEW.idempotency, NEW.origin_trust, NEW.argument_trust, NEW.attempt,
        CASE WHEN NEW.status NOT IN ('PENDING', 'RUNNING') THEN NEW.updated_at - NEW.created_at END, NEW.updated_at
    WHERE OLD.status <> NEW.status AND (NEW.status <> 'PENDING' OR OLD.status = 'RUNNING');
    -- back in PENDING and waiting for a person: an approved call released for a retry
    -- waits for no one, so it is not held again
    INSERT INTO events (kind, tenant, session_id, run_id, invocation_id, step_number, call_id, tool, status,
        reason_code, mode, decision, idempotency, origin_trust, argument_trust, attempt, at)
    SELECT 'held', NEW.tenant, NEW.session_id, NEW.run_id, NEW.id, NEW.step_number, NEW.call_id, NEW.tool, NEW.status,
        NEW.reason_code, NEW.mode, NEW.decision, NEW.idempotency, NEW.origin_trust, NEW.argument_trust, NEW.attempt, NEW.updated_at
    WHERE OLD.status <> 'PENDING' AND NEW.status = 'PENDING' AND NEW.decision = 'needs_approval'
        AND NOT EXISTS (SELECT 1 FROM approvals WHERE key = NEW.key);
    INSERT INTO events (kind, tenant, session_id, run_id, invocation_id, step_number, call_id, tool, status,
        reason_code, mode, decision, idempotency, origin_trust, argument_trust, attempt, at)
    SELECT 'suspended', NEW.tenant, NEW.session_id, NEW.run_id, NEW.id, NEW.step_number, NEW.call_id, NEW.tool, NEW.status,
        NEW.reason_code, NEW.mode, NEW.decision, NEW.idempotency, NEW.origin_trust, NEW.argument_trust, NEW.attempt, NEW.updated_at
    WHERE OLD.suspended_at IS NULL AND NEW.suspended_at IS NOT NULL;
    INSERT INTO events (kind, tenant, session_id, run_id, invocation_id, step_number, call_id, tool, status,
        reason_code, mode, decision, idempotency, origin_trust, argument_trust, attempt, at)
    SELECT 'resolved', NEW.tenant, NEW.session_id, NEW.run_id, NEW.id, NEW.step_number, NEW.call_id, NEW.tool, NEW.status,
        NEW.reason_code, NEW.mode, NEW.decision, NEW.idempotency, NEW.origin_trust, NEW.argument_trust, NEW.attempt, NEW.updated_at
    WHERE OLD.resolution = '' AND NEW.resolution <> '';
END;

-- A catalog change is drift: the server, the tool and the kind of change, never the detail.
CREATE TRIGGER mcp_catalog_history_events AFTER INSERT ON mcp_catalog_history
BEGIN
    INSERT INTO events (kind, tool, server_id, change, at)
    VALUES ('catalog_drift', NEW.tool, NEW.server_id, NEW.change, NEW.at);
END;
