package faulttest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/internal/faultstore"
)

// route is one way a class reaches a write point.
type route struct {
	Path    path
	Classes []class
}

// matrixPoints are the write points of the matrix and the routes that reach each. A
// read reaches only its terminal insert: it has no row until step 13.
var matrixPoints = []struct {
	Point  faultstore.Point
	Routes []route
}{
	{faultstore.InsertRunning, []route{{pathDirect, []class{classPut, classSaveT, classSaveF, classSend}}}},
	{faultstore.InsertPending, []route{{pathDirect, []class{classDeploy}}}},
	{faultstore.InsertTerminal, []route{{pathDirect, []class{classRead}}}},
	{faultstore.Claim, []route{
		{pathDirect, []class{classDeploy}}, // the claim after the approval
		{pathFlaky, writeClasses},          // the caller's retry claims the released row
		{pathCrashBefore, writeClasses},    // recovery claims the swept row
	}},
	{faultstore.Watermark, []route{{pathDirect, []class{classSaveT, classSaveF, classSend, classDeploy}}}},
	{faultstore.Settle, []route{{pathDirect, writeClasses}}},
	{faultstore.Release, []route{{pathFlaky, writeClasses}}},
	{faultstore.Sweep, []route{{pathCrashBefore, writeClasses}, {pathCrashAfter, writeClasses}}},
	{faultstore.Renew, []route{{pathRenew, writeClasses}}},
}

// Deadlines of the caller's contexts: a hang at a write that uses the caller's context
// lasts hangDeadline; other cases never come near theirs.
const (
	hangDeadline = 300 * time.Millisecond
	longDeadline = 30 * time.Second
	maxHang      = 50 * time.Millisecond // a hang whose context has no deadline
)

// TestFaultMatrix injects every fault type at every write point, exactly once per case
// (the first call at the point; at the lease renewal, every call, since one lost
// renewal is absorbed by the next), into a call of every class that reaches the point,
// and checks each case (see check, and the expectations below).
func TestFaultMatrix(t *testing.T) {
	t.Parallel() // the tests spend most of their time waiting out hangs
	// One database per store and fault type, each a lane of its own: the lanes run at
	// once (a hang is spent waiting), and each one's lease surgery and sweeps see only
	// its own calls.
	type lane struct {
		name string
		kind faultstore.Kind
		h    *harness
	}
	var lanes []lane
	for _, name := range stores() {
		for _, kind := range faultstore.Kinds {
			lanes = append(lanes, lane{name, kind, newHarness(t, name)})
		}
	}
	inParallel(len(lanes), func(i int) {
		name, kind, h := lanes[i].name, lanes[i].kind, lanes[i].h
		var results []caseResult
		seq := 0
		for _, mp := range matrixPoints {
			for _, rt := range mp.Routes {
				for _, c := range rt.Classes {
					seq++
					sp := caseSpec{Point: mp.Point, Path: rt.Path, Kind: kind, Class: c}
					rule := faultstore.Rule{Point: mp.Point, Kind: kind, Nth: 1}
					if mp.Point == faultstore.Renew {
						rule = faultstore.Rule{Point: mp.Point, Kind: kind, Rate: 1}
					}
					fs, err := faultstore.New(h.raw, faultstore.Options{Rules: []faultstore.Rule{rule}, MaxHang: maxHang})
					if err != nil {
						t.Error(err)
						return
					}
					o := runOpts{deadline: longDeadline, maxIter: 12}
					if (kind == faultstore.Hang || kind == faultstore.HangAfterExecute) && rt.Path != pathRenew {
						o.deadline, o.afterFault = hangDeadline, longDeadline
					}
					r := h.runCase(fs, sp, fmt.Sprintf("m%d", seq), seq, o)
					expectMatrix(&r)
					if len(r.Problems) > 0 {
						t.Errorf("%s %s %s %s %s: %v\n\t%s", name, sp.Point, sp.Path, sp.Kind, sp.Class.Name,
							r.Problems, strings.Join(r.Trace, "\n\t"))
					}
					results = append(results, r)
				}
			}
		}
		if open, err := h.openRows(); err != nil || len(open) > 0 {
			t.Errorf("%s %s: rows left open: %d (%v)", name, kind, len(open), err)
		}
		report.addMatrix(name, results)
		t.Log("\n" + matrixTable(name+", "+kind.String(), results))
	})
}

// inParallel runs f(0) ... f(n-1) at once and waits for them all. The test runner runs
// only GOMAXPROCS parallel subtests at a time, and these wait far more than they compute.
func inParallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i)
		}()
	}
	wg.Wait()
}

