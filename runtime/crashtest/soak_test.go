package crashtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	rt "github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// TestCrashSoak is the kill soak (issue 7, point 1): helper processes run calls
// through the pipeline and recover each other's calls, and the parent SIGKILLs each
// one at a random instant — a random delay after the helper reported entering a window
// chosen to spread the kills over every window × idempotency class. After each kill a
// fresh process reviews, waits for the dead leases, runs the sweep, lets the callers
// retry with the same key, and the checker compares every row with the receipt file:
// each killed call must be classified as its state at the kill requires, no effect of
// a class that may not be repeated may run twice, no call may be lost, and UNCERTAIN
// must only ever follow a committed watermark.
//
//	CRASHTEST_SOAK_KILLS=1000 go test -run TestCrashSoak -timeout 60m -v ./runtime/crashtest/
//
// Settings: CRASHTEST_SOAK_KILLS (kills per store, default 50), CRASHTEST_SOAK_LANES
// (independent databases killed in parallel per store, default 4),
// CRASHTEST_SOAK_STORES (default "sqlite,postgres"; postgres needs TOOLGEN_PG_DSN),
// CRASHTEST_SOAK_OUT (write the tables there as Markdown), CRASHTEST_SOAK_PAD_US (the
// largest random pause inside each window, default 1000) and CRASHTEST_SOAK_DELAY_US
// (the largest delay of a kill after the window was entered, default 1500);
// CRASHTEST_SOAK_DEBUG=1 prints the targets a process ended before reaching.
func TestCrashSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the kill soak runs real subprocesses; skipped in -short")
	}
	kills := 50
	if n := envInt("CRASHTEST_SOAK_KILLS"); n > 0 {
		kills = n
	}
	lanes := 4
	if n := envInt("CRASHTEST_SOAK_LANES"); n > 0 {
		lanes = n
	}
	pad, delay := 1000, 1500
	if n := envInt("CRASHTEST_SOAK_PAD_US"); n > 0 {
		pad = n
	}
	if n := envInt("CRASHTEST_SOAK_DELAY_US"); n > 0 {
		delay = n
	}
	kinds := []string{"sqlite", "postgres"}
	if s := os.Getenv("CRASHTEST_SOAK_STORES"); s != "" {
		kinds = strings.Split(s, ",")
	}
	dsn := os.Getenv("TOOLGEN_PG_DSN")

	var mu sync.Mutex
	var runs []*soakRun
	t.Run("stores", func(t *testing.T) {
		for _, kind := range kinds {
			t.Run(kind, func(t *testing.T) {
				t.Parallel()
				if kind == "postgres" && dsn == "" {
					t.Skip("TOOLGEN_PG_DSN is not set: skipping the PostgreSQL soak " +
						"(CI sets postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
				}
				if kind != "postgres" && kind != "sqlite" {
					t.Fatalf("CRASHTEST_SOAK_STORES: unknown store %q", kind)
				}
				r := &soakRun{kind: kind, want: kills, lanes: lanes,
					pad: time.Duration(pad) * time.Microsecond, delay: time.Duration(delay) * time.Microsecond,
					landed: map[soakCell]int{}, pending: map[soakCell]int{}}
				r.run(t, dsn)
				mu.Lock()
				runs = append(runs, r)
				mu.Unlock()
			})
		}
	})
	if len(runs) == 0 {
		return
	}
	slices.SortFunc(runs, func(a, b *soakRun) int { return strings.Compare(a.kind, b.kind) })
	var report strings.Builder
	for _, r := range runs {
		report.WriteString(r.render())
		report.WriteString("\n")
	}
	report.WriteString(soakLegend)
	t.Log("kill soak\n" + report.String())
	if out := os.Getenv("CRASHTEST_SOAK_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(report.String()), 0o644); err != nil {
			t.Errorf("write %s: %v", out, err)
		}
	}
}

const soakLegend = `Each row is a window of a call × its idempotency class; "kills" counts the SIGKILLs that landed
there (the window is the last one the killed process reported entering), "in recovery" those that hit a
process while it was recovering the call (the sweep and the swept retry: "during the sweep itself").
"watermark at kill" and "effect sent at kill" say what the kill left: a committed watermark on the
row, an effect receipt written by the killed process. After each kill a fresh process approved held
calls, waited for the dead leases, ran Recover until the open calls were settled, then retried each
call with the same key as its caller. Outcome of each killed call: "retried" = executed again (by
the sweep's retry or the caller's) and SUCCEEDED; "uncertain" = UNCERTAIN for review (in brackets:
of which no effect had been sent, the false positives of a kill after the watermark commit and
before the effect); "terminal" = the settle had committed, the retry replayed it; "double effects"
= the effect ran more than once (allowed only for the retry-safe classes: idempotent, cond(true) and
the read); "lost" = not terminal at the end. "claim → watermark" is "claim → effect" for classes
without a watermark; a read has no row before its effect, so its "before the record" lasts until
the effect and "effect → settle" ends with the row's one insert. Every kill is checked: the row
after recovery is what the state at the kill requires (no row: executed once by the caller;
terminal: unchanged; RUNNING with a watermark and not retry-safe: UNCERTAIN, nothing re-sent;
otherwise retried once on the next attempt), the receipts match exactly, nothing was sent before
the effect window, and no snapshot ever shows an effect without a committed watermark for a class
that may not be repeated; every call the kill did not interrupt SUCCEEDED with one effect.
`

