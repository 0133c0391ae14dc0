package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// ErrNotImplemented is returned by the MemStore methods the call path never uses.
var ErrNotImplemented = errors.New("bench: MemStore does not implement this method")

// MemStore is an in-memory [store.Store] for measuring the pipeline without a
// database: a map under one mutex. It is correct for the paths a call takes when
// nothing goes wrong — insert (yielding to an existing key), read by key or id, the
// fenced watermark and settle — and nothing else: the breaker always counts zero
// (so it never refuses), leases never expire, and the sweep, approvals, suspension,
// audit, catalog history and events return [ErrNotImplemented]. Rows are kept for
// the life of the store.
type MemStore struct {
	mu     sync.Mutex
	byKey  map[string]*store.Invocation
	byID   map[int64]*store.Invocation
	nextID int64
	pins   map[[2]string][]store.ToolPin // (tenant, session) -> pinned catalog
	// secrets are the deployment secrets (DeploymentSecretGetOrCreate).
	secrets map[string][]byte
}

var _ store.Store = (*MemStore)(nil)

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{byKey: map[string]*store.Invocation{}, byID: map[int64]*store.Invocation{}}
}

// Len is the number of rows.
func (m *MemStore) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byKey)
}

func clone(inv *store.Invocation) *store.Invocation {
	c := *inv
	return &c
}

