-- name: SessionClaim
-- Sessions (SES-1, migration 005): who owns a session id, each tenant's session mode
-- and pinned catalog. Every table but sessions is keyed by (tenant, session id).
-- SessionClaim records the first owner of a session id; a later claim, of any
-- tenant, changes nothing.
INSERT INTO sessions (session_id, tenant, created_at) VALUES (:session_id, :tenant, {{nowMicros}})
ON CONFLICT (session_id) DO NOTHING

-- name: SessionOwner
SELECT tenant FROM sessions WHERE session_id = :session_id

-- name: SessionCatalogInsert
-- SessionCatalogInsert marks a tenant's session as pinned, unless it is already.
INSERT INTO session_catalogs (tenant, session_id, pinned_at) VALUES (:tenant, :session_id, {{nowMicros}})
ON CONFLICT (tenant, session_id) DO NOTHING

-- name: SessionPinsInsert
-- SessionPinsInsert writes the pins of a catalog the same transaction marked.
INSERT INTO session_pins (tenant, session_id, tool, schema_sha256)
SELECT :tenant, :session_id, p.value ->> 'tool', p.value ->> 'sha256' FROM json_each(:pins) AS p

-- name: SessionPins
-- SessionPins reads a catalog in one statement (one snapshot): no row is "not
-- pinned", one row with a NULL tool is the empty catalog.
SELECT p.tool, p.schema_sha256 FROM session_catalogs AS c
LEFT JOIN session_pins AS p ON p.tenant = c.tenant AND p.session_id = c.session_id
WHERE c.tenant = :tenant AND c.session_id = :session_id
ORDER BY p.tool

-- name: SessionPinsDelete
-- SessionPinsDelete and sessionPinsEpochSQL are a forced epoch (MCP-7), in one
-- transaction: the pins under the prefix go, in every catalog, and the current
-- ones are written into every catalog of the epoch's tenant ('' for all).
DELETE FROM session_pins WHERE substr(tool, 1, length(:prefix)) = :prefix

-- name: SessionPinsEpoch
INSERT INTO session_pins (tenant, session_id, tool, schema_sha256)
SELECT c.tenant, c.session_id, p.value ->> 'tool', p.value ->> 'sha256'
FROM session_catalogs AS c, json_each(:pins) AS p
WHERE :tenant = '' OR c.tenant = :tenant

