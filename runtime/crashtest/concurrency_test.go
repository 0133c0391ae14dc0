package crashtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rt "github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// concClass is the class of call idx: the four write classes, interleaved.
func concClass(idx int) class {
	return [...]class{classes[3], classes[0], classes[2], classes[1]}[idx%4]
}

func concCallID(idx int) string { return fmt.Sprintf("c%04d", idx) }

func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}

// workerLoop is a worker process: it executes its share of the calls (idx ≡ worker
// mod workers), from the first one each time it is (re)started — a recorded call
// replays at step 8 —, runs Recover every 25 calls and once at the end, and keeps its
// leases alive meanwhile.
func workerLoop(ctx context.Context, p *rt.Pipeline) error {
	w, workers, calls := envInt(envWorker), envInt(envWorkers), envInt(envCalls)
	if workers <= 0 {
		return errors.New("no workers")
	}
	n := 0
	for idx := w; idx < calls; idx += workers {
		if _, err := p.Execute(ctx, callOf(concClass(idx), concCallID(idx), idx)); err != nil {
			return fmt.Errorf("call %d: %w", idx, err)
		}
		if n++; n%25 == 0 {
			if _, err := p.Recover(ctx); err != nil {
				return err
			}
		}
	}
	_, err := p.Recover(ctx)
	return err
}

// drain is the last process: it recovers until every call is settled, and retries
// (as their caller would) calls that have no row at all.
func drain(ctx context.Context, p *rt.Pipeline, st store.Store) (string, error) {
	calls := envInt(envCalls)
	deadline := time.Now().Add(90 * time.Second)
	rounds, unrecorded := 0, 0
	for {
		open := 0
		for idx := range calls {
			c := concClass(idx)
			inv, err := st.InvocationGetByKey(ctx, keyOf(c, concCallID(idx), idx))
			if errors.Is(err, store.ErrNotFound) {
				unrecorded++
				open++
				if _, err := p.Execute(ctx, callOf(c, concCallID(idx), idx)); err != nil {
					return "", err
				}
				continue
			}
			if err != nil {
				return "", err
			}
			if !inv.Status.Terminal() {
				open++
			}
		}
		if open == 0 {
			return fmt.Sprintf("%d recovery rounds, %d unrecorded calls retried", rounds, unrecorded), nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%d calls still not settled after %d rounds", open, rounds)
		}
		if _, err := p.Recover(ctx); err != nil {
			return "", err
		}
		rounds++
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCrashConcurrency: several worker processes share one database and run 2,000
// calls; the parent SIGKILLs a random worker every few hundred calls and restarts it.
// Afterwards no call ran in two processes at once, no non-retryable call ran twice,
// none is lost and every one is classified.
func TestCrashConcurrency(t *testing.T) {
	if os.Getenv("CRASHTEST_CONCURRENCY") == "" {
		t.Skip("set CRASHTEST_CONCURRENCY=1 to run the multi-worker kill test (2,000 calls per store, about 15 s)")
	}
	calls := 2000
	if n := envInt("CRASHTEST_CALLS"); n > 0 {
		calls = n
	}
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		runConcurrency(t, target{Kind: "sqlite", Path: filepath.Join(dir, "toolgen.db")}, dir, 2, calls)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := os.Getenv("TOOLGEN_PG_DSN")
		if dsn == "" {
			t.Skip("TOOLGEN_PG_DSN is not set: skipping the PostgreSQL run")
		}
		tg := target{Kind: "postgres", DSN: dsn, Schema: newSchemas(t, dsn).next()}
		runConcurrency(t, tg, t.TempDir(), 4, calls)
	})
}

type workerProc struct {
	cmd    *exec.Cmd
	out    *bytes.Buffer
	done   chan error
	gen    int
	reaped bool
}

