-- 010_wakeups: LISTEN/NOTIFY wake-ups (issue 16, point 4). A waiter (an approval
-- hold, an /events stream, a host watching the catalog) is woken by a notification
-- sent in the transaction of the write it waits for, instead of reading the store
-- every 200 ms. Numbered 010, leaving 009 to the sessions and tasks of issue 16.
--
-- Channel: toolgen_wake_<hash of the tables' schema>, so stores in other schemas of the
-- database (a test's, another deployment's) never wake each other. Payload: a kind
-- byte and a hash (store.Topic.Wire): 'a' || h(length(tenant) || ':' || tenant || key)
-- for a decision on a held call, 'k' || the same for a call's status, 'e' ||
-- h(length(tenant) || ':' || tenant) for a tenant's events, 'c' for the catalog
-- history, where h is the first 32 hex digits of the SHA-256 of the UTF-8 bytes
-- (SHA-256, not md5(), which a FIPS-mode server refuses). No id in clear: whoever
-- else listens on the database learns only that something was written.
--
-- A notifying transaction takes a lock that serializes the commits of every notifying
-- transaction of the cluster (PreCommit_Notify), which costs group commit under load.
-- So the hot topics — a tenant's events, a call's status, written by every call — are
-- notified only while someone waits for them: a listener registers the topics its
-- process waits for in wake_interest (refreshed every few seconds, expiring after a
-- minute if its process is gone), and only a topic with a live registration is
-- notified ('e*' registers every tenant's events). Decisions and catalog changes are
-- rare and always notify.
--
-- A call's milestones are notified by 003's trigger function itself (replaced below:
-- one statement more in the function every milestone already runs, rather than a
-- trigger function more per event); the events no row reports (EventAppend) by a
-- trigger on events that fires for direct inserts only.

-- UNLOGGED: registrations are rebuilt by their listeners after a crash or failover,
-- and refreshing them writes no WAL.
CREATE UNLOGGED TABLE wake_interest (
    topic      text        NOT NULL,
    listener   text        NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (topic, listener)
);

-- wake_hash is h above (inlined where it is called).
CREATE FUNCTION wake_hash(s text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT left(encode(sha256(convert_to(s, 'UTF8')), 'hex'), 32) $$;

-- wake_registered notifies, on the channel of schema, each payload of payloads that a
-- listener registered ('e*' stands for every 'e' payload).
CREATE FUNCTION wake_registered(schema name, payloads text[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    p text;
BEGIN
    FOR p IN SELECT DISTINCT x FROM unnest(payloads) AS x
        WHERE EXISTS (SELECT 1 FROM wake_interest AS w
            WHERE w.topic IN (x, CASE WHEN x LIKE 'e%' THEN 'e*' END) AND w.expires_at > now()) LOOP
        PERFORM pg_notify('toolgen_wake_' || wake_hash(schema), p);
    END LOOP;
END
$$;

-- 003's function, and then: wake the waiters of the tenant's events and, for an update
-- (a status change, a watermark, a suspension, a resolution), of the call.
CREATE OR REPLACE FUNCTION tool_invocations_event() RETURNS trigger LANGUAGE plpgsql AS $$
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
    -- nobody waits (the common case): one look at an empty table, no notification
    IF EXISTS (SELECT 1 FROM wake_interest WHERE expires_at > now()) THEN
        PERFORM wake_registered(TG_TABLE_SCHEMA, ARRAY[
            'e' || wake_hash(length(NEW.tenant) || ':' || NEW.tenant),
            CASE WHEN TG_OP = 'UPDATE' THEN 'k' || wake_hash(length(NEW.tenant) || ':' || NEW.tenant || NEW.key) END]);
    END IF;
    RETURN NULL;
END
$$;

-- Decisions, catalog changes (with their catalog_drift event, which no tenant owns,
-- before the change itself) and the events no row reports.
CREATE FUNCTION wake_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    CASE TG_TABLE_NAME
    WHEN 'approvals' THEN
        PERFORM pg_notify('toolgen_wake_' || wake_hash(TG_TABLE_SCHEMA),
            'a' || wake_hash(length(NEW.tenant) || ':' || NEW.tenant || NEW.key));
    WHEN 'mcp_catalog_history' THEN
        PERFORM wake_registered(TG_TABLE_SCHEMA, ARRAY['e' || wake_hash('0:')]);
        PERFORM pg_notify('toolgen_wake_' || wake_hash(TG_TABLE_SCHEMA), 'c');
    ELSE -- events
        PERFORM wake_registered(TG_TABLE_SCHEMA, ARRAY['e' || wake_hash(length(NEW.tenant) || ':' || NEW.tenant)]);
    END CASE;
    RETURN NULL;
END
$$;

CREATE TRIGGER wake_approvals AFTER INSERT ON approvals
    FOR EACH ROW EXECUTE FUNCTION wake_notify();
CREATE TRIGGER wake_catalog AFTER INSERT ON mcp_catalog_history
    FOR EACH ROW EXECUTE FUNCTION wake_notify();
-- direct inserts only (EventAppend): the triggers of 003 insert the others, and
-- notify them themselves
CREATE TRIGGER wake_events AFTER INSERT ON events
    FOR EACH ROW WHEN (pg_trigger_depth() = 0) EXECUTE FUNCTION wake_notify();
