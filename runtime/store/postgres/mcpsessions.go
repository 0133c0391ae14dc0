package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// MCP sessions (migration 009) and task cancellation (issue 16): store.MCPSessions and
// store.Tasks.

var (
	_ store.MCPSessions = (*Store)(nil)
	_ store.Tasks       = (*Store)(nil)

	mcpSessionCreate = compile(queries.Get("MCPSessionCreate"),
		"session_id", "tenant", "user_id", "protocol_version", "state")
	mcpSessionGet           = compile(queries.Get("MCPSessionGet"), "session_id", "idle_us")
	mcpSessionTouch         = compile(queries.Get("MCPSessionTouch"), "session_id", "tenant", "state")
	mcpSessionEnd           = compile(queries.Get("MCPSessionEnd"), "session_id", "tenant")
	mcpCancelRecord         = compile(queries.Get("MCPCancelRecord"), "retention_us", "session_id", "request_id")
	mcpCancelsSince         = compile(queries.Get("MCPCancelsSince"), "after_id", "max_age_us", "limit")
	invocationCancelPending = compile(queries.Get("InvocationCancelPending"),
		append([]string{"id", "tenant", "status", "reason_code", "outcome", "with_audit"}, auditParams...)...)
)

func (s *Store) MCPSessionCreate(ctx context.Context, m store.MCPSession) error {
	if err := m.Validate(); err != nil {
		return err
	}
	_, err := s.exec(ctx, mcpSessionCreate, m.ID, m.Tenant, m.UserID, m.ProtocolVersion, string(m.State))
	return err // a taken id is a unique violation: ErrConflict
}

func (s *Store) MCPSessionGet(ctx context.Context, id string, idle time.Duration) (*store.MCPSession, error) {
	var m store.MCPSession
	var state []byte
	err := s.queryRow(ctx, mcpSessionGet, id, idle.Microseconds()).
		Scan(&m.ID, &m.Tenant, &m.UserID, &m.ProtocolVersion, &state, &m.CreatedAt, &m.LastSeenAt)
	if err != nil {
		return nil, err
	}
	m.State = json.RawMessage(state)
	m.CreatedAt, m.LastSeenAt = m.CreatedAt.UTC(), m.LastSeenAt.UTC()
	return &m, nil
}

func (s *Store) MCPSessionTouch(ctx context.Context, tenant, id string, state json.RawMessage) error {
	if len(state) > 0 && !json.Valid(state) {
		return fmt.Errorf("%w: an MCP session's state must be JSON", store.ErrInvalid)
	}
	n, err := s.exec(ctx, mcpSessionTouch, id, tenant, nullJSON(state))
	return oneSession(n, err, id)
}

func (s *Store) MCPSessionEnd(ctx context.Context, tenant, id string) error {
	n, err := s.exec(ctx, mcpSessionEnd, id, tenant)
	return oneSession(n, err, id)
}

func oneSession(n int64, err error, id string) error {
	if err == nil && n == 0 {
		return fmt.Errorf("%w: no live MCP session %q of the tenant", store.ErrNotFound, id)
	}
	return err
}

func (s *Store) InvocationCancelPending(ctx context.Context, tenant string, id int64, st store.Settlement, audit *store.AuditEntry) (*store.Invocation, error) {
	if err := st.Validate(); err != nil {
		return nil, err
	}
	if audit != nil && audit.Tenant != tenant {
		return nil, fmt.Errorf("%w: the audit entry of tenant %q for a row of tenant %q", store.ErrInvalid, audit.Tenant, tenant)
	}
	args := append([]any{id, tenant, string(st.Status), st.ReasonCode, nullJSON(st.Outcome)}, auditArgs(audit)...)
	inv, err := s.invocation(ctx, invocationCancelPending, args...)
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
	_, err := s.exec(ctx, mcpCancelRecord, store.MCPCancelRetention.Microseconds(), sessionID, requestID)
	return err
}

func (s *Store) MCPCancelsSince(ctx context.Context, afterID int64, maxAge time.Duration, limit int) ([]store.MCPCancel, error) {
	rows, err := s.pool.Query(ctx, mcpCancelsSince.sql, afterID, maxAge.Microseconds(), sqlLimit(limit))
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []store.MCPCancel
	for rows.Next() {
		var c store.MCPCancel
		if err := rows.Scan(&c.ID, &c.SessionID, &c.RequestID); err != nil {
			return nil, mapErr(err)
		}
		out = append(out, c)
	}
	return out, mapErr(rows.Err())
}
