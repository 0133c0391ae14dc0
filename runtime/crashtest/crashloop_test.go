package crashtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	rt "github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// TestCrashLoop: a call that kills its worker every time it runs — the first worker
// and every recovering one — ends FAILED crash_loop after exactly MaxAttempts runs
// (durable-execution.md §8, lesson 6), and a caller retry replays that outcome.
func TestCrashLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real subprocesses; skipped in -short")
	}
	dsn := os.Getenv("TOOLGEN_PG_DSN")
	for _, kind := range []string{"sqlite", "postgres"} {
		for _, tc := range []struct {
			class   class
			point   string
			effects int // in all
		}{
			{classes[0], "effect", rt.DefaultMaxAttempts}, // idempotent: dies after each effect
			{classes[3], "prepare", 0},                    // non_idempotent: dies before each watermark
		} {
			t.Run(kind+"/"+tc.class.Name+"/"+tc.point, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				tg := target{Kind: kind, Path: filepath.Join(dir, "toolgen.db")}
				if kind == "postgres" {
					if dsn == "" {
						t.Skip("TOOLGEN_PG_DSN is not set: skipping the PostgreSQL run")
					}
					tg.DSN, tg.Schema = dsn, newSchemas(t, dsn).next()
				}
				testCrashLoop(t, tg, dir, tc.class, tc.point, tc.effects)
			})
		}
	}
}

func testCrashLoop(t *testing.T, tg target, dir string, cls class, point string, wantEffects int) {
	ctx := context.Background()
	st, err := tg.open(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key := keyOf(cls, "c1", 1)
	env := append(tg.env(), envDir+"="+dir, envClass+"="+cls.Name, envLeaseMS+"=500")
	run := spawn(ctx, append(env, envRole+"="+roleRun, envKill+"="+point), filepath.Join(dir, "run.json"))
	if !run.Killed {
		t.Fatalf("run: %s, want killed at %s", run, point)
	}
	killedRecoveries := 0
	var last exited
	for i := range 2 * rt.DefaultMaxAttempts {
		inv, err := getRow(ctx, st, key)
		if err != nil || inv == nil {
			t.Fatalf("row: %v, %v", inv, err)
		}
		if err := waitLeaseExpired(ctx, st, inv.ID); err != nil {
			t.Fatal(err)
		}
		last = spawn(ctx, append(env, envRole+"="+roleRecover, envKillRec+"="+point), filepath.Join(dir, fmt.Sprintf("recover%d.json", i)))
		if last.Err != nil {
			t.Fatalf("recover %d: %s", i, last)
		}
		if !last.Killed {
			break
		}
		killedRecoveries++
	}
	inv, err := getRow(ctx, st, key)
	if err != nil {
		t.Fatal(err)
	}
	rcpts, err := readReceipts(filepath.Join(dir, "receipts.log"))
	if err != nil {
		t.Fatal(err)
	}
	effects := count(rcpts, "effect", "")
	t.Logf("%s %s killed at %s: %d runs (1 + %d recovering workers killed), then %s/%s at attempt %d, %d effect(s); last report %+v",
		tg.Kind, cls.Name, point, 1+killedRecoveries, killedRecoveries, inv.Status, inv.ReasonCode, inv.Attempt, effects, last.Result.Report)
	if inv.Status != store.StatusFailed || inv.ReasonCode != store.ReasonCrashLoop {
		t.Errorf("row ended %s/%s, want FAILED/%s", inv.Status, inv.ReasonCode, store.ReasonCrashLoop)
	}
	if inv.Attempt != rt.DefaultMaxAttempts || 1+killedRecoveries != rt.DefaultMaxAttempts {
		t.Errorf("the call ran %d times (attempt %d), want exactly MaxAttempts = %d", 1+killedRecoveries, inv.Attempt, rt.DefaultMaxAttempts)
	}
	if effects != wantEffects {
		t.Errorf("%d effects, want %d", effects, wantEffects)
	}
	if rep := last.Result.Report; rep == nil || rep.Failed != 1 || rep.Retried != 0 {
		t.Errorf("last recovery report %+v, want 1 failed, 0 retried", rep)
	}
	retry := spawn(ctx, append(env, envRole+"="+roleRetry), filepath.Join(dir, "retry.json"))
	if retry.Err != nil || retry.Killed || !retry.Result.Replayed || retry.Result.Status != rt.OutcomeFailed ||
		retry.Result.Reason != rt.ReasonCode(store.ReasonCrashLoop) {
		t.Errorf("caller retry: %s, %+v; want the recorded failed/crash_loop replayed", retry, retry.Result)
	}
}
