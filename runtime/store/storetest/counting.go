package storetest

import (
	"context"
	"encoding/json"
	"sort"
	"sync"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// WriteMethods are the Store methods that write: each call is exactly one commit.
var WriteMethods = []string{
	"InvocationInsert",
	"InvocationClaimIfPending",
	"InvocationMarkEffectSentIfLeased",
	"InvocationSettleIfLeased",
	"InvocationReleaseIfLeased",
	"InvocationSuspendIfLeased",
	"InvocationResume",
	"InvocationRenewLeases",
	"InvocationSweep",
	"InvocationUnsuspendDecided",
	"InvocationResolveUncertain",
	"ApprovalDecide",
	"AuditAppend",
	"CatalogHistoryAppend",
	"SessionModeSet",
	"EventAppend",
	"SessionClaim",
	"SessionPinsCreate",
	"SessionPinsForceEpoch",
}

// CountingStore wraps a Store and counts its commits: calls of the writing methods
// ([WriteMethods]), by method name. Every call counts, also one that returns an error
// (a driver still opens and ends its one transaction), so the count is the number of
// commits a caller asked for. Reads are counted apart ([CountingStore.Reads]). It
// implements every method explicitly, so a method added to the interface cannot slip
// through uncounted. Its Unwrap gives store.WakerOf the wrapped store's wake-ups.
type CountingStore struct {
	s      store.Store
	mu     sync.Mutex
	counts map[string]int
	reads  map[string]int
}

var _ store.Store = (*CountingStore)(nil)

// NewCountingStore wraps s.
func NewCountingStore(s store.Store) *CountingStore {
	return &CountingStore{s: s, counts: map[string]int{}, reads: map[string]int{}}
}

// Unwrap returns the wrapped store.
func (c *CountingStore) Unwrap() store.Store { return c.s }

func (c *CountingStore) count(method string) {
	c.mu.Lock()
	c.counts[method]++
	c.mu.Unlock()
}

func (c *CountingStore) read(method string) {
	c.mu.Lock()
	c.reads[method]++
	c.mu.Unlock()
}

// Reads returns how many times the reading method was called (since New or Reset).
func (c *CountingStore) Reads(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[method]
}

// Commits returns a copy of the counts by method name.
func (c *CountingStore) Commits() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// Total returns the number of commits so far.
func (c *CountingStore) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.counts {
		n += v
	}
	return n
}