func (m *MemStore) InvocationInsert(_ context.Context, p store.InsertParams) (*store.Invocation, bool, error) {
	if err := p.Validate(); err != nil {
		return nil, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if inv, ok := m.byKey[p.Key]; ok {
		return clone(inv), false, nil
	}
	now := time.Now().UTC()
	m.nextID++
	inv := &store.Invocation{
		ID: m.nextID, Key: p.Key, Tenant: p.Tenant, Principal: p.Principal, SessionID: p.SessionID,
		RunID: p.RunID, Step: p.Step, CallID: p.CallID, Tool: p.Tool, ToolVersion: p.ToolVersion, ToolSHA256: p.ToolSHA256,
		Idempotency: p.Idempotency, IdempotentWhen: p.IdempotentWhen, Args: p.Args, ArgsHash: p.ArgsHash,
		OriginTrust: p.OriginTrust, ArgumentTrust: p.ArgumentTrust, Mode: p.Mode, Decision: p.Decision,
		Status: p.Status(), ReasonCode: p.Settlement().ReasonCode, Outcome: p.Settlement().Outcome,
		CreatedAt: now, UpdatedAt: now, Workspace: p.Workspace,
	}
	if owner, lease := p.Lease(); p.Status() == store.StatusRunning {
		exp := now.Add(lease)
		inv.LeaseOwner, inv.LeaseExpiresAt, inv.Attempt = owner, &exp, p.Attempt()
	}
	m.byKey[p.Key] = inv
	m.byID[inv.ID] = inv
	return clone(inv), true, nil
}

func (m *MemStore) InvocationGet(_ context.Context, id int64) (*store.Invocation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if inv, ok := m.byID[id]; ok {
		return clone(inv), nil
	}
	return nil, store.ErrNotFound
}

func (m *MemStore) InvocationGetByKey(_ context.Context, key string) (*store.Invocation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if inv, ok := m.byKey[key]; ok {
		return clone(inv), nil
	}
	return nil, store.ErrNotFound
}

// fenced returns the row f holds, or ErrLeaseLost. m.mu must be held.
func (m *MemStore) fenced(f store.Fence) (*store.Invocation, error) {
	inv, ok := m.byID[f.ID]
	if !ok || inv.Status != store.StatusRunning || inv.LeaseOwner != f.Owner || inv.Attempt != f.Attempt || inv.SuspendedAt != nil {
		return nil, fmt.Errorf("%w: invocation %d attempt %d of %s", store.ErrLeaseLost, f.ID, f.Attempt, f.Owner)
	}
	return inv, nil
}

func (m *MemStore) InvocationMarkEffectSentIfLeased(_ context.Context, f store.Fence, token string) error {
	if token == "" {
		return fmt.Errorf("%w: watermark without a token", store.ErrInvalid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	inv, err := m.fenced(f)
	if err != nil {
		return err
	}
	if inv.EffectSentAt == nil {
		now := time.Now().UTC()
		inv.EffectSentAt, inv.UpdatedAt = &now, now
	}
	return nil
}

func (m *MemStore) InvocationSettleIfLeased(_ context.Context, f store.Fence, s store.Settlement) error {
	if err := s.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	inv, err := m.fenced(f)
	if err != nil {
		return err
	}
	inv.Status, inv.ReasonCode, inv.Outcome, inv.WatermarkMissing = s.Status, s.ReasonCode, s.Outcome, s.WatermarkMissing
	inv.LeaseExpiresAt, inv.UpdatedAt = nil, time.Now().UTC()
	return nil
}

// InvocationPriorCalls counts nothing, so the breaker never refuses, and every derived
// call is its first; a named call's key is looked up as the drivers do.
func (m *MemStore) InvocationPriorCalls(_ context.Context, p store.PriorCallsParams) (store.PriorCalls, error) {
	if err := p.Validate(); err != nil {
		return store.PriorCalls{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, taken := m.byKey[p.Key]
	return store.PriorCalls{KeyTaken: p.Key != "" && taken}, nil
}

func (m *MemStore) InvocationGetByResumeToken(context.Context, string) (*store.Invocation, error) {
	return nil, store.ErrNotFound
}

func (m *MemStore) InvocationClaimIfPending(context.Context, int64, string, time.Duration) (*store.Invocation, error) {
	return nil, ErrNotImplemented
}

func (m *MemStore) InvocationSuspendIfLeased(context.Context, store.Fence, string, json.RawMessage) error {
	return ErrNotImplemented
}

func (m *MemStore) InvocationResume(context.Context, string, store.Settlement) (*store.Invocation, error) {
	return nil, ErrNotImplemented
}

func (m *MemStore) InvocationRenewLeases(context.Context, string, []int64, time.Duration) (int, error) {
	return 0, nil
}

func (m *MemStore) InvocationSweep(context.Context, store.SweepParams) ([]store.Swept, error) {
	return nil, nil
}

func (m *MemStore) InvocationListRetryable(context.Context, store.RetryableParams) ([]*store.Invocation, error) {
	return nil, nil
}

func (m *MemStore) InvocationUnsuspendDecided(context.Context, store.RetryableParams) ([]*store.Invocation, error) {
	return nil, nil
}

func (m *MemStore) InvocationCountUnclaimable(context.Context, []store.ToolRef, string) (store.Unclaimable, error) {
	return store.Unclaimable{}, nil
}

func (m *MemStore) InvocationListUncertain(context.Context, string) ([]*store.Invocation, error) {
	return nil, nil
}

func (m *MemStore) InvocationResolveUncertain(context.Context, int64, string, string, json.RawMessage, *store.AuditEntry) (*store.Invocation, error) {
	return nil, ErrNotImplemented
}

func (m *MemStore) ApprovalDecide(context.Context, store.Approval, *store.AuditEntry) error {
	return ErrNotImplemented
}

func (m *MemStore) ApprovalGet(context.Context, string) (*store.Approval, error) {
	return nil, store.ErrNotFound
}

func (m *MemStore) AuditAppend(context.Context, store.AuditEntry) (int64, error) {
	return 0, ErrNotImplemented
}

func (m *MemStore) AuditList(context.Context, string, int64, int) ([]store.AuditEntry, error) {
	return nil, nil
}

func (m *MemStore) CatalogHistoryAppend(context.Context, store.CatalogChange) (int64, error) {
	return 0, ErrNotImplemented
}

func (m *MemStore) CatalogHistoryList(context.Context, string) ([]store.CatalogChange, error) {
	return nil, nil
}

func (m *MemStore) EventAppend(context.Context, store.Event) (int64, error) {
	return 0, ErrNotImplemented
}

func (m *MemStore) EventList(context.Context, store.EventFilter) ([]store.Event, error) {
	return nil, nil
}

func (m *MemStore) InvocationList(context.Context, store.InvocationFilter) ([]*store.Invocation, error) {
	return nil, ErrNotImplemented
}

func (m *MemStore) SessionModeGet(context.Context, string, string) (string, error) {
	return "", store.ErrNotFound
}

func (m *MemStore) SessionModeSet(context.Context, string, string, string) error {
	return ErrNotImplemented
}

// SessionClaim: every session is its caller's (the benchmarks have one tenant).
func (m *MemStore) SessionClaim(context.Context, string, string) (bool, error) { return true, nil }

// SessionPinsGet and SessionPinsCreate keep pinned catalogs in memory, first writer
// wins, as the drivers do: every call resolves its tool through its session's pins.
func (m *MemStore) SessionPinsGet(_ context.Context, tenant, sessionID string) ([]store.ToolPin, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pins, ok := m.pins[[2]string{tenant, sessionID}]
	return pins, ok, nil
}

func (m *MemStore) SessionPinsCreate(_ context.Context, tenant, sessionID string, pins []store.ToolPin) ([]store.ToolPin, error) {
	if err := store.ValidatePins(pins); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{tenant, sessionID}
	if got, ok := m.pins[k]; ok {
		return got, nil
	}
	if m.pins == nil {
		m.pins = map[[2]string][]store.ToolPin{}
	}
	m.pins[k] = store.SortedPins(pins)
	return m.pins[k], nil
}

// SessionMint pins a new session's catalog (its owner is the one tenant's).
func (m *MemStore) SessionMint(_ context.Context, tenant, sessionID string, pins []store.ToolPin) error {
	if err := store.ValidatePins(pins); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{tenant, sessionID}
	if _, ok := m.pins[k]; ok {
		return store.ErrConflict
	}
	if m.pins == nil {
		m.pins = map[[2]string][]store.ToolPin{}
	}
	m.pins[k] = store.SortedPins(pins)
	return nil
}

func (m *MemStore) SessionPinsForceEpoch(context.Context, store.PinEpoch) (int, error) {
	return 0, ErrNotImplemented
}

func (m *MemStore) Close() error { return nil }

func (m *MemStore) InvocationReleaseIfLeased(_ context.Context, f store.Fence) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	inv, err := m.fenced(f)
	if err != nil {
		return err
	}
	if inv.EarlierEffectSentAt == nil {
		inv.EarlierEffectSentAt = inv.EffectSentAt
	}
	inv.Status, inv.LeaseOwner, inv.LeaseExpiresAt, inv.EffectSentAt = store.StatusPending, "", nil, nil
	inv.UpdatedAt = time.Now().UTC()
	return nil
}

func (m *MemStore) DeploymentSecretGetOrCreate(_ context.Context, name string, candidate []byte) ([]byte, error) {
	if err := store.ValidateDeploymentSecret(name, candidate); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.secrets == nil {
		m.secrets = map[string][]byte{}
	}
	if s, ok := m.secrets[name]; ok {
		return s, nil
	}
	m.secrets[name] = append([]byte(nil), candidate...)
	return m.secrets[name], nil
}
