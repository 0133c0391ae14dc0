DROP TRIGGER mcp_catalog_history_events ON mcp_catalog_history;
DROP FUNCTION mcp_catalog_history_events();
-- dropping the function drops the triggers that call it (events_*)
DROP FUNCTION tool_invocations_event() CASCADE;
DROP TABLE events;
