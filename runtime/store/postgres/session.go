package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/toolgen/toolgen/runtime/store"
)

// The listing and session-mode statements: not on a call's hot path.
const (
	// invocationListSQL is store.InvocationFilter: every condition is off when its
	// parameter is the zero value.
	invocationListSQL = `
SELECT ` + invocationColumns + ` FROM tool_invocations
WHERE id > @after_id AND (@tenant::text = '' OR tenant = @tenant) AND (@session_id::text = '' OR session_id = @session_id)
	AND (NOT @awaiting::boolean OR (status = 'PENDING' AND decision = 'needs_approval'
		AND NOT EXISTS (SELECT 1 FROM approvals a WHERE a.key = tool_invocations.key)))
ORDER BY id
LIMIT @lim`

	// The session's mode is keyed by (tenant, session id) (migration 005): another
	// tenant's mode of the same id is another row.
	sessionModeGetSQL = `SELECT mode FROM session_modes WHERE tenant = @tenant AND session_id = @session_id`

	sessionModeSetSQL = `
INSERT INTO session_modes (tenant, session_id, mode, updated_at)
VALUES (@tenant, @session_id, @mode, now())
ON CONFLICT (tenant, session_id) DO UPDATE SET mode = excluded.mode, updated_at = excluded.updated_at`
)

var (
	invocationList = compile(invocationListSQL, "after_id", "tenant", "session_id", "awaiting", "lim")
	sessionModeGet = compile(sessionModeGetSQL, "tenant", "session_id")
	sessionModeSet = compile(sessionModeSetSQL, "session_id", "tenant", "mode")
)

func (s *Store) InvocationList(ctx context.Context, f store.InvocationFilter) ([]*store.Invocation, error) {
	var limit *int64 // NULL: no limit
	if f.Limit > 0 {
		l := int64(f.Limit)
		limit = &l
	}
	return s.invocations(ctx, invocationList, f.AfterID, f.Tenant, f.SessionID, f.AwaitingApproval, limit)
}

func (s *Store) SessionModeGet(ctx context.Context, tenant, sessionID string) (string, error) {
	var mode string
	err := s.queryRow(ctx, sessionModeGet, tenant, sessionID).Scan(&mode)
	return mode, err
}

func (s *Store) SessionModeSet(ctx context.Context, tenant, sessionID, mode string) error {
	if sessionID == "" || mode == "" {
		return fmt.Errorf("%w: a session mode needs a session id and a mode", store.ErrInvalid)
	}
	_, err := s.exec(ctx, sessionModeSet, sessionID, tenant, mode)
	return err
}

// Session ownership and pinned catalogs (SES-1, migration 005).
const (
	// sessionClaimSQL records the first owner of a session id; a later claim, of any
	// tenant, changes nothing. A concurrent claimer's insert waits for this one to
	// commit, so the read after it sees the winner.
	sessionClaimSQL = `INSERT INTO sessions (session_id, tenant) VALUES (@session_id, @tenant) ON CONFLICT (session_id) DO NOTHING`
	sessionOwnerSQL = `SELECT tenant FROM sessions WHERE session_id = @session_id`

	sessionCatalogInsertSQL = `
INSERT INTO session_catalogs (tenant, session_id) VALUES (@tenant, @session_id)
ON CONFLICT (tenant, session_id) DO NOTHING`
	sessionPinsInsertSQL = `
INSERT INTO session_pins (tenant, session_id, tool, schema_sha256)
SELECT @tenant, @session_id, p.tool, p.sha256 FROM jsonb_to_recordset(@pins::jsonb) AS p(tool text, sha256 text)`
	// sessionPinsSQL reads a catalog in one statement (one snapshot): no row is "not
	// pinned", one row with a NULL tool is the empty catalog.
	sessionPinsSQL = `
SELECT p.tool, p.schema_sha256 FROM session_catalogs AS c
LEFT JOIN session_pins AS p ON p.tenant = c.tenant AND p.session_id = c.session_id
WHERE c.tenant = @tenant AND c.session_id = @session_id
ORDER BY p.tool COLLATE "C"`

	// A forced epoch (MCP-7), in one transaction: the pins under the prefix go, in
	// every catalog, and the current ones are written into every catalog of the
	// epoch's tenant ('' for all).
	sessionPinsDeleteSQL = `DELETE FROM session_pins WHERE left(tool, length(@prefix)) = @prefix`
	sessionPinsEpochSQL  = `
INSERT INTO session_pins (tenant, session_id, tool, schema_sha256)
SELECT c.tenant, c.session_id, p.tool, p.sha256
FROM session_catalogs AS c, jsonb_to_recordset(@pins::jsonb) AS p(tool text, sha256 text)
WHERE @tenant = '' OR c.tenant = @tenant`
)

