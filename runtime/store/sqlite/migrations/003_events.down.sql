DROP TRIGGER mcp_catalog_history_events;
DROP TRIGGER tool_invocations_events_update;
DROP TRIGGER tool_invocations_events_insert;
DROP TABLE events;
