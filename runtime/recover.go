package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// RecoveryReport says what one recovery pass did.
type RecoveryReport struct {
	Reclaimed int // expired leases the sweep reclaimed
	Retried   int // calls re-executed (swept retries; same key)
	Uncertain int // calls that went to the review queue
	Failed    int // calls that ended crash_loop
}

// Recover runs one recovery pass (RT-4), safe on any worker at any time and
// concurrently on many: the sweep reclaims RUNNING rows whose lease expired and
// classifies each from its recorded facts — the watermark, the idempotency class and
// the recorded idempotent_when — never from timestamps; then this worker re-executes
// the calls the sweep made retryable.
func (p *Pipeline) Recover(ctx context.Context) (RecoveryReport, error) {
	var rep RecoveryReport
	for {
		swept, err := p.cfg.Store.InvocationSweep(ctx, store.SweepParams{Limit: 100, MaxAttempts: p.cfg.MaxAttempts})
		if err != nil {
			return rep, fmt.Errorf("runtime: sweep: %w", err)
		}
		for _, s := range swept {
			rep.Reclaimed++
			switch s.Decision {
			case store.SweepUncertain:
				rep.Uncertain++
				p.cfg.Metrics.uncertain(ctx, s.Invocation.Tool)
				p.log.Warn("call is UNCERTAIN: its effect may have happened and it may not be retried",
					"tool", s.Invocation.Tool, "call_id", s.Invocation.CallID, "key", s.Invocation.Key)
			case store.SweepFailed:
				rep.Failed++
			}
		}
		if len(swept) < 100 {
			break
		}
	}
	n, err := p.RunRetryable(ctx)
	rep.Retried = n
	return rep, err
}

// RunRetryable claims and re-executes PENDING calls that need no further decision
// (swept retries), oldest first, and returns how many it ran. A call another worker
// claims first is skipped.
func (p *Pipeline) RunRetryable(ctx context.Context) (int, error) {
	rows, err := p.cfg.Store.InvocationListRetryable(ctx, 100)
	if err != nil {
		return 0, fmt.Errorf("runtime: list retryable: %w", err)
	}
	// One row's failure does not stop the pass: the others are as ready as before, and
	// a row whose claim or run failed is retried by a later pass (or swept).
	ran := 0
	var errs []error
	for _, row := range rows {
		if ctx.Err() != nil {
			break
		}
		inv, err := p.cfg.Store.InvocationClaimIfPending(ctx, row.ID, p.cfg.WorkerID, p.cfg.Lease)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("runtime: claim retry of %d: %w", row.ID, err))
			continue
		}
		if _, err := p.reexecute(ctx, inv); err != nil {
			errs = append(errs, err)
			continue
		}
		ran++
	}
	return ran, errors.Join(errs...)
}

// reexecute runs steps 11 to 14 again for a recorded call this worker has claimed:
// same key, same arguments, same recorded decision. The tool must still be registered
// at the recorded version; otherwise the call fails rather than run other code.
func (p *Pipeline) reexecute(ctx context.Context, inv *store.Invocation) (Outcome, error) {
	c := &call{
		Call: Call{
			Tenant: inv.Tenant, Principal: Principal{ID: inv.Principal, Tenant: inv.Tenant},
			SessionID: inv.SessionID, RunID: inv.RunID, Step: inv.Step, CallID: inv.CallID,
			Tool: inv.Tool, Args: inv.Args,
		},
		canonicalArgs: inv.Args, key: inv.Key, argsHash: inv.ArgsHash, mode: inv.Mode,
		idemWhen: inv.IdempotentWhen, inv: inv, start: time.Now(),
		originTrust: ParseTrust(inv.OriginTrust), argumentTrust: ParseTrust(inv.ArgumentTrust),
	}
	if p.cfg.WorkspaceFor != nil {
		c.Workspace = p.cfg.WorkspaceFor(inv.Tenant, inv.RunID)
	}
	reg, ok := p.cfg.Registry.lookup(inv.Tool)
	if !ok || reg.spec.Version != inv.ToolVersion {
		reason := ReasonToolWithdrawn
		if ok {
			reason = ReasonToolChanged
		}
		o := NewOutcome(reason, inv.CallID)
		err := p.settle(ctx, inv.Fence(), store.Settlement{Status: statusOf(o), ReasonCode: string(o.ReasonCode), Outcome: mustJSON(o)})
		if err != nil && !errors.Is(err, store.ErrLeaseLost) {
			return Outcome{}, err
		}
		return p.stepEmit(ctx, c, o), nil
	}
	c.reg, c.spec = reg, reg.spec
	if err := json.Unmarshal(inv.Args, &c.args); err != nil || c.args == nil {
		c.args = map[string]any{}
	}
	c.args = reg.argTypes.Normalize(c.args)
	o, err := p.runClaimed(ctx, c)
	if err != nil {
		return Outcome{}, err
	}
	return p.stepEmit(ctx, c, o), nil
}

// KeepLeases renews the leases of the calls this pipeline is executing, in one statement
// per interval (a third of the lease) however many calls are in flight, and none when it
// executes nothing, until ctx is done. A row the worker holds but no longer executes is
// left to expire (see Pipeline.executing).
func (p *Pipeline) KeepLeases(ctx context.Context) {
	t := time.NewTicker(p.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			ids := p.executingIDs()
			if len(ids) == 0 {
				continue
			}
			if _, err := p.cfg.Store.InvocationRenewLeases(ctx, p.cfg.WorkerID, ids, p.cfg.Lease); err != nil && ctx.Err() == nil {
				p.log.Error("renew leases", "worker", p.cfg.WorkerID, "err", err)
			}
		}
	}
}

// Resume completes a suspended control call (RT-11) with the input it waited for,
// found by its resume token. The answer becomes the call's structured result.
func (p *Pipeline) Resume(ctx context.Context, resumeToken string, answer json.RawMessage) (Outcome, error) {
	inv, err := p.cfg.Store.InvocationGetByResumeToken(ctx, resumeToken)
	if err != nil {
		return Outcome{}, fmt.Errorf("runtime: resume: %w", err)
	}
	o := Succeeded(inv.CallID, ToolResult{OK: true, Structured: answer,
		Content: []Item{{Type: "text", Text: string(answer), MIMEType: "application/json", Trust: TrustUser}}})
	if _, err := p.cfg.Store.InvocationResume(ctx, resumeToken, store.Settlement{
		Status: store.StatusSucceeded, Outcome: mustJSON(o),
	}); err != nil {
		return Outcome{}, fmt.Errorf("runtime: resume: %w", err)
	}
	return o, nil
}
