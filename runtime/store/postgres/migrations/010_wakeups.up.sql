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
-- minute if its process is gone), and the trigger notifies only a topic with a live
-- registration ('e*' registers every tenant's events). Decisions and catalog changes
-- are rare and always notify.

-- UNLOGGED: registrations are rebuilt by their listeners after a crash or failover,
-- and refreshing them writes no WAL.
CREATE UNLOGGED TABLE wake_interest (
    topic      text        NOT NULL,
    listener   text        NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (topic, listener)
);

CREATE FUNCTION wake_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    payload text;
BEGIN
    CASE TG_TABLE_NAME
    WHEN 'approvals' THEN
        payload := 'a' || left(encode(sha256(convert_to(length(NEW.tenant) || ':' || NEW.tenant || NEW.key, 'UTF8')), 'hex'), 32);
    WHEN 'mcp_catalog_history' THEN
        payload := 'c';
    WHEN 'events' THEN
        payload := 'e' || left(encode(sha256(convert_to(length(NEW.tenant) || ':' || NEW.tenant, 'UTF8')), 'hex'), 32);
        IF NOT EXISTS (SELECT 1 FROM wake_interest AS w
                WHERE w.topic IN (payload, 'e*') AND w.expires_at > now()) THEN
            RETURN NULL;
        END IF;
    ELSE -- tool_invocations
        payload := 'k' || left(encode(sha256(convert_to(length(NEW.tenant) || ':' || NEW.tenant || NEW.key, 'UTF8')), 'hex'), 32);
        IF NOT EXISTS (SELECT 1 FROM wake_interest AS w WHERE w.topic = payload AND w.expires_at > now()) THEN
            RETURN NULL;
        END IF;
    END CASE;
    PERFORM pg_notify('toolgen_wake_' || left(encode(sha256(convert_to(TG_TABLE_SCHEMA, 'UTF8')), 'hex'), 32), payload);
    RETURN NULL;
END
$$;

CREATE TRIGGER wake_approvals AFTER INSERT ON approvals
    FOR EACH ROW EXECUTE FUNCTION wake_notify();
CREATE TRIGGER wake_catalog AFTER INSERT ON mcp_catalog_history
    FOR EACH ROW EXECUTE FUNCTION wake_notify();
-- every event: a call's milestones (the triggers of 003), EventAppend, catalog_drift
CREATE TRIGGER wake_events AFTER INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION wake_notify();
-- a call's status changes (a waiter waits on a row it has read: its insert wakes nobody)
CREATE TRIGGER wake_call_status AFTER UPDATE OF status ON tool_invocations
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION wake_notify();
