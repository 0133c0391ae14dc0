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
	// Unsuspended counts the scripts suspended at a held call (RT-11, RT-12) whose
	// approval has been decided, given back to be re-executed from the start: each is
	// then among Retried when this worker ran it.
	Unsuspended int
	// SkippedNotRegistered and SkippedChanged count, after the pass, the calls recovery
	// would act on (an expired lease, a retryable PENDING call) that this worker left
	// alone for a worker that has their tool (LIFE-1): of a tool not registered here,
	// or registered here at another version or definition hash.
	SkippedNotRegistered int
	SkippedChanged       int
}

// recoveryBatch bounds the rows of one sweep and of one retryable list.
const recoveryBatch = 100

// Recover runs one recovery pass (RT-4), safe on any worker at any time and
// concurrently on many: the sweep reclaims RUNNING rows whose lease expired and
// classifies each from its recorded facts — the watermark, the idempotency class and
// the recorded idempotent_when — never from timestamps; then this worker re-executes
// the calls the sweep made retryable.
//
// A worker never decides for a tool it cannot run (LIFE-1): the sweep and the re-runs
// consider only rows of the tools registered here, at the recorded version and
// definition hash, filtered by the store (rows of other tools are not even locked).
// The others are left as they are for a worker that has their tool, and counted in
// the report; nothing here settles another host's call.
func (p *Pipeline) Recover(ctx context.Context) (RecoveryReport, error) {
	return p.recover(ctx, "")
}

// RecoverTenant is Recover for the calls of one tenant: what an operator of that
// tenant runs (SEC-3; issue 14, finding 12). Another tenant's calls are neither
// decided nor re-run nor counted in the report.
func (p *Pipeline) RecoverTenant(ctx context.Context, tenant string) (RecoveryReport, error) {
	if tenant == "" {
		return RecoveryReport{}, errors.New("runtime: RecoverTenant needs a tenant")
	}
	return p.recover(ctx, tenant)
}

// recover is one recovery pass over the calls of tenant ("" for every tenant).
func (p *Pipeline) recover(ctx context.Context, tenant string) (RecoveryReport, error) {
	var rep RecoveryReport
	refs := p.cfg.Registry.ToolRefs()
	// With no tool registered there is no row this worker may decide for (and the
	// store refuses an empty Claimable): it only counts what it leaves.
	for len(refs) > 0 {
		swept, err := p.cfg.Store.InvocationSweep(ctx, store.SweepParams{
			Limit: recoveryBatch, MaxAttempts: p.cfg.MaxAttempts, Claimable: store.Claimable{Tools: refs, Tenant: tenant},
		})
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
		if len(swept) < recoveryBatch {
			break
		}
	}
	// Scripts suspended at a held call whose approval is now decided become PENDING
	// again, so the retryable list below re-executes them (at most once at a time: the
	// claim). One still waiting for its approval is left suspended: nothing polls it.
	for len(refs) > 0 {
		rows, err := p.cfg.Store.InvocationUnsuspendDecided(ctx, store.RetryableParams{
			Limit: recoveryBatch, Claimable: store.Claimable{Tools: refs, Tenant: tenant},
		})
		if err != nil {
			return rep, fmt.Errorf("runtime: unsuspend decided scripts: %w", err)
		}
		rep.Unsuspended += len(rows)
		if len(rows) < recoveryBatch {
			break
		}
	}
	n, err := p.runRetryable(ctx, refs, tenant)
	rep.Retried = n
	// Counted with the registry as it is now, after the pass: a call given back because
	// its tool left during the pass is among them.
	left, cerr := p.cfg.Store.InvocationCountUnclaimable(ctx, p.cfg.Registry.ToolRefs(), tenant)
	if cerr != nil {
		return rep, errors.Join(err, fmt.Errorf("runtime: count unclaimable: %w", cerr))
	}
	rep.SkippedNotRegistered, rep.SkippedChanged = left.NotRegistered, left.DefinitionChanged
	if left != (store.Unclaimable{}) {
		// Debug: on a store shared with hosts of other tools this holds on every pass.
		p.log.Debug("recovery left calls of tools this worker cannot run for a worker that has them",
			"worker", p.cfg.WorkerID, "not_registered", left.NotRegistered, "definition_changed", left.DefinitionChanged)
	}
	return rep, err
}