// Methods returns the names of the writing methods called so far, sorted.
func (c *CountingStore) Methods() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k := range c.counts {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Reset sets every count to zero.
func (c *CountingStore) Reset() {
	c.mu.Lock()
	c.counts, c.reads = map[string]int{}, map[string]int{}
	c.mu.Unlock()
}

func (c *CountingStore) InvocationInsert(ctx context.Context, p store.InsertParams) (*store.Invocation, bool, error) {
	c.count("InvocationInsert")
	return c.s.InvocationInsert(ctx, p)
}

func (c *CountingStore) InvocationGet(ctx context.Context, id int64) (*store.Invocation, error) {
	c.read("InvocationGet")
	return c.s.InvocationGet(ctx, id)
}

func (c *CountingStore) InvocationGetByKey(ctx context.Context, key string) (*store.Invocation, error) {
	c.read("InvocationGetByKey")
	return c.s.InvocationGetByKey(ctx, key)
}

func (c *CountingStore) InvocationGetByResumeToken(ctx context.Context, token string) (*store.Invocation, error) {
	c.read("InvocationGetByResumeToken")
	return c.s.InvocationGetByResumeToken(ctx, token)
}

func (c *CountingStore) InvocationClaimIfPending(ctx context.Context, id int64, owner string, lease time.Duration) (*store.Invocation, error) {
	c.count("InvocationClaimIfPending")
	return c.s.InvocationClaimIfPending(ctx, id, owner, lease)
}

func (c *CountingStore) InvocationMarkEffectSentIfLeased(ctx context.Context, f store.Fence, token string) error {
	c.count("InvocationMarkEffectSentIfLeased")
	return c.s.InvocationMarkEffectSentIfLeased(ctx, f, token)
}

func (c *CountingStore) InvocationReleaseIfLeased(ctx context.Context, f store.Fence) error {
	c.count("InvocationReleaseIfLeased")
	return c.s.InvocationReleaseIfLeased(ctx, f)
}

func (c *CountingStore) InvocationSettleIfLeased(ctx context.Context, f store.Fence, s store.Settlement) error {
	c.count("InvocationSettleIfLeased")
	return c.s.InvocationSettleIfLeased(ctx, f, s)
}

func (c *CountingStore) InvocationSuspendIfLeased(ctx context.Context, f store.Fence, resumeToken string, outcome json.RawMessage) error {
	c.count("InvocationSuspendIfLeased")
	return c.s.InvocationSuspendIfLeased(ctx, f, resumeToken, outcome)
}

func (c *CountingStore) InvocationResume(ctx context.Context, resumeToken string, s store.Settlement) (*store.Invocation, error) {
	c.count("InvocationResume")
	return c.s.InvocationResume(ctx, resumeToken, s)
}

func (c *CountingStore) InvocationRenewLeases(ctx context.Context, owner string, ids []int64, lease time.Duration) (int, error) {
	c.count("InvocationRenewLeases")
	return c.s.InvocationRenewLeases(ctx, owner, ids, lease)
}

func (c *CountingStore) InvocationSweep(ctx context.Context, p store.SweepParams) ([]store.Swept, error) {
	c.count("InvocationSweep")
	return c.s.InvocationSweep(ctx, p)
}

func (c *CountingStore) InvocationListRetryable(ctx context.Context, p store.RetryableParams) ([]*store.Invocation, error) {
	c.read("InvocationListRetryable")
	return c.s.InvocationListRetryable(ctx, p)
}

func (c *CountingStore) InvocationUnsuspendDecided(ctx context.Context, p store.RetryableParams) ([]*store.Invocation, error) {
	c.count("InvocationUnsuspendDecided")
	return c.s.InvocationUnsuspendDecided(ctx, p)
}

func (c *CountingStore) InvocationCountUnclaimable(ctx context.Context, tools []store.ToolRef, tenant string) (store.Unclaimable, error) {
	c.read("InvocationCountUnclaimable")
	return c.s.InvocationCountUnclaimable(ctx, tools, tenant)
}

func (c *CountingStore) InvocationListUncertain(ctx context.Context, tenant string) ([]*store.Invocation, error) {
	c.read("InvocationListUncertain")
	return c.s.InvocationListUncertain(ctx, tenant)
}

func (c *CountingStore) InvocationResolveUncertain(ctx context.Context, id int64, resolution, by string, outcome json.RawMessage, audit *store.AuditEntry) (*store.Invocation, error) {
	c.count("InvocationResolveUncertain") // with its audit entry: still one commit
	return c.s.InvocationResolveUncertain(ctx, id, resolution, by, outcome, audit)
}

func (c *CountingStore) InvocationPriorCalls(ctx context.Context, p store.PriorCallsParams) (store.PriorCalls, error) {
	c.read("InvocationPriorCalls")
	return c.s.InvocationPriorCalls(ctx, p)
}

func (c *CountingStore) ApprovalDecide(ctx context.Context, a store.Approval, audit *store.AuditEntry) error {
	c.count("ApprovalDecide") // with its audit entry: still one commit
	return c.s.ApprovalDecide(ctx, a, audit)
}

func (c *CountingStore) ApprovalGet(ctx context.Context, key string) (*store.Approval, error) {
	c.read("ApprovalGet")
	return c.s.ApprovalGet(ctx, key)
}

func (c *CountingStore) AuditAppend(ctx context.Context, e store.AuditEntry) (int64, error) {
	c.count("AuditAppend")
	return c.s.AuditAppend(ctx, e)
}

func (c *CountingStore) AuditList(ctx context.Context, tenant string, afterID int64, limit int) ([]store.AuditEntry, error) {
	c.read("AuditList")
	return c.s.AuditList(ctx, tenant, afterID, limit)
}

func (c *CountingStore) CatalogHistoryAppend(ctx context.Context, ch store.CatalogChange) (int64, error) {
	c.count("CatalogHistoryAppend")
	return c.s.CatalogHistoryAppend(ctx, ch)
}

func (c *CountingStore) CatalogHistoryList(ctx context.Context, serverID string) ([]store.CatalogChange, error) {
	c.read("CatalogHistoryList")
	return c.s.CatalogHistoryList(ctx, serverID)
}

func (c *CountingStore) InvocationList(ctx context.Context, f store.InvocationFilter) ([]*store.Invocation, error) {
	c.read("InvocationList")
	return c.s.InvocationList(ctx, f)
}

func (c *CountingStore) SessionModeGet(ctx context.Context, tenant, sessionID string) (string, error) {
	c.read("SessionModeGet")
	return c.s.SessionModeGet(ctx, tenant, sessionID)
}

// SessionClaim commits only when it records a new owner, but it may: it counts.
func (c *CountingStore) SessionClaim(ctx context.Context, tenant, sessionID string) (bool, error) {
	c.count("SessionClaim")
	return c.s.SessionClaim(ctx, tenant, sessionID)
}

func (c *CountingStore) SessionPinsGet(ctx context.Context, tenant, sessionID string) ([]store.ToolPin, bool, error) {
	c.read("SessionPinsGet")
	return c.s.SessionPinsGet(ctx, tenant, sessionID)
}

func (c *CountingStore) SessionPinsCreate(ctx context.Context, tenant, sessionID string, pins []store.ToolPin) ([]store.ToolPin, error) {
	c.count("SessionPinsCreate")
	return c.s.SessionPinsCreate(ctx, tenant, sessionID, pins)
}

func (c *CountingStore) SessionMint(ctx context.Context, tenant, sessionID string, pins []store.ToolPin) error {
	c.count("SessionMint")
	return c.s.SessionMint(ctx, tenant, sessionID, pins)
}

func (c *CountingStore) SessionPinsForceEpoch(ctx context.Context, e store.PinEpoch) (int, error) {
	c.count("SessionPinsForceEpoch")
	return c.s.SessionPinsForceEpoch(ctx, e)
}

func (c *CountingStore) SessionModeSet(ctx context.Context, tenant, sessionID, mode string) error {
	c.count("SessionModeSet")
	return c.s.SessionModeSet(ctx, tenant, sessionID, mode)
}

func (c *CountingStore) EventAppend(ctx context.Context, e store.Event) (int64, error) {
	c.count("EventAppend")
	return c.s.EventAppend(ctx, e)
}

func (c *CountingStore) EventList(ctx context.Context, f store.EventFilter) ([]store.Event, error) {
	c.read("EventList")
	return c.s.EventList(ctx, f)
}

// Close closes the wrapped store (not a commit).
func (c *CountingStore) Close() error { return c.s.Close() }

func (c *CountingStore) DeploymentSecretGetOrCreate(ctx context.Context, name string, candidate []byte) ([]byte, error) {
	c.count("DeploymentSecretGetOrCreate")
	return c.s.DeploymentSecretGetOrCreate(ctx, name, candidate)
}