// expectMatrix adds what a single fault at a point must lead to, beyond the invariants.
func expectMatrix(r *caseResult) {
	if r.Injected == 0 {
		r.problem("the fault was never injected: the case did not reach %s", r.Point)
		return
	}
	hang := r.Kind == faultstore.Hang || r.Kind == faultstore.HangAfterExecute
	switch {
	case r.Point == faultstore.Watermark && !hang && r.InjectedFirst > 0:
		// The pipeline retries the watermark with the same token: after a Timeout the
		// retry writes it, after an ExecuteAndTimeout the store recognises the retry as
		// the same write. Either way the effect goes out once and the call succeeds in
		// the same Execute — never UNCERTAIN, never twice.
		if r.First != "succeeded/" || r.Executes != 1 || r.Effects != 1 {
			r.problem("watermark %s: first outcome %s after %d executes with %d effects; want succeeded at once with 1",
				r.Kind, r.First, r.Executes, r.Effects)
		}
	case r.Point == faultstore.Watermark && hang && r.InjectedFirst > 0:
		// The caller's deadline ended the wait: the watermark is not known to be
		// committed, so nothing was sent and the call is retryable.
		if r.First != "unavailable/"+string(runtime.ReasonWatermarkFailed) || r.FinalStatus != "SUCCEEDED" || r.Effects != 1 {
			r.problem("watermark %s: first outcome %s, final %s with %d effects; want watermark_failed, then SUCCEEDED with 1",
				r.Kind, r.First, r.FinalStatus, r.Effects)
		}
	case r.Point == faultstore.Settle && !hang:
		// A settle retried under the same fence lands or is recognised as landed.
		if r.First != "succeeded/" || r.Executes != 1 || r.Effects != 1 {
			r.problem("settle %s: first outcome %s after %d executes with %d effects; want succeeded at once with 1",
				r.Kind, r.First, r.Executes, r.Effects)
		}
	case r.Point == faultstore.Release && !hang:
		// A release retried under the same fence lands or is recognised as landed: the
		// caller sees the retryable failure, and its retry runs the call.
		if r.First != "failed/"+string(runtime.ReasonToolFailureRetryable) || r.FinalStatus != "SUCCEEDED" || r.Effects != 1 {
			r.problem("release %s: first outcome %s, final %s with %d effects; want tool_failure_retryable, then SUCCEEDED with 1",
				r.Kind, r.First, r.FinalStatus, r.Effects)
		}
	}
	// Exactly one fault per case, except at the renewal (every call).
	if r.Point != faultstore.Renew && r.Injected != 1 {
		r.problem("%d faults injected, want 1", r.Injected)
	}
}

// TestFaultRate runs calls of every class on every path except the stalled renewal,
// with a fault at each write of the claim, record, watermark, settle, release and sweep
// points at FAULTTEST_RATE (default 5 %), the fault type drawn uniformly, several
// faults per call possible. FAULTTEST_CALLS sets the number of calls per store (default
// 200, under -short 50; the soak uses 20000).
func TestFaultRate(t *testing.T) {
	t.Parallel() // the tests spend most of their time waiting out hangs
	calls := envInt(t, "FAULTTEST_CALLS", defaultRateCalls())
	seed := uint64(envInt(t, "FAULTTEST_SEED", 1))
	rate := 0.05
	if s := os.Getenv("FAULTTEST_RATE"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v <= 0 || v > 1 {
			t.Fatalf("FAULTTEST_RATE=%q: want a number in (0, 1]", s)
		}
		rate = v
	}
	names := stores()
	hs := make([]*harness, len(names))
	for i, name := range names {
		hs[i] = newHarness(t, name)
	}
	inParallel(len(names), func(i int) {
		name, h := names[i], hs[i]
		var rules []faultstore.Rule
		for _, p := range ratePoints {
			for _, k := range faultstore.Kinds {
				rules = append(rules, faultstore.Rule{Point: p, Kind: k, Rate: rate / float64(len(faultstore.Kinds))})
			}
		}
		fs, err := faultstore.New(h.raw, faultstore.Options{Seed: seed, Rules: rules, MaxHang: maxHang})
		if err != nil {
			t.Error(err)
			return
		}
		rng := rand.New(rand.NewPCG(seed, 2))
		paths := []path{pathDirect, pathFlaky, pathCrashBefore, pathCrashAfter}
		var results []caseResult
		start := time.Now()
		for i := range calls {
			c := classes[rng.IntN(len(classes))]
			p := pathDirect
			if c != classRead {
				p = paths[rng.IntN(len(paths))]
			}
			r := h.runCase(fs, caseSpec{Path: p, Class: c}, fmt.Sprintf("r%d", i), i,
				runOpts{deadline: hangDeadline, maxIter: 30})
			if len(r.Problems) > 0 {
				t.Errorf("%s call %d (%s, %s): %v\n\t%s", name, i, c.Name, p, r.Problems, strings.Join(r.Trace, "\n\t"))
			}
			results = append(results, r)
		}
		if open, err := h.openRows(); err != nil || len(open) > 0 {
			t.Errorf("%s: rows left open: %d (%v)", name, len(open), err)
		}
		run := rateRun{Store: name, Calls: calls, Rate: rate, Seed: seed, Results: results,
			Injected: fs.Injected(), Elapsed: time.Since(start)}
		report.addRate(run)
		t.Log("\n" + rateTable(run))
	})
}

