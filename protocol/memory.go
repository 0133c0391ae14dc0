package protocol

import (
	"context"
	"sync"

	"github.com/toolgen/toolgen/runtime/store"
)

// MemorySessionModes is an in-memory [SessionModes] for tests and examples: it
// persists nothing, so a host that can restart or runs several workers uses its store.
type MemorySessionModes struct {
	mu    sync.Mutex
	modes map[[2]string]string // (tenant, session id) -> mode
	sets  int                  // SessionModeSet calls, so a test can tell that nothing moved
}

// SessionModeGet returns the mode of tenant's session; store.ErrNotFound if none was set.
func (m *MemorySessionModes) SessionModeGet(_ context.Context, tenant, sessionID string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mode, ok := m.modes[[2]string{tenant, sessionID}]
	if !ok {
		return "", store.ErrNotFound
	}
	return mode, nil
}

// SessionModeSet records the mode of tenant's session.
func (m *MemorySessionModes) SessionModeSet(_ context.Context, tenant, sessionID, mode string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.modes == nil {
		m.modes = map[[2]string]string{}
	}
	m.modes[[2]string{tenant, sessionID}] = mode
	m.sets++
	return nil
}

// Sets is the number of SessionModeSet calls so far.
func (m *MemorySessionModes) Sets() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sets
}
