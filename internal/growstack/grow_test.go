package growstack

import (
	"runtime"
	"sync"
	"testing"
)

// Grow on fresh goroutines, at several depths, while the garbage collector runs and
// scans their stacks: the frame must hold nothing it would follow, and the goroutine
// must go on as if nothing happened.
func TestGrow_OnFreshGoroutinesUnderGC(t *testing.T) {
	stop := make(chan struct{})
	var gc sync.WaitGroup
	gc.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	})
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			if got := recurse(i%40, i); got != i+i%40 {
				t.Errorf("recurse(%d, %d) = %d after Grow", i%40, i, got)
			}
		})
	}
	wg.Wait()
	close(stop)
	gc.Wait()
}

// recurse calls Grow depth frames down, with a live pointer in every frame above it.
func recurse(depth, n int) int {
	p := &n
	if depth == 0 {
		Grow()
		runtime.Gosched()
		return *p
	}
	return recurse(depth-1, n) + 1 + (*p - n)
}

func BenchmarkGrow_StackAlreadyLarge(b *testing.B) {
	Grow()
	for b.Loop() {
		Grow()
	}
}
