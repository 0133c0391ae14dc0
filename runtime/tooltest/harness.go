package tooltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// What a Worker puts around the real store and the real tool to watch one call: the
// call's state travels in the context the pipeline hands down to the store and to
// Tool.Execute, so nothing here is a hook in the pipeline's production config.
//
// This file holds every direct use of the store interface the Worker makes: the
// methods watchedStore overrides, reading a call's row back (row), and deciding a held
// call (through runtime.DecideApproval, not ApprovalDecide itself).

// callState is what one Worker.Call saw.
type callState struct {
	leaveHeld bool
	approver  runtime.Principal
	onMark    func() error
	cancel    context.CancelFunc

	mu         sync.Mutex
	key        string
	runs       int // Tool.Execute calls
	marked     bool
	suspended  bool
	res        runtime.ToolResult
	err        error
	markCalls  int // watermark writes asked for (the pipeline retries an ambiguous failure)
	held       bool
	decided    bool
	approveErr error
}

type callStateKey struct{}

func callStateFrom(ctx context.Context) *callState {
	cs, _ := ctx.Value(callStateKey{}).(*callState)
	return cs
}

func (cs *callState) idempotencyKey() string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.key
}

func (cs *callState) ran() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.runs > 0
}

func (cs *callState) wasHeld() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.held
}

func (cs *callState) approvalError() error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.approveErr
}

// toolReturn is what the tool's last execution did, as the pipeline saw it.
func (cs *callState) toolReturn() (runs int, marked bool, res runtime.ToolResult, err error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.runs, cs.marked, cs.res, cs.err
}

func (cs *callState) markRequests() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.markCalls
}

// watchedStore is the real store, watching the calls of its Worker: it learns each
// call's idempotency key and row, runs the suite's hook at the watermark write, and
// decides a held call at its first look for the approval.
type watchedStore struct {
	store.Store
	mu   sync.Mutex
	byID map[int64]*callState // rows of calls in flight, for the watermark (its fence names the row)
}

// follow notes, for the call of ctx, the key the pipeline used and the row it got.
func (s *watchedStore) follow(ctx context.Context, key string, inv *store.Invocation) {
	cs := callStateFrom(ctx)
	if cs == nil {
		return
	}
	cs.mu.Lock()
	cs.key = key
	cs.mu.Unlock()
	if inv != nil {
		s.mu.Lock()
		s.byID[inv.ID] = cs
		s.mu.Unlock()
	}
}

