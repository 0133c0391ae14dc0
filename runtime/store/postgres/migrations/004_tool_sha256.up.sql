-- 004_tool_sha256: the definition hash (the spec's schema_sha256) each call was
-- recorded with. Recovery claims a row only on a worker that has registered the same
-- tool, version and hash (LIFE-1); rows recorded before this migration carry '' and
-- match by tool and version alone. A constant default: no table rewrite. No index:
-- the recovery statements reach their rows through the sweep and pending indexes and
-- test the tool on those few rows. The event triggers of 003 name their columns, so
-- the new one changes no event.
ALTER TABLE tool_invocations ADD COLUMN tool_sha256 text NOT NULL DEFAULT '';
