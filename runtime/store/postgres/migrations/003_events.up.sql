-- 003_events: the event stream (EV-1). An event carries the classification of a
-- milestone, never its payload: there is no column for arguments, outcomes, remote
-- text or catalog detail. The triggers below write the events of tool_invocations and
-- mcp_catalog_history in the transaction that writes the milestone: no extra commit,
-- no code in the pipeline.
--
-- Ids come from a sequence in the order transactions take them, not the order they
-- commit, so a reader paging by id alone could pass an id whose transaction commits
-- later. tx is the writing transaction's id: readers see only events with
-- tx < pg_snapshot_xmin(pg_current_snapshot()) (every such transaction has ended, and
-- no new one can take a lower id), in (tx, id) order, and page by (tx, id).

CREATE TABLE events (
    id             bigint      GENERATED ALWAYS AS IDENTITY,
    tx             bigint      NOT NULL DEFAULT (pg_current_xact_id()::text::bigint),
    kind           text        NOT NULL CHECK (kind <> ''),
    tenant         text        NOT NULL DEFAULT '',
    session_id     text        NOT NULL DEFAULT '',
    run_id         text        NOT NULL DEFAULT '',
    invocation_id  bigint,
    step_number    integer     NOT NULL DEFAULT 0,
    call_id        text        NOT NULL DEFAULT '',
    tool           text        NOT NULL DEFAULT '',
    status         text        NOT NULL DEFAULT '',
    reason_code    text        NOT NULL DEFAULT '',
    mode           text        NOT NULL DEFAULT '',
    decision       text        NOT NULL DEFAULT '',
    idempotency    text        NOT NULL DEFAULT '',
    origin_trust   text        NOT NULL DEFAULT '',
    argument_trust text        NOT NULL DEFAULT '',
    attempt        integer     NOT NULL DEFAULT 0,
    server_id      text        NOT NULL DEFAULT '', -- catalog_drift: the server; device_*: the device
    change         text        NOT NULL DEFAULT '', -- catalog_drift: added, removed, changed, ...
    duration_us    bigint,                          -- settled, uncertain: created_at to the settlement
    at             timestamptz NOT NULL,
    -- the stream order and the readers' page; one index, not two: every event costs it
    PRIMARY KEY (tx, id)
);

-- One trigger per kind, its condition in its WHEN clause (evaluated without calling
-- the function), so an update that crosses one milestone runs the function once, for
-- one INSERT. PostgreSQL fires the triggers of one event in the order of their names:
-- the number in each name is the kind's place in the stream.
CREATE FUNCTION tool_invocations_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- back in PENDING: an approved call released for a retry waits for no one
    IF TG_ARGV[0] = 'held' AND TG_OP = 'UPDATE' AND EXISTS (SELECT 1 FROM approvals WHERE key = NEW.key) THEN
        RETURN NULL;
    END IF;
    INSERT INTO events (kind, tenant, session_id, run_id, invocation_id, step_number, call_id, tool, status,
        reason_code, mode, decision, idempotency, origin_trust, argument_trust, attempt, duration_us, at)
    VALUES (TG_ARGV[0], NEW.tenant, NEW.session_id, NEW.run_id, NEW.id, NEW.step_number, NEW.call_id, NEW.tool,
        NEW.status, NEW.reason_code, NEW.mode, NEW.decision, NEW.idempotency, NEW.origin_trust,
        NEW.argument_trust, NEW.attempt,
        -- settled and uncertain after a record: the time from the record to the settlement
        CASE WHEN TG_OP = 'UPDATE' AND TG_ARGV[0] IN ('settled', 'uncertain')
            THEN (extract(epoch FROM NEW.updated_at - NEW.created_at) * 1000000)::bigint END,
        NEW.updated_at);
    RETURN NULL;
END
$$;

-- An insert reports recorded, then what the inserted status already is.
CREATE TRIGGER events_0_recorded AFTER INSERT ON tool_invocations
    FOR EACH ROW EXECUTE FUNCTION tool_invocations_event('recorded');
