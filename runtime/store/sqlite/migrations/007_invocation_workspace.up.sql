-- 007_invocation_workspace: the workspace root each call was made in. Recovery re-runs
-- a call in its own workspace — its tenant's, its run's — never in the workspace of
-- the process that happens to recover it (issue 14, finding 12: one tenant's
-- operator's recover re-ran another tenant's write into its own workspace). Rows
-- recorded before this migration carry '' and are re-run where the recovering host
-- places that tenant's and run's workspace. No index; the event triggers of 003 name
-- their columns, so the new one changes no event.
ALTER TABLE tool_invocations ADD COLUMN workspace TEXT NOT NULL DEFAULT '';
