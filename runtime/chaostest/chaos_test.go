package chaostest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rt "github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/postgres"
)

// settings of one chaos run, from the environment.
type settings struct {
	calls, workers, callers  int
	full                     bool // CHAOSTEST_CALLS set: restarts every interval until the calls are done
	intervalMin, intervalMax time.Duration
	downMin, downMax         time.Duration
	effect                   string
	lease                    time.Duration
	giveUp                   time.Duration
	modes                    []string
	seed                     uint64
}

func settingsFromEnv(t *testing.T) settings {
	s := settings{calls: 300, workers: 4, callers: 2, lease: 2 * time.Second, effect: "10ms-40ms",
		modes: []string{"immediate"}, seed: mrand.Uint64()}
	if n := envInt("CHAOSTEST_CALLS"); n > 0 {
		s.calls, s.full = n, true
		s.effect = "100ms-300ms"
		s.modes = []string{"immediate", "fast"}
	}
	if n := envInt("CHAOSTEST_WORKERS"); n > 0 {
		s.workers = n
	}
	if n := envInt("CHAOSTEST_CALLERS"); n > 0 {
		s.callers = n
	}
	if d := envDuration("CHAOSTEST_LEASE"); d > 0 {
		s.lease = d
	}
	if v := os.Getenv("CHAOSTEST_EFFECT"); v != "" {
		s.effect = v
	}
	if _, _, err := parseRange(s.effect); err != nil {
		t.Fatalf("CHAOSTEST_EFFECT: %v", err)
	}
	var err error
	interval, down := "5s-20s", "0s-2s"
	if v := os.Getenv("CHAOSTEST_INTERVAL"); v != "" {
		interval = v
	}
	if v := os.Getenv("CHAOSTEST_DOWN"); v != "" {
		down = v
	}
	if s.intervalMin, s.intervalMax, err = parseRange(interval); err != nil {
		t.Fatalf("CHAOSTEST_INTERVAL: %v", err)
	}
	if s.downMin, s.downMax, err = parseRange(down); err != nil {
		t.Fatalf("CHAOSTEST_DOWN: %v", err)
	}
	if v := os.Getenv("CHAOSTEST_MODES"); v != "" {
		s.modes = nil
		for m := range strings.SplitSeq(v, ",") {
			if m != "immediate" && m != "fast" {
				t.Fatalf("CHAOSTEST_MODES: %q is neither immediate nor fast", m)
			}
			s.modes = append(s.modes, m)
		}
	}
	if v := os.Getenv("CHAOSTEST_SEED"); v != "" {
		if s.seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("CHAOSTEST_SEED: %v", err)
		}
	}
	s.giveUp = 3*s.lease + time.Second
	return s
}

// restart is one stop and start of the server, as the workers lived it.
type restart struct {
	Mode            string
	At              time.Duration // the stop command, since the workers started
	Stop            time.Duration // the stop command until the postmaster exited
	Down            time.Duration // the postmaster's exit until the start command
	Ready           time.Duration // the start command until it accepted a connection
	Recovery        time.Duration // the start command until a worker completed a call; -1: none before the next stop
	AllWorkers      time.Duration // ... until every running worker completed one; -1: not all before the next stop
	EffectsInFlight int           // effects begun and not ended at the stop command

	stopAt, startAt, readyAt time.Time
}

type worker struct {
	idx    int
	cmd    *exec.Cmd
	out    *bytes.Buffer
	done   <-chan struct{}
	exited time.Time
}