func runConcurrency(t *testing.T, tg target, dir string, workers, calls int) {
	start := time.Now()
	ctx := context.Background()
	st, err := tg.open(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	receipts := filepath.Join(dir, "receipts.log")
	const leaseMS = 2000 // renewed every third; a killed worker's calls wait this long
	env := append(tg.env(), envDir+"="+dir, envWorkers+"="+strconv.Itoa(workers),
		envCalls+"="+strconv.Itoa(calls), envLeaseMS+"="+strconv.Itoa(leaseMS))

	startWorker := func(i, gen int) *workerProc {
		out := &bytes.Buffer{}
		cmd := helperCmd(ctx, append(env, envRole+"="+roleWorker, envWorker+"="+strconv.Itoa(i),
			envGen+"=g"+strconv.Itoa(gen), envResult+"="+filepath.Join(dir, fmt.Sprintf("worker%d-%d.json", i, gen))))
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w := &workerProc{cmd: cmd, out: out, done: make(chan error, 1), gen: gen}
		go func() { w.done <- cmd.Wait() }()
		return w
	}
	procs := make([]*workerProc, workers)
	for i := range procs {
		procs[i] = startWorker(i, 0)
	}
	defer func() { // a failed test must not leave workers behind
		for _, w := range procs {
			if w != nil && !w.reaped {
				_ = w.cmd.Process.Kill()
				<-w.done
			}
		}
	}()

	running, kills, restarts := workers, 0, 0
	nextKill := 150 + rand.IntN(150)
	timeout := time.After(8 * time.Minute)
	for running > 0 {
		select {
		case <-timeout:
			t.Fatalf("workers did not finish (%d still running)", running)
		case <-time.After(20 * time.Millisecond):
		}
		for i, w := range procs {
			if w == nil || w.reaped {
				continue
			}
			select {
			case err := <-w.done:
				w.reaped = true
				running--
				if err != nil {
					t.Errorf("worker %d (generation %d) failed: %v\n%s", i, w.gen, err, w.out)
				}
			default:
			}
		}
		ends := countPrefix(receipts, "end ")
		if ends < nextKill || running == 0 {
			continue
		}
		var alive []int
		for i, w := range procs {
			if !w.reaped {
				alive = append(alive, i)
			}
		}
		i := alive[rand.IntN(len(alive))]
		w := procs[i]
		pid := w.cmd.Process.Pid
		_ = w.cmd.Process.Signal(syscall.SIGKILL)
		err := <-w.done // reaped: the process is gone before anyone may reclaim its leases
		w.reaped = true
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
				if err := appendReceipt(receipts, "kill", "-", "w"+strconv.Itoa(i), pid); err != nil {
					t.Fatal(err)
				}
				kills++
				restarts++
				procs[i] = startWorker(i, w.gen+1)
				nextKill = ends + 200 + rand.IntN(150)
				continue
			}
		}
		// it finished (or failed) on its own just before the signal
		running--
		if err != nil {
			t.Errorf("worker %d (generation %d) failed: %v\n%s", i, w.gen, err, w.out)
		}
		nextKill = ends + 200 + rand.IntN(150)
	}
	workersDone := time.Since(start)

	// The survivors' sweep, and the callers' retries, until every call is settled.
	drained := spawn(ctx, append(env, envRole+"="+roleDrain, envWorker+"=drain"), filepath.Join(dir, "drain.json"))
	if drained.Err != nil || drained.Killed {
		t.Fatalf("drain: %s", drained)
	}

	// The checks.
	rs, err := readReceipts(receipts)
	if err != nil {
		t.Fatal(err)
	}
	type perKey struct{ begins, ends int }
	effects := map[string]*perKey{}
	open := map[string]int{} // key -> pid of a begin without its end
	dead := map[int]bool{}
	var overlaps []string
	for _, r := range rs {
		switch r.Kind {
		case "kill":
			dead[r.PID] = true
		case "begin":
			if pid, ok := open[r.Key]; ok && !dead[pid] {
				overlaps = append(overlaps, fmt.Sprintf("%s: begun by pid %d while pid %d (alive) was in it", r.Key[:12], r.PID, pid))
			}
			open[r.Key] = r.PID
			if effects[r.Key] == nil {
				effects[r.Key] = &perKey{}
			}
			effects[r.Key].begins++
		case "end":
			if open[r.Key] == r.PID {
				delete(open, r.Key)
			}
			if effects[r.Key] == nil {
				effects[r.Key] = &perKey{}
			}
			effects[r.Key].ends++
		}
	}
	for _, o := range overlaps {
		t.Errorf("overlapping execution: %s", o)
	}
	statuses := map[string]int{}
	var falsePositive, genuineUncertain, retriedRows, idemTwice, earlier int
	known := map[string]bool{}
	var problems []string
	for idx := range calls {
		c := concClass(idx)
		key := keyOf(c, concCallID(idx), idx)
		known[key] = true
		inv, err := getRow(ctx, st, key)
		if err != nil {
			t.Fatal(err)
		}
		e := effects[key]
		if e == nil {
			e = &perKey{}
		}
		if inv == nil {
			problems = append(problems, fmt.Sprintf("call %d (%s): lost, no row (%d effects)", idx, c.Name, e.begins))
			continue
		}
		statuses[string(inv.Status)+" "+inv.ReasonCode]++
		if inv.Attempt > 1 {
			retriedRows++
		}
		if inv.EarlierEffectSentAt != nil {
			earlier++
		}
		if c.RetrySafe() && e.begins > 1 {
			idemTwice++
		}
		switch inv.Status {
		case store.StatusSucceeded:
			if e.ends < 1 {
				problems = append(problems, fmt.Sprintf("call %d (%s): SUCCEEDED but no effect completed (%d begun)", idx, c.Name, e.begins))
			}
		case store.StatusUncertain:
			if c.RetrySafe() || inv.EffectSentAt == nil {
				problems = append(problems, fmt.Sprintf("call %d (%s): UNCERTAIN (watermark %v) but the class may be retried or nothing was marked",
					idx, c.Name, inv.EffectSentAt != nil))
			}
			if e.begins == 0 {
				falsePositive++
			} else {
				genuineUncertain++
			}
		default:
			problems = append(problems, fmt.Sprintf("call %d (%s): ended %s/%s (attempt %d)", idx, c.Name, inv.Status, inv.ReasonCode, inv.Attempt))
		}
		if !c.RetrySafe() && e.begins > 1 {
			problems = append(problems, fmt.Sprintf("call %d (%s): effect sent %d times", idx, c.Name, e.begins))
		}
	}
	for key := range effects {
		if !known[key] {
			problems = append(problems, "an effect with an unknown key "+key)
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
	var st2 []string
	for s, n := range statuses {
		st2 = append(st2, fmt.Sprintf("%s %d", strings.TrimSpace(s), n))
	}
	sort.Strings(st2)
	t.Logf("%s: %d workers, %d calls, %d SIGKILLs (each worker restarted), workers done in %s, total %s",
		tg.Kind, workers, calls, kills, workersDone.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
	t.Logf("%s: rows: %s; UNCERTAIN with the effect sent %d, without (watermark→send window) %d; "+
		"rows retried after a crash %d (of which with an earlier watermark %d); retry-safe calls executed twice %d; "+
		"overlapping executions %d; drain: %s", tg.Kind, strings.Join(st2, ", "), genuineUncertain, falsePositive,
		retriedRows, earlier, idemTwice, len(overlaps), drained.Result.Note)
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
