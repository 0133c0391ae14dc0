package sandbox_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/postgres"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
	"github.com/toolgen/toolgen/sandbox"
)

// The SIGKILL soak of scripts (issue 19): a child process runs a script with
// non_idempotent calls through a real pipeline and kills itself with SIGKILL at a
// random pipeline step (of the script's call or of any call of the script); the parent
// then runs recovery, which re-runs the script from the start, until the script's row
// is terminal, and checks against a receipt file kept outside the store that no
// non_idempotent effect ran twice, that a script that completed made every effect
// once, and that a script stopped at an UNCERTAIN call stopped there.
//
//	go test -run TestScriptSoak ./sandbox/                           # 10 kills per store
//	SANDBOX_SOAK_KILLS=200 go test -run TestScriptSoak -v ./sandbox/  # make soak-scripts
//
// TOOLGEN_PG_DSN adds the PostgreSQL store (a fresh schema, dropped at the end).

const soakScript = `
a = tools.soak.send(n = 1)
b = tools.soak.put(n = 2)
c = tools.soak.send(n = 3)
d = tools.soak.read(n = 4)
e = tools.soak.send(n = 5)
result = [a.status, b.status, c.status, d.status, e.status]
`

// soakTool appends "<tool> <idempotency key>" to the receipt file, synced, as its
// effect; the writes mark the watermark first.
type soakTool struct {
	spec     runtime.ToolSpec
	receipts string
}

func (t *soakTool) Spec() *runtime.ToolSpec { return &t.spec }

func (t *soakTool) Execute(ctx context.Context, tc *runtime.ExecContext, raw json.RawMessage) (runtime.ToolResult, error) {
	if t.spec.SideEffect == runtime.SideEffectWrite {
		if err := tc.MarkEffectSent(ctx); err != nil {
			return runtime.ToolResult{}, err
		}
	}
	f, err := os.OpenFile(t.receipts, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return runtime.ToolResult{}, err
	}
	_, err = fmt.Fprintf(f, "%s %s %s\n", t.spec.Name, tc.IdempotencyKey(), tc.Identity().RunID)
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if err != nil {
		return runtime.ToolResult{}, err
	}
	return runtime.StructuredResult(&t.spec, map[string]any{"ok": true})
}

func soakTools(receipts string) []runtime.Tool {
	mk := func(name string, se runtime.SideEffect, idem runtime.Idempotency) runtime.Tool {
		return &soakTool{spec: spec(name, se, idem, runtime.RiskLow, runtime.TrustTool), receipts: receipts}
	}
	return []runtime.Tool{
		mk("soak.send", runtime.SideEffectWrite, runtime.NonIdempotent),
		mk("soak.put", runtime.SideEffectWrite, runtime.Idempotent),
		mk("soak.read", runtime.SideEffectRead, runtime.Idempotent),
	}
}

type soakTarget struct{ Kind, Path, DSN, Schema string }

func (tg soakTarget) open(ctx context.Context) (store.Store, error) {
	if tg.Kind == "postgres" {
		return postgres.Open(ctx, tg.DSN, postgres.WithSchema(tg.Schema))
	}
	return sqlite.Open(ctx, tg.Path)
}

func soakPipeline(st store.Store, receipts string, afterStep func(string)) (*runtime.Pipeline, error) {
	reg := runtime.NewRegistry()
	if err := reg.Register(soakTools(receipts)...); err != nil {
		return nil, err
	}
	if err := reg.RegisterAdapter(sandbox.Domain, sandbox.NewTool()); err != nil {
		return nil, err
	}
	return runtime.NewPipeline(runtime.Config{Registry: reg, Store: st, Lease: 100 * time.Millisecond,
		SweepJitter: -1, AfterStep: afterStep})
}

const soakTenant = "soak"

func soakCall(i int) runtime.Call {
	raw, _ := json.Marshal(map[string]any{"script": soakScript})
	return runtime.Call{Tenant: soakTenant, Principal: runtime.Principal{ID: "agent", Tenant: soakTenant},
		SessionID: fmt.Sprintf("s%d", i), RunID: fmt.Sprintf("r%d", i), Step: 1, CallID: "script",
		Tool: "sandbox.run_script", Args: raw, ContextTrust: []runtime.Trust{runtime.TrustUser}, ArgumentTrust: runtime.TrustUser}
}

