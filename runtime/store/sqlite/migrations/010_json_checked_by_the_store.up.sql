-- 010_json_checked_by_the_store: the arguments and the outcome of a call are checked
-- as JSON by the store before it writes them (store.InsertParams, store.Settlement,
-- a suspension, a resolution: Go's json.Valid, the same for every driver), no longer
-- by a CHECK: json_valid() parsed each value into SQLite's JSONB on every insert and
-- settlement, with a stack deep enough to be grown on every call, and that was a sixth
-- of the CPU of a read call's record (issue 20). Removing a CHECK does not change what
-- is stored: SQLite's documented in-place schema edit, as in 008.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(replace(sql,
    'args                   TEXT    CHECK (args IS NULL OR json_valid(args)),',
    'args                   TEXT,'),
    'outcome                TEXT    CHECK (outcome IS NULL OR json_valid(outcome)),',
    'outcome                TEXT,')
WHERE type = 'table' AND name = 'tool_invocations';
PRAGMA writable_schema = OFF;