// soakCell is one row of the table: a window and a class (an index of classes).
type soakCell struct {
	Window string
	Class  int
}

var soakWindows = []string{winBeforeRecord, winRecordClaim, winClaimWatermark, winWatermarkEff,
	winEffect, winEffectSettle, winAfterSettle, winSweep}

var soakWindowNames = map[string]string{
	winBeforeRecord: "before the record", winRecordClaim: "record → claim", winClaimWatermark: "claim → watermark",
	winWatermarkEff: "watermark → effect", winEffect: "during the effect", winEffectSettle: "effect → settle",
	winAfterSettle: "after settle", winSweep: "during the sweep",
}

// runWindows are the windows a first execution of class c passes.
func runWindows(c class) []string {
	switch {
	case c.RecordOnce():
		return []string{winBeforeRecord, winEffect, winEffectSettle, winAfterSettle}
	case c.Held():
		return []string{winBeforeRecord, winRecordClaim, winClaimWatermark, winWatermarkEff, winEffect, winEffectSettle, winAfterSettle}
	case c.Watermarked():
		return []string{winBeforeRecord, winClaimWatermark, winWatermarkEff, winEffect, winEffectSettle, winAfterSettle}
	}
	return []string{winBeforeRecord, winClaimWatermark, winEffect, winEffectSettle, winAfterSettle}
}

// reexecWindows are the windows of a swept retry of class c, from its PENDING row on.
func reexecWindows(c class) []string {
	ws := []string{winRecordClaim, winClaimWatermark}
	if c.Watermarked() {
		ws = append(ws, winWatermarkEff)
	}
	return append(ws, winEffect, winEffectSettle, winAfterSettle)
}

// recoveryWindows are the windows a recovering process passes for a call whose row
// was left as s.
func recoveryWindows(c class, s soakSnap) []string {
	switch {
	case s.Row == nil || s.Row.Status.Terminal():
		return nil
	case s.Row.Status == store.StatusPending:
		return reexecWindows(c)
	case s.Row.EffectSentAt != nil && !c.RetrySafe(), s.Row.Attempt >= rt.DefaultMaxAttempts:
		return []string{winSweep, winAfterSettle}
	}
	return append([]string{winSweep}, reexecWindows(c)...)
}

func soakApplicable(w string, c class) bool {
	if slices.Contains(runWindows(c), w) {
		return true
	}
	return !c.RecordOnce() && (w == winSweep || slices.Contains(reexecWindows(c), w))
}

// soakRun is the soak of one store.
type soakRun struct {
	kind         string
	want, lanes  int
	logf         func(format string, args ...any) // progress
	pad, delay   time.Duration
	kills, procs atomic.Int64
	start        time.Time
	elapsed      time.Duration

	mu      sync.Mutex
	landed  map[soakCell]int // kills per cell
	pending map[soakCell]int // targets in flight
	events  []*soakKill
	missed  int // armed, but the process ended before the kill
	// leaseLosses counts fenced writes that found their lease lost while the process
	// was alive: only a stalled process does that.
	leaseLosses int
	calls       int // calls verified
	statuses    map[string]int
	problems    []string
}

func (r *soakRun) failf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