// TestScriptSoakChild is the child process: it runs iteration SANDBOX_SOAK_I and kills
// itself at the SANDBOX_SOAK_KILL_AT-th pipeline step.
func TestScriptSoakChild(t *testing.T) {
	if os.Getenv("SANDBOX_SOAK_CHILD") == "" {
		t.Skip("the soak's child process")
	}
	tg := soakTarget{Kind: os.Getenv("SANDBOX_SOAK_STORE"), Path: os.Getenv("SANDBOX_SOAK_SQLITE"), DSN: os.Getenv("TOOLGEN_PG_DSN"), Schema: os.Getenv("SANDBOX_SOAK_SCHEMA")}
	i, _ := strconv.Atoi(os.Getenv("SANDBOX_SOAK_I"))
	killAt, _ := strconv.Atoi(os.Getenv("SANDBOX_SOAK_KILL_AT"))
	ctx := context.Background()
	st, err := tg.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	p, err := soakPipeline(st, os.Getenv("SANDBOX_SOAK_RECEIPTS"), func(string) {
		mu.Lock()
		n++
		hit := n == killAt
		mu.Unlock()
		if hit {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Execute(ctx, soakCall(i)); err != nil {
		t.Fatal(err)
	}
}

func TestScriptSoak(t *testing.T) {
	kills := 10
	if s := os.Getenv("SANDBOX_SOAK_KILLS"); s != "" {
		kills, _ = strconv.Atoi(s)
	}
	targets := []soakTarget{{Kind: "sqlite", Path: filepath.Join(t.TempDir(), "soak.db")}}
	if dsn := os.Getenv("TOOLGEN_PG_DSN"); dsn != "" {
		b := make([]byte, 6)
		rand.Read(b)
		schema := "toolgen_scriptsoak_" + hex.EncodeToString(b)
		targets = append(targets, soakTarget{Kind: "postgres", DSN: dsn, Schema: schema})
		t.Cleanup(func() {
			ctx := context.Background()
			if conn, err := pgx.Connect(ctx, dsn); err == nil {
				conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
				conn.Close(ctx)
			}
		})
	}
	for _, tg := range targets {
		t.Run(tg.Kind, func(t *testing.T) { soak(t, tg, kills) })
	}
}

func soak(t *testing.T, tg soakTarget, kills int) {
	ctx := context.Background()
	receipts := filepath.Join(t.TempDir(), "receipts")
	st, err := tg.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := soakPipeline(st, receipts, nil)
	if err != nil {
		t.Fatal(err)
	}
	// About 12 steps per call, 6 calls: a kill point past the end lets the child finish,
	// which the soak counts apart (it kills until it has made `kills` kills).
	const maxPoint = 75
	var killed, completed, succeeded, stopped, beforeRow int
	var completedRuns []string
	for i := 0; killed < kills; i++ {
		at := 1 + mrand.IntN(maxPoint)
		cmd := exec.Command(os.Args[0], "-test.run=^TestScriptSoakChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "SANDBOX_SOAK_CHILD=1", "SANDBOX_SOAK_STORE="+tg.Kind, "SANDBOX_SOAK_SQLITE="+tg.Path,
			"SANDBOX_SOAK_SCHEMA="+tg.Schema, "SANDBOX_SOAK_RECEIPTS="+receipts,
			"SANDBOX_SOAK_I="+strconv.Itoa(i), "SANDBOX_SOAK_KILL_AT="+strconv.Itoa(at))
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled():
			killed++
		case err == nil:
			completed++
		default:
			t.Fatalf("iteration %d: child: %v\n%s", i, err, out)
		}
		// Recovery: sweep and re-run until the script's row is terminal.
		var script *store.Invocation
		for tries := 0; ; tries++ {
			rows, err := st.InvocationList(ctx, store.InvocationFilter{Tenant: soakTenant, SessionID: fmt.Sprintf("s%d", i), Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			script = nil
			for _, r := range rows {
				if r.Tool == "sandbox.run_script" {
					script = r
				}
			}
			if script == nil {
				if len(rows) > 0 {
					t.Fatalf("iteration %d: calls of the script recorded without the script's row", i)
				}
				beforeRow++
				break
			}
			if script.Status.Terminal() {
				break
			}
			if tries > 3000 {
				t.Fatalf("iteration %d (kill at %d): the script's row is still %s after recovery", i, at, script.Status)
			}
			if _, err := p.RecoverTenant(ctx, soakTenant); err != nil {
				t.Fatalf("iteration %d: recover: %v", i, err)
			}
			time.Sleep(10 * time.Millisecond) // the killed worker's lease runs out
		}
		if script == nil {
			continue
		}
		switch {
		case script.Status == store.StatusSucceeded:
			succeeded++
			completedRuns = append(completedRuns, fmt.Sprintf("r%d", i))
		case script.ReasonCode == "script_stopped":
			stopped++
			rows, _ := st.InvocationList(ctx, store.InvocationFilter{Tenant: soakTenant, SessionID: fmt.Sprintf("s%d", i), Limit: 100})
			uncertain := false
			for _, r := range rows {
				uncertain = uncertain || r.Status == store.StatusUncertain
			}
			if !uncertain {
				t.Fatalf("iteration %d (kill at %d): the script stopped with no UNCERTAIN call", i, at)
			}
		default:
			t.Fatalf("iteration %d (kill at %d): the script ended %s/%s", i, at, script.Status, script.ReasonCode)
		}
	}
	// No non_idempotent effect twice; every send of a completed script once.
	data, _ := os.ReadFile(receipts)
	perKey := map[string]int{}
	sends := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if strings.HasPrefix(line, "soak.send ") {
			perKey[line]++
			sends++
		}
	}
	perRun := map[string]int{}
	for k, n := range perKey {
		if n > 1 {
			t.Errorf("effect ran %d times: %s", n, k)
		}
		perRun[k[strings.LastIndexByte(k, ' ')+1:]]++
	}
	for _, run := range completedRuns {
		if perRun[run] != 3 {
			t.Errorf("run %s completed with %d of its 3 send effects", run, perRun[run])
		}
	}
	t.Logf("%s: %d kills, %d runs not killed, %d scripts completed, %d stopped at UNCERTAIN, %d killed before the script's row; %d send effects, none twice",
		tg.Kind, killed, completed, succeeded, stopped, beforeRow, sends)
	if out := os.Getenv("SANDBOX_SOAK_OUT"); out != "" {
		f, err := os.OpenFile(out, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err == nil {
			fmt.Fprintf(f, "| %s | %d | %d | %d | %d | %d | %d | 0 |\n", tg.Kind, killed, completed, succeeded, stopped, beforeRow, sends)
			f.Close()
		}
	}
}
