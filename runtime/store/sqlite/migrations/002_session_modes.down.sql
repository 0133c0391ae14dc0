DROP INDEX tool_invocations_session_idx;
DROP TABLE session_modes;
