package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/toolgen/toolgen/runtime/store"
)

var (
	invocationListSQL = queries.Get("InvocationList")
	sessionModeGetSQL = queries.Get("SessionModeGet")
	sessionModeSetSQL = queries.Get("SessionModeSet")
	invocationList    = compile(invocationListSQL, "after_id", "tenant", "session_id", "awaiting", "lim")
	sessionModeGet    = compile(sessionModeGetSQL, "tenant", "session_id")
	sessionModeSet    = compile(sessionModeSetSQL, "session_id", "tenant", "mode")
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

var (
	sessionClaimSQL         = queries.Get("SessionClaim")
	sessionOwnerSQL         = queries.Get("SessionOwner")
	sessionCatalogInsertSQL = queries.Get("SessionCatalogInsert")
	sessionPinsInsertSQL    = queries.Get("SessionPinsInsert")
	sessionPinsSQL          = queries.Get("SessionPins")
	sessionMintSQL          = queries.Get("SessionMint")
	sessionPinsDeleteSQL    = queries.Get("SessionPinsDelete")
	sessionPinsEpochSQL     = queries.Get("SessionPinsEpoch")
	sessionClaim            = compile(sessionClaimSQL, "session_id", "tenant")
	sessionOwner            = compile(sessionOwnerSQL, "session_id")
	sessionCatalogInsert    = compile(sessionCatalogInsertSQL, "tenant", "session_id")
	sessionPinsInsert       = compile(sessionPinsInsertSQL, "tenant", "session_id", "pins")
	sessionPins             = compile(sessionPinsSQL, "tenant", "session_id")
	sessionMint             = compile(sessionMintSQL, "session_id", "tenant", "pins")
	sessionPinsDelete       = compile(sessionPinsDeleteSQL, "prefix")
	sessionPinsEpoch        = compile(sessionPinsEpochSQL, "tenant", "pins")
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

// SessionMint is one relaxed autocommit statement (SessionMint in sql/sessions.sql).
func (s *Store) SessionMint(ctx context.Context, tenant, sessionID string, pins []store.ToolPin) error {
	if sessionID == "" {
		return fmt.Errorf("%w: a minted session needs a session id", store.ErrInvalid)
	}
	if err := store.ValidatePins(pins); err != nil {
		return err
	}
	var catalogs int64
	if err := s.queryRow(ctx, sessionMint, sessionID, tenant, store.PinsJSON(pins)).Scan(&catalogs); err != nil {
		return err
	}
	if catalogs != 1 {
		return fmt.Errorf("%w: session %q is not new", store.ErrConflict, sessionID)
	}
	return nil
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