// TestPostgresChaos is issue 7's PostgreSQL chaos (point 3): workers run calls on a
// throwaway cluster while the test stops and starts it; afterwards no call is lost,
// no non-idempotent effect ran twice, UNCERTAIN follows a committed watermark only,
// every watermarked effect began after its committed watermark, and the time each
// restart took to recover is recorded.
//
// By default it is the short version `make test` runs: 300 calls, one immediate
// restart once a third of them are done. CHAOSTEST_CALLS=n makes it the full run
// (`make chaos`, n=5000): the server is stopped (immediate or fast shutdown, chosen at
// random) for 0-2 s every 5-20 s until the workers are done. Settings:
//
//	CHAOSTEST_CALLS     number of calls (setting it selects the full run)
//	CHAOSTEST_WORKERS   worker processes (4); CHAOSTEST_CALLERS concurrent callers each (2)
//	CHAOSTEST_INTERVAL  time between restarts, full run ("5s-20s")
//	CHAOSTEST_DOWN      time the server stays down ("0s-2s")
//	CHAOSTEST_MODES     shutdown modes to choose from ("immediate" short, "immediate,fast" full)
//	CHAOSTEST_EFFECT    how long an effect takes ("10ms-40ms" short, "100ms-300ms" full)
//	CHAOSTEST_LEASE     the pipeline's lease (2s; renewed every third)
//	CHAOSTEST_SEED      the chaos schedule's seed (printed by every run)
//	CHAOSTEST_OUT       write the tables there as Markdown
//	CHAOSTEST_PG_BINDIR where initdb and postgres are (found otherwise)
func TestPostgresChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos test runs a PostgreSQL cluster and worker processes; skipped in -short")
	}
	s := settingsFromEnv(t)
	cl := newCluster(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, cl.DSN(), postgres.WithMaxConns(4)) // migrates before the workers open
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dir := t.TempDir()
	receipts, progressLog := filepath.Join(dir, "receipts.log"), filepath.Join(dir, "progress.log")

	budget := 60 * time.Minute
	if dl, ok := t.Deadline(); ok {
		budget = time.Until(dl) - 45*time.Second // leave the drain and the cleanup their time
	}
	deadline := time.Now().Add(budget)

	env := append(os.Environ(), envHelper+"=1", envDSN+"="+cl.DSN(), envDir+"="+dir,
		envWorkers+"="+strconv.Itoa(s.workers), envCalls+"="+strconv.Itoa(s.calls),
		envCallers+"="+strconv.Itoa(s.callers), envLease+"="+s.lease.String(), envEffect+"="+s.effect,
		envGiveUp+"="+s.giveUp.String(), envRecoverEach+"=1s")
	begin := time.Now()
	workers := make([]*worker, s.workers)
	for i := range workers {
		out := &bytes.Buffer{}
		cmd := exec.Command(os.Args[0], "-test.run=^TestChaosHelperProcess$", "-test.count=1", "-test.v=false")
		cmd.Env = append(slices.Clone(env), envWorker+"="+strconv.Itoa(i))
		cmd.Stdout, cmd.Stderr = out, out
		// A worker dies with the test process: none outlives a failed run.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		done, err := startOwned(cmd)
		if err != nil {
			t.Fatal(err)
		}
		workers[i] = &worker{idx: i, cmd: cmd, out: out, done: done}
	}
	defer func() {
		for _, w := range workers {
			if w != nil && w.exited.IsZero() {
				_ = w.cmd.Process.Kill()
				<-w.done
			}
		}
	}()

	// The chaos loop.
	rng := mrand.New(mrand.NewPCG(s.seed, s.seed^0x9e3779b97f4a7c15))
	pick := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)))
	}
	var restarts []*restart
	nextStop := time.Now().Add(pick(s.intervalMin, s.intervalMax))
	running := len(workers)
	for running > 0 {
		time.Sleep(50 * time.Millisecond)
		for _, w := range workers {
			if !w.exited.IsZero() {
				continue
			}
			select {
			case <-w.done:
				w.exited = time.Now()
				running--
				if !w.cmd.ProcessState.Success() {
					t.Errorf("worker %d failed (%v):\n%s", w.idx, w.cmd.ProcessState, tail(w.out.String(), 6000))
				}
			default:
			}
		}
		if time.Now().After(deadline) {
			// Stuck: ask the live workers for their goroutines before failing.
			for _, w := range workers {
				if w.exited.IsZero() {
					_ = w.cmd.Process.Signal(syscall.SIGQUIT)
				}
			}
			time.Sleep(3 * time.Second)
			for _, w := range workers {
				t.Logf("worker %d output:\n%s", w.idx, tail(w.out.String(), 20000))
			}
			t.Fatalf("the workers did not finish within %s (%d still running, %d restarts)", budget.Round(time.Second), running, len(restarts))
		}
		if running == 0 {
			break
		}
		var due bool
		if s.full {
			due = time.Now().After(nextStop)
		} else {
			due = len(restarts) == 0 && countPrefix(progressLog, "done ") >= s.calls/3
		}
		if !due {
			continue
		}
		r := &restart{Mode: s.modes[rng.IntN(len(s.modes))]}
		r.stopAt = time.Now()
		r.At = r.stopAt.Sub(begin)
		if r.Stop, err = cl.stop(r.Mode); err != nil {
			t.Fatal(err)
		}
		r.EffectsInFlight = effectsOpenAt(receipts, r.stopAt)
		down := pick(s.downMin, s.downMax)
		time.Sleep(down)
		r.startAt = time.Now()
		r.Down = r.startAt.Sub(r.stopAt) - r.Stop
		if r.Ready, err = cl.start(); err != nil {
			t.Fatal(err)
		}
		r.readyAt = r.startAt.Add(r.Ready)
		restarts = append(restarts, r)
		nextStop = time.Now().Add(pick(s.intervalMin, s.intervalMax))
	}
	workersDone := time.Since(begin)
	if t.Failed() {
		t.FailNow()
	}
	if len(restarts) == 0 {
		t.Fatal("the workers finished before the first restart: nothing was tested (more calls, or a shorter CHAOSTEST_INTERVAL)")
	}

	results := make([]workerResult, len(workers))
	for i := range workers {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("worker%d.json", i)))
		if err != nil {
			t.Fatalf("worker %d wrote no result: %v", i, err)
		}
		if err := json.Unmarshal(b, &results[i]); err != nil {
			t.Fatalf("worker %d result: %v", i, err)
		}
	}
	prog, err := readProgress(progressLog)
	if err != nil {
		t.Fatal(err)
	}
	measureRecovery(restarts, prog, workers)

	// The drain: the cluster is up and every call was submitted. Recover until no row
	// is left RUNNING or PENDING; a call without a row is retried, as its caller would.
	drainStart := time.Now()
	drain := newDrain(t, st, receipts, s)
	drained := drain.run(ctx, s.calls, time.Now().Add(2*time.Minute+2*s.lease))
	drainTime := time.Since(drainStart)

	// The checks.
	rs, err := readReceipts(receipts)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := allRows(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	chk := check(s.calls, rows, rs)
	for _, p := range chk.problems {
		t.Error(p)
	}

	rep := report(s, chk, restarts, results, drained, workersDone, drainTime, len(prog))
	for _, section := range strings.Split(rep, "\n\n") {
		t.Log("\n" + section)
	}
	if out := os.Getenv("CHAOSTEST_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(rep), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// effectsOpenAt counts the effects begun and not yet ended at instant at.
func effectsOpenAt(receipts string, at time.Time) int {
	rs, err := readReceipts(receipts)
	if err != nil {
		return -1
	}
	open := map[string]bool{}
	for _, r := range rs {
		if r.At.After(at) {
			continue
		}
		switch r.Kind {
		case "begin":
			open[r.Token] = true
		case "end":
			delete(open, r.Token)
		}
	}
	return len(open)
}

// measureRecovery fills each restart's Recovery and AllWorkers from the callers'
// progress lines: the first call completed after the server accepted connections
// again, before the next stop.
func measureRecovery(restarts []*restart, prog []progress, workers []*worker) {
	var done []progress
	for _, p := range prog {
		if p.Kind == "done" {
			done = append(done, p)
		}
	}
	sort.Slice(done, func(i, j int) bool { return done[i].At.Before(done[j].At) })
	for i, r := range restarts {
		until := time.Now()
		if i+1 < len(restarts) {
			until = restarts[i+1].stopAt
		}
		r.Recovery, r.AllWorkers = -1, -1
		first := map[int]time.Time{}
		for _, p := range done {
			if !p.At.After(r.readyAt) || p.At.After(until) {
				continue
			}
			if r.Recovery < 0 {
				r.Recovery = p.At.Sub(r.startAt)
			}
			if _, ok := first[p.Worker]; !ok {
				first[p.Worker] = p.At
			}
		}
		var last time.Time
		all := true
		for _, w := range workers {
			if !w.exited.After(r.startAt) {
				continue // it had finished its share before this restart
			}
			at, ok := first[w.idx]
			if !ok {
				if w.exited.Before(until) {
					continue // it finished its share without another call
				}
				all = false
				break
			}
			if at.After(last) {
				last = at
			}
		}
		if all && !last.IsZero() {
			r.AllWorkers = last.Sub(r.startAt)
		}
	}
}

// countPrefix counts the lines of path that start with prefix.
func countPrefix(path, prefix string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n := bytes.Count(b, []byte("\n"+prefix))
	if bytes.HasPrefix(b, []byte(prefix)) {
		n++
	}
	return n
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// The drain.

type drainer struct {
	t  *testing.T
	st store.Store
	p  *rt.Pipeline
}

type drainResult struct {
	Rounds, Unrecorded, Retried, Reclaimed, Uncertain, CrashLoop, StoreErrors int
}

func newDrain(t *testing.T, st store.Store, receipts string, s settings) *drainer {
	minD, maxD, _ := parseRange(s.effect)
	reg, err := newRegistry(receipts, "drain", minD, maxD)
	if err != nil {
		t.Fatal(err)
	}
	p, err := rt.NewPipeline(rt.Config{Registry: reg, Store: st, Lease: s.lease, WorkerID: fmt.Sprintf("drain-%d", os.Getpid())})
	if err != nil {
		t.Fatal(err)
	}
	return &drainer{t: t, st: st, p: p}
}

func (d *drainer) run(ctx context.Context, calls int, deadline time.Time) drainResult {
	var res drainResult
	for ; ; res.Rounds++ {
		rows, err := allRows(ctx, d.st)
		if err != nil {
			res.StoreErrors++
			time.Sleep(100 * time.Millisecond)
			continue
		}
		open := 0
		for idx := range calls {
			inv := rows[keyOf(idx)]
			if inv == nil {
				// No row: the caller's retry records and runs it.
				res.Unrecorded++
				open++
				if _, err := d.p.Execute(ctx, callOf(idx)); err != nil {
					res.StoreErrors++
				}
				continue
			}
			if !inv.Status.Terminal() {
				open++
			}
		}
		if open == 0 {
			return res
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("drain: %d calls still not settled after %d rounds", open, res.Rounds)
		}
		rep, err := d.p.Recover(ctx)
		if err != nil {
			res.StoreErrors++
		}
		res.Reclaimed += rep.Reclaimed
		res.Retried += rep.Retried
		res.Uncertain += rep.Uncertain
		res.CrashLoop += rep.Failed
		time.Sleep(200 * time.Millisecond)
	}
}

// allRows returns every invocation, by key.
func allRows(ctx context.Context, st store.Store) (map[string]*store.Invocation, error) {
	invs, err := st.InvocationList(ctx, store.InvocationFilter{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]*store.Invocation, len(invs))
	for _, inv := range invs {
		out[inv.Key] = inv
	}
	return out, nil
}

// The checker.

type classCounts struct {
	Calls, Succeeded, UncertainSent, UncertainNotSent, CrashLoop, Other int
	Effects, RunTwice, Retried, Overlaps                                int
}

type checked struct {
	perClass                                  []classCounts // by index of classes
	lost, unsettled, doubles, badUncertain    int
	effectBeforeWatermark, unfinishedEffects  int
	succeededWithoutEffect, unknownEffectKeys int
	problems                                  []string
}

func check(calls int, rows map[string]*store.Invocation, rs []receipt) checked {
	c := checked{perClass: make([]classCounts, len(classes))}
	begins := map[string][]receipt{}
	ends := map[string]int{}
	open := map[string]map[string]bool{} // key -> tokens begun and not ended
	overlaps := map[string]int{}
	for _, r := range rs {
		switch r.Kind {
		case "begin":
			begins[r.Key] = append(begins[r.Key], r)
			if len(open[r.Key]) > 0 {
				overlaps[r.Key]++
			}
			if open[r.Key] == nil {
				open[r.Key] = map[string]bool{}
			}
			open[r.Key][r.Token] = true
		case "end":
			ends[r.Key]++
			delete(open[r.Key], r.Token)
		}
	}
	known := map[string]bool{}
	for idx := range calls {
		cl := classOf(idx)
		ci := idx % len(classes)
		cc := &c.perClass[ci]
		key := keyOf(idx)
		known[key] = true
		cc.Calls++
		bs := begins[key]
		cc.Effects += len(bs)
		cc.Overlaps += overlaps[key]
		if len(open[key]) > 0 {
			c.unfinishedEffects++
			c.problems = append(c.problems, fmt.Sprintf("call %d (%s): an effect began and never ended", idx, cl.Name))
		}
		if len(bs) > 1 {
			cc.RunTwice++
			if !cl.RetrySafe() {
				c.doubles++
				c.problems = append(c.problems, fmt.Sprintf("call %d (%s): effect executed %d times (by %s)", idx, cl.Name, len(bs), whoList(bs)))
			}
		}
		inv := rows[key]
		if inv == nil {
			c.lost++
			c.problems = append(c.problems, fmt.Sprintf("call %d (%s): lost, no row (%d effects)", idx, cl.Name, len(bs)))
			continue
		}
		if inv.Attempt > 1 {
			cc.Retried++
		}
		switch {
		case !inv.Status.Terminal():
			c.unsettled++
			c.problems = append(c.problems, fmt.Sprintf("call %d (%s): not classified: %s (attempt %d)", idx, cl.Name, inv.Status, inv.Attempt))
		case inv.Status == store.StatusSucceeded:
			cc.Succeeded++
			if ends[key] == 0 {
				c.succeededWithoutEffect++
				c.problems = append(c.problems, fmt.Sprintf("call %d (%s): SUCCEEDED but no effect completed", idx, cl.Name))
			}
			if cl.Watermarked() && inv.EffectSentAt == nil {
				c.effectBeforeWatermark++
				c.problems = append(c.problems, fmt.Sprintf("call %d (%s): SUCCEEDED without a committed watermark", idx, cl.Name))
			}
		case inv.Status == store.StatusUncertain:
			if len(bs) == 0 {
				cc.UncertainNotSent++
			} else {
				cc.UncertainSent++
			}
			if cl.RetrySafe() || inv.EffectSentAt == nil {
				c.badUncertain++
				c.problems = append(c.problems, fmt.Sprintf("call %d (%s): UNCERTAIN but the class may be retried or no watermark was committed (watermark %v)",
					idx, cl.Name, inv.EffectSentAt != nil))
			}
		case inv.Status == store.StatusFailed && inv.ReasonCode == string(rt.ReasonCrashLoop):
			cc.CrashLoop++
			if !cl.RetrySafe() && len(bs) > 0 {
				c.problems = append(c.problems, fmt.Sprintf("call %d (%s): crash_loop although its effect ran", idx, cl.Name))
			}
		default:
			cc.Other++
			c.problems = append(c.problems, fmt.Sprintf("call %d (%s): ended %s/%s (attempt %d)", idx, cl.Name, inv.Status, inv.ReasonCode, inv.Attempt))
		}
		if !cl.Watermarked() {
			continue
		}
		// Every effect began after a committed watermark of its call (the database's
		// clock and ours are the same machine's). A non-idempotent call's one effect
		// belongs to the attempt whose watermark the row keeps; a retried
		// conditionally idempotent call keeps its first watermark as the earlier one.
		for _, b := range bs {
			wm := inv.EffectSentAt
			if cl.RetrySafe() && inv.EarlierEffectSentAt != nil && (wm == nil || inv.EarlierEffectSentAt.Before(*wm)) {
				wm = inv.EarlierEffectSentAt
			}
			if wm == nil || wm.After(b.At) {
				c.effectBeforeWatermark++
				c.problems = append(c.problems, fmt.Sprintf("call %d (%s): effect by %s at %s without a watermark committed before it (watermark %v)",
					idx, cl.Name, b.Who, b.At.Format(time.RFC3339Nano), wm))
			}
		}
	}
	for key := range begins {
		if !known[key] {
			c.unknownEffectKeys++
			c.problems = append(c.problems, "an effect with an unknown key "+key)
		}
	}
	sort.Strings(c.problems)
	return c
}

func whoList(rs []receipt) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Who)
	}
	return strings.Join(out, ",")
}

