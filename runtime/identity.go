package runtime

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
)

// DefaultRetryWindow is Config.RetryWindow's default: how long after an identical
// write settled a call without a call id is still taken for its retry (SES-2).
const DefaultRetryWindow = 10 * time.Minute

// Call identity for callers that send no call id (SES-2).
//
// A client that names its calls (io.toolgen/call_id, toolrun call --call-id) says
// itself which call is a retry: the same id is the same call, always. Most MCP
// clients name none; their call id is derived from the tool and the canonical
// arguments (Call.Derived), so that a retry after a lost answer finds its call. But
// the same tool with the same arguments in the same session is not always the same
// call — a file read again after it changed, a write repeated on purpose — so a
// derived id names a family of calls, its generations: base, base-1, base-2, ...
// stepIdentity picks the generation by what the store holds for the latest one
// (store.PriorCalls.Latest), and this is the rule:
//
//   - None yet: the first generation, base.
//   - The latest is not settled (held for approval, running, suspended, released for
//     a retry) or UNCERTAIN: the same call. A retry joins it: it waits for the
//     approval it needs, answers call_in_progress, or the UNCERTAIN outcome until a
//     person resolves it. A held call is never held twice.
//   - The latest is a settled read or none call: a new call. A read is never answered
//     from a recorded outcome; reading again reads again (a duplicate that arrives
//     while the first is in flight runs too — reads record their row once, after they
//     ran, so there is nothing to join, and reading twice is harmless).
//   - The latest is a settled write that may have had its effect (SUCCEEDED, or ended
//     after its watermark), or a held write a person denied: the same call within
//     Config.RetryWindow of when it settled — a retry after a lost answer gets the
//     recorded outcome and never runs twice — and a new call after it.
//   - The latest is a write that ended before its watermark (FAILED or UNAVAILABLE
//     with nothing sent): a new call. Nothing happened; running it is not running it
//     twice.
//
// Refusals are never a generation (they are recorded under keys of their own; see
// recordRefusal): a call refused for its scope, mode, policy or the breaker is
// decided anew every time. And a call a person resolved moves on with the resolution
// (store.InvocationResolveUncertain): happened is a settled success, did not happen a
// call released to run again under its own key.
//
// The trade-off is the window. Inside it, a deliberate identical write is answered
// with the record of the first, replayed: true, and does not run; a client that means
// to repeat a write names its calls (or sends io.toolgen/step, which is part of the
// identity: the ADR's own step number). Past it, a retry of a write whose answer was
// lost runs again. The default, ten minutes, is far above the time clients wait
// before they give up and retry (60 s for the TypeScript SDK and the inspector) and
// the default approval hold (5 min), and short against the minutes between an agent's
// deliberate repeats. The window is read against the store's clock as the host sees
// it, so hosts on one store should agree on the time.
//
// The latest generation is read in one statement with the breaker's counter (step
// 5), which every call needs, named or derived (store.InvocationPriorCalls). So is,
// for a named call that may be recorded once, whether its key has a row: a named
// call is the call its id names, so its key is known before the read, and a read
// call would otherwise look it up apart at step 8 (issue 20). A call in a new run
// (Call.NewRun) reads nothing: the run can hold no call yet, so the first generation
// and an empty counter are what the read would have returned.
func (p *Pipeline) stepIdentity(ctx context.Context, c *call) error {
	c.argsHash = ArgsHash(c.spec.Name, c.canonicalArgs)
	params := store.PriorCallsParams{Tenant: c.Tenant, RunID: c.RunID, Step: c.Step, ArgsHash: c.argsHash}
	if c.Derived {
		params.CallIDBase = c.CallID
	} else { // a named call's id, and so its key, is decided already
		p.stepKey(c)
		if mayRecordOnce(c.spec) {
			params.Key = c.key
		}
	}
	var prior store.PriorCalls // a new run has no earlier calls: nothing to read
	if !c.NewRun {
		var err error
		if prior, err = p.cfg.Store.InvocationPriorCalls(ctx, params); err != nil {
			return fmt.Errorf("runtime: call identity and breaker: %w", err)
		}
	}
	c.breaker = prior.Breaker
	switch {
	case !c.Derived: // a named call is the call its id names
		c.keyFree = params.Key != "" && !prior.KeyTaken
	case !prior.HasLatest:
		c.keyFree = true
	case p.sameCall(c, prior.Latest, time.Now()):
		c.CallID = prior.Latest.CallID
	default:
		c.CallID, c.keyFree = nextGeneration(c.CallID, prior.Latest.CallID), true
	}
	if c.Derived {
		p.stepKey(c)
	}
	return nil
}

// sameCall applies the rule of stepIdentity to the latest generation prev.
func (p *Pipeline) sameCall(c *call, prev store.Generation, now time.Time) bool {
	switch {
	case !prev.Status.Terminal(), prev.Status == store.StatusUncertain:
		return true
	case c.spec.SideEffect != SideEffectWrite:
		return false
	case prev.Status == store.StatusSucceeded, prev.Status == store.StatusDenied,
		prev.EffectSentAt != nil, prev.EarlierEffectSentAt != nil:
		return now.Sub(prev.UpdatedAt) < p.cfg.RetryWindow
	}
	return false
}

// nextGeneration is the call id after prev in the generations of base.
func nextGeneration(base, prev string) string {
	n := 0
	if suffix, ok := strings.CutPrefix(prev, base+"-"); ok {
		n, _ = strconv.Atoi(suffix)
	}
	return base + "-" + strconv.Itoa(n+1)
}
