package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// MCP sessions (migration 009) and task cancellation (issue 16): store.MCPSessions and
// store.Tasks.

var (
	_                          store.MCPSessions = (*Store)(nil)
	_                          store.Tasks       = (*Store)(nil)
	mcpSessionCreateSQL                          = queries.Get("MCPSessionCreate")
	mcpSessionGetSQL                             = queries.Get("MCPSessionGet")
	mcpSessionTouchSQL                           = queries.Get("MCPSessionTouch")
	mcpSessionEndSQL                             = queries.Get("MCPSessionEnd")
	mcpCancelRecordSQL                           = queries.Get("MCPCancelRecord")
	mcpCancelForgetSQL                           = queries.Get("MCPCancelForget")
	mcpCancelsSinceSQL                           = queries.Get("MCPCancelsSince")
	invocationCancelPendingSQL                   = queries.Get("InvocationCancelPending")
)

func (s *Store) MCPSessionCreate(ctx context.Context, m store.MCPSession) error {
	if err := m.Validate(); err != nil {
		return err
	}
	_, err := s.write.ExecContext(ctx, s.clock.sql(mcpSessionCreateSQL), sql.Named("session_id", m.ID), sql.Named("tenant", m.Tenant),
		sql.Named("user_id", m.UserID), sql.Named("protocol_version", m.ProtocolVersion), sql.Named("state", string(m.State)))
	return mapErr(err) // a taken id is a unique violation: ErrConflict
}

func (s *Store) MCPSessionGet(ctx context.Context, id string, idle time.Duration) (*store.MCPSession, error) {
	var m store.MCPSession
	var state string
	var created, seen int64
	err := s.read.QueryRowContext(ctx, s.clock.sql(mcpSessionGetSQL), sql.Named("session_id", id), sql.Named("idle_us", idle.Microseconds())).
		Scan(&m.ID, &m.Tenant, &m.UserID, &m.ProtocolVersion, &state, &created, &seen)
	if err != nil {
		return nil, notFound(err)
	}
	m.State = json.RawMessage(state)
	m.CreatedAt, m.LastSeenAt = fromMicros(created), fromMicros(seen)
	return &m, nil
}

func (s *Store) MCPSessionTouch(ctx context.Context, tenant, id string, state json.RawMessage) error {
	if len(state) > 0 && !json.Valid(state) {
		return fmt.Errorf("%w: an MCP session's state must be JSON", store.ErrInvalid)
	}
	res, err := s.write.ExecContext(ctx, s.clock.sql(mcpSessionTouchSQL), sql.Named("session_id", id), sql.Named("tenant", tenant),
		sql.Named("state", nullJSON(state)))
	return oneRow(res, err, id)
}

func (s *Store) MCPSessionEnd(ctx context.Context, tenant, id string) error {
	res, err := s.write.ExecContext(ctx, s.clock.sql(mcpSessionEndSQL), sql.Named("session_id", id), sql.Named("tenant", tenant))
	return oneRow(res, err, id)
}

func oneRow(res sql.Result, err error, id string) error {
	if err != nil {
		return mapErr(err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return errors.Join(fmt.Errorf("%w: no live MCP session %q of the tenant", store.ErrNotFound, id), err)
	}
	return nil
}

func (s *Store) InvocationCancelPending(ctx context.Context, tenant string, id int64, st store.Settlement, audit *store.AuditEntry) (*store.Invocation, error) {
	if err := st.Validate(); err != nil {
		return nil, err
	}
	if audit != nil && audit.Tenant != tenant {
		return nil, fmt.Errorf("%w: the audit entry of tenant %q for a row of tenant %q", store.ErrInvalid, audit.Tenant, tenant)
	}
	var inv *store.Invocation
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		inv, err = scanInvocation(tx.QueryRowContext(ctx, s.clock.sql(invocationCancelPendingSQL), sql.Named("id", id), sql.Named("tenant", tenant),
			sql.Named("status", string(st.Status)), sql.Named("reason_code", st.ReasonCode), sql.Named("outcome", nullJSON(st.Outcome))))
		if err == nil && audit != nil {
			_, err = s.auditAppendTx(ctx, tx, *audit)
		}
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		return inv, err
	}
	cur, gerr := s.InvocationGet(ctx, id)
	switch {
	case errors.Is(gerr, store.ErrNotFound) || (gerr == nil && cur.Tenant != tenant):
		return nil, fmt.Errorf("%w: no invocation %d in tenant %q", store.ErrNotFound, id, tenant)
	case gerr != nil:
		return nil, gerr
	}
	return cur, fmt.Errorf("%w: invocation %d is %s, not PENDING", store.ErrConflict, id, cur.Status)
}

func (s *Store) MCPCancelRecord(ctx context.Context, sessionID, requestID string) error {
	if err := store.ValidateMCPCancel(sessionID, requestID); err != nil {
		return err
	}
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.clock.sql(mcpCancelForgetSQL), sql.Named("retention_us", store.MCPCancelRetention.Microseconds())); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, s.clock.sql(mcpCancelRecordSQL), sql.Named("session_id", sessionID), sql.Named("request_id", requestID))
		return err
	})
}

func (s *Store) MCPCancelsSince(ctx context.Context, afterID int64, maxAge time.Duration, limit int) ([]store.MCPCancel, error) {
	rows, err := s.read.QueryContext(ctx, s.clock.sql(mcpCancelsSinceSQL), sql.Named("after_id", afterID),
		sql.Named("max_age_us", maxAge.Microseconds()), sql.Named("limit", sqlLimit(limit)))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.MCPCancel
	for rows.Next() {
		var c store.MCPCancel
		if err := rows.Scan(&c.ID, &c.SessionID, &c.RequestID); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
