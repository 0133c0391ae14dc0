package faultstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// Point is one write point: a writing method of [store.Store], with InvocationInsert
// split by the status it records (the RUNNING insert is the claim fused with the
// record; the terminal insert is a denial or a read recorded once, at step 13).
type Point string

const (
	InsertRunning    Point = "InvocationInsert(RUNNING)"
	InsertPending    Point = "InvocationInsert(PENDING)"
	InsertTerminal   Point = "InvocationInsert(terminal)"
	Claim            Point = "InvocationClaimIfPending"
	Watermark        Point = "InvocationMarkEffectSentIfLeased"
	Settle           Point = "InvocationSettleIfLeased"
	Release          Point = "InvocationReleaseIfLeased"
	Suspend          Point = "InvocationSuspendIfLeased"
	Resume           Point = "InvocationResume"
	Renew            Point = "InvocationRenewLeases"
	Sweep            Point = "InvocationSweep"
	ResolveUncertain Point = "InvocationResolveUncertain"
	ApprovalDecide   Point = "ApprovalDecide"
	AuditAppend      Point = "AuditAppend"
	CatalogAppend    Point = "CatalogHistoryAppend"
	SessionModeSet   Point = "SessionModeSet"
	EventAppend      Point = "EventAppend"
	// The session writes of migration 005 (SES-1).
	SessionClaim          Point = "SessionClaim"
	SessionPinsCreate     Point = "SessionPinsCreate"
	SessionMint           Point = "SessionMint"
	SessionPinsForceEpoch Point = "SessionPinsForceEpoch"
)

// Points lists every write point.
var Points = []Point{
	InsertRunning, InsertPending, InsertTerminal, Claim, Watermark, Settle, Release,
	Suspend, Resume, Renew, Sweep, ResolveUncertain, ApprovalDecide, AuditAppend,
	CatalogAppend, SessionModeSet, EventAppend, SessionClaim, SessionPinsCreate, SessionMint, SessionPinsForceEpoch,
}

// Kind is a fault type (see the package documentation).
type Kind int

const (
	Timeout           Kind = iota + 1 // fails before commit: not applied
	ExecuteAndTimeout                 // committed, then the caller sees a timeout
	Hang                              // blocks until the context is done; not applied
	HangAfterExecute                  // committed, then blocks until the context is done
)

// Kinds lists every fault type.
var Kinds = []Kind{Timeout, ExecuteAndTimeout, Hang, HangAfterExecute}

