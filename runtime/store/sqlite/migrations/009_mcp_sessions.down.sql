DROP TABLE mcp_cancellations;
DROP TABLE mcp_sessions;
