DROP TABLE mcp_catalog_history;
DROP TABLE audit_log;
DROP FUNCTION audit_log_append_only();
DROP TABLE approvals;
DROP TABLE tool_invocations;