func (r *soakRun) run(t *testing.T, dsn string) {
	ctx := context.Background()
	r.start = time.Now()
	r.logf = t.Logf
	r.statuses = map[string]int{}
	var pg *schemas
	if r.kind == "postgres" {
		pg = newSchemas(t, dsn)
	}
	base := t.TempDir()
	var wg sync.WaitGroup
	for i := range r.lanes {
		dir := filepath.Join(base, fmt.Sprintf("lane%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		tg := target{Kind: r.kind, Path: filepath.Join(dir, "toolgen.db"), DSN: dsn}
		if pg != nil {
			tg.Schema = pg.next()
		}
		l := &soakLane{r: r, id: i, tg: tg, dir: dir, receipts: filepath.Join(dir, "receipts.log")}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.run(ctx); err != nil {
				r.failf("lane %d: %v", l.id, err)
			}
		}()
	}
	wg.Wait()
	r.elapsed = time.Since(r.start)
	t.Logf("%s: %d kills in %d processes (%d lanes) in %s", r.kind, r.kills.Load(), r.procs.Load(), r.lanes, r.elapsed.Round(100*time.Millisecond))
	for _, k := range r.events {
		if k.Call != nil && k.Category == "" {
			r.problems = append(r.problems, fmt.Sprintf("a kill in %s/%s of call %d was never checked", k.Phase, k.Cell.Window, k.Call.ref.Idx))
		}
	}
	for _, p := range r.problems {
		t.Error(p)
	}
	if int(r.kills.Load()) < r.want {
		t.Errorf("%s: only %d of %d kills landed", r.kind, r.kills.Load(), r.want)
	}
}

// soakCall is one call of a lane and what the checker knows of it.
type soakCall struct {
	ref      soakCallRef
	snaps    []soakSnap // what each process death left, while the call was open
	kills    []*soakKill
	verified bool
}

// soakSnap is a call's row and its number of effects (receipts), read after a death.
type soakSnap struct {
	Row     *store.Invocation
	Effects int
	// LeaseLost: the process that left this state lost the call's lease while alive.
	LeaseLost bool
}

func (s soakSnap) String() string {
	if s.Row == nil {
		return fmt.Sprintf("no row, %d effect(s)", s.Effects)
	}
	return fmt.Sprintf("%s/%s attempt %d watermark %v earlier %v owner %q, %d effect(s)", s.Row.Status, orDash(s.Row.ReasonCode),
		s.Row.Attempt, s.Row.EffectSentAt != nil, s.Row.EarlierEffectSentAt != nil, s.Row.LeaseOwner, s.Effects)
}

// soakKill is one SIGKILL that landed.
type soakKill struct {
	Cell  soakCell
	Phase string
	Call  *soakCall // nil: no call was in flight
	Snap  int       // index in Call.snaps of what this kill left
	// set when the call is verified
	Category string
	Double   bool
	NoEffect bool // uncertain without an effect sent
	Wrong    bool
	// what the kill left (set with the snapshot)
	Watermark bool // the row carries a committed watermark
	Sent      bool // the killed process had sent the call's effect
}

type soakTarget struct {
	Phase, Window, Key string
	Cell               soakCell
}

// soakLane is one database and one chain of processes: each process recovers what its
// killed predecessor left, then runs new calls, and is killed in turn.
type soakLane struct {
	r        *soakRun
	id       int
	tg       target
	dir      string
	receipts string
	st       store.Store
	pg       *pgx.Conn
	next     int
	open     []*soakCall
	all      []*soakCall
}

func (l *soakLane) run(ctx context.Context) error {
	st, err := l.tg.open(ctx, 2) // creates and migrates the database before any helper
	if err != nil {
		return err
	}
	defer st.Close()
	l.st = st
	if l.tg.Kind == "postgres" {
		conn, err := pgx.Connect(ctx, l.tg.DSN)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		l.pg = conn
	}
	for procs := 0; int(l.r.kills.Load()) < l.r.want; procs++ {
		if procs > 4*l.r.want+50 {
			return fmt.Errorf("%d processes and still only %d kills: the targets are not reached", procs, l.r.kills.Load())
		}
		tgt, fresh := l.choose()
		err := l.step(ctx, &tgt, fresh)
		l.r.mu.Lock()
		l.r.pending[tgt.Cell]--
		l.r.mu.Unlock()
		if err != nil {
			return err
		}
	}
	// The last process is not killed: it settles and checks whatever is still open.
	if err := l.step(ctx, nil, nil); err != nil {
		return err
	}
	if len(l.open) > 0 {
		return fmt.Errorf("%d calls still open after the final recovery", len(l.open))
	}
	return l.audit(ctx)
}

// choose picks the next target: the cell with the fewest kills so far among those the
// next process can reach (a first execution of any class, or the recovery of a call
// the last kill left RUNNING or PENDING).
func (l *soakLane) choose() (soakTarget, []soakCallRef) {
	var cands []soakTarget
	for ci, c := range classes {
		for _, w := range runWindows(c) {
			cands = append(cands, soakTarget{Phase: phaseRun, Window: w, Cell: soakCell{w, ci}})
		}
	}
	for _, oc := range l.open {
		if len(oc.kills) >= 3 {
			continue // far from MaxAttempts: the crash loop is TestCrashLoop's
		}
		for _, w := range recoveryWindows(oc.ref.Cls, oc.snaps[len(oc.snaps)-1]) {
			cands = append(cands, soakTarget{Phase: phaseRecover, Window: w, Key: oc.ref.key(), Cell: soakCell{w, oc.ref.classIndex()}})
		}
	}
	rand.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	l.r.mu.Lock()
	best := 0
	score := func(c soakTarget) int { return 2*l.r.landed[c.Cell] + l.r.pending[c.Cell] }
	for i, c := range cands {
		if score(c) < score(cands[best]) {
			best = i
		}
	}
	tgt := cands[best]
	l.r.pending[tgt.Cell]++
	l.r.mu.Unlock()
	if tgt.Phase == phaseRecover {
		return tgt, nil
	}
	// A bystander first: a call the kill must not disturb.
	fresh := []soakCallRef{l.newCall(classes[rand.IntN(len(classes))]), l.newCall(classes[tgt.Cell.Class])}
	tgt.Key = fresh[1].key()
	return tgt, fresh
}

func (l *soakLane) newCall(c class) soakCallRef {
	l.next++
	return soakCallRef{Idx: l.next, Cls: c}
}

// soakMark is one line a helper wrote.
type soakMark struct{ Phase, Window, Key string }

// step runs one helper process: it recovers and checks the open calls, runs fresh,
// and is killed at tgt (nil: not killed, the final process).
func (l *soakLane) step(ctx context.Context, tgt *soakTarget, fresh []soakCallRef) error {
	r := l.r
	r.procs.Add(1)
	var openRefs []soakCallRef
	for _, oc := range l.open {
		openRefs = append(openRefs, oc.ref)
	}
	env := append(l.tg.env(), envRole+"="+roleSoak, envDir+"="+l.dir, envLeaseMS+"="+strconv.FormatInt(soakLease.Milliseconds(), 10),
		envSoakOpen+"="+soakCallList(openRefs), envSoakNew+"="+soakCallList(fresh),
		envSoakPadUS+"="+strconv.FormatInt(r.pad.Microseconds(), 10))

	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := helperCmd(pctx, env)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.ExtraFiles = []*os.File{pw}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return err
	}
	pw.Close()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var marks []soakMark
	checkpoint := false
	outcomes := map[string][]string{}
	leaseLost := map[string]bool{}
	var timer *time.Timer
	bad := ""
	for line := range lines {
		f := strings.Fields(line)
		switch {
		case len(f) == 1 && f[0] == "checkpoint":
			checkpoint = true
		case len(f) == 1 && f[0] == "done":
		case len(f) == 5 && f[0] == "outcome":
			outcomes[f[1]] = f[2:]
		case len(f) == 2 && f[0] == "leaselost":
			leaseLost[f[1]] = true
		case len(f) == 3:
			m := soakMark{f[0], f[1], f[2]}
			marks = append(marks, m)
			if tgt != nil && timer == nil && m.Phase == tgt.Phase && m.Window == tgt.Window && m.Key == tgt.Key {
				// The kill: a random instant from here on. It lands in this window or,
				// if the window is shorter than the delay, in a later one.
				timer = time.AfterFunc(rand.N(r.delay+1), func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
			}
		default:
			if bad == "" {
				bad = line
				_ = cmd.Process.Kill() // a harness bug: stop, and report it below
			}
		}
	}
	werr := cmd.Wait()
	if timer != nil {
		timer.Stop()
	}
	if bad != "" {
		return fmt.Errorf("helper wrote %q", bad)
	}
	killed := false
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			killed = true
		}
	}
	if werr != nil && !killed {
		return fmt.Errorf("helper: %v\n%s", werr, out.String())
	}
	if tgt == nil && !checkpoint {
		return fmt.Errorf("the final process did not reach its checkpoint:\n%s", out.String())
	}
	if killed && l.pg != nil {
		if err := l.waitBackends(ctx, soakAppName(cmd.Process.Pid)); err != nil {
			return err
		}
	}

	// What the death left.
	counts, err := l.effects()
	if err != nil {
		return err
	}
	snap := func(c soakCallRef) (soakSnap, error) {
		inv, err := getRow(ctx, l.st, c.key())
		return soakSnap{Row: inv, Effects: counts[c.key()], LeaseLost: leaseLost[c.key()]}, err
	}
	if len(leaseLost) > 0 {
		r.mu.Lock()
		r.leaseLosses += len(leaseLost)
		r.mu.Unlock()
	}
	started := map[string]bool{}
	for _, m := range marks {
		started[m.Key] = true
	}

	// The kill: where it landed.
	var kill *soakKill
	if killed {
		if n := r.kills.Add(1); n%100 == 0 && r.logf != nil {
			r.logf("%s: %d kills, %s", r.kind, n, time.Since(r.start).Round(time.Second))
		}
		kill = &soakKill{Cell: soakCell{Window: "startup", Class: -1}, Phase: phaseStart}
		if len(marks) > 0 {
			m := marks[len(marks)-1]
			kill.Cell.Window, kill.Phase = m.Window, m.Phase
			for _, c := range l.open {
				if c.ref.key() == m.Key {
					kill.Call = c
				}
			}
			for _, fc := range fresh {
				if fc.key() == m.Key {
					kill.Call = &soakCall{ref: fc} // becomes open below
				}
			}
			if kill.Call != nil {
				kill.Cell.Class = kill.Call.ref.classIndex()
			}
		}
		r.mu.Lock()
		r.landed[kill.Cell]++
		r.events = append(r.events, kill)
		r.mu.Unlock()
	} else if tgt != nil {
		r.mu.Lock()
		r.missed++
		r.mu.Unlock()
		if os.Getenv("CRASHTEST_SOAK_DEBUG") != "" {
			var ms []string
			for _, m := range marks {
				ms = append(ms, m.Phase+"/"+m.Window+"/"+m.Key[:min(8, len(m.Key))])
			}
			fmt.Fprintf(os.Stderr, "missed target %s/%s/%s: marks %v\n", tgt.Phase, tgt.Window, tgt.Key[:min(8, len(tgt.Key))], ms)
		}
	}

	if checkpoint {
		// The open calls are final: check each against what the last death left.
		for _, oc := range l.open {
			final, err := snap(oc.ref)
			if err != nil {
				return err
			}
			last := oc.snaps[len(oc.snaps)-1]
			if kill != nil && kill.Call == oc {
				// Killed after its caller's retry returned, just past the checkpoint,
				// before the first new call: the call was settled (after_settle).
				oc.snaps = append(oc.snaps, final)
				kill.Snap = len(oc.snaps) - 1
				oc.kills = append(oc.kills, kill)
				l.checkWindow(kill, last, final)
			}
			l.verify(oc, last, final, outcomes[oc.ref.key()])
		}
		l.open = nil
	} else {
		for _, oc := range l.open {
			s, err := snap(oc.ref)
			if err != nil {
				return err
			}
			prev := oc.snaps[len(oc.snaps)-1]
			oc.snaps = append(oc.snaps, s)
			if kill != nil && kill.Call == oc {
				kill.Snap = len(oc.snaps) - 1
				oc.kills = append(oc.kills, kill)
				l.checkWindow(kill, prev, s)
			}
		}
	}
	for _, fc := range fresh {
		s, err := snap(fc)
		if err != nil {
			return err
		}
		if !started[fc.key()] {
			if s.Row != nil || s.Effects != 0 {
				r.failf("lane %d call %d (%s) never started but has %s", l.id, fc.Idx, fc.Cls.Name, s)
			}
			continue
		}
		oc := &soakCall{ref: fc, snaps: []soakSnap{s}}
		if kill != nil && kill.Call != nil && kill.Call.ref == fc {
			oc = kill.Call
			oc.snaps = []soakSnap{s}
			oc.kills = append(oc.kills, kill)
			l.checkWindow(kill, soakSnap{}, s)
		} else if !s.LeaseLost && (s.Row == nil || s.Row.Status != store.StatusSucceeded || s.Effects != 1) {
			// A call the kill did not interrupt ran to its end.
			r.failf("lane %d call %d (%s) ran undisturbed but left %s", l.id, fc.Idx, fc.Cls.Name, s)
		}
		l.open = append(l.open, oc)
		l.all = append(l.all, oc)
	}
	return nil
}

