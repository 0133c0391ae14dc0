package crashtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rt "github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// killPoints are the rows of the matrix, in pipeline order: after each named step
// (Config.AfterStep), "prepare" (inside the tool, before it marks the watermark: the
// worker that died marshalling its request), "effect" (inside the tool, right after
// its receipt is fsynced) and "none" (no kill: the control run).
var killPoints = []string{
	"resolve", "validate", "label", "key", "breaker", "policy", "persist", "hold",
	"prepare", "watermark", "effect", "execute", "shape", "settle", "none",
}

// prePersist are the points before the row exists (steps 1 to 6).
var prePersist = []string{"resolve", "validate", "label", "key", "breaker", "policy"}

// reaches reports whether a call of class c passes kill point p: only watermarked
// classes pass "watermark".
func reaches(c class, p string) bool { return p != "watermark" || c.Watermarked() }

// expected is what the matrix expects after the recovery sweep: the row's status (""
// for no row) and the number of effects in the receipt file.
func expected(c class, p string) (store.Status, int) {
	switch {
	case slices.Contains(prePersist, p):
		return "", 0 // nothing recorded, nothing sent: the caller retries
	case p == "persist" || p == "hold" || p == "prepare":
		if c.RecordOnce() {
			return "", 0
		}
		// RUNNING without watermark: retried, same key. A held call killed at persist
		// is PENDING; once approved, recovery runs it.
		return store.StatusSucceeded, 1
	case p == "watermark":
		if c.RetrySafe() {
			return store.StatusSucceeded, 1
		}
		return store.StatusUncertain, 0 // the false positive of the watermark→send window
	case p == "effect" || p == "execute" || p == "shape":
		switch {
		case c.RecordOnce():
			return "", 1 // a read records its row at step 13 only
		case c.RetrySafe():
			return store.StatusSucceeded, 2 // sent, retried: allowed for this class
		}
		return store.StatusUncertain, 1
	}
	return store.StatusSucceeded, 1 // settle, none
}

// maxEffects is the acceptance bound: at most one effect unless the class may be
// retried after its effect.
func maxEffects(c class) int {
	if c.RetrySafe() {
		return 2
	}
	return 1
}

type cell struct {
	Store string
	Class class
	Point string
}

func (c cell) String() string { return c.Store + "/" + c.Class.Name + "/" + c.Point }

type cellResult struct {
	Summary  string // "SUCCEEDED 1"
	Problems []string
}

