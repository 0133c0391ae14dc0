-- Down puts AUTOINCREMENT back: SQLite then takes the larger of max(id) and the
-- high-water mark sqlite_sequence still holds, so no id is reused either way.
DROP TRIGGER events_no_delete;
DROP TRIGGER tool_invocations_no_delete;
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql, 'INTEGER PRIMARY KEY,', 'INTEGER PRIMARY KEY AUTOINCREMENT,')
WHERE type = 'table' AND name IN ('tool_invocations', 'events');
PRAGMA writable_schema = OFF;
