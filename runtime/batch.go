package runtime

import (
	"context"
	"sync"
)

// ExecuteBatch runs the calls one model call produced: one step, distinct call ids
// (RT-10). The batch runs in parallel only if every call in it is parallel_safe;
// otherwise the whole batch runs sequentially, in order — a mixed batch is never split,
// because splitting it would mean inferring that no read depends on a write in the same
// batch. Outcomes are returned in the order of calls; the error is the first store
// failure, if any.
func (p *Pipeline) ExecuteBatch(ctx context.Context, calls []Call) ([]Outcome, error) {
	out := make([]Outcome, len(calls))
	if !p.parallelSafe(ctx, calls) {
		for i, c := range calls {
			o, err := p.Execute(ctx, c)
			if err != nil {
				return out, err
			}
			out[i] = o
		}
		return out, nil
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := p.Execute(ctx, c)
			out[i] = o
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out, firstErr
}

// parallelSafe reports whether every call names a pinned tool whose spec is
// parallel_safe. An unknown tool (or a pin the store could not read) makes the batch
// sequential; its call is refused, or fails, in turn.
func (p *Pipeline) parallelSafe(ctx context.Context, calls []Call) bool {
	if len(calls) < 2 {
		return false
	}
	for _, c := range calls {
		reg, reason, err := p.cfg.Registry.resolve(ctx, c.sessionKey(), c.Tool)
		if err != nil || reason != "" || !reg.spec.ParallelSafe || !reg.spec.VisibleTo(c.Tenant) {
			return false
		}
	}
	return true
}