func (r *cellResult) failf(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// TestCrashMatrix is the crash matrix of the issue: every kill point × each
// idempotency class × both stores, each cell in real subprocesses killed with SIGKILL.
func TestCrashMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash matrix runs real subprocesses (about 300 of them); skipped in -short")
	}
	start := time.Now()
	ctx := context.Background()
	stores := []string{"sqlite"}
	dsn := os.Getenv("TOOLGEN_PG_DSN")
	if dsn != "" {
		stores = append(stores, "postgres")
	} else {
		t.Log("TOOLGEN_PG_DSN is not set: the PostgreSQL columns are skipped " +
			"(CI sets postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	}
	var pg *schemas
	if dsn != "" {
		pg = newSchemas(t, dsn)
	}
	base := t.TempDir()

	var cells []cell
	for _, s := range stores {
		for _, c := range classes {
			for _, p := range killPoints {
				if reaches(c, p) {
					cells = append(cells, cell{s, c, p})
				}
			}
		}
	}
	parallel := 8
	if n, err := strconv.Atoi(os.Getenv("CRASHTEST_PARALLEL")); err == nil && n > 0 {
		parallel = n
	}
	results := make([]cellResult, len(cells))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, c := range cells {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			dir := filepath.Join(base, fmt.Sprintf("cell%03d", i))
			tg := target{Kind: c.Store, Path: filepath.Join(dir, "toolgen.db"), DSN: dsn}
			if c.Store == "postgres" {
				tg.Schema = pg.next()
			}
			results[i] = runCell(ctx, tg, dir, c)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	byCell := map[string]cellResult{}
	for i, c := range cells {
		byCell[c.String()] = results[i]
	}
	table := renderMatrix(stores, byCell)
	var failures []string
	for i, c := range cells {
		for _, p := range results[i].Problems {
			failures = append(failures, fmt.Sprintf("- %s: %s", c, p))
		}
	}
	summary := fmt.Sprintf("%d cells (%d kill points × %d classes × %d stores, unreached points omitted), "+
		"parallel %d, GOMAXPROCS %d: %s", len(cells), len(killPoints), len(classes), len(stores),
		parallel, runtime.GOMAXPROCS(0), elapsed.Round(100*time.Millisecond))
	report := table + "\n" + legend + "\n" + summary + "\n"
	if len(failures) > 0 {
		report += "\nFailing cells:\n" + strings.Join(failures, "\n") + "\n"
	}
	t.Log("crash matrix\n" + report)
	if out := os.Getenv("CRASHTEST_MATRIX_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			t.Errorf("write %s: %v", out, err)
		}
	}
	for i, c := range cells {
		for _, p := range results[i].Problems {
			t.Errorf("FAIL cell %s: %s", c, p)
		}
	}
}

const legend = `Cell: status of the call's row after a fresh process (another worker id) ran Recover once
("no row": the kill came before the row existed, so the caller retries), then the number of effects
in the receipt file. Every cell also checks: the helper died of SIGKILL at that point (for none: it
passed every step and succeeded); no effect before the tool ran, exactly one after; the row is
terminal; effects <= 1 unless the class may be retried after its effect (then <= 2, one per
attempt); UNCERTAIN iff the row was RUNNING with effect_sent_at set at the crash and the class may
not be retried (with reason effect_may_have_happened); every receipt carries the call's idempotency
key; a retried row is on the next attempt, its second effect came from the recovering process and it
keeps the earlier watermark in earlier_effect_sent_at; the Recover report matches; a held call
killed while PENDING is approved by another principal while its worker is dead and then run by
recovery; and a caller retry with the same key afterwards replays the recorded outcome without
executing (or, with no row, executes once and records SUCCEEDED). "—": the class never reaches that
point (an idempotent tool marks no watermark).`

func renderMatrix(stores []string, byCell map[string]cellResult) string {
	var b strings.Builder
	b.WriteString("| kill point |")
	for _, s := range stores {
		for _, c := range classes {
			fmt.Fprintf(&b, " %s %s |", s, c.Name)
		}
	}
	b.WriteString("\n|---|")
	for range stores {
		for range classes {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for _, p := range killPoints {
		fmt.Fprintf(&b, "| %s |", p)
		for _, s := range stores {
			for _, c := range classes {
				r, ok := byCell[cell{s, c, p}.String()]
				switch {
				case !ok:
					b.WriteString(" — |")
				case len(r.Problems) == 0:
					fmt.Fprintf(&b, " ok %s |", r.Summary)
				default:
					fmt.Fprintf(&b, " FAIL %s |", r.Summary)
				}
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// runCell kills one call at one point, recovers in a fresh process, checks, then
// retries the call as its caller would and checks again.
func runCell(ctx context.Context, tg target, dir string, c cell) (res cellResult) {
	res.Summary = "?"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		res.failf("%v", err)
		return res
	}
	st, err := tg.open(ctx, 2) // creates and migrates the database before any helper runs
	if err != nil {
		res.failf("open store: %v", err)
		return res
	}
	defer st.Close()
	cls := c.Class
	key := keyOf(cls, "c1", 1)
	receipts := filepath.Join(dir, "receipts.log")
	// The killed call's lease is what recovery waits for: short, but long enough that a
	// loaded machine does not lose it before the kill point. Processes that are not
	// killed get a long one (nothing waits for it).
	env := append(tg.env(), envDir+"="+dir, envClass+"="+cls.Name, envLeaseMS+"=10000")

	// A held call needs an approval by another principal while its caller waits.
	approve := func() {}
	if cls.Held() {
		approve = func() { approveIfHeld(ctx, st, key) }
	}

	// 1. The call, killed at the point.
	run := spawnApproving(ctx, append(env, envRole+"="+roleRun, envKill+"="+c.Point, envLeaseMS+"=1000"), filepath.Join(dir, "run.json"), approve)
	switch {
	case run.Err != nil:
		res.failf("run: %s", run)
		return res
	case c.Point == "none" && run.Killed:
		res.failf("run: killed without a kill point")
		return res
	case c.Point == "none":
		want := []string{"resolve", "validate", "label", "key", "breaker", "policy", "persist", "hold"}
		if cls.Watermarked() {
			want = append(want, "watermark")
		}
		want = append(want, "execute", "shape", "settle")
		if !slices.Equal(run.Result.Steps, want) {
			res.failf("control run passed steps %v, want %v", run.Result.Steps, want)
		}
		if run.Result.Status != rt.OutcomeSucceeded {
			res.failf("control run: outcome %s/%s", run.Result.Status, run.Result.Reason)
		}
	case !run.Killed:
		res.failf("run: kill point %q not reached (steps %v, outcome %s/%s)", c.Point, run.Result.Steps, run.Result.Status, run.Result.Reason)
		return res
	}

	// 2. What the crash left: the row (if any) and the receipts.
	crashRow, err := getRow(ctx, st, key)
	if err != nil {
		res.failf("read row after crash: %v", err)
		return res
	}
	atCrash, err := readReceipts(receipts)
	if err != nil {
		res.failf("%v", err)
		return res
	}
	crashRunning := crashRow != nil && crashRow.Status == store.StatusRunning
	crashHeld := crashRow != nil && crashRow.Status == store.StatusPending
	if crashHeld {
		approve() // the reviewer approves while the worker is dead
	}
	if crashRunning {
		if err := waitLeaseExpired(ctx, st, crashRow.ID); err != nil {
			res.failf("%v", err)
			return res
		}
	}

	// 3. The sweep, in a fresh process with another worker id.
	rec := spawn(ctx, append(env, envRole+"="+roleRecover), filepath.Join(dir, "recover.json"))
	if rec.Err != nil || rec.Killed || rec.Result.Report == nil {
		res.failf("recover: %s", rec)
		return res
	}
	row, err := getRow(ctx, st, key)
	if err != nil {
		res.failf("read row after recovery: %v", err)
		return res
	}
	rcpts, err := readReceipts(receipts)
	if err != nil {
		res.failf("%v", err)
		return res
	}
	effects := count(rcpts, "effect", "")
	status := store.Status("no row")
	if row != nil {
		status = row.Status
	}
	res.Summary = fmt.Sprintf("%s %d", status, effects)

	// The acceptance checks.
	if row == nil {
		if effects > 0 && !cls.RecordOnce() {
			res.failf("no row but %d effect(s): an effect escaped without a record", effects)
		}
		if !cls.RecordOnce() && !slices.Contains(prePersist, c.Point) {
			res.failf("no row after a kill at %s: the call was lost", c.Point)
		}
	} else if !row.Status.Terminal() {
		res.failf("row left %s (attempt %d, lease owner %q): neither terminal nor reviewable", row.Status, row.Attempt, row.LeaseOwner)
	}
	if effects > maxEffects(cls) {
		res.failf("%d effects; the class allows at most %d", effects, maxEffects(cls))
	}
	if row != nil && effects > max(row.Attempt, 1) {
		res.failf("%d effects in %d attempt(s)", effects, row.Attempt)
	}
	wantUncertain := crashRunning && crashRow.EffectSentAt != nil && !cls.RetrySafe()
	gotUncertain := row != nil && row.Status == store.StatusUncertain
	if wantUncertain != gotUncertain {
		res.failf("UNCERTAIN = %v, want %v (row at crash: %s, watermark set %v; class retry-safe %v)",
			gotUncertain, wantUncertain, statusOf(crashRow), crashRow != nil && crashRow.EffectSentAt != nil, cls.RetrySafe())
	}
	if gotUncertain && (row.EffectSentAt == nil || row.ReasonCode != store.ReasonEffectMayHaveHappened) {
		res.failf("UNCERTAIN row without its watermark or reason (effect_sent_at %v, reason %q)", row.EffectSentAt, row.ReasonCode)
	}
	for _, r := range rcpts {
		if r.Key != key {
			res.failf("receipt with key %s, want the call's key %s", r.Key, key)
		}
	}
	retried := (crashRunning && !wantUncertain) || crashHeld
	if retried {
		if row == nil || row.Attempt != crashRow.Attempt+1 || row.Status != store.StatusSucceeded {
			res.failf("retried row: %s attempt %d, want SUCCEEDED attempt %d", statusOf(row), attemptOf(row), crashRow.Attempt+1)
		}
		if count(rcpts, "effect", roleRecover) != 1 {
			res.failf("the recovering process ran %d effect(s), want 1 (same key)", count(rcpts, "effect", roleRecover))
		}
		if crashRunning && crashRow.EffectSentAt != nil && row != nil &&
			(row.EarlierEffectSentAt == nil || !row.EarlierEffectSentAt.Equal(*crashRow.EffectSentAt)) {
			res.failf("retried row lost the earlier attempt's watermark: earlier_effect_sent_at %v, watermark at the crash %v",
				row.EarlierEffectSentAt, crashRow.EffectSentAt)
		}
	} else if n := count(rcpts, "effect", roleRecover); n != 0 {
		res.failf("the recovering process ran %d effect(s) of a call it should not retry", n)
	}
	rep := rec.Result.Report
	if want := b2i(crashRunning); rep.Reclaimed != want || rep.Uncertain != b2i(wantUncertain) || rep.Retried != b2i(retried) {
		res.failf("recovery report %+v, want reclaimed %d, uncertain %d, retried %d", *rep, want, b2i(wantUncertain), b2i(retried))
	}
	if ws, we := expected(cls, c.Point); (ws == "" && row != nil) || (ws != "" && status != ws) || we != effects {
		wss := string(ws)
		if ws == "" {
			wss = "no row"
		}
		res.failf("after recovery: %s with %d effect(s), expected %s with %d", status, effects, wss, we)
	}
	// Nothing before step 11 touches the world; the effect is on disk once it ran.
	wantAtCrash := 0
	if i := slices.Index(killPoints, c.Point); i >= slices.Index(killPoints, "effect") {
		wantAtCrash = 1
	}
	if n := count(atCrash, "effect", ""); n != wantAtCrash {
		res.failf("%d effect(s) at the crash, want %d", n, wantAtCrash)
	}

	// 4. The caller retries the same call (same key) in a fresh process.
	retry := spawnApproving(ctx, append(env, envRole+"="+roleRetry), filepath.Join(dir, "retry.json"), approve)
	if retry.Err != nil || retry.Killed {
		res.failf("caller retry: %s", retry)
		return res
	}
	after, err := getRow(ctx, st, key)
	if err != nil {
		res.failf("read row after the caller's retry: %v", err)
		return res
	}
	final, err := readReceipts(receipts)
	if err != nil {
		res.failf("%v", err)
		return res
	}
	newEffects := count(final, "effect", "") - effects
	if row != nil {
		if !retry.Result.Replayed || outcomeRowStatus(retry.Result.Status) != row.Status {
			res.failf("caller retry returned %s/%s (replayed %v), want the recorded %s replayed",
				retry.Result.Status, retry.Result.Reason, retry.Result.Replayed, row.Status)
		}
		if newEffects != 0 {
			res.failf("caller retry of a recorded call ran %d effect(s)", newEffects)
		}
		if after == nil || after.Status != row.Status || after.Attempt != row.Attempt {
			res.failf("caller retry changed the row: %s attempt %d -> %s attempt %d", row.Status, row.Attempt, statusOf(after), attemptOf(after))
		}
	} else {
		if retry.Result.Status != rt.OutcomeSucceeded || retry.Result.Replayed || newEffects != 1 {
			res.failf("caller retry of an unrecorded call: %s/%s replayed %v with %d effect(s), want succeeded, executed once",
				retry.Result.Status, retry.Result.Reason, retry.Result.Replayed, newEffects)
		}
		if after == nil || after.Status != store.StatusSucceeded {
			res.failf("caller retry left row %s, want SUCCEEDED", statusOf(after))
		}
		if total := count(final, "effect", ""); total > maxEffects(cls) {
			res.failf("%d effects in all; the class allows at most %d", total, maxEffects(cls))
		}
	}
	return res
}

// spawnApproving is spawn while a reviewer approves the call as soon as it is held.
func spawnApproving(ctx context.Context, env []string, resultPath string, approve func()) exited {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			approve()
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	e := spawn(ctx, env, resultPath)
	close(stop)
	<-done
	return e
}

// approveIfHeld records an approval by "bob" for a held call that has none yet.
func approveIfHeld(ctx context.Context, st store.Store, key string) {
	inv, err := getRow(ctx, st, key)
	if err != nil || inv == nil || inv.Status != store.StatusPending || inv.Decision != store.DecisionNeedsApproval {
		return
	}
	if _, err := st.ApprovalGet(ctx, key); err == nil {
		return
	}
	_ = st.ApprovalDecide(ctx, store.Approval{Key: key, Tenant: inv.Tenant, Approved: true, DecidedBy: "bob"}, nil)
}

func getRow(ctx context.Context, st store.Store, key string) (*store.Invocation, error) {
	inv, err := st.InvocationGetByKey(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return inv, err
}

// waitLeaseExpired polls the row until its lease has expired (the sweep compares with
// the database clock; both are this machine's clock here).
func waitLeaseExpired(ctx context.Context, st store.Store, id int64) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		inv, err := st.InvocationGet(ctx, id)
		if err != nil {
			return err
		}
		if inv.Status != store.StatusRunning || inv.LeaseExpiresAt == nil {
			return nil
		}
		left := time.Until(*inv.LeaseExpiresAt)
		if left < -10*time.Millisecond {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the lease of invocation %d never expired (expires %v)", id, inv.LeaseExpiresAt)
		}
		time.Sleep(min(max(left+15*time.Millisecond, 5*time.Millisecond), 100*time.Millisecond))
	}
}

// count counts receipts of kind (and of who, if not "").
func count(rs []receipt, kind, who string) int {
	n := 0
	for _, r := range rs {
		if r.Kind == kind && (who == "" || r.Who == who) {
			n++
		}
	}
	return n
}

func statusOf(inv *store.Invocation) store.Status {
	if inv == nil {
		return "no row"
	}
	return inv.Status
}

func attemptOf(inv *store.Invocation) int {
	if inv == nil {
		return 0
	}
	return inv.Attempt
}

func outcomeRowStatus(s rt.OutcomeStatus) store.Status {
	switch s {
	case rt.OutcomeSucceeded:
		return store.StatusSucceeded
	case rt.OutcomeDenied:
		return store.StatusDenied
	case rt.OutcomeUnavailable:
		return store.StatusUnavailable
	case rt.OutcomeUncertain:
		return store.StatusUncertain
	case rt.OutcomeFailed:
		return store.StatusFailed
	}
	return store.Status("outcome " + string(s))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
