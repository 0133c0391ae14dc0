-- name: InvocationList
-- The listing and session-mode statements: not on a call's hot path.
-- InvocationList is store.InvocationFilter: every condition is off when its
-- parameter is the zero value.
SELECT {{invocationColumns}} FROM tool_invocations
WHERE id > @after_id AND (@tenant::text = '' OR tenant = @tenant) AND (@session_id::text = '' OR session_id = @session_id)
	AND (NOT @awaiting::boolean OR (status = 'PENDING' AND decision = 'needs_approval'
		AND NOT EXISTS (SELECT 1 FROM approvals a WHERE a.key = tool_invocations.key)))
ORDER BY id
LIMIT @lim

-- name: SessionModeGet
-- The session's mode is keyed by (tenant, session id) (migration 005): another
-- tenant's mode of the same id is another row.
SELECT mode FROM session_modes WHERE tenant = @tenant AND session_id = @session_id

-- name: SessionModeSet
INSERT INTO session_modes (tenant, session_id, mode, updated_at)
VALUES (@tenant, @session_id, @mode, now())
ON CONFLICT (tenant, session_id) DO UPDATE SET mode = excluded.mode, updated_at = excluded.updated_at

-- name: SessionClaim
-- Session ownership and pinned catalogs (SES-1, migration 005).
-- SessionClaim records the first owner of a session id; a later claim, of any
-- tenant, changes nothing. A concurrent claimer's insert waits for this one to
-- commit, so the read after it sees the winner.
INSERT INTO sessions (session_id, tenant) VALUES (@session_id, @tenant) ON CONFLICT (session_id) DO NOTHING

-- name: SessionOwner
SELECT tenant FROM sessions WHERE session_id = @session_id

-- name: SessionCatalogInsert
INSERT INTO session_catalogs (tenant, session_id) VALUES (@tenant, @session_id)
ON CONFLICT (tenant, session_id) DO NOTHING

-- name: SessionPinsInsert
INSERT INTO session_pins (tenant, session_id, tool, schema_sha256)
SELECT @tenant, @session_id, p.tool, p.sha256 FROM jsonb_to_recordset(@pins::jsonb) AS p(tool text, sha256 text)

-- name: SessionMint
-- SessionMint records a minted session (store.Store.SessionMint) in one statement,
-- committed as InvocationInsertRelaxed is (synchronous_commit off for its own
-- transaction only). Each insert takes the row the one before it wrote, so an id the
-- store knows writes nothing: not as an owner (ON CONFLICT), not as a catalog (NOT
-- EXISTS; only two writers racing with one random id could get past both, and then
-- the loser writes its owner row alone). One row: the catalogs written, 1 for a new id.
WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true)),
owner AS (
	INSERT INTO sessions (session_id, tenant)
	SELECT @session_id, @tenant FROM relaxed
	WHERE NOT EXISTS (SELECT 1 FROM session_catalogs WHERE tenant = @tenant AND session_id = @session_id)
	ON CONFLICT (session_id) DO NOTHING
	RETURNING session_id),
catalog AS (
	INSERT INTO session_catalogs (tenant, session_id) SELECT @tenant, session_id FROM owner
	ON CONFLICT (tenant, session_id) DO NOTHING
	RETURNING session_id),
pins AS (
	INSERT INTO session_pins (tenant, session_id, tool, schema_sha256)
	SELECT @tenant, c.session_id, p.tool, p.sha256
	FROM catalog AS c, jsonb_to_recordset(@pins::jsonb) AS p(tool text, sha256 text))
SELECT count(*) FROM catalog

-- name: SessionPins
-- SessionPins reads a catalog in one statement (one snapshot): no row is "not
-- pinned", one row with a NULL tool is the empty catalog.
SELECT p.tool, p.schema_sha256 FROM session_catalogs AS c
LEFT JOIN session_pins AS p ON p.tenant = c.tenant AND p.session_id = c.session_id
WHERE c.tenant = @tenant AND c.session_id = @session_id
ORDER BY p.tool COLLATE "C"

-- name: SessionPinsDelete
-- A forced epoch (MCP-7), in one transaction: the pins under the prefix go, in
-- every catalog, and the current ones are written into every catalog of the
-- epoch's tenant ('' for all).
DELETE FROM session_pins WHERE left(tool, length(@prefix)) = @prefix

-- name: SessionPinsEpoch
INSERT INTO session_pins (tenant, session_id, tool, schema_sha256)
SELECT c.tenant, c.session_id, p.tool, p.sha256
FROM session_catalogs AS c, jsonb_to_recordset(@pins::jsonb) AS p(tool text, sha256 text)
WHERE @tenant = '' OR c.tenant = @tenant