// The report.

func report(s settings, c checked, restarts []*restart, results []workerResult, d drainResult,
	workersDone, drainTime time.Duration, progressLines int) string {
	var b strings.Builder
	version := "short (one restart)"
	if s.full {
		version = fmt.Sprintf("full (a restart every %s-%s)", s.intervalMin, s.intervalMax)
	}
	modes := map[string]int{}
	for _, r := range restarts {
		modes[r.Mode]++
	}
	fmt.Fprintf(&b, "### PostgreSQL chaos: %s\n\n", version)
	fmt.Fprintf(&b, "| calls | workers x callers | restarts | down | effect | lease | workers done in | drain | seed |\n")
	fmt.Fprintf(&b, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	fmt.Fprintf(&b, "| %d | %d x %d | %d (immediate %d, fast %d) | %s-%s | %s | %s | %s | %s, %d rounds | %d |\n\n",
		s.calls, s.workers, s.callers, len(restarts), modes["immediate"], modes["fast"], s.downMin, s.downMax,
		s.effect, s.lease, workersDone.Round(100*time.Millisecond), drainTime.Round(100*time.Millisecond), d.Rounds, s.seed)

	fmt.Fprintf(&b, "| class | calls | SUCCEEDED | UNCERTAIN, effect sent | UNCERTAIN, not sent | FAILED crash_loop | other | effects run | calls run twice | overlapping runs | rows retried |\n")
	fmt.Fprintf(&b, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	var tot classCounts
	for i, cc := range c.perClass {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d |\n", classes[i].Name, cc.Calls, cc.Succeeded,
			cc.UncertainSent, cc.UncertainNotSent, cc.CrashLoop, cc.Other, cc.Effects, cc.RunTwice, cc.Overlaps, cc.Retried)
		tot.Calls += cc.Calls
		tot.Succeeded += cc.Succeeded
		tot.UncertainSent += cc.UncertainSent
		tot.UncertainNotSent += cc.UncertainNotSent
		tot.CrashLoop += cc.CrashLoop
		tot.Other += cc.Other
		tot.Effects += cc.Effects
		tot.RunTwice += cc.RunTwice
		tot.Overlaps += cc.Overlaps
		tot.Retried += cc.Retried
	}
	fmt.Fprintf(&b, "| **all** | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d |\n\n", tot.Calls, tot.Succeeded, tot.UncertainSent,
		tot.UncertainNotSent, tot.CrashLoop, tot.Other, tot.Effects, tot.RunTwice, tot.Overlaps, tot.Retried)

	fmt.Fprintf(&b, "| check | count |\n| --- | --- |\n")
	fmt.Fprintf(&b, "| calls lost (no row) | %d |\n| calls not classified (RUNNING or PENDING after the drain) | %d |\n", c.lost, c.unsettled)
	fmt.Fprintf(&b, "| non-idempotent effects executed twice | %d |\n| UNCERTAIN without a committed watermark, or of a retry-safe class | %d |\n", c.doubles, c.badUncertain)
	fmt.Fprintf(&b, "| effects without a watermark committed before them | %d |\n| SUCCEEDED without a completed effect | %d |\n", c.effectBeforeWatermark, c.succeededWithoutEffect)
	fmt.Fprintf(&b, "| effects begun and never ended | %d |\n| effects of unknown calls | %d |\n\n", c.unfinishedEffects, c.unknownEffectKeys)

	fmt.Fprintf(&b, "| restart | mode | at | stop | down | start until ready | recovery (first call done) | all workers done a call | effects in flight at stop |\n")
	fmt.Fprintf(&b, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	var downs, readies, recs, alls []time.Duration
	for i, r := range restarts {
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %d |\n", i+1, r.Mode, r.At.Round(100*time.Millisecond),
			ms(r.Stop), ms(r.Down), ms(r.Ready), msOrNone(r.Recovery), msOrNone(r.AllWorkers), r.EffectsInFlight)
		downs, readies = append(downs, r.Stop+r.Down), append(readies, r.Ready)
		if r.Recovery >= 0 {
			recs = append(recs, r.Recovery)
		}
		if r.AllWorkers >= 0 {
			alls = append(alls, r.AllWorkers)
		}
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "| per restart | n | min | median | max |\n| --- | --- | --- | --- | --- |\n")
	for _, row := range []struct {
		name string
		ds   []time.Duration
	}{
		{"server down (stop command until start command)", downs},
		{"start command until ready (crash recovery after immediate)", readies},
		{"recovery: start command until a call completed", recs},
		{"start command until every worker completed a call", alls},
	} {
		lo, med, hi := spread(row.ds)
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", row.name, len(row.ds), lo, med, hi)
	}
	b.WriteString("\n")

	storeErrs, retryable, logged := map[string]int{}, map[string]int{}, map[string]int{}
	var w workerResult
	for _, r := range results {
		w.Executes += r.Executes
		w.Done += r.Done
		w.GaveUp += r.GaveUp
		w.GaveUpSelf += r.GaveUpSelf
		w.ReplayedRetryable += r.ReplayedRetryable
		w.RecoverErrors += r.RecoverErrors
		w.Reclaimed += r.Reclaimed
		w.Retried += r.Retried
		w.SweptUncertain += r.SweptUncertain
		w.CrashLoop += r.CrashLoop
		for k, v := range r.StoreErrors {
			storeErrs[k] += v
		}
		for k, v := range r.Retryable {
			retryable[k] += v
		}
		for k, v := range r.Logged {
			logged[k] += v
		}
	}
	fmt.Fprintf(&b, "| workers | count |\n| --- | --- |\n")
	fmt.Fprintf(&b, "| Execute calls (first tries and retries) | %d |\n| calls completed by their caller | %d |\n", w.Executes, w.Done)
	fmt.Fprintf(&b, "| Execute errors (store failed), by step | %s |\n| retryable outcomes, by reason | %s |\n", kv(storeErrs), kv(retryable))
	fmt.Fprintf(&b, "| callers that gave up on call_in_progress after %s (the drain finished the call) | %d |\n", s.giveUp, w.GaveUp)
	fmt.Fprintf(&b, "| ... of which the row's lease was the caller's own worker's, kept alive by its renewal | %d |\n", w.GaveUpSelf)
	fmt.Fprintf(&b, "| recorded outcomes asking for a retry (replayed retryable) | %d |\n", w.ReplayedRetryable)
	fmt.Fprintf(&b, "| Recover passes that failed | %d |\n| sweeps: reclaimed / re-executed / UNCERTAIN / crash_loop | %d / %d / %d / %d |\n",
		w.RecoverErrors, w.Reclaimed, w.Retried, w.SweptUncertain, w.CrashLoop)
	fmt.Fprintf(&b, "| pipeline warnings and errors logged | %s |\n", kv(logged))
	fmt.Fprintf(&b, "| drain: calls without a row retried / reclaimed / re-executed / UNCERTAIN / crash_loop / store errors | %d / %d / %d / %d / %d / %d |\n",
		d.Unrecorded, d.Reclaimed, d.Retried, d.Uncertain, d.CrashLoop, d.StoreErrors)
	return b.String()
}

func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

func msOrNone(d time.Duration) string {
	if d < 0 {
		return "none before the next stop"
	}
	return ms(d)
}

func spread(ds []time.Duration) (string, string, string) {
	if len(ds) == 0 {
		return "-", "-", "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return ms(s[0]), ms(s[len(s)/2]), ms(s[len(s)-1])
}

func kv(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
