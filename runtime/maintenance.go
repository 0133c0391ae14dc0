package runtime

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// A pipeline maintains itself (LIFE-1), the way River's client runs its maintenance
// services: nobody has to remember a command for a crashed call to be recovered.
//
//   - Lease renewal is automatic and needs no Start: while any call runs its tool in
//     this process, one goroutine renews the leases of exactly those calls every
//     Lease/3, in one statement, and it exits when none runs. So a call's lease is
//     held for as long as its tool runs — a Prepare slower than the lease never ends
//     lease_lost, and no sweeper can reclaim a healthy long call — in a short-lived
//     `toolrun call` as much as in a server.
//   - The sweep is what a long-lived host starts (Start/Stop): a recovery pass
//     ([Pipeline.Recover]) at once, then every SweepInterval × (1 ± SweepJitter). Each
//     pass reclaims the expired leases of this worker's tools, decides them from their
//     recorded facts (RT-4) and re-runs the retryable ones, so the agent's retry of a
//     crashed call finds the recovered outcome. Many workers on one store may all run
//     it: every row is reclaimed and claimed by exactly one.

// ErrMaintenanceRunning is returned by Start when the maintenance already runs.
var ErrMaintenanceRunning = errors.New("runtime: maintenance is already running")

// maintenance is the state of the services Start runs.
type maintenance struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs the pipeline's maintenance — the periodic, jittered recovery pass — in
// the background until Stop is called or ctx is done. The first pass runs at once, so
// a host restarted after a crash recovers its own calls as soon as their leases
// expire. A pass's failure is logged, and the next pass tries again.
func (p *Pipeline) Start(ctx context.Context) error {
	m := &p.maint
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done != nil {
		return ErrMaintenanceRunning
	}
	ctx, m.cancel = context.WithCancel(ctx)
	m.done = make(chan struct{})
	go p.sweepLoop(ctx, m.done)
	return nil
}

// Stop ends the maintenance Start began and waits, until ctx is done, for a pass in
// progress to finish (a call it re-runs is cancelled; its lease then expires and the
// next sweep, here or elsewhere, decides it). Stopping what is not running is a no-op.
func (p *Pipeline) Stop(ctx context.Context) error {
	m := &p.maint
	m.mu.Lock()
	cancel, done := m.cancel, m.done
	m.cancel, m.done = nil, nil
	m.mu.Unlock()
	if done == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Pipeline) sweepLoop(ctx context.Context, done chan struct{}) {
	defer close(done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		rep, err := p.Recover(ctx)
		skipped := []any{"skipped_not_registered", rep.SkippedNotRegistered, "skipped_changed", rep.SkippedChanged}
		switch {
		case err != nil && ctx.Err() == nil:
			p.log.Error("recovery pass", "worker", p.cfg.WorkerID, "err", err)
		case rep.Reclaimed+rep.Retried+rep.Unsuspended > 0:
			p.log.Info("recovery pass", append([]any{"worker", p.cfg.WorkerID, "reclaimed", rep.Reclaimed, "retried", rep.Retried,
				"uncertain", rep.Uncertain, "failed", rep.Failed, "unsuspended", rep.Unsuspended}, skipped...)...)
		case rep.SkippedNotRegistered+rep.SkippedChanged > 0:
			// Rows of other hosts' tools on a shared store: theirs to recover, every pass.
			p.log.Debug("recovery pass", append([]any{"worker", p.cfg.WorkerID}, skipped...)...)
		}
		timer.Reset(p.nextSweep())
	}
}

// nextSweep draws the wait before the next pass: SweepInterval × (1 ± SweepJitter).
func (p *Pipeline) nextSweep() time.Duration {
	j := p.cfg.SweepJitter
	return time.Duration(float64(p.cfg.SweepInterval) * (1 - j + 2*j*rand.Float64()))
}

// trackExecuting adds d to the count of runs of invocation id in progress, and starts
// the lease renewer when the first run begins.
func (p *Pipeline) trackExecuting(id int64, d int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.executing == nil {
		p.executing = map[int64]int{}
	}
	if p.executing[id] += d; p.executing[id] <= 0 {
		delete(p.executing, id)
	}
	if len(p.executing) > 0 && !p.renewing {
		p.renewing = true
		go p.renewLeases()
	}
}

// renewLeases renews the leases of the calls this process executes, every Lease/3, in
// one statement however many are in flight, and returns once none is. A renewal may
// take up to a whole lease — a store slow to commit (a loaded disk, a writer lock held
// by another process) must not make the renewal give up early; one slower than that
// could not keep the lease anyway. Ticks that fall while a renewal is in flight are
// dropped, so renewals never pile up. A renewal that fails is logged and tried again
// at the next tick. If the store stays unreachable the lease runs out, the watermark
// write then refuses (an expired lease cannot start an effect) and the sweep decides.
func (p *Pipeline) renewLeases() {
	t := time.NewTicker(p.cfg.Lease / 3)
	defer t.Stop()
	for range t.C {
		p.mu.Lock()
		if len(p.executing) == 0 {
			p.renewing = false
			p.mu.Unlock()
			return
		}
		ids := make([]int64, 0, len(p.executing))
		for id := range p.executing {
			ids = append(ids, id)
		}
		p.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.Lease)
		_, err := p.cfg.Store.InvocationRenewLeases(ctx, p.cfg.WorkerID, ids, p.cfg.Lease)
		cancel()
		if err != nil {
			p.log.Error("renew leases", "worker", p.cfg.WorkerID, "calls", len(ids), "err", err)
		}
	}
}
