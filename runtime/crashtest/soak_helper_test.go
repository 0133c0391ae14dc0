package crashtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	rt "github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// The kill soak's helper process (role soak). One process does what a worker does
// after a crash and then some new work, in this order:
//
//  1. as the reviewer, approve held calls of the dead worker that wait for approval;
//  2. wait until the dead worker's leases have expired (CRASHTEST_SOAK_NOT_BEFORE);
//  3. recover (Recover, as often as needed) until every open call is settled;
//  4. as the callers, retry every open call with the same key;
//  5. write "checkpoint": from here on the open calls' rows are final;
//  6. run the new calls.
//
// The parent SIGKILLs it at a random instant. To know where the kill landed, the
// helper writes a line to fd 3 (a pipe to the parent) before it enters each window
// of a call ("<phase> <window> <key>"), and then sleeps a random pad inside the window
// so that a random kill lands in every window often. A pipe write returns once the
// line is in the kernel's buffer, so the last line the parent reads after the death is
// the window the process was in.

const (
	roleSoak = "soak"

	envSoakOpen  = "CRASHTEST_SOAK_OPEN"   // open calls: idx:class,... (steps 1 to 5)
	envSoakNew   = "CRASHTEST_SOAK_NEW"    // new calls: idx:class,... (step 6)
	envSoakPadUS = "CRASHTEST_SOAK_PAD_US" // the largest pad, microseconds
)

// The windows of a call, in pipeline order, as the markers name them.
const (
	winBeforeRecord   = "before_record"    // steps 1-7, up to the insert's commit (a read: up to its effect)
	winRecordClaim    = "record_claim"     // a PENDING row not yet claimed: a held call's wait, a swept retry
	winClaimWatermark = "claim_watermark"  // claimed, until the watermark commit returns (no watermark: until the effect)
	winWatermarkEff   = "watermark_effect" // the watermark is committed, the effect not begun
	winEffect         = "effect"           // inside the effect (its receipt is written half-way)
	winEffectSettle   = "effect_settle"    // the effect returned, until the settle commit returns
	winAfterSettle    = "after_settle"     // the row is terminal
	winSweep          = "sweep"            // inside InvocationSweep
)

// Phases of a soak helper.
const (
	phaseStart   = "start"
	phaseRecover = "recover"
	phaseRetry   = "retry"
	phaseRun     = "run"
)

// soakCallRef is a call a soak helper knows: its index and class.
type soakCallRef struct {
	Idx int
	Cls class
}

func (c soakCallRef) callID() string  { return fmt.Sprintf("k%06d", c.Idx) }
func (c soakCallRef) key() string     { return keyOf(c.Cls, c.callID(), c.Idx) }
func (c soakCallRef) call() rt.Call   { return callOf(c.Cls, c.callID(), c.Idx) }
func (c soakCallRef) classIndex() int { return classIndex(c.Cls) }

// soakCallList is the environment form of calls: idx:class-index,...
func soakCallList(cs []soakCallRef) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%d:%d", c.Idx, c.classIndex())
	}
	return strings.Join(parts, ",")
}

func classIndex(c class) int {
	for i, x := range classes {
		if x == c {
			return i
		}
	}
	return -1
}

func parseSoakCalls(s string) ([]soakCallRef, error) {
	var out []soakCallRef
	for _, f := range strings.Split(s, ",") {
		if f == "" {
			continue
		}
		a, b, ok := strings.Cut(f, ":")
		idx, err1 := strconv.Atoi(a)
		ci, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || ci < 0 || ci >= len(classes) {
			return nil, fmt.Errorf("bad call %q", f)
		}
		out = append(out, soakCallRef{Idx: idx, Cls: classes[ci]})
	}
	return out, nil
}

// soakHelper is the state of a soak helper process.
type soakHelper struct {
	marks    *os.File
	pad      time.Duration
	phase    string
	cur      atomic.Pointer[soakCallRef] // the call in flight (read by the reviewer)
	byKey    map[string]soakCallRef
	receipts string
	pid      int
	st       store.Store // the real store (the reviewer's writes are not windows)
}

// line writes one line to the parent. A failed write means the parent is gone.
func (h *soakHelper) line(s string) {
	if _, err := h.marks.WriteString(s + "\n"); err != nil {
		fmt.Fprintln(os.Stderr, "crashtest soak helper: marker pipe:", err)
		os.Exit(3)
	}
}

// enter reports that the call in flight enters window w, then stays in it a random
// while (0 to pad).
func (h *soakHelper) enter(w string) {
	key := "-"
	if c := h.cur.Load(); c != nil {
		key = c.key()
	}
	h.enterKey(w, key)
}

func (h *soakHelper) enterKey(w, key string) {
	h.line(h.phase + " " + w + " " + key)
	if h.pad > 0 {
		time.Sleep(rand.N(h.pad))
	}
}

func (h *soakHelper) setCurrent(key string) {
	if c, ok := h.byKey[key]; ok {
		h.cur.Store(&c)
	}
}