func (k Kind) String() string {
	switch k {
	case Timeout:
		return "Timeout"
	case ExecuteAndTimeout:
		return "ExecuteAndTimeout"
	case Hang:
		return "Hang"
	case HangAfterExecute:
		return "HangAfterExecute"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Applies reports whether a fault of this kind commits the write before failing.
func (k Kind) Applies() bool { return k == ExecuteAndTimeout || k == HangAfterExecute }

// Rule injects Kind at Point. Exactly one of Nth and Rate is set: Nth > 0 faults
// exactly the Nth call at Point (1-based, counted from New or the last SetRules), once;
// Rate in (0, 1] faults each call with that probability.
type Rule struct {
	Point Point
	Kind  Kind
	Nth   int
	Rate  float64
}

// Options configure a Store.
type Options struct {
	Seed  uint64 // of the generator that rate rules draw from
	Rules []Rule
	// MaxHang bounds a hang whose context has no deadline (default 100ms): it stands for
	// the driver's own statement or network timeout.
	MaxHang time.Duration
}

// Fault names one injected fault type at one point.
type Fault struct {
	Point Point
	Kind  Kind
}

// Error is what an injected fault returns. It wraps context.DeadlineExceeded, or
// ctx.Err() for a hang whose context ended, so it looks like a driver's timeout.
// Applied is for the test's bookkeeping only: a caller cannot know it.
type Error struct {
	Point   Point
	Kind    Kind
	Applied bool
	Err     error
}

func (e *Error) Error() string {
	return fmt.Sprintf("faultstore: injected %s at %s: %v", e.Kind, e.Point, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Timeout reports true, as net.Error does for a deadline.
func (e *Error) Timeout() bool { return true }

// Store wraps a store.Store and injects faults into its writes.
type Store struct {
	s       store.Store
	maxHang time.Duration

	mu       sync.Mutex
	rules    []Rule
	rng      *rand.Rand
	calls    map[Point]int // since New or SetRules: what Nth counts
	total    map[Point]int // since New
	injected map[Fault]int
}

var _ store.Store = (*Store)(nil)

// New wraps s. Faults are injected as o.Rules say; a Store without rules passes every
// call through.
func New(s store.Store, o Options) (*Store, error) {
	if o.MaxHang <= 0 {
		o.MaxHang = 100 * time.Millisecond
	}
	f := &Store{
		s: s, maxHang: o.MaxHang,
		rng:   rand.New(rand.NewPCG(o.Seed, 0x6661756c7473)),
		calls: map[Point]int{}, total: map[Point]int{}, injected: map[Fault]int{},
	}
	if err := f.SetRules(o.Rules...); err != nil {
		return nil, err
	}
	return f, nil
}

// SetRules replaces the rules and restarts the per-point call counts that Nth rules
// count (Calls and Injected keep counting).
func (f *Store) SetRules(rules ...Rule) error {
	for _, r := range rules {
		switch {
		case r.Kind < Timeout || r.Kind > HangAfterExecute:
			return fmt.Errorf("faultstore: rule at %s: unknown fault type %d", r.Point, int(r.Kind))
		case (r.Nth > 0) == (r.Rate > 0):
			return fmt.Errorf("faultstore: rule %s at %s: set exactly one of Nth and Rate", r.Kind, r.Point)
		case r.Rate > 1:
			return fmt.Errorf("faultstore: rule %s at %s: rate %v above 1", r.Kind, r.Point, r.Rate)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append([]Rule(nil), rules...)
	f.calls = map[Point]int{}
	return nil
}

// Unwrap returns the wrapped store (for a test's own reads and state, never faulted).
func (f *Store) Unwrap() store.Store { return f.s }

// Calls returns how many calls reached point since New.
func (f *Store) Calls(p Point) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total[p]
}

// Injected returns a copy of the injected faults by point and type.
func (f *Store) Injected() map[Fault]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[Fault]int, len(f.injected))
	for k, v := range f.injected {
		out[k] = v
	}
	return out
}

// InjectedTotal returns the number of faults injected so far.
func (f *Store) InjectedTotal() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, v := range f.injected {
		n += v
	}
	return n
}

// InjectedFaults returns the faults injected so far, sorted by point and type.
func (f *Store) InjectedFaults() []Fault {
	m := f.Injected()
	out := make([]Fault, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Point != out[j].Point {
			return out[i].Point < out[j].Point
		}
		return out[i].Kind < out[j].Kind
	})
	return out
}

// decide counts a call at p and returns the fault to inject, if any. Nth rules come
// first; rate rules share one draw, so their rates add up.
func (f *Store) decide(p Point) (Kind, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[p]++
	f.total[p]++
	n := f.calls[p]
	var rate []Rule
	for _, r := range f.rules {
		switch {
		case r.Point != p:
		case r.Nth > 0 && r.Nth == n:
			return r.Kind, true
		case r.Rate > 0:
			rate = append(rate, r)
		}
	}
	if len(rate) == 0 {
		return 0, false
	}
	u := f.rng.Float64()
	for _, r := range rate {
		if u < r.Rate {
			return r.Kind, true
		}
		u -= r.Rate
	}
	return 0, false
}

func (f *Store) count(p Point, k Kind) {
	f.mu.Lock()
	f.injected[Fault{p, k}]++
	f.mu.Unlock()
}

// inject runs write at p with the fault the rules decide. A write that is to be
// applied but fails by itself returns its own error and counts no fault: the caller saw
// a real failure, not an injected one.
func inject[T any](f *Store, ctx context.Context, p Point, write func(context.Context) (T, error)) (T, error) {
	k, ok := f.decide(p)
	if !ok {
		return write(ctx)
	}
	var zero T
	if k.Applies() {
		// The commit must happen even if the caller's context is about to end: the
		// fault is that the caller does not hear about it.
		if _, err := write(context.WithoutCancel(ctx)); err != nil {
			return zero, err
		}
	}
	f.count(p, k)
	e := &Error{Point: p, Kind: k, Applied: k.Applies(), Err: context.DeadlineExceeded}
	if k == Hang || k == HangAfterExecute {
		e.Err = f.hang(ctx)
	}
	return zero, e
}

// hang blocks until ctx is done, or for MaxHang if ctx has no deadline.
func (f *Store) hang(ctx context.Context) error {
	if _, ok := ctx.Deadline(); ok {
		<-ctx.Done()
		return ctx.Err()
	}
	t := time.NewTimer(f.maxHang)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return context.DeadlineExceeded
	}
}

