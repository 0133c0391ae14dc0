ALTER TABLE tool_invocations DROP COLUMN workspace;
