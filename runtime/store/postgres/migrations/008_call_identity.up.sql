-- 008_call_identity: what SES-2 (issue 15, point 9) changes in the rows.
--
-- A refusal is recorded under a key of its own (the call's key, ':refused:', a unique
-- tail), so it never occupies the call's key: the same call made again is decided
-- again instead of being answered with the old refusal. Refusals recorded before this
-- migration held the call's key; they are moved off it (':refused:' and the row's id).
-- A person's denial of a held call (approval_denied) is a decision on that call and
-- keeps its key. The rows stay, with their call ids, statuses and outcomes; the event
-- triggers of 003 do not watch keys.
UPDATE tool_invocations SET key = key || ':refused:' || id
WHERE status = 'DENIED' AND reason_code <> 'approval_denied' AND strpos(key, ':refused:') = 0;

-- A person's review moves an UNCERTAIN row on to what is now known (happened: a
-- success; did not happen: a call to run again), so a resolution no longer implies the
-- status UNCERTAIN: the CHECK of 001 that said so goes. 001 left it unnamed; it is
-- found by its definition. Rows resolved before this migration keep their status.
DO $$
DECLARE
    c text;
BEGIN
    FOR c IN SELECT conname FROM pg_constraint
             WHERE conrelid = 'tool_invocations'::regclass AND contype = 'c'
               AND pg_get_constraintdef(oid) LIKE '%resolution%UNCERTAIN%'
    LOOP
        EXECUTE format('ALTER TABLE tool_invocations DROP CONSTRAINT %I', c);
    END LOOP;
END $$;
