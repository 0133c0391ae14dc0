package chaostest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rt "github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/internal/testtools"
	"github.com/toolgen/toolgen/runtime/store/postgres"
)

// The environment of a worker process (the test binary re-executed with
// -test.run=^TestChaosHelperProcess$). Distinct from the CHAOSTEST_* settings a user
// sets, which the workers inherit.
const (
	envHelper      = "CHAOSTEST_HELPER"       // "1" in a worker process
	envDSN         = "CHAOSTEST_W_DSN"        // the cluster
	envDir         = "CHAOSTEST_W_DIR"        // receipts.log, progress.log, worker<i>.json
	envWorker      = "CHAOSTEST_W_INDEX"      // this worker's index
	envWorkers     = "CHAOSTEST_W_WORKERS"    // number of workers
	envCalls       = "CHAOSTEST_W_CALLS"      // number of calls, shared by idx ≡ worker mod workers
	envCallers     = "CHAOSTEST_W_CALLERS"    // concurrent callers in this worker
	envLease       = "CHAOSTEST_W_LEASE"      // lease (a Go duration)
	envEffect      = "CHAOSTEST_W_EFFECT"     // the effect's duration, "min-max"
	envGiveUp      = "CHAOSTEST_W_GIVEUP"     // how long a caller waits on call_in_progress
	envRecoverEach = "CHAOSTEST_W_RECOVER_EV" // Recover interval
)

// The test tools and classes are shared with the other reliability suites
// (runtime/internal/testtools); chaos runs the four that are never held. Their effect
// here appends a begin and an end line to the receipt file, with the effect's duration
// between them.
const (
	toolPut     = testtools.Put
	toolSave    = testtools.Save
	toolSend    = testtools.Send
	toolRead    = testtools.Read
	inputSchema = testtools.InputSchema
)

// class is one idempotency class: a tool and arguments.
type class = testtools.Class

var classes = []class{
	{Name: "non_idempotent", Tool: toolSend, Mode: "append"},
	{Name: "idempotent", Tool: toolPut, Mode: "overwrite"},
	{Name: "cond(false)", Tool: toolSave, Mode: "append"},
	{Name: "cond(true)", Tool: toolSave, Mode: "overwrite"},
	{Name: "idempotent read", Tool: toolRead, Mode: "overwrite"},
}

func specs() []rt.ToolSpec { return testtools.Specs(toolPut, toolSave, toolSend, toolRead) }

// chaosTool is a runtime.Tool whose effect is the effect function.
type chaosTool struct {
	spec   rt.ToolSpec
	effect func(ctx context.Context, tc *rt.ExecContext) error
}

func (t *chaosTool) Spec() *rt.ToolSpec { return &t.spec }

func (t *chaosTool) Execute(ctx context.Context, tc *rt.ExecContext, _ json.RawMessage) (rt.ToolResult, error) {
	if t.spec.Idempotency.NeedsWatermark() {
		if err := tc.MarkEffectSent(ctx); err != nil {
			return rt.ToolResult{}, err // not marked: the effect must not be sent
		}
	}
	if err := t.effect(ctx, tc); err != nil {
		return rt.ToolResult{}, err
	}
	return rt.StructuredResult(&t.spec, map[string]any{"ok": true})
}

// newRegistry registers the tools with an effect that writes receipts as who and
// lasts a random time in [minD, maxD].
func newRegistry(receipts, who string, minD, maxD time.Duration) (*rt.Registry, error) {
	pid := os.Getpid()
	effect := func(ctx context.Context, tc *rt.ExecContext) error {
		token := randomHex(6) // tells two executions of one key apart
		if err := appendReceipt(receipts, "begin", tc.IdempotencyKey(), who, pid, token); err != nil {
			return err
		}
		d := minD
		if maxD > minD {
			d += time.Duration(mrand.Int64N(int64(maxD - minD)))
		}
		time.Sleep(d) // the effect takes a while: outages land inside it too
		return appendReceipt(receipts, "end", tc.IdempotencyKey(), who, pid, token)
	}
	reg := rt.NewRegistry()
	var tools []rt.Tool
	for _, s := range specs() {
		tools = append(tools, &chaosTool{spec: s, effect: effect})
	}
	return reg, reg.Register(tools...)
}

