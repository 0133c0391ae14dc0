package postgres

import (
	"context"
	"fmt"

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

	sessionModeGetSQL = `SELECT mode FROM session_modes WHERE session_id = @session_id`

	sessionModeSetSQL = `
INSERT INTO session_modes (session_id, tenant, mode, updated_at)
VALUES (@session_id, @tenant, @mode, now())
ON CONFLICT (session_id) DO UPDATE SET tenant = excluded.tenant, mode = excluded.mode, updated_at = excluded.updated_at`
)

var (
	invocationList = compile(invocationListSQL, "after_id", "tenant", "session_id", "awaiting", "lim")
	sessionModeGet = compile(sessionModeGetSQL, "session_id")
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

func (s *Store) SessionModeGet(ctx context.Context, sessionID string) (string, error) {
	var mode string
	err := s.queryRow(ctx, sessionModeGet, sessionID).Scan(&mode)
	return mode, err
}

func (s *Store) SessionModeSet(ctx context.Context, tenant, sessionID, mode string) error {
	if sessionID == "" || mode == "" {
		return fmt.Errorf("%w: a session mode needs a session id and a mode", store.ErrInvalid)
	}
	_, err := s.exec(ctx, sessionModeSet, sessionID, tenant, mode)
	return err
}
