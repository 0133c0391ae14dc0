package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// MCPSession is one Streamable HTTP session of a session-based MCP revision
// (2025-11-25 and earlier) as the store keeps it (SES-1, issue 16): what any replica
// needs to serve a request of it that it never saw the initialize of. Its pinned
// catalog and mode are keyed by (Tenant, ID) in the session tables already.
type MCPSession struct {
	ID     string // the Mcp-Session-Id
	Tenant string // the owner: only its principals may use the session
	// UserID is the verified token's user the session was opened with ("" without
	// authentication): as the go-sdk does, a request of another user is refused.
	UserID          string
	ProtocolVersion string
	// State is the go-sdk's ServerSessionState as JSON: the initialize parameters
	// (capabilities, client info), the negotiated version, the log level.
	State      json.RawMessage
	CreatedAt  time.Time // set by the store (database clock)
	LastSeenAt time.Time // set by the store (database clock)
}

// Validate reports whether s can be recorded (ErrInvalid if not).
func (s MCPSession) Validate() error {
	if s.ID == "" || s.Tenant == "" || len(s.State) == 0 || !json.Valid(s.State) {
		return fmt.Errorf("%w: an MCP session needs an id, a tenant and its state as JSON", ErrInvalid)
	}
	return nil
}

// MCPSessions is the store of MCP sessions (migration 009), a role of its own beside
// Store: both drivers implement it. Every method is one statement.
type MCPSessions interface {
	// MCPSessionCreate records a new session, its CreatedAt and LastSeenAt the database
	// clock. ErrConflict if the id is taken (live, ended or expired: ids are never
	// reused); ErrInvalid for a session that does not validate.
	MCPSessionCreate(ctx context.Context, s MCPSession) error
	// MCPSessionGet reads a live session: ErrNotFound if there is none, if it was
	// ended, or, when idle > 0, if it was last seen more than idle ago (database clock).
	MCPSessionGet(ctx context.Context, id string, idle time.Duration) (*MCPSession, error)
	// MCPSessionTouch marks a live session of tenant seen now and, when state is not
	// nil, records it as the session's state. ErrNotFound if tenant has no live
	// session of that id.
	MCPSessionTouch(ctx context.Context, tenant, id string, state json.RawMessage) error
	// MCPSessionEnd ends a live session of tenant (the client's DELETE): every later
	// MCPSessionGet is ErrNotFound. ErrNotFound if tenant has no live session of that id.
	MCPSessionEnd(ctx context.Context, tenant, id string) error
	// MCPCancelRecord records a client's notifications/cancelled for request requestID
	// (its JSON-RPC id, as JSON) of session sessionID, received by a process that does
	// not run that request, for the one that does (MCPCancelsSince); cancellations
	// older than MCPCancelRetention are forgotten. One commit. ErrInvalid for an empty
	// session or request id.
	MCPCancelRecord(ctx context.Context, sessionID, requestID string) error
	// MCPCancelsSince lists the cancellations recorded after afterID and at most maxAge
	// ago (database clock), in id order, at most limit (<= 0: no limit). It reads only.
	MCPCancelsSince(ctx context.Context, afterID int64, maxAge time.Duration, limit int) ([]MCPCancel, error)
}

// MCPCancel is one recorded notifications/cancelled (MCPSessions.MCPCancelRecord).
type MCPCancel struct {
	ID        int64
	SessionID string
	RequestID string // the JSON-RPC id as JSON: 7 or "7"
}

// MCPCancelRetention is how long a recorded cancellation is kept.
const MCPCancelRetention = time.Hour

// ValidateMCPCancel reports whether a cancellation can be recorded (ErrInvalid if not).
func ValidateMCPCancel(sessionID, requestID string) error {
	if sessionID == "" || requestID == "" || !json.Valid([]byte(requestID)) {
		return fmt.Errorf("%w: a cancellation needs a session id and a request id as JSON", ErrInvalid)
	}
	return nil
}

// Tasks is the store role of the Tasks extension (io.modelcontextprotocol/tasks,
// issue 16): a task is an invocation row, read with InvocationGet; what only a task
// needs is here. Both drivers implement it.
type Tasks interface {
	// InvocationCancelPending settles a PENDING row of tenant as s without running it
	// (a held call, or one waiting for its retry, cancelled by its client) and returns
	// the row after; audit, when not nil, is appended in the same transaction (its
	// Tenant must be tenant). A row that is no longer PENDING is not changed:
	// ErrConflict, and the row as it is. ErrNotFound if tenant has no row of that id;
	// ErrInvalid if s is not terminal or audit is another tenant's.
	InvocationCancelPending(ctx context.Context, tenant string, id int64, s Settlement, audit *AuditEntry) (*Invocation, error)
}
