package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/toolgen/toolgen/runtime/store"
)

var (
	sessionClaimSQL         = queries.Get("SessionClaim")
	sessionOwnerSQL         = queries.Get("SessionOwner")
	sessionCatalogInsertSQL = queries.Get("SessionCatalogInsert")
	sessionPinsInsertSQL    = queries.Get("SessionPinsInsert")
	sessionPinsSQL          = queries.Get("SessionPins")
	sessionPinsDeleteSQL    = queries.Get("SessionPinsDelete")
	sessionPinsEpochSQL     = queries.Get("SessionPinsEpoch")
)

// sessionWriteStmts and sessionReadStmts are the session statements, prepared with
// the others (writeStmts, readStmts).
type sessionWriteStmts struct {
	claim, catalogInsert, pinsInsert, pinsDelete, pinsEpoch *sql.Stmt
}

type sessionReadStmts struct {
	owner, pins *sql.Stmt
}

func (s *Store) SessionModeGet(ctx context.Context, tenant, sessionID string) (string, error) {
	var mode string
	err := s.r.sessionModeGet.QueryRowContext(ctx, sql.Named("tenant", tenant), sql.Named("session_id", sessionID)).Scan(&mode)
	return mode, notFound(err)
}

func (s *Store) SessionModeSet(ctx context.Context, tenant, sessionID, mode string) error {
	if sessionID == "" || mode == "" {
		return fmt.Errorf("%w: a session mode needs a session id and a mode", store.ErrInvalid)
	}
	_, err := s.w.sessionModeSet.ExecContext(ctx, sql.Named("session_id", sessionID), sql.Named("tenant", tenant), sql.Named("mode", mode))
	return mapErr(err)
}

// SessionClaim reads the owner first: a session in use is claimed once and read on
// every later request, so almost every call is one read and no commit.
func (s *Store) SessionClaim(ctx context.Context, tenant, sessionID string) (bool, error) {
	if sessionID == "" {
		return false, fmt.Errorf("%w: a session claim needs a session id", store.ErrInvalid)
	}
	owner, err := s.sessionOwner(ctx, sessionID)
	if err == nil {
		return owner == tenant, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	if _, err := s.w.session.claim.ExecContext(ctx, sql.Named("session_id", sessionID), sql.Named("tenant", tenant)); err != nil {
		return false, mapErr(err)
	}
	// Committed (ours or a concurrent claimer's, which the insert waited for): a new
	// read sees the owner.
	owner, err = s.sessionOwner(ctx, sessionID)
	if err != nil {
		return false, err
	}
	return owner == tenant, nil
}

func (s *Store) sessionOwner(ctx context.Context, sessionID string) (string, error) {
	var owner string
	err := s.r.session.owner.QueryRowContext(ctx, sql.Named("session_id", sessionID)).Scan(&owner)
	return owner, notFound(err)
}

func (s *Store) SessionPinsGet(ctx context.Context, tenant, sessionID string) ([]store.ToolPin, bool, error) {
	rows, err := s.r.session.pins.QueryContext(ctx, sql.Named("tenant", tenant), sql.Named("session_id", sessionID))
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var pins []store.ToolPin
	pinned := false
	for rows.Next() {
		var tool, sha sql.NullString
		if err := rows.Scan(&tool, &sha); err != nil {
			return nil, false, err
		}
		pinned = true
		if tool.Valid {
			pins = append(pins, store.ToolPin{Tool: tool.String, SHA256: sha.String})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
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
	inserted := false
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		n, err := execRows(ctx, tx.StmtContext(ctx, s.w.session.catalogInsert), sql.Named("tenant", tenant), sql.Named("session_id", sessionID))
		if err != nil || n == 0 {
			return err
		}
		inserted = true
		_, err = execRows(ctx, tx.StmtContext(ctx, s.w.session.pinsInsert), sql.Named("tenant", tenant),
			sql.Named("session_id", sessionID), sql.Named("pins", store.PinsJSON(pins)))
		return err
	})
	if err != nil {
		return nil, err
	}
	if !inserted {
		// Another writer pinned first, and committed (writes are serialized): its
		// catalog is the session's.
		got, _, err := s.SessionPinsGet(ctx, tenant, sessionID)
		return got, err
	}
	return store.SortedPins(pins), nil
}

// SessionMint writes the session's three rows in one transaction on the relaxed
// connection (synchronous=NORMAL), while it holds the writer's, as a record-once row
// is written (records.go): no fsync, and no read before or after.
func (s *Store) SessionMint(ctx context.Context, tenant, sessionID string, pins []store.ToolPin) error {
	if sessionID == "" {
		return fmt.Errorf("%w: a minted session needs a session id", store.ErrInvalid)
	}
	if err := store.ValidatePins(pins); err != nil {
		return err
	}
	release, err := s.holdRelaxed(ctx)
	if err != nil {
		return err
	}
	defer release()
	m := &s.relaxedMint
	return s.relaxedTx(ctx, func(tx *sql.Tx) error {
		id, owner := sql.Named("session_id", sessionID), sql.Named("tenant", tenant)
		for _, stmt := range []*sql.Stmt{m.claim, m.catalogInsert} {
			if n, err := execRows(ctx, tx.StmtContext(ctx, stmt), id, owner); err != nil || n == 0 {
				return cmp.Or(err, fmt.Errorf("%w: session %q is not new", store.ErrConflict, sessionID))
			}
		}
		_, err := execRows(ctx, tx.StmtContext(ctx, m.pinsInsert), owner, id, sql.Named("pins", store.PinsJSON(pins)))
		return err
	})
}

func (s *Store) SessionPinsForceEpoch(ctx context.Context, e store.PinEpoch) (int, error) {
	if err := e.Validate(); err != nil {
		return 0, err
	}
	var catalogs int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := execRows(ctx, tx.StmtContext(ctx, s.w.session.pinsDelete), sql.Named("prefix", e.Prefix)); err != nil {
			return err
		}
		if len(e.Pins) == 0 {
			return nil
		}
		n, err := execRows(ctx, tx.StmtContext(ctx, s.w.session.pinsEpoch), sql.Named("tenant", e.Tenant), sql.Named("pins", store.PinsJSON(e.Pins)))
		catalogs = n / int64(len(e.Pins))
		return err
	})
	return int(catalogs), err
}
