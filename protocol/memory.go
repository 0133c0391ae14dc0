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
	modes map[string]string
	sets  int // SessionModeSet calls, so a test can tell that nothing moved
}

// SessionModeGet returns the session's mode; store.ErrNotFound if none was set.
func (m *MemorySessionModes) SessionModeGet(_ context.Context, sessionID string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mode, ok := m.modes[sessionID]
	if !ok {
		return "", store.ErrNotFound
	}
	return mode, nil
}

// SessionModeSet records the session's mode.
func (m *MemorySessionModes) SessionModeSet(_ context.Context, _, sessionID, mode string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.modes == nil {
		m.modes = map[string]string{}
	}
	m.modes[sessionID] = mode
	m.sets++
	return nil
}

// Sets is the number of SessionModeSet calls so far.
func (m *MemorySessionModes) Sets() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sets
}