// afterStep maps the pipeline's named steps to windows (Config.AfterStep).
func (h *soakHelper) afterStep(step string) {
	c := h.cur.Load()
	if c == nil {
		return
	}
	switch step {
	case "persist":
		switch {
		case c.Cls.Held():
			h.enter(winRecordClaim) // PENDING: the hold waits for an approval, then claims
		case !c.Cls.RecordOnce():
			h.enter(winClaimWatermark) // the insert was the claim (steps 7 and 10 fused)
		}
	case "hold":
		if c.Cls.Held() {
			h.enter(winClaimWatermark)
		}
	case "watermark":
		h.enter(winWatermarkEff)
	case "settle":
		h.enter(winAfterSettle)
	}
}

// effect is the tools' effect: a receipt, half-way through the window.
func (h *soakHelper) effect(ctx context.Context, tc *rt.ExecContext) error {
	h.enter(winEffect)
	if err := appendReceipt(h.receipts, "effect", tc.IdempotencyKey(), h.phase, h.pid); err != nil {
		return err
	}
	if h.pad > 0 {
		time.Sleep(rand.N(h.pad))
	}
	h.enter(winEffectSettle)
	return nil
}

// reviewer approves, as "bob", the held call in flight once it waits (POL-1: another
// principal), after a random while.
func (h *soakHelper) reviewer(ctx context.Context) {
	for ctx.Err() == nil {
		time.Sleep(time.Duration(500+rand.IntN(2500)) * time.Microsecond)
		if c := h.cur.Load(); c != nil && c.Cls.Held() {
			approveIfHeld(ctx, h.st, c.key())
		}
	}
}

// soakStore reports the recovery's windows: the sweep, and the claim of a swept retry.
type soakStore struct {
	store.Store
	h *soakHelper
}

func (s *soakStore) InvocationSweep(ctx context.Context, p store.SweepParams) ([]store.Swept, error) {
	h := s.h
	if h.phase != phaseRecover {
		return s.Store.InvocationSweep(ctx, p)
	}
	// The call the sweep is about: the first open call whose row is RUNNING.
	key := "-"
	for k := range h.byKey {
		if inv, err := s.Store.InvocationGetByKey(ctx, k); err == nil && inv.Status == store.StatusRunning {
			key = k
			h.setCurrent(k)
			break
		}
	}
	h.enterKey(winSweep, key)
	swept, err := s.Store.InvocationSweep(ctx, p)
	for _, sw := range swept {
		if _, ok := h.byKey[sw.Invocation.Key]; !ok {
			continue
		}
		h.setCurrent(sw.Invocation.Key)
		if sw.Decision == store.SweepRetry {
			h.enter(winRecordClaim) // PENDING, until RunRetryable claims it
		} else {
			h.enter(winAfterSettle) // UNCERTAIN or crash_loop: terminal
		}
	}
	return swept, err
}

// The fenced writes report a lost lease: a process that stalled past its lease while
// alive (a loaded machine) may then sweep its own call in the same process, which the
// parent's one-step expectations do not model; it relaxes them for that call and
// counts the event.
func (s *soakStore) leaseLost(f store.Fence, err error) error {
	if errors.Is(err, store.ErrLeaseLost) {
		if inv, gerr := s.Store.InvocationGet(context.Background(), f.ID); gerr == nil {
			s.h.line("leaselost " + inv.Key)
		}
	}
	return err
}

func (s *soakStore) InvocationMarkEffectSentIfLeased(ctx context.Context, f store.Fence, token string) error {
	return s.leaseLost(f, s.Store.InvocationMarkEffectSentIfLeased(ctx, f, token))
}

func (s *soakStore) InvocationSettleIfLeased(ctx context.Context, f store.Fence, st store.Settlement) error {
	return s.leaseLost(f, s.Store.InvocationSettleIfLeased(ctx, f, st))
}

func (s *soakStore) InvocationReleaseIfLeased(ctx context.Context, f store.Fence) error {
	return s.leaseLost(f, s.Store.InvocationReleaseIfLeased(ctx, f))
}

func (s *soakStore) InvocationClaimIfPending(ctx context.Context, id int64, owner string, lease time.Duration) (*store.Invocation, error) {
	h := s.h
	if h.phase != phaseRecover {
		return s.Store.InvocationClaimIfPending(ctx, id, owner, lease)
	}
	if inv, err := s.Store.InvocationGet(ctx, id); err == nil {
		h.setCurrent(inv.Key)
	}
	h.enter(winRecordClaim)
	inv, err := s.Store.InvocationClaimIfPending(ctx, id, owner, lease)
	if err == nil {
		h.enter(winClaimWatermark)
	}
	return inv, err
}