// RunRetryable claims and re-executes PENDING calls that need no further decision
// (swept retries, approved holds) of the tools registered here, oldest first, and
// returns how many it ran. A call another worker claims first is skipped, as is one
// whose tool is no longer registered here as recorded (LIFE-1).
func (p *Pipeline) RunRetryable(ctx context.Context) (int, error) {
	return p.runRetryable(ctx, p.cfg.Registry.ToolRefs(), "")
}

// runRetryable is RunRetryable for the tools refs (the registry's, read once per pass)
// and the calls of tenant ("" for every tenant).
func (p *Pipeline) runRetryable(ctx context.Context, refs []store.ToolRef, tenant string) (int, error) {
	if len(refs) == 0 {
		return 0, nil
	}
	rows, err := p.cfg.Store.InvocationListRetryable(ctx, store.RetryableParams{
		Limit: recoveryBatch, Claimable: store.Claimable{Tools: refs, Tenant: tenant},
	})
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
		// The registry may have changed since refs were read: a call this worker can no
		// longer run is not claimed, since a claim costs the call an attempt.
		if _, ok := p.runnableHere(row); !ok {
			continue
		}
		inv, err := p.cfg.Store.InvocationClaimIfPending(ctx, row.ID, p.cfg.WorkerID, p.cfg.Lease)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("runtime: claim retry of %d: %w", row.ID, err))
			continue
		}
		_, executed, err := p.reexecute(ctx, inv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if executed {
			ran++
		}
	}
	return ran, errors.Join(errs...)
}

// runnableHere returns the registered tool that may re-run inv: registered under its
// name at its recorded version and, when the row recorded one, its definition hash —
// the store's Claimable match. false: this worker would run other code than the call
// recorded, or none, and must not decide for it (LIFE-1).
func (p *Pipeline) runnableHere(inv *store.Invocation) (*registered, bool) {
	reg, ok := p.cfg.Registry.lookup(inv.Tool)
	if !ok || reg.spec.Version != inv.ToolVersion || (inv.ToolSHA256 != "" && reg.spec.SchemaSHA256 != inv.ToolSHA256) {
		return nil, false
	}
	return reg, true
}

// reexecute runs steps 11 to 14 again for a recorded call this worker has claimed:
// same key, same arguments, same recorded decision, and reports whether it ran the
// tool. If the tool is no longer registered here as recorded (it left or changed
// after the pre-claim check), the call is given back instead: never settled as
// tool_withdrawn or tool_changed, since a worker that has the tool can still run it.
func (p *Pipeline) reexecute(ctx context.Context, inv *store.Invocation) (Outcome, bool, error) {
	reg, ok := p.runnableHere(inv)
	if !ok {
		// The release puts the row back as the sweep left it (PENDING, decision kept, no
		// lease) and keeps the attempt the claim took: attempts only grow, which every
		// fence relies on, so a give-back costs the call one of its MaxAttempts claims.
		// It takes the registry changing between the check before the claim and this
		// one, so it is rare; and should the release fail, the unrenewed lease expires
		// and the sweep gives the call to a worker that has its tool.
		if err := p.cfg.Store.InvocationReleaseIfLeased(ctx, inv.Fence()); err != nil && !errors.Is(err, store.ErrLeaseLost) {
			return Outcome{}, false, fmt.Errorf("runtime: give back %d: %w", inv.ID, err)
		}
		p.log.Info("gave a call back: its tool is no longer registered here as recorded",
			"tool", inv.Tool, "version", inv.ToolVersion, "call_id", inv.CallID, "key", inv.Key)
		return Outcome{}, false, nil
	}
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
	// The call runs again where it was made: its recorded workspace, never this
	// process's (issue 14, finding 12). A row recorded before the workspace was (store
	// migration 007) takes the workspace this host gives the call's tenant and run.
	c.Workspace = inv.Workspace
	if c.Workspace == "" && p.cfg.WorkspaceFor != nil {
		c.Workspace = p.cfg.WorkspaceFor(inv.Tenant, inv.RunID)
	}
	c.reg, c.spec = reg, reg.spec
	if err := json.Unmarshal(inv.Args, &c.args); err != nil || c.args == nil {
		c.args = map[string]any{}
	}
	c.args = reg.argTypes.Normalize(c.args)
	o, err := p.runClaimed(ctx, c)
	if err != nil {
		return Outcome{}, true, err
	}
	return p.stepEmit(ctx, c, o), true, nil
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
	if _, err := p.cfg.Store.InvocationResume(ctx, resumeToken, store.SettleSucceeded(mustJSON(o))); err != nil {
		return Outcome{}, fmt.Errorf("runtime: resume: %w", err)
	}
	return o, nil
}