func insertPoint(s store.Status) Point {
	switch s {
	case store.StatusRunning:
		return InsertRunning
	case store.StatusPending:
		return InsertPending
	}
	return InsertTerminal
}

type inserted struct {
	inv *store.Invocation
	ok  bool
}

// The writes.

func (f *Store) InvocationInsert(ctx context.Context, p store.InsertParams) (*store.Invocation, bool, error) {
	r, err := inject(f, ctx, insertPoint(p.Status()), func(ctx context.Context) (inserted, error) {
		inv, ok, err := f.s.InvocationInsert(ctx, p)
		return inserted{inv, ok}, err
	})
	return r.inv, r.ok, err
}

func (f *Store) InvocationClaimIfPending(ctx context.Context, id int64, owner string, lease time.Duration) (*store.Invocation, error) {
	return inject(f, ctx, Claim, func(ctx context.Context) (*store.Invocation, error) {
		return f.s.InvocationClaimIfPending(ctx, id, owner, lease)
	})
}

func (f *Store) InvocationMarkEffectSentIfLeased(ctx context.Context, fc store.Fence, token string) error {
	_, err := inject(f, ctx, Watermark, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, f.s.InvocationMarkEffectSentIfLeased(ctx, fc, token)
	})
	return err
}

func (f *Store) InvocationSettleIfLeased(ctx context.Context, fc store.Fence, s store.Settlement) error {
	_, err := inject(f, ctx, Settle, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, f.s.InvocationSettleIfLeased(ctx, fc, s)
	})
	return err
}

func (f *Store) InvocationReleaseIfLeased(ctx context.Context, fc store.Fence) error {
	_, err := inject(f, ctx, Release, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, f.s.InvocationReleaseIfLeased(ctx, fc)
	})
	return err
}

func (f *Store) InvocationSuspendIfLeased(ctx context.Context, fc store.Fence, resumeToken string, outcome json.RawMessage) error {
	_, err := inject(f, ctx, Suspend, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, f.s.InvocationSuspendIfLeased(ctx, fc, resumeToken, outcome)
	})
	return err
}

func (f *Store) InvocationResume(ctx context.Context, resumeToken string, s store.Settlement) (*store.Invocation, error) {
	return inject(f, ctx, Resume, func(ctx context.Context) (*store.Invocation, error) {
		return f.s.InvocationResume(ctx, resumeToken, s)
	})
}

func (f *Store) InvocationRenewLeases(ctx context.Context, owner string, ids []int64, lease time.Duration) (int, error) {
	return inject(f, ctx, Renew, func(ctx context.Context) (int, error) {
		return f.s.InvocationRenewLeases(ctx, owner, ids, lease)
	})
}

func (f *Store) InvocationSweep(ctx context.Context, p store.SweepParams) ([]store.Swept, error) {
	return inject(f, ctx, Sweep, func(ctx context.Context) ([]store.Swept, error) {
		return f.s.InvocationSweep(ctx, p)
	})
}

func (f *Store) InvocationResolveUncertain(ctx context.Context, id int64, resolution, by string, outcome json.RawMessage, audit *store.AuditEntry) (*store.Invocation, error) {
	return inject(f, ctx, ResolveUncertain, func(ctx context.Context) (*store.Invocation, error) {
		return f.s.InvocationResolveUncertain(ctx, id, resolution, by, outcome, audit)
	})
}

func (f *Store) ApprovalDecide(ctx context.Context, a store.Approval, audit *store.AuditEntry) error {
	_, err := inject(f, ctx, ApprovalDecide, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, f.s.ApprovalDecide(ctx, a, audit)
	})
	return err
}

func (f *Store) AuditAppend(ctx context.Context, e store.AuditEntry) (int64, error) {
	return inject(f, ctx, AuditAppend, func(ctx context.Context) (int64, error) {
		return f.s.AuditAppend(ctx, e)
	})
}

func (f *Store) CatalogHistoryAppend(ctx context.Context, c store.CatalogChange) (int64, error) {
	return inject(f, ctx, CatalogAppend, func(ctx context.Context) (int64, error) {
		return f.s.CatalogHistoryAppend(ctx, c)
	})
}

func (f *Store) SessionModeSet(ctx context.Context, tenant, sessionID, mode string) error {
	_, err := inject(f, ctx, SessionModeSet, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, f.s.SessionModeSet(ctx, tenant, sessionID, mode)
	})
	return err
}

func (f *Store) SessionClaim(ctx context.Context, tenant, sessionID string) (bool, error) {
	return inject(f, ctx, SessionClaim, func(ctx context.Context) (bool, error) {
		return f.s.SessionClaim(ctx, tenant, sessionID)
	})
}

