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
WHERE status = 'DENIED' AND reason_code <> 'approval_denied' AND instr(key, ':refused:') = 0;

-- A person's review moves an UNCERTAIN row on to what is now known (happened: a
-- success; did not happen: a call to run again), so a resolution no longer implies the
-- status UNCERTAIN: the CHECK of 001 that said so goes. Removing a CHECK does not
-- change what is stored, so it is SQLite's documented in-place schema edit
-- (https://sqlite.org/lang_altertable.html, "Making Other Kinds Of Table Schema
-- Changes"), not a rebuild of the table; schema_version is bumped by the driver after
-- this script (see migrate.go), so every connection reloads the schema. Rows resolved
-- before this migration keep their status.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql, ',
    CHECK (resolution = '''' OR status = ''UNCERTAIN'')', '')
WHERE type = 'table' AND name = 'tool_invocations';
PRAGMA writable_schema = OFF;