// waitBackends waits until the PostgreSQL backends of a killed helper are gone: a
// statement that was running when its client died may still commit until then.
func (l *soakLane) waitBackends(ctx context.Context, app string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		if err := l.pg.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d backends of %s still there 20 s after its death", n, app)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// effects counts the effect receipts per key.
func (l *soakLane) effects() (map[string]int, error) {
	rs, err := readReceipts(l.receipts)
	if err != nil {
		return nil, err
	}
	m := map[string]int{}
	for _, rc := range rs {
		if rc.Kind == "effect" {
			m[rc.Key]++
		}
	}
	return m, nil
}

// checkWindow checks that what a kill left fits the window it landed in: nothing is
// sent before the effect window, everything after it.
func (l *soakLane) checkWindow(k *soakKill, prev, s soakSnap) {
	c := k.Call.ref.Cls
	sent := s.Effects - prev.Effects
	k.Sent = sent > 0
	k.Watermark = s.Row != nil && s.Row.EffectSentAt != nil
	bad := ""
	switch window := k.Cell.Window; {
	case s.LeaseLost && sent > 1:
		bad = "more than one effect"
	case s.LeaseLost:
		// a stalled process: its settle may have found the lease lost
	default:
		bad = soakWindowCheck(window, sent, s)
	}
	if bad != "" {
		k.Wrong = true
		l.r.failf("lane %d call %d (%s): killed in %s/%s: %s (before: %s; after: %s)",
			l.id, k.Call.ref.Idx, c.Name, k.Phase, k.Cell.Window, bad, prev, s)
	}
	l.checkSnap(k.Call, s)
}

// soakWindowCheck: what a kill in window w may have left, given the effects sent in
// the killed process (sent) and the row (s).
func soakWindowCheck(w string, sent int, s soakSnap) string {
	bad := ""
	switch w {
	case winBeforeRecord, winRecordClaim, winClaimWatermark, winSweep:
		if sent != 0 {
			bad = "an effect before the effect window"
		}
	case winWatermarkEff:
		if sent != 0 {
			bad = "an effect before the effect window"
		} else if s.Row == nil || s.Row.Status != store.StatusRunning || s.Row.EffectSentAt == nil {
			bad = "no committed watermark after the watermark step returned"
		}
	case winEffect:
		if sent > 1 {
			bad = "more than one effect"
		}
	case winEffectSettle:
		if sent != 1 {
			bad = "the effect that returned is not in the receipts"
		}
	case winAfterSettle:
		if sent > 1 || s.Row == nil || !s.Row.Status.Terminal() {
			bad = "not terminal after the settle"
		}
	}
	return bad
}

// checkSnap checks the invariants every snapshot of a call must satisfy.
func (l *soakLane) checkSnap(oc *soakCall, s soakSnap) bool {
	c := oc.ref.Cls
	bad := ""
	switch {
	case !c.RetrySafe() && s.Effects > 1:
		bad = "effect sent more than once"
	case s.Row == nil && !c.RecordOnce() && s.Effects > 0:
		bad = "an effect without a record"
	case c.Watermarked() && !c.RetrySafe() && s.Effects > 0 && (s.Row == nil || s.Row.EffectSentAt == nil):
		bad = "an effect without a committed watermark"
	case s.Row != nil && s.Row.Status == store.StatusUncertain && (s.Row.EffectSentAt == nil || c.RetrySafe()):
		bad = "UNCERTAIN without a watermark, or for a class that may be retried"
	}
	if bad != "" {
		l.r.failf("lane %d call %d (%s): %s: %s", l.id, oc.ref.Idx, c.Name, bad, s)
		return false
	}
	return true
}

// soakExpect is what recovery and the caller's retry must make of a call left as s.
type soakExpect struct {
	Status   store.Status
	Reason   string
	Attempt  int // -1: any
	Effects  int
	Category string
}

func expectAfter(c class, s soakSnap) soakExpect {
	row := s.Row
	switch {
	case row == nil: // the caller's retry executes it
		return soakExpect{store.StatusSucceeded, "", -1, s.Effects + 1, "retried"}
	case row.Status.Terminal(): // replayed
		cat := "terminal"
		if row.Status == store.StatusUncertain {
			cat = "uncertain"
		}
		return soakExpect{row.Status, row.ReasonCode, row.Attempt, s.Effects, cat}
	case row.Status == store.StatusPending: // claimed and run on the next attempt
		return soakExpect{store.StatusSucceeded, "", row.Attempt + 1, s.Effects + 1, "retried"}
	case row.EffectSentAt != nil && !c.RetrySafe():
		return soakExpect{store.StatusUncertain, store.ReasonEffectMayHaveHappened, row.Attempt, s.Effects, "uncertain"}
	case row.Attempt >= rt.DefaultMaxAttempts:
		return soakExpect{store.StatusFailed, store.ReasonCrashLoop, row.Attempt, s.Effects, "crash_loop"}
	}
	return soakExpect{store.StatusSucceeded, "", row.Attempt + 1, s.Effects + 1, "retried"}
}

// verify checks a settled call (final) against what the last death before the
// checking process left (last), and its history.
func (l *soakLane) verify(oc *soakCall, last, final soakSnap, outcome []string) {
	r := l.r
	c := oc.ref.Cls
	oc.verified = true
	wrong := false
	fail := func(format string, args ...any) {
		wrong = true
		hist := make([]string, len(oc.snaps))
		for i, s := range oc.snaps {
			hist[i] = s.String()
		}
		r.failf("lane %d call %d (%s, key %s): %s\n\thistory: %s\n\tfinal: %s", l.id, oc.ref.Idx, c.Name, oc.ref.key()[:12],
			fmt.Sprintf(format, args...), strings.Join(hist, " → "), final)
	}
	// Each step of the history: what one process made of the previous state. A step
	// in which the process lost the call's lease while alive is only held to the
	// invariants (checkSnap).
	for i := 1; i < len(oc.snaps); i++ {
		if oc.snaps[i].LeaseLost {
			continue
		}
		if msg := soakTransition(c, oc.snaps[i-1], oc.snaps[i]); msg != "" {
			fail("step %d: %s", i, msg)
		}
	}
	if !l.checkSnap(oc, final) {
		wrong = true
	}
	exp := expectAfter(c, last)
	row := final.Row
	switch {
	case row == nil || !row.Status.Terminal():
		fail("lost: neither terminal nor reviewable")
	case final.LeaseLost:
		// a stalled process: the invariants above, not the one-step expectation
	case row.Status != exp.Status || (exp.Reason != "" && row.ReasonCode != exp.Reason):
		fail("ended %s/%s, want %s/%s", row.Status, row.ReasonCode, exp.Status, exp.Reason)
	case exp.Attempt >= 0 && row.Attempt != exp.Attempt:
		fail("ended at attempt %d, want %d", row.Attempt, exp.Attempt)
	case final.Effects != exp.Effects:
		fail("%d effect(s), want %d", final.Effects, exp.Effects)
	}
	if row != nil && !final.LeaseLost && exp.Category == "retried" && last.Row != nil && last.Row.EffectSentAt != nil && row.EarlierEffectSentAt == nil {
		fail("the retry lost the earlier attempt's watermark")
	}
	// The caller's retry: a recorded call is replayed, an unrecorded one executed.
	if len(outcome) != 3 {
		fail("no caller retry reported")
	} else if row != nil && !final.LeaseLost {
		// (A retry that lost its lease while alive was recovered and retried again: the
		// outcome reported is the last retry's.)
		replayed := outcome[2] == "true"
		if replayed != (last.Row != nil) || outcomeRowStatus(rt.OutcomeStatus(outcome[0])) != row.Status {
			fail("caller retry returned %s/%s replayed %v; want %s, replayed %v", outcome[0], outcome[1], replayed, row.Status, last.Row != nil)
		}
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if row != nil {
		r.statuses[string(row.Status)]++
	} else {
		r.statuses["no row"]++
	}
	for _, k := range oc.kills {
		k.Wrong = k.Wrong || wrong
		k.Double = final.Effects > 1
		k.NoEffect = row != nil && row.Status == store.StatusUncertain && final.Effects == 0
		s := oc.snaps[k.Snap]
		switch {
		case row == nil || !row.Status.Terminal():
			k.Category = "lost"
		case row.Status == store.StatusUncertain:
			k.Category = "uncertain"
		case s.Row != nil && s.Row.Status.Terminal():
			k.Category = "terminal"
		case row.Status == store.StatusSucceeded:
			k.Category = "retried"
		default:
			k.Category = strings.ToLower(string(row.Status))
		}
	}
}

// soakTransition checks what one process (recovering, then retrying as the caller)
// made of a call left as a: "" if allowed.
func soakTransition(c class, a, b soakSnap) string {
	switch {
	case a.Row == nil:
		if b.Effects-a.Effects > 1 {
			return "two effects in one process"
		}
	case b.Row == nil:
		return "the row disappeared"
	case a.Row.Status.Terminal():
		if b.Row.Status != a.Row.Status || b.Row.Attempt != a.Row.Attempt || b.Effects != a.Effects {
			return fmt.Sprintf("a terminal row changed: %s → %s", a, b)
		}
	case a.Row.Status == store.StatusRunning && a.Row.EffectSentAt != nil && !c.RetrySafe():
		if b.Row.Attempt != a.Row.Attempt || b.Effects != a.Effects ||
			(b.Row.Status != store.StatusRunning && b.Row.Status != store.StatusUncertain) {
			return fmt.Sprintf("a watermarked call that may not be repeated became %s (want UNCERTAIN, or RUNNING if the sweep did not commit)", b)
		}
	default: // RUNNING that may be retried, or PENDING
		if b.Row.Status == store.StatusUncertain {
			return fmt.Sprintf("UNCERTAIN from %s, which had no watermark or may be retried", a)
		}
		if b.Row.Attempt < a.Row.Attempt || b.Effects-a.Effects > b.Row.Attempt-a.Row.Attempt {
			return fmt.Sprintf("%d effect(s) in %d new attempt(s)", b.Effects-a.Effects, b.Row.Attempt-a.Row.Attempt)
		}
	}
	return ""
}

// audit checks the whole lane once every call is settled: every call terminal, no
// effect of a class that may not be repeated twice, and no receipt of an unknown key.
func (l *soakLane) audit(ctx context.Context) error {
	counts, err := l.effects()
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, oc := range l.all {
		key := oc.ref.key()
		known[key] = true
		if !oc.verified {
			l.r.failf("lane %d call %d (%s) was never verified", l.id, oc.ref.Idx, oc.ref.Cls.Name)
		}
		inv, err := getRow(ctx, l.st, key)
		if err != nil {
			return err
		}
		switch {
		case inv == nil || !inv.Status.Terminal():
			l.r.failf("lane %d call %d (%s): lost at the end (%s)", l.id, oc.ref.Idx, oc.ref.Cls.Name, soakSnap{Row: inv, Effects: counts[key]})
		case soakTooManyEffects(oc, inv, counts[key]):
			l.r.failf("lane %d call %d (%s): %d effects in %d attempt(s) with %d kill(s)", l.id, oc.ref.Idx, oc.ref.Cls.Name,
				counts[key], inv.Attempt, len(oc.kills))
		}
	}
	for key, n := range counts {
		if !known[key] {
			l.r.failf("lane %d: %d effect(s) of an unknown key %s", l.id, n, key)
		}
	}
	return nil
}

// soakTooManyEffects: a class that may not be repeated has at most one effect; a
// retry-safe one at most one per execution (one, plus one more per kill) and, with a
// row claimed per attempt, at most one per claim.
func soakTooManyEffects(oc *soakCall, inv *store.Invocation, effects int) bool {
	c := oc.ref.Cls
	return (!c.RetrySafe() && effects > 1) || effects > 1+len(oc.kills) || (!c.RecordOnce() && effects > inv.Attempt)
}

// The table.

type soakStats struct {
	Kills, InRecovery, Watermark, Sent, Retried, Uncertain, NoEffect, Terminal, Double, Forbidden, Lost, Wrong, Other int
}

func (r *soakRun) render() string {
	stats := map[soakCell]*soakStats{}
	var total soakStats
	for _, k := range r.events {
		s := stats[k.Cell]
		if s == nil {
			s = &soakStats{}
			stats[k.Cell] = s
		}
		for _, s := range []*soakStats{s, &total} {
			s.Kills++
			if k.Phase == phaseRecover {
				s.InRecovery++
			}
			if k.Watermark {
				s.Watermark++
			}
			if k.Sent {
				s.Sent++
			}
			switch k.Category {
			case "retried":
				s.Retried++
			case "uncertain":
				s.Uncertain++
				if k.NoEffect {
					s.NoEffect++
				}
			case "terminal":
				s.Terminal++
			case "lost":
				s.Lost++
			default: // crash_loop, or no call in flight
				s.Other++
			}
			if k.Double {
				s.Double++
				if k.Call != nil && !k.Call.ref.Cls.RetrySafe() {
					s.Forbidden++
				}
			}
			if k.Wrong {
				s.Wrong++
			}
		}
	}
	name := map[string]string{"sqlite": "SQLite (temporary file)", "postgres": "PostgreSQL (fresh schema per lane)"}[r.kind]
	var b strings.Builder
	fmt.Fprintf(&b, "### Kill soak: %s\n\n", name)
	b.WriteString("| window | class | kills | in recovery | watermark at kill | effect sent at kill | retried | uncertain (no effect) | terminal | double effects | lost | misclassified |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	cell := func(w, cname string, s soakStats) {
		dbl := strconv.Itoa(s.Double)
		if s.Double > 0 && s.Forbidden == 0 {
			dbl += " (allowed)"
		} else if s.Forbidden > 0 {
			dbl = fmt.Sprintf("%d (%d FORBIDDEN)", s.Double, s.Forbidden)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %d (%d) | %d | %s | %d | %d |\n", w, cname, s.Kills, s.InRecovery,
			s.Watermark, s.Sent, s.Retried, s.Uncertain, s.NoEffect, s.Terminal, dbl, s.Lost, s.Wrong)
	}
	gaps := 0
	for _, w := range soakWindows {
		for ci, c := range classes {
			s := stats[soakCell{w, ci}]
			if s == nil {
				if !soakApplicable(w, c) {
					continue
				}
				gaps++
				s = &soakStats{}
			}
			cell(soakWindowNames[w], c.Name, *s)
		}
	}
	for k, s := range stats {
		if k.Class < 0 {
			cell(k.Window, "(no call in flight)", *s)
		}
	}
	cell("**all**", "", total)
	r.mu.Lock()
	defer r.mu.Unlock()
	var sts []string
	for s, n := range r.statuses {
		sts = append(sts, fmt.Sprintf("%s %d", s, n))
	}
	slices.Sort(sts)
	fmt.Fprintf(&b, "\n%d kills (%d lanes, %d helper processes; %d targets missed: the process ended first), "+
		"%d of %d applicable window × class cells never hit; %d calls checked (%s); %d leases lost by a live (stalled) process; %d killed calls misclassified, "+
		"%d effects of a non-retry-safe class executed twice, %d calls lost; wall time %s (%.1f kills/s); "+
		"largest pause per window %s, largest kill delay %s.\n",
		total.Kills, r.lanes, r.procs.Load(), r.missed, gaps, soakApplicableCells(), r.calls, strings.Join(sts, ", "), r.leaseLosses,
		total.Wrong, total.Forbidden, total.Lost, r.elapsed.Round(100*time.Millisecond),
		float64(total.Kills)/r.elapsed.Seconds(), r.pad, r.delay)
	if total.Other > 0 {
		fmt.Fprintf(&b, "%d kill(s) hit no call or ended otherwise (crash_loop).\n", total.Other)
	}
	if len(r.problems) > 0 {
		fmt.Fprintf(&b, "\n%d problem(s):\n", len(r.problems))
		for _, p := range r.problems {
			b.WriteString("- " + p + "\n")
		}
	}
	return b.String()
}

func soakApplicableCells() int {
	n := 0
	for _, w := range soakWindows {
		for _, c := range classes {
			if soakApplicable(w, c) {
				n++
			}
		}
	}
	return n
}