// The calls.

const (
	tenant = "acme"
	runID  = "chaos"
)

// classOf is the class of call idx: the five classes, interleaved.
func classOf(idx int) class { return classes[idx%len(classes)] }

func callIDOf(idx int) string { return fmt.Sprintf("c%05d", idx) }

func argsOf(idx int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"n":%d,"mode":%q}`, idx, classOf(idx).Mode))
}

func callOf(idx int) rt.Call {
	return rt.Call{
		Tenant: tenant, Principal: rt.Principal{ID: "alice", Tenant: tenant},
		SessionID: "s1", RunID: runID, Step: 1, CallID: callIDOf(idx), Tool: classOf(idx).Tool, Args: argsOf(idx),
		ContextTrust: []rt.Trust{rt.TrustUser}, ArgumentTrust: rt.TrustUser,
	}
}

// keyOf is the idempotency key the pipeline gives callOf(idx) (RT-5).
func keyOf(idx int) string {
	canon, err := rt.CanonicalJSON(argsOf(idx))
	if err != nil {
		panic(err)
	}
	return rt.IdempotencyKey(rt.KeyInput{Tenant: tenant, RunID: runID, Step: 1, CallID: callIDOf(idx),
		Tool: classOf(idx).Tool, ToolVersion: 1, CanonicalArgs: canon})
}

// Logs outside the store. Every line is one write to a file opened with O_APPEND, so
// lines of concurrent writers never interleave.
//
// receipts.log: "<begin|end> <key> <who> <pid> <token> <unix ns>" around every effect.
// progress.log: "done <unix ns> <worker> <idx> <status> <reason> <replayed>" when a
// caller got its call's final outcome; "gaveup <unix ns> <worker> <idx> <owner> <self>"
// when it stopped waiting on call_in_progress (the drain finishes the call).

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(line)
	return errors.Join(werr, f.Close())
}

func appendReceipt(path, kind, key, who string, pid int, token string) error {
	return appendLine(path, fmt.Sprintf("%s %s %s %d %s %d\n", kind, key, who, pid, token, time.Now().UnixNano()))
}

type receipt struct {
	Kind, Key, Who, Token string
	PID                   int
	At                    time.Time
}

func readReceipts(path string) ([]receipt, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []receipt
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 6 {
			return nil, fmt.Errorf("receipts: malformed line %q", sc.Text())
		}
		pid, err1 := strconv.Atoi(f[3])
		ns, err2 := strconv.ParseInt(f[5], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("receipts: malformed line %q", sc.Text())
		}
		out = append(out, receipt{Kind: f[0], Key: f[1], Who: f[2], PID: pid, Token: f[4], At: time.Unix(0, ns)})
	}
	return out, sc.Err()
}

type progress struct {
	Kind   string // done | gaveup
	At     time.Time
	Worker int
	Idx    int
	Fields []string // done: status, reason, replayed; gaveup: owner, self
}

func readProgress(path string) ([]progress, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []progress
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			return nil, fmt.Errorf("progress: malformed line %q", sc.Text())
		}
		ns, err1 := strconv.ParseInt(f[1], 10, 64)
		w, err2 := strconv.Atoi(f[2])
		idx, err3 := strconv.Atoi(f[3])
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("progress: malformed line %q", sc.Text())
		}
		out = append(out, progress{Kind: f[0], At: time.Unix(0, ns), Worker: w, Idx: idx, Fields: f[4:]})
	}
	return out, sc.Err()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// parseRange reads "min-max" durations ("100ms-300ms"); a single duration is both.
func parseRange(s string) (time.Duration, time.Duration, error) {
	lo, hi, found := strings.Cut(s, "-")
	a, err := time.ParseDuration(strings.TrimSpace(lo))
	if err != nil {
		return 0, 0, fmt.Errorf("range %q: %w", s, err)
	}
	if !found {
		return a, a, nil
	}
	b, err := time.ParseDuration(strings.TrimSpace(hi))
	if err != nil {
		return 0, 0, fmt.Errorf("range %q: %w", s, err)
	}
	if b < a {
		return 0, 0, fmt.Errorf("range %q: max below min", s)
	}
	return a, b, nil
}

func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}

func envDuration(name string) time.Duration {
	d, _ := time.ParseDuration(os.Getenv(name))
	return d
}

// workerResult is what a worker reports when its share is done.
type workerResult struct {
	Worker, Share, Done, Executes int
	GaveUp                        int
	GaveUpSelf                    int            // ... on a row whose lease this worker itself kept renewing
	StoreErrors                   map[string]int // Execute's errors, by the step that failed
	Retryable                     map[string]int // retryable outcomes, by reason code
	ReplayedRetryable             int            // a recorded outcome that asks for a retry: would loop forever
	RecoverErrors                 int
	Reclaimed, Retried            int // by this worker's Recover passes
	SweptUncertain, CrashLoop     int
	Logged                        map[string]int // the pipeline's warnings and errors, by message
	OpenAttempts                  int            // store.Open attempts before the store was usable
}

// TestChaosHelperProcess is not a test: it is the body of the worker processes the
// chaos test starts (the test binary re-executed). Run directly it does nothing.
func TestChaosHelperProcess(t *testing.T) {
	if os.Getenv(envHelper) != "1" {
		return
	}
	if err := workerMain(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "chaostest worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// workerMain is one worker process: it executes its share of the calls (idx ≡ worker
// mod workers) with a few concurrent callers, keeps its leases alive, runs Recover
// every second, and never gives up on the store: an error is retried, as a caller
// whose database went away would.
func workerMain(ctx context.Context) error {
	w, workers, calls, callers := envInt(envWorker), envInt(envWorkers), envInt(envCalls), envInt(envCallers)
	dir, lease, giveUp, recoverEvery := os.Getenv(envDir), envDuration(envLease), envDuration(envGiveUp), envDuration(envRecoverEach)
	if workers <= 0 || callers <= 0 || lease <= 0 || giveUp <= 0 || recoverEvery <= 0 {
		return errors.New("incomplete worker environment")
	}
	minD, maxD, err := parseRange(os.Getenv(envEffect))
	if err != nil {
		return err
	}
	res := &workerResult{Worker: w, StoreErrors: map[string]int{}, Retryable: map[string]int{}}
	var mu sync.Mutex // guards res

	// The first connection may meet an outage too.
	var st *postgres.Store
	for {
		res.OpenAttempts++
		st, err = postgres.Open(ctx, os.Getenv(envDSN), postgres.WithMaxConns(callers+2))
		if err == nil {
			break
		}
		if res.OpenAttempts > 600 {
			return fmt.Errorf("open the store: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer st.Close()

	who := "w" + strconv.Itoa(w)
	reg, err := newRegistry(filepath.Join(dir, "receipts.log"), who, minD, maxD)
	if err != nil {
		return err
	}
	logs := &countingHandler{counts: map[string]int{}}
	p, err := rt.NewPipeline(rt.Config{
		Registry: reg, Store: st, Lease: lease, WorkerID: fmt.Sprintf("%s-%d", who, os.Getpid()),
		Logger: slog.New(logs),
	})
	if err != nil {
		return err
	}
	progressLog := filepath.Join(dir, "progress.log")

	bg, stopBackground := context.WithCancel(ctx)
	defer stopBackground()
	var background sync.WaitGroup
	recoverOnce := func() error {
		rep, err := p.Recover(ctx)
		mu.Lock()
		defer mu.Unlock()
		res.Reclaimed += rep.Reclaimed
		res.Retried += rep.Retried
		res.SweptUncertain += rep.Uncertain
		res.CrashLoop += rep.Failed
		if err != nil {
			res.RecoverErrors++
		}
		return err
	}
	background.Go(func() {
		tick := time.NewTicker(recoverEvery)
		defer tick.Stop()
		for {
			select {
			case <-bg.Done():
				return
			case <-tick.C:
				_ = recoverOnce() // an outage: the next tick tries again
			}
		}
	})

	// attempt runs one call until it has its final outcome (done), or gets
	// call_in_progress (wait: someone else holds it; the caller comes back to it
	// later, doing its other calls meanwhile, as an agent with independent calls
	// would). A store error (the database is down) or another retryable outcome is
	// retried at once, with backoff: same call, same key.
	attempt := func(idx int) (done bool) {
		call := callOf(idx)
		backoff := 20 * time.Millisecond
		for {
			o, err := p.Execute(ctx, call)
			mu.Lock()
			res.Executes++
			switch {
			case err != nil:
				res.StoreErrors[failedStep(err)]++
			case o.Retryable:
				res.Retryable[string(o.ReasonCode)]++
				if o.Replayed {
					res.ReplayedRetryable++
				}
			}
			mu.Unlock()
			switch {
			case err != nil:
			case o.Retryable && !o.Replayed && o.ReasonCode == rt.ReasonCallInProgress:
				return false
			case o.Retryable && !o.Replayed:
			default:
				mu.Lock()
				res.Done++
				mu.Unlock()
				_ = appendLine(progressLog, fmt.Sprintf("done %d %d %d %s %s %t\n", time.Now().UnixNano(), w, idx,
					o.Status, orDash(string(o.ReasonCode)), o.Replayed))
				return true
			}
			time.Sleep(backoff + time.Duration(mrand.Int64N(int64(backoff))))
			backoff = min(2*backoff, 400*time.Millisecond)
		}
	}
	// giveUpOn leaves a call someone holds and keeps alive but does not finish to the
	// drain, and says whose lease it is.
	giveUpOn := func(idx int) {
		owner := "?"
		if inv, err := st.InvocationGetByKey(ctx, keyOf(idx)); err == nil {
			owner = inv.LeaseOwner
		}
		self := owner == p.WorkerID()
		mu.Lock()
		res.GaveUp++
		if self {
			res.GaveUpSelf++
		}
		mu.Unlock()
		_ = appendLine(progressLog, fmt.Sprintf("gaveup %d %d %d %s %t\n", time.Now().UnixNano(), w, idx, orDash(owner), self))
	}
	type waiting struct {
		idx         int
		since, next time.Time
		backoff     time.Duration
	}
	caller := func(jobs <-chan int) {
		var later []waiting // calls in progress elsewhere, by next try
		for {
			if len(later) > 0 && !time.Now().Before(later[0].next) {
				it := later[0]
				later = later[1:]
				if attempt(it.idx) {
					continue
				}
				if time.Since(it.since) >= giveUp {
					giveUpOn(it.idx)
					continue
				}
				it.backoff = min(2*it.backoff, time.Second)
				it.next = time.Now().Add(it.backoff)
				later = append(later, it)
				slices.SortFunc(later, func(a, b waiting) int { return a.next.Compare(b.next) })
				continue
			}
			var wake <-chan time.Time
			if len(later) > 0 {
				wake = time.After(time.Until(later[0].next))
			} else if jobs == nil {
				return
			}
			select {
			case idx, ok := <-jobs:
				if !ok {
					jobs = nil
					continue
				}
				if !attempt(idx) {
					now := time.Now()
					later = append(later, waiting{idx: idx, since: now, next: now.Add(100 * time.Millisecond), backoff: 100 * time.Millisecond})
					slices.SortFunc(later, func(a, b waiting) int { return a.next.Compare(b.next) })
				}
			case <-wake:
			}
		}
	}

	jobs := make(chan int)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() { caller(jobs) })
	}
	for idx := w; idx < calls; idx += workers {
		res.Share++
		jobs <- idx
	}
	close(jobs)
	wg.Wait()
	// A last pass while the leases are still kept: what the sweep made retryable runs here.
	for i := 0; recoverOnce() != nil; i++ {
		if i > 600 {
			return errors.New("the last Recover kept failing")
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopBackground()
	background.Wait()
	res.Logged = logs.snapshot()
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, fmt.Sprintf("worker%d.json", w)), b, 0o644)
}

// failedStep names the step of an Execute error ("runtime: settle: ..." is settle).
func failedStep(err error) string {
	parts := strings.SplitN(err.Error(), ": ", 3)
	if len(parts) >= 2 && parts[0] == "runtime" {
		return parts[1]
	}
	return "other"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// countingHandler counts the pipeline's warnings and errors by message (a failed
// lease renewal is logged, not returned).
type countingHandler struct {
	mu     sync.Mutex
	counts map[string]int
}

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.counts[r.Message]++
	h.mu.Unlock()
	return nil
}

func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) snapshot() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.counts))
	for k, v := range h.counts {
		out[k] = v
	}
	return out
}