func soakHelperMain(ctx context.Context) error {
	dir := os.Getenv(envDir)
	pid := os.Getpid()
	tg := targetFromEnv()
	if tg.Kind == "postgres" {
		// The parent waits until this process's backends are gone before it reads
		// what the kill left: a statement the server was running when the client died
		// still commits.
		tg.DSN = withParam(tg.DSN, "application_name", soakAppName(pid))
	}
	st, err := tg.open(ctx, 4)
	if err != nil {
		return err
	}
	defer st.Close()
	open, err := parseSoakCalls(os.Getenv(envSoakOpen))
	if err != nil {
		return err
	}
	fresh, err := parseSoakCalls(os.Getenv(envSoakNew))
	if err != nil {
		return err
	}
	h := &soakHelper{
		marks: os.NewFile(3, "marks"), phase: phaseStart, byKey: map[string]soakCallRef{},
		receipts: filepath.Join(dir, "receipts.log"), pid: pid, st: st,
	}
	if us, err := strconv.Atoi(os.Getenv(envSoakPadUS)); err == nil && us > 0 {
		h.pad = time.Duration(us) * time.Microsecond
	}
	for _, c := range append(append([]soakCallRef(nil), open...), fresh...) {
		h.byKey[c.key()] = c
	}
	lease := soakLease
	if ms, err := strconv.Atoi(os.Getenv(envLeaseMS)); err == nil && ms > 0 {
		lease = time.Duration(ms) * time.Millisecond
	}
	reg := rt.NewRegistry()
	if err := reg.Register(newTools(func() {}, h.effect)...); err != nil {
		return err
	}
	p, err := rt.NewPipeline(rt.Config{
		Registry: reg, Store: &soakStore{Store: st, h: h}, Lease: lease, ApprovalPoll: 2 * time.Millisecond,
		WorkerID:  fmt.Sprintf("soak-%d", pid),
		Artifacts: rt.NewFSArtifactWriter(filepath.Join(dir, "artifacts")),
		AfterStep: h.afterStep,
	})
	if err != nil {
		return err
	}
	bg, cancel := context.WithCancel(ctx)
	defer cancel()
	go h.reviewer(bg)

	// 1. The reviewer decides what waited while the worker was dead.
	for _, c := range open {
		if c.Cls.Held() {
			approveIfHeld(ctx, st, c.key())
		}
	}
	// 2. Recover until every open call is settled (or has no row: its caller retries).
	// The dead worker's leases run out meanwhile: a pass before that leaves its rows
	// alone, so the loop waits on the rows, not on a guess of the leases' end.
	h.phase = phaseRecover
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := p.Recover(ctx); err != nil {
			return err
		}
		h.cur.Store(nil)
		waiting := ""
		for _, c := range open {
			inv, err := getRow(ctx, st, c.key())
			if err != nil {
				return err
			}
			if inv == nil || inv.Status.Terminal() {
				continue
			}
			if inv.Status == store.StatusPending && c.Cls.Held() {
				approveIfHeld(ctx, st, c.key())
			}
			waiting = fmt.Sprintf("call %d is %s (attempt %d, lease owner %q, expires %v)",
				c.Idx, inv.Status, inv.Attempt, inv.LeaseOwner, inv.LeaseExpiresAt)
		}
		if waiting == "" {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("recovery did not settle the open calls: " + waiting)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// 3. The callers retry with the same key.
	h.phase = phaseRetry
	for _, c := range open {
		h.cur.Store(&c)
		inv, err := getRow(ctx, st, c.key())
		if err != nil {
			return err
		}
		switch {
		case inv == nil:
			h.enter(winBeforeRecord)
		case inv.Status.Terminal():
			h.enter(winAfterSettle)
		default:
			return fmt.Errorf("call %d is still %s after recovery", c.Idx, inv.Status)
		}
		o, err := p.Execute(ctx, c.call())
		// A retry that stalled past its lease on a loaded machine ends lease_lost
		// (retryable), its row left RUNNING for a sweep: as a caller would, wait for the
		// lease, recover and retry again. The store wrapper reported the loss
		// (leaselost), which relaxes the parent's one-step expectations for the call.
		for tries := 0; err == nil && o.ReasonCode == rt.ReasonLeaseLost && tries < 20; tries++ {
			time.Sleep(lease)
			if _, err = p.Recover(ctx); err == nil {
				o, err = p.Execute(ctx, c.call())
			}
		}
		if err != nil {
			return fmt.Errorf("caller retry of call %d: %w", c.Idx, err)
		}
		h.line(fmt.Sprintf("outcome %s %s %s %t", c.key(), o.Status, orDash(string(o.ReasonCode)), o.Replayed))
	}
	// 5. The open calls are final.
	h.cur.Store(nil)
	h.line("checkpoint")
	// 6. New work.
	h.phase = phaseRun
	for _, c := range fresh {
		h.cur.Store(&c)
		h.enter(winBeforeRecord)
		if _, err := p.Execute(ctx, c.call()); err != nil {
			return fmt.Errorf("call %d: %w", c.Idx, err)
		}
	}
	// A worker would go on to its next call: linger in the last window for a while, so
	// that a kill aimed at it does not miss because the process is already gone.
	time.Sleep(2 * h.pad)
	h.cur.Store(nil)
	h.line("done")
	return nil
}

// soakLease is the helpers' lease: renewed every third of it while they live, waited
// for after each kill that leaves a RUNNING row.
const soakLease = 400 * time.Millisecond

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func soakAppName(pid int) string { return fmt.Sprintf("crashsoak-%d", pid) }

// withParam adds a query parameter to a URL-style DSN.
func withParam(dsn, name, value string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + name + "=" + value
}
