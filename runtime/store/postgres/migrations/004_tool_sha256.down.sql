ALTER TABLE tool_invocations DROP COLUMN tool_sha256;
