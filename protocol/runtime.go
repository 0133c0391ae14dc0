package protocol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// SessionModes persists each session's current mode (WF-4), keyed by (tenant, session
// id) (SES-1): a session id another tenant also uses is another session, whose mode
// this one's dispatch never moves. store.Store satisfies it.
type SessionModes interface {
	// SessionModeGet returns the current mode of tenant's session; store.ErrNotFound if
	// none was set.
	SessionModeGet(ctx context.Context, tenant, sessionID string) (string, error)
	// SessionModeSet records the session's current mode (insert or update), one commit.
	SessionModeSet(ctx context.Context, tenant, sessionID, mode string) error
}

// Config assembles a [Runtime].
type Config struct {
	// Protocol is the loaded protocol. Required.
	Protocol *Protocol
	// PinnedMode is the one mode this server serves (--mode), "" to serve them all. A
	// pinned runtime never reads or writes session modes.
	PinnedMode string
	// Sessions persists current_mode. Required unless PinnedMode is set.
	Sessions SessionModes
	// Audit receives dispatch_request entries. Required.
	Audit  AuditLog
	Logger *slog.Logger
}

// Runtime is one protocol served by one server: the pipeline's ModeResolver, the
// exposure filter of tools/list, and the dispatcher of protocol.dispatch. It keeps no
// session state in memory, so any number of workers can share a store.
type Runtime struct {
	proto    *Protocol
	pinned   string
	sessions SessionModes
	audit    AuditLog
	log      *slog.Logger
}

var _ runtime.ModeResolver = (*Runtime)(nil)

// New returns the runtime of cfg.
func New(cfg Config) (*Runtime, error) {
	if cfg.Protocol == nil {
		return nil, errors.New("protocol: runtime needs a loaded protocol")
	}
	if cfg.Audit == nil {
		return nil, errors.New("protocol: runtime needs an audit log")
	}
	if cfg.PinnedMode != "" && !cfg.Protocol.HasMode(cfg.PinnedMode) {
		return nil, fmt.Errorf("protocol: %s: pinned %w %q", cfg.Protocol.name, ErrUnknownMode, cfg.PinnedMode)
	}
	if cfg.PinnedMode == "" && cfg.Sessions == nil {
		return nil, errors.New("protocol: a runtime that serves every mode needs session modes")
	}
	r := &Runtime{proto: cfg.Protocol, pinned: cfg.PinnedMode, sessions: cfg.Sessions, audit: cfg.Audit, log: logger(cfg.Logger)}
	for _, m := range r.proto.modes {
		if cfg.PinnedMode == "" && !r.proto.Holds(m.name, DispatchTool) {
			r.log.Info("protocol mode is terminal: it does not list protocol.dispatch", "protocol", r.proto.name, "mode", m.name)
		}
	}
	return r, nil
}

// Protocol is the protocol served.
func (r *Runtime) Protocol() *Protocol { return r.proto }

// PinnedMode is the mode this server is pinned to, "" when it serves every mode.
func (r *Runtime) PinnedMode() string { return r.pinned }

// Mode is the active mode (WF-4) of tenant's session: the pinned mode; else the
// session's persisted current_mode; else the protocol's initial_mode. A persisted mode
// the protocol does not declare falls back to initial_mode (logged). The error is the
// store's.
func (r *Runtime) Mode(ctx context.Context, tenant, sessionID string) (string, error) {
	if r.pinned != "" {
		return r.pinned, nil
	}
	if sessionID == "" {
		return r.proto.initial, nil
	}
	m, err := r.sessions.SessionModeGet(ctx, tenant, sessionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return r.proto.initial, nil
	case err != nil:
		return "", fmt.Errorf("protocol: current mode of session %s: %w", sessionID, err)
	case !r.proto.HasMode(m):
		r.log.Warn("session's current mode is not in the protocol; using the initial mode",
			"protocol", r.proto.name, "session_id", sessionID, "mode", m, "initial_mode", r.proto.initial)
		return r.proto.initial, nil
	}
	return m, nil
}

// ActiveMode implements runtime.ModeResolver for step 6 (and the mode recorded on the
// invocation row, WF-5): the active mode of tenant's session and whether it holds tool.
func (r *Runtime) ActiveMode(ctx context.Context, tenant, sessionID, tool string) (string, bool, error) {
	m, err := r.Mode(ctx, tenant, sessionID)
	if err != nil {
		return "", false, err
	}
	return m, r.proto.Holds(m, tool), nil
}

// Exposed reports whether the active mode of tenant's session exposes tool (WF-3).
func (r *Runtime) Exposed(ctx context.Context, tenant, sessionID, tool string) (bool, error) {
	_, in, err := r.ActiveMode(ctx, tenant, sessionID, tool)
	return in, err
}

// ToolsFor filters all, keeping order, to the tools the active mode of tenant's
// session exposes: what tools/list shows (MCP-9). The active mode is resolved once.
func (r *Runtime) ToolsFor(ctx context.Context, tenant, sessionID string, all []string) ([]string, error) {
	m, err := r.Mode(ctx, tenant, sessionID)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(all))
	for _, t := range all {
		if r.proto.Holds(m, t) {
			out = append(out, t)
		}
	}
	return out, nil
}
