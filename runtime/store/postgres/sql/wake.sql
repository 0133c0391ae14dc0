-- name: WakeChannel
-- WakeChannel is the channel migration 010's triggers notify: named after the
-- schema of the tables this connection's search_path finds (TG_TABLE_SCHEMA there).
SELECT 'toolgen_wake_' || left(encode(sha256(convert_to(n.nspname, 'UTF8')), 'hex'), 32)
FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.oid = 'events'::regclass

-- name: WakeRegister
-- WakeRegister: $1 the listener, $2 its topics, $3 the registrations' lifetime
-- in microseconds. One statement: upsert the topics, drop the listener's others
-- and everyone's expired ones (a process that died), so that a call nobody waits
-- for finds the table empty.
WITH upserted AS (
	INSERT INTO wake_interest (topic, listener, expires_at)
	SELECT t, $1, now() + $3::bigint * interval '1 microsecond' FROM unnest($2::text[]) AS t
	ON CONFLICT (topic, listener) DO UPDATE SET expires_at = EXCLUDED.expires_at
	RETURNING 1
)
DELETE FROM wake_interest
WHERE (listener = $1 AND NOT (topic = ANY ($2::text[]))) OR expires_at < now()

-- name: WakeUnregister
DELETE FROM wake_interest WHERE listener = $1

