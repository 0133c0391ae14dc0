DROP TABLE mcp_catalog_history;
DROP TRIGGER audit_log_no_delete;
DROP TRIGGER audit_log_no_update;
DROP TABLE audit_log;
DROP TABLE approvals;
DROP TABLE tool_invocations;