func (f *Store) SessionMint(ctx context.Context, tenant, sessionID string, pins []store.ToolPin) error {
	_, err := inject(f, ctx, SessionMint, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, f.s.SessionMint(ctx, tenant, sessionID, pins)
	})
	return err
}

func (f *Store) SessionPinsCreate(ctx context.Context, tenant, sessionID string, pins []store.ToolPin) ([]store.ToolPin, error) {
	return inject(f, ctx, SessionPinsCreate, func(ctx context.Context) ([]store.ToolPin, error) {
		return f.s.SessionPinsCreate(ctx, tenant, sessionID, pins)
	})
}

func (f *Store) SessionPinsForceEpoch(ctx context.Context, e store.PinEpoch) (int, error) {
	return inject(f, ctx, SessionPinsForceEpoch, func(ctx context.Context) (int, error) {
		return f.s.SessionPinsForceEpoch(ctx, e)
	})
}

func (f *Store) EventAppend(ctx context.Context, e store.Event) (int64, error) {
	return inject(f, ctx, EventAppend, func(ctx context.Context) (int64, error) {
		return f.s.EventAppend(ctx, e)
	})
}

// The reads pass through.

func (f *Store) EventList(ctx context.Context, filter store.EventFilter) ([]store.Event, error) {
	return f.s.EventList(ctx, filter)
}

func (f *Store) InvocationGet(ctx context.Context, id int64) (*store.Invocation, error) {
	return f.s.InvocationGet(ctx, id)
}

func (f *Store) InvocationGetByKey(ctx context.Context, key string) (*store.Invocation, error) {
	return f.s.InvocationGetByKey(ctx, key)
}

func (f *Store) InvocationGetByResumeToken(ctx context.Context, resumeToken string) (*store.Invocation, error) {
	return f.s.InvocationGetByResumeToken(ctx, resumeToken)
}

func (f *Store) InvocationListRetryable(ctx context.Context, p store.RetryableParams) ([]*store.Invocation, error) {
	return f.s.InvocationListRetryable(ctx, p)
}

func (f *Store) InvocationUnsuspendDecided(ctx context.Context, p store.RetryableParams) ([]*store.Invocation, error) {
	return f.s.InvocationUnsuspendDecided(ctx, p)
}

func (f *Store) InvocationCountUnclaimable(ctx context.Context, tools []store.ToolRef, tenant string) (store.Unclaimable, error) {
	return f.s.InvocationCountUnclaimable(ctx, tools, tenant)
}

func (f *Store) InvocationListUncertain(ctx context.Context, tenant string) ([]*store.Invocation, error) {
	return f.s.InvocationListUncertain(ctx, tenant)
}

func (f *Store) InvocationPriorCalls(ctx context.Context, p store.PriorCallsParams) (store.PriorCalls, error) {
	return f.s.InvocationPriorCalls(ctx, p)
}

func (f *Store) ApprovalGet(ctx context.Context, key string) (*store.Approval, error) {
	return f.s.ApprovalGet(ctx, key)
}

func (f *Store) AuditList(ctx context.Context, tenant string, afterID int64, limit int) ([]store.AuditEntry, error) {
	return f.s.AuditList(ctx, tenant, afterID, limit)
}

func (f *Store) InvocationList(ctx context.Context, filter store.InvocationFilter) ([]*store.Invocation, error) {
	return f.s.InvocationList(ctx, filter)
}

func (f *Store) SessionModeGet(ctx context.Context, tenant, sessionID string) (string, error) {
	return f.s.SessionModeGet(ctx, tenant, sessionID)
}

func (f *Store) SessionPinsGet(ctx context.Context, tenant, sessionID string) ([]store.ToolPin, bool, error) {
	return f.s.SessionPinsGet(ctx, tenant, sessionID)
}

func (f *Store) CatalogHistoryList(ctx context.Context, serverID string) ([]store.CatalogChange, error) {
	return f.s.CatalogHistoryList(ctx, serverID)
}

// Close does not close the wrapped store: the test that opened it does.
func (f *Store) Close() error { return nil }

// DeploymentSecretGetOrCreate is passed through without faults: a host reads it once,
// at startup, and the pipeline under test never does.
func (f *Store) DeploymentSecretGetOrCreate(ctx context.Context, name string, candidate []byte) ([]byte, error) {
	return f.s.DeploymentSecretGetOrCreate(ctx, name, candidate)
}
