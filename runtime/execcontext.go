package runtime

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"
)

// Identity says on whose behalf, and as which call, a tool runs.
type Identity struct {
	Tenant    string
	Principal string
	RunID     string
	Step      int
	CallID    string
	// IdempotencyKey is the call's key (RT-5), lower-case hex; see
	// [ExecContext.IdempotencyKey].
	IdempotencyKey string
}

// Budget bounds what a call may spend. Zero means unbounded.
type Budget struct {
	MaxOutputBytes int
}

// ArtifactWriter stores content too large to return inline (RT-9).
type ArtifactWriter interface {
	WriteArtifact(ctx context.Context, mediaType string, r io.Reader) (ArtifactRef, error)
}

// CredentialResolver hands a tool the secret it names, scoped to the call's identity.
type CredentialResolver interface {
	Credential(ctx context.Context, name string) (string, error)
}

// ExecContextConfig builds an ExecContext. The pipeline fills it; tests use it directly.
type ExecContextConfig struct {
	Identity    Identity
	Budget      Budget
	Deadline    time.Time
	Target      string
	Workspace   string // absolute root of the run's workspace; empty when the run has none
	Artifacts   ArtifactWriter
	Credentials CredentialResolver
	// MarkEffectSent durably records the watermark (effect_sent_at). It must not return
	// before the write is committed; an error means the effect must not be sent.
	MarkEffectSent func(ctx context.Context) error
}

// ExecContext is everything a tool may use while it runs (RT-2). It deliberately holds
// no database handle, store, policy engine or registry: a tool cannot reach the pipeline
// that invoked it, cannot hold a transaction across its own I/O and cannot call a tool.
type ExecContext struct {
	cfg ExecContextConfig

	mu          sync.Mutex
	effectSent  bool
	suspendWith string
	suspended   bool
}

// NewExecContext returns a context for one call.
func NewExecContext(cfg ExecContextConfig) *ExecContext { return &ExecContext{cfg: cfg} }

func (tc *ExecContext) Identity() Identity              { return tc.cfg.Identity }
func (tc *ExecContext) Budget() Budget                  { return tc.cfg.Budget }
func (tc *ExecContext) Deadline() time.Time             { return tc.cfg.Deadline }
func (tc *ExecContext) Target() string                  { return tc.cfg.Target }
func (tc *ExecContext) Workspace() string               { return tc.cfg.Workspace }
func (tc *ExecContext) Artifacts() ArtifactWriter       { return tc.cfg.Artifacts }
func (tc *ExecContext) Credentials() CredentialResolver { return tc.cfg.Credentials }

// IdempotencyKey is the call's idempotency key (RT-5): the lower-case hex SHA-256 of
// the tenant, run, step, call id, tool, tool version and canonical arguments. It is
// stable across attempts: the attempt number is never an input, so the pipeline's
// retries, a caller's retry of the same call and recovery's re-runs after a crash all
// see the same key. A tool whose effect goes to an external service forwards it to
// that service's own idempotency mechanism (for example an Idempotency-Key HTTP
// header), so that the service applies the effect once even when toolgen cannot know
// whether an earlier attempt reached it.
func (tc *ExecContext) IdempotencyKey() string { return tc.cfg.Identity.IdempotencyKey }

// ErrNoWatermarkWriter is returned by MarkEffectSent when the context was built without one.
var ErrNoWatermarkWriter = errors.New("runtime: ExecContext has no watermark writer")

// MarkEffectSent records, durably, that the effect is about to be sent (the watermark,
// ADR-0021 decision 4). Generated wrappers call it between Prepare and Commit; the MCP
// adapter calls it immediately before tools/call. If it returns an error the effect
// must not be sent. Calling it again after success is a no-op.
func (tc *ExecContext) MarkEffectSent(ctx context.Context) error {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.effectSent {
		return nil
	}
	if tc.cfg.MarkEffectSent == nil {
		return ErrNoWatermarkWriter
	}
	if err := tc.cfg.MarkEffectSent(ctx); err != nil {
		return err
	}
	tc.effectSent = true
	return nil
}

// EffectMarked reports whether MarkEffectSent has succeeded for this call. The pipeline
// uses it to flag a watermark-requiring tool that returned without marking (RT-13).
func (tc *ExecContext) EffectMarked() bool {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.effectSent
}

// Suspend asks the pipeline to suspend the run after this control tool returns (RT-11),
// waiting for input described by reason. Only tools whose spec says suspends: true may
// suspend; the pipeline ignores the request from any other tool.
func (tc *ExecContext) Suspend(reason string) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.suspended, tc.suspendWith = true, reason
}

// SuspendRequested reports whether the tool asked to suspend, and why.
func (tc *ExecContext) SuspendRequested() (string, bool) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.suspendWith, tc.suspended
}