CREATE TRIGGER events_3_held AFTER INSERT ON tool_invocations
    FOR EACH ROW WHEN (NEW.status = 'PENDING' AND NEW.decision = 'needs_approval')
    EXECUTE FUNCTION tool_invocations_event('held');
CREATE TRIGGER events_4_started AFTER INSERT ON tool_invocations
    FOR EACH ROW WHEN (NEW.status = 'RUNNING')
    EXECUTE FUNCTION tool_invocations_event('started');
CREATE TRIGGER events_6_settled AFTER INSERT ON tool_invocations
    FOR EACH ROW WHEN (NEW.status IN ('SUCCEEDED', 'FAILED', 'DENIED', 'UNAVAILABLE'))
    EXECUTE FUNCTION tool_invocations_event('settled');
CREATE TRIGGER events_7_uncertain AFTER INSERT ON tool_invocations
    FOR EACH ROW WHEN (NEW.status = 'UNCERTAIN')
    EXECUTE FUNCTION tool_invocations_event('uncertain');

-- An update reports each milestone it crossed. Lease renewals (lease_expires_at only)
-- fire none of these; a watermark retried after a lost acknowledgement matches no WHEN.
CREATE TRIGGER events_1_effect_sent_update AFTER UPDATE OF effect_sent_at ON tool_invocations
    FOR EACH ROW WHEN (OLD.effect_sent_at IS NULL AND NEW.effect_sent_at IS NOT NULL)
    EXECUTE FUNCTION tool_invocations_event('effect_sent');
CREATE TRIGGER events_2_released_update AFTER UPDATE OF status ON tool_invocations
    FOR EACH ROW WHEN (OLD.status = 'RUNNING' AND NEW.status = 'PENDING')
    EXECUTE FUNCTION tool_invocations_event('released');
CREATE TRIGGER events_3_held_update AFTER UPDATE OF status ON tool_invocations
    FOR EACH ROW WHEN (OLD.status <> 'PENDING' AND NEW.status = 'PENDING' AND NEW.decision = 'needs_approval')
    EXECUTE FUNCTION tool_invocations_event('held');
CREATE TRIGGER events_4_started_update AFTER UPDATE OF status ON tool_invocations
    FOR EACH ROW WHEN (OLD.status <> 'RUNNING' AND NEW.status = 'RUNNING')
    EXECUTE FUNCTION tool_invocations_event('started');
CREATE TRIGGER events_5_suspended_update AFTER UPDATE OF suspended_at ON tool_invocations
    FOR EACH ROW WHEN (OLD.suspended_at IS NULL AND NEW.suspended_at IS NOT NULL)
    EXECUTE FUNCTION tool_invocations_event('suspended');
CREATE TRIGGER events_6_settled_update AFTER UPDATE OF status ON tool_invocations
    FOR EACH ROW WHEN (OLD.status <> NEW.status AND NEW.status IN ('SUCCEEDED', 'FAILED', 'DENIED', 'UNAVAILABLE'))
    EXECUTE FUNCTION tool_invocations_event('settled');
CREATE TRIGGER events_7_uncertain_update AFTER UPDATE OF status ON tool_invocations
    FOR EACH ROW WHEN (OLD.status <> 'UNCERTAIN' AND NEW.status = 'UNCERTAIN')
    EXECUTE FUNCTION tool_invocations_event('uncertain');
CREATE TRIGGER events_8_resolved_update AFTER UPDATE OF resolution ON tool_invocations
    FOR EACH ROW WHEN (OLD.resolution = '' AND NEW.resolution <> '')
    EXECUTE FUNCTION tool_invocations_event('resolved');

-- A catalog change is drift: the server, the tool and the kind of change, never the detail.
CREATE FUNCTION mcp_catalog_history_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO events (kind, tool, server_id, change, at)
    VALUES ('catalog_drift', NEW.tool, NEW.server_id, NEW.change, NEW.at);
    RETURN NULL;
END
$$;

CREATE TRIGGER mcp_catalog_history_events AFTER INSERT ON mcp_catalog_history
    FOR EACH ROW EXECUTE FUNCTION mcp_catalog_history_events();
