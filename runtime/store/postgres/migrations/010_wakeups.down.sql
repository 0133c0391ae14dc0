-- dropping wake_notify drops the triggers that call it (wake_*)
DROP FUNCTION wake_notify() CASCADE;
-- 003's function as it was
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
    RETURN NULL;
END
$$;
DROP FUNCTION wake_registered(name, text[]);
DROP FUNCTION wake_hash(text);
DROP TABLE wake_interest;