var (
	sessionClaim         = compile(sessionClaimSQL, "session_id", "tenant")
	sessionOwner         = compile(sessionOwnerSQL, "session_id")
	sessionCatalogInsert = compile(sessionCatalogInsertSQL, "tenant", "session_id")
	sessionPinsInsert    = compile(sessionPinsInsertSQL, "tenant", "session_id", "pins")
	sessionPins          = compile(sessionPinsSQL, "tenant", "session_id")
	sessionPinsDelete    = compile(sessionPinsDeleteSQL, "prefix")
	sessionPinsEpoch     = compile(sessionPinsEpochSQL, "tenant", "pins")
)

// SessionClaim reads the owner first: a session in use is claimed once and read on
// every later request, so almost every call is one read and no commit.
func (s *Store) SessionClaim(ctx context.Context, tenant, sessionID string) (bool, error) {
	if sessionID == "" {
		return false, fmt.Errorf("%w: a session claim needs a session id", store.ErrInvalid)
	}
	var owner string
	err := s.queryRow(ctx, sessionOwner, sessionID).Scan(&owner)
	if err == nil {
		return owner == tenant, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	if _, err := s.exec(ctx, sessionClaim, sessionID, tenant); err != nil {
		return false, err
	}
	if err := s.queryRow(ctx, sessionOwner, sessionID).Scan(&owner); err != nil {
		return false, err
	}
	return owner == tenant, nil
}

func (s *Store) SessionPinsGet(ctx context.Context, tenant, sessionID string) ([]store.ToolPin, bool, error) {
	return s.sessionPins(ctx, s.pool, tenant, sessionID)
}

// querier is what sessionPins reads through: the pool, or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func (s *Store) sessionPins(ctx context.Context, q querier, tenant, sessionID string) ([]store.ToolPin, bool, error) {
	rows, err := q.Query(ctx, sessionPins.sql, tenant, sessionID)
	if err != nil {
		return nil, false, mapErr(err)
	}
	defer rows.Close()
	var pins []store.ToolPin
	pinned := false
	for rows.Next() {
		var tool, sha *string
		if err := rows.Scan(&tool, &sha); err != nil {
			return nil, false, mapErr(err)
		}
		pinned = true
		if tool != nil {
			pins = append(pins, store.ToolPin{Tool: *tool, SHA256: *sha})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, false, mapErr(err)
	}
	if pinned && pins == nil {
		pins = []store.ToolPin{}
	}
	return pins, pinned, nil
}

func (s *Store) SessionPinsCreate(ctx context.Context, tenant, sessionID string, pins []store.ToolPin) ([]store.ToolPin, error) {
	if sessionID == "" {
		return nil, fmt.Errorf("%w: pins need a session id", store.ErrInvalid)
	}
	if err := store.ValidatePins(pins); err != nil {
		return nil, err
	}
	var out []store.ToolPin
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, sessionCatalogInsert.sql, tenant, sessionID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			_, err := tx.Exec(ctx, sessionPinsInsert.sql, tenant, sessionID, store.PinsJSON(pins))
			out = store.SortedPins(pins)
			return err
		}
		// Another writer pinned first: the insert waited for it to commit, and this
		// statement's snapshot (READ COMMITTED) sees its catalog.
		out, _, err = s.sessionPins(ctx, tx, tenant, sessionID)
		return err
	})
	if err != nil {
		return nil, mapErr(err)
	}
	return out, nil
}

func (s *Store) SessionPinsForceEpoch(ctx context.Context, e store.PinEpoch) (int, error) {
	if err := e.Validate(); err != nil {
		return 0, err
	}
	var catalogs int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sessionPinsDelete.sql, e.Prefix); err != nil {
			return err
		}
		if len(e.Pins) == 0 {
			return nil
		}
		tag, err := tx.Exec(ctx, sessionPinsEpoch.sql, e.Tenant, store.PinsJSON(e.Pins))
		catalogs = tag.RowsAffected() / int64(len(e.Pins))
		return err
	})
	return int(catalogs), mapErr(err)
}
