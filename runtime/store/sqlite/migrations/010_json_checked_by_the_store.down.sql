-- Down puts the CHECKs back in place: every value the store wrote since passed
-- json.Valid, so the rows satisfy them.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(replace(sql,
    'args                   TEXT,',
    'args                   TEXT    CHECK (args IS NULL OR json_valid(args)),'),
    'outcome                TEXT,',
    'outcome                TEXT    CHECK (outcome IS NULL OR json_valid(outcome)),')
WHERE type = 'table' AND name = 'tool_invocations';
PRAGMA writable_schema = OFF;
