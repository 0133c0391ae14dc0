package protocol

import (
	"context"
	"errors"
	"log/slog"

	"github.com/toolgen/toolgen/runtime/store"
)

// Audit entry kinds written by this package and by the loader (WF-5).
const (
	KindWF1Violation    = "wf1_violation"
	KindDispatchRequest = "dispatch_request"
)

// AuditLog is where the wf1_violation and dispatch_request entries go. store.Store
// satisfies it.
type AuditLog interface {
	AuditAppend(ctx context.Context, e store.AuditEntry) (int64, error)
}

var _ AuditLog = store.Store(nil)

// ErrUnknownMode is returned when a pinned mode is not one of the protocol's modes.
var ErrUnknownMode = errors.New("unknown mode")

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
