-- 011_ids_without_sqlite_sequence: calls and events take the next id without
-- AUTOINCREMENT. Rows of both tables are never deleted (the triggers below make that
-- a rule of the schema, as audit_log's are), so max(id) + 1, SQLite's choice for an
-- INTEGER PRIMARY KEY, is never an id a row had or a reader's event cursor has passed,
-- which is what AUTOINCREMENT was for. It kept a high-water mark in sqlite_sequence,
-- which every commit that adds a call or an event read and rewrote: one more page (one
-- WAL frame) and two more b-tree updates per record, an eighth of a read call's record
-- (issue 20). One visible difference: an insert that meets an existing key (ON
-- CONFLICT DO NOTHING) no longer uses up an id, so ids have no gaps from it. The rows
-- and their ids are unchanged; only how the next id is chosen changes, so the in-place
-- schema edit of 008 and 010 applies (a table's b-tree does not depend on
-- AUTOINCREMENT). The rows sqlite_sequence holds for the two tables stay, unused, for
-- down.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql, 'INTEGER PRIMARY KEY AUTOINCREMENT,', 'INTEGER PRIMARY KEY,')
WHERE type = 'table' AND name IN ('tool_invocations', 'events');
PRAGMA writable_schema = OFF;

CREATE TRIGGER tool_invocations_no_delete BEFORE DELETE ON tool_invocations
BEGIN
    SELECT RAISE(ABORT, 'tool_invocations rows are never deleted: ids are max(id) + 1');
END;

CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are never deleted: ids are max(id) + 1 and cursors must stay valid');
END;