// defaultRateCalls is the rate run's size without FAULTTEST_CALLS: 200 calls per
// store, and under -short 50, which at 5 % of the writes still injects several faults
// per store over every class and path (the table in the test log counts them).
func defaultRateCalls() int {
	if testing.Short() {
		return 50
	}
	return 200
}

// ratePoints are the writes the rate run faults.
var ratePoints = []faultstore.Point{
	faultstore.InsertRunning, faultstore.InsertPending, faultstore.InsertTerminal, faultstore.Claim,
	faultstore.Watermark, faultstore.Settle, faultstore.Release, faultstore.Sweep,
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// TestFaultBursts exhausts the pipeline's retries of one write: the first three calls
// at the point fault (the pipeline tries a watermark, settle or release three times),
// so it must give up and decide without knowing whether the write landed.
func TestFaultBursts(t *testing.T) {
	t.Parallel() // the tests spend most of their time waiting out hangs
	type burst struct {
		point  faultstore.Point
		path   path
		expect func(r *caseResult)
	}
	watermarked := []class{classSaveT, classSaveF, classSend, classDeploy}
	bursts := []burst{
		{faultstore.Watermark, pathDirect, func(r *caseResult) {
			// Three lost acks, or three failures: the watermark is not known to be
			// committed, so the effect is not sent and the call is released for a retry
			// (never UNCERTAIN); the retry sends it once.
			if r.First != "unavailable/"+string(runtime.ReasonWatermarkFailed) || r.FinalStatus != "SUCCEEDED" || r.Effects != 1 {
				r.problem("first %s, final %s, %d effects; want watermark_failed, then SUCCEEDED with 1", r.First, r.FinalStatus, r.Effects)
			}
		}},
		{faultstore.Settle, pathDirect, func(r *caseResult) {
			// The effect went out and the outcome could not be recorded: the caller gets an
			// error. If the settle did land (ExecuteAndTimeout), the retry replays it;
			// if not, recovery decides from the watermark: UNCERTAIN where a repeat is not
			// safe, a re-execution where it is.
			want := "SUCCEEDED"
			if r.Kind == faultstore.Timeout && !r.Class.RetrySafe() {
				want = "UNCERTAIN"
			}
			if r.First != "error" || r.FinalStatus != want {
				r.problem("first %s, final %s; want error, then %s", r.First, r.FinalStatus, want)
			}
			if r.Kind == faultstore.ExecuteAndTimeout && r.Effects != 1 {
				r.problem("%d effects after a settle that landed; want 1", r.Effects)
			}
		}},
		{faultstore.Release, pathFlaky, func(r *caseResult) {
			if r.First != "error" || r.FinalStatus != "SUCCEEDED" || r.Effects != 1 {
				r.problem("first %s, final %s, %d effects; want error, then SUCCEEDED with 1", r.First, r.FinalStatus, r.Effects)
			}
		}},
	}
	names := stores()
	hs := make([]*harness, len(names))
	for i, name := range names {
		hs[i] = newHarness(t, name)
	}
	inParallel(len(names), func(i int) {
		name, h := names[i], hs[i]
		var results []caseResult
		seq := 0
		for _, bu := range bursts {
			cs := writeClasses
			if bu.point == faultstore.Watermark {
				cs = watermarked
			}
			for _, kind := range []faultstore.Kind{faultstore.Timeout, faultstore.ExecuteAndTimeout} {
				for _, c := range cs {
					seq++
					rules := []faultstore.Rule{
						{Point: bu.point, Kind: kind, Nth: 1}, {Point: bu.point, Kind: kind, Nth: 2}, {Point: bu.point, Kind: kind, Nth: 3},
					}
					fs, err := faultstore.New(h.raw, faultstore.Options{Rules: rules, MaxHang: maxHang})
					if err != nil {
						t.Error(err)
						return
					}
					sp := caseSpec{Point: bu.point, Path: bu.path, Kind: kind, Class: c}
					r := h.runCase(fs, sp, fmt.Sprintf("b%d", seq), seq, runOpts{deadline: longDeadline, maxIter: 12})
					if r.Injected != 3 {
						r.problem("%d faults injected, want 3", r.Injected)
					}
					bu.expect(&r)
					if len(r.Problems) > 0 {
						t.Errorf("%s %s ×3 %s %s: %v\n\t%s", name, bu.point, kind, c.Name, r.Problems, strings.Join(r.Trace, "\n\t"))
					}
					results = append(results, r)
				}
			}
		}
		if open, err := h.openRows(); err != nil || len(open) > 0 {
			t.Errorf("%s: rows left open: %d (%v)", name, len(open), err)
		}
		report.addBursts(name, results)
		t.Log("\n" + matrixTable(name+", three faults in a row", results))
	})
}