// row reads the invocation of key back, nil when there is none.
func (s *watchedStore) row(ctx context.Context, key string) (*store.Invocation, error) {
	inv, err := s.Store.InvocationGetByKey(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return inv, err
}

// forget drops the rows of a call that has returned.
func (s *watchedStore) forget(cs *callState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, c := range s.byID {
		if c == cs {
			delete(s.byID, id)
		}
	}
}

func (s *watchedStore) InvocationInsert(ctx context.Context, p store.InsertParams) (*store.Invocation, bool, error) {
	inv, inserted, err := s.Store.InvocationInsert(ctx, p)
	s.follow(ctx, p.Key, inv)
	return inv, inserted, err
}

func (s *watchedStore) InvocationGetByKey(ctx context.Context, key string) (*store.Invocation, error) {
	inv, err := s.Store.InvocationGetByKey(ctx, key)
	s.follow(ctx, key, inv)
	return inv, err
}

func (s *watchedStore) InvocationClaimIfPending(ctx context.Context, id int64, owner string, lease time.Duration) (*store.Invocation, error) {
	inv, err := s.Store.InvocationClaimIfPending(ctx, id, owner, lease)
	if inv != nil {
		s.follow(ctx, inv.Key, inv)
	}
	return inv, err
}

// InvocationMarkEffectSentIfLeased is the instant MarkEffectSent is called: the
// call's hook runs first, and its error fails the write without touching the database.
// The call is found by the fence's row, whatever context the tool marked with.
func (s *watchedStore) InvocationMarkEffectSentIfLeased(ctx context.Context, f store.Fence, token string) error {
	s.mu.Lock()
	cs := s.byID[f.ID]
	s.mu.Unlock()
	if cs == nil {
		cs = callStateFrom(ctx)
	}
	if cs != nil {
		cs.mu.Lock()
		cs.markCalls++
		hook := cs.onMark
		cs.mu.Unlock()
		if hook != nil {
			if err := hook(); err != nil {
				return err
			}
		}
	}
	return s.Store.InvocationMarkEffectSentIfLeased(ctx, f, token)
}

// ApprovalGet is the pipeline's look for the decision on a held call (step 9). At the
// first look the Worker decides: the Approver approves, unless the call is to be left
// held, in which case the call is ended the way a hold past its bound ends it.
func (s *watchedStore) ApprovalGet(ctx context.Context, key string) (*store.Approval, error) {
	cs := callStateFrom(ctx)
	if cs == nil {
		return s.Store.ApprovalGet(ctx, key)
	}
	cs.mu.Lock()
	cs.held = true
	decide := !cs.leaveHeld && !cs.decided
	cs.decided = true
	cs.mu.Unlock()
	if decide {
		err := runtime.DecideApproval(ctx, s.Store, key, cs.approver, true, "tooltest: approved by the Worker", nil)
		if err != nil && !errors.Is(err, store.ErrConflict) { // ErrConflict: a decision already recorded stands
			cs.mu.Lock()
			cs.approveErr = err
			cs.mu.Unlock()
			cs.cancel()
		}
	}
	a, err := s.Store.ApprovalGet(ctx, key)
	if cs.leaveHeld && errors.Is(err, store.ErrNotFound) {
		cs.cancel() // the hold's context is the call's: the pipeline returns approval_pending
	}
	return a, err
}

// watchedTool is the tool under test, counted: it records each execution and what it
// returned in the state of the call that ran it.
type watchedTool struct{ runtime.Tool }

func (w watchedTool) Execute(ctx context.Context, tc *runtime.ExecContext, args json.RawMessage) (runtime.ToolResult, error) {
	cs := callStateFrom(ctx)
	if cs == nil { // a recovery's re-execution: not a call of the Worker
		return w.Tool.Execute(ctx, tc, args)
	}
	cs.mu.Lock()
	cs.runs++
	cs.mu.Unlock()
	res, err := w.Tool.Execute(ctx, tc, args)
	_, suspended := tc.SuspendRequested()
	cs.mu.Lock()
	cs.marked, cs.suspended, cs.res, cs.err = tc.EffectMarked(), suspended, res, err
	cs.mu.Unlock()
	return res, err
}

// mapCredentials resolves credentials from a map.
type mapCredentials map[string]string

func (m mapCredentials) Credential(_ context.Context, name string) (string, error) {
	if v, ok := m[name]; ok {
		return v, nil
	}
	return "", fmt.Errorf("tooltest: no credential %q (Env.Credentials, WorkerOptions.Credentials)", name)
}

// markFailure is one way the watermark write fails, and the outcome it must produce.
type markFailure struct {
	what string
	err  error
	want runtime.ReasonCode
}

var (
	// errStoreDown is an ambiguous store failure: the pipeline retries it, then gives up.
	errStoreDown = markFailure{what: "a failing watermark write", err: errors.New("tooltest: the store is unavailable"), want: runtime.ReasonWatermarkFailed}
	// errLeaseLost is a fence that no longer holds: another worker took the call over.
	errLeaseLost = markFailure{what: "a lost lease", err: fmt.Errorf("tooltest: %w", store.ErrLeaseLost), want: runtime.ReasonLeaseLost}
)

// withMarkHook runs hook at the instant MarkEffectSent writes the watermark (the suite's
// observation point); a non-nil error fails the write without touching the database.
func withMarkHook(hook func() error) CallOption { return func(c *callConfig) { c.onMark = hook } }
