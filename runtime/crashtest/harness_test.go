package crashtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/toolgen/toolgen/runtime/internal/testtools"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/postgres"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
)

// The environment of a helper process (the test binary re-executed with
// -test.run=^TestCrashHelperProcess$).
const (
	envHelper  = "CRASHTEST_HELPER"       // "1" in a helper process
	envRole    = "CRASHTEST_ROLE"         // run | recover | retry | worker | drain
	envStore   = "CRASHTEST_STORE"        // sqlite | postgres
	envSQLite  = "CRASHTEST_SQLITE"       // database file
	envPGDSN   = "CRASHTEST_PG_DSN"       // PostgreSQL DSN
	envSchema  = "CRASHTEST_SCHEMA"       // PostgreSQL schema of the cell
	envDir     = "CRASHTEST_DIR"          // the cell's directory: receipts.log, artifacts/
	envResult  = "CRASHTEST_RESULT"       // where the helper writes its helperResult
	envClass   = "CRASHTEST_CLASS"        // class name (run, retry)
	envKill    = "CRASHTEST_KILL"         // kill point (run)
	envKillRec = "CRASHTEST_KILL_RECOVER" // kill point of a recovering process (crash loop)
	envLeaseMS = "CRASHTEST_LEASE"        // lease, milliseconds
	envWorker  = "CRASHTEST_WORKER"       // worker index (worker)
	envWorkers = "CRASHTEST_WORKERS"      // number of workers (worker, drain)
	envCalls   = "CRASHTEST_CALLS"        // number of calls (worker, drain)
	envGen     = "CRASHTEST_GEN"          // restart generation of a worker
)

// Roles of a helper process.
const (
	roleRun     = "run"     // one call through Execute, killed at the kill point
	roleRecover = "recover" // one Recover pass, as a fresh worker
	roleRetry   = "retry"   // the caller retries the same call (same key)
	roleWorker  = "worker"  // concurrency: a share of the calls, Recover now and then
	roleDrain   = "drain"   // concurrency: recover until every call is settled
)

// The test tools and classes are shared with the other reliability suites
// (runtime/internal/testtools). Their effect here appends a line to the receipt file.
const (
	toolPut     = testtools.Put
	toolSave    = testtools.Save
	toolSend    = testtools.Send
	toolRead    = testtools.Read
	toolDeploy  = testtools.Deploy
	inputSchema = testtools.InputSchema
)

// class is one idempotency class of the matrix: a tool and arguments.
type class = testtools.Class

var classes = []class{
	{Name: "idempotent", Tool: toolPut, Mode: "overwrite"},
	{Name: "cond(true)", Tool: toolSave, Mode: "overwrite"},
	{Name: "cond(false)", Tool: toolSave, Mode: "append"},
	{Name: "non_idempotent", Tool: toolSend, Mode: "append"},
	{Name: "idempotent read", Tool: toolRead, Mode: "overwrite"},
	{Name: "held non_idempotent", Tool: toolDeploy, Mode: "append"},
}

func classByName(name string) (class, bool) {
	for _, c := range classes {
		if c.Name == name {
			return c, true
		}
	}
	return class{}, false
}

func specs() []runtime.ToolSpec { return testtools.Specs() }

// crashTool is a runtime.Tool whose effect is the effect function; prepare runs first,
// before the watermark (the generated wrapper's Prepare).
type crashTool struct {
	spec    runtime.ToolSpec
	prepare func()
	effect  func(ctx context.Context, tc *runtime.ExecContext) error
}

func (t *crashTool) Spec() *runtime.ToolSpec { return &t.spec }

func (t *crashTool) Execute(ctx context.Context, tc *runtime.ExecContext, _ json.RawMessage) (runtime.ToolResult, error) {
	t.prepare()
	if t.spec.Idempotency.NeedsWatermark() {
		// Prepare is done; the generated wrapper marks here, before Commit.
		if err := tc.MarkEffectSent(ctx); err != nil {
			return runtime.ToolResult{}, err
		}
	}
	if err := t.effect(ctx, tc); err != nil {
		return runtime.ToolResult{}, err
	}
	return runtime.StructuredResult(&t.spec, map[string]any{"ok": true})
}

func newTools(prepare func(), effect func(ctx context.Context, tc *runtime.ExecContext) error) []runtime.Tool {
	var out []runtime.Tool
	for _, s := range specs() {
		out = append(out, &crashTool{spec: s, prepare: prepare, effect: effect})
	}
	return out
}

// The calls.

const (
	tenant = "acme"
	runID  = "r1"
)

func argsOf(c class, n int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"n":%d,"mode":%q}`, n, c.Mode))
}

func callOf(c class, callID string, n int) runtime.Call {
	return runtime.Call{
		Tenant: tenant, Principal: runtime.Principal{ID: "alice", Tenant: tenant},
		SessionID: "s1", RunID: runID, Step: 1, CallID: callID, Tool: c.Tool, Args: argsOf(c, n),
		ContextTrust: []runtime.Trust{runtime.TrustUser}, ArgumentTrust: runtime.TrustUser,
	}
}

// keyOf is the idempotency key the pipeline gives callOf(c, callID, n) (RT-5).
func keyOf(c class, callID string, n int) string {
	canon, err := runtime.CanonicalJSON(argsOf(c, n))
	if err != nil {
		panic(err)
	}
	return runtime.IdempotencyKey(runtime.KeyInput{Tenant: tenant, RunID: runID, Step: 1, CallID: callID,
		Tool: c.Tool, ToolVersion: 1, CanonicalArgs: canon})
}

// Receipts: the effect ledger outside the store, one line per event, appended with
// O_APPEND and fsynced: "<kind> <key> <who> <pid>". Kinds: effect (matrix), begin and
// end (concurrency, around the effect), kill (written by the parent after a worker it
// SIGKILLed has been reaped).

type receipt struct {
	Kind, Key, Who string
	PID            int
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func appendReceipt(path, kind, key, who string, pid int) error {
	return appendLine(path, fmt.Sprintf("%s %s %s %d\n", kind, key, who, pid))
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
		if len(f) != 4 {
			// a line cut by a kill would be a harness bug: an append is one write
			return nil, fmt.Errorf("receipts: malformed line %q", sc.Text())
		}
		pid, err := strconv.Atoi(f[3])
		if err != nil {
			return nil, fmt.Errorf("receipts: malformed line %q", sc.Text())
		}
		out = append(out, receipt{Kind: f[0], Key: f[1], Who: f[2], PID: pid})
	}
	return out, sc.Err()
}

// Stores.

// target names one database: a SQLite file or a PostgreSQL schema.
type target struct {
	Kind   string // sqlite | postgres
	Path   string // sqlite
	DSN    string // postgres
	Schema string // postgres
}

func (tg target) env() []string {
	return []string{envStore + "=" + tg.Kind, envSQLite + "=" + tg.Path, envPGDSN + "=" + tg.DSN, envSchema + "=" + tg.Schema}
}

func targetFromEnv() target {
	return target{Kind: os.Getenv(envStore), Path: os.Getenv(envSQLite), DSN: os.Getenv(envPGDSN), Schema: os.Getenv(envSchema)}
}

func (tg target) open(ctx context.Context, maxConns int) (store.Store, error) {
	switch tg.Kind {
	case "sqlite":
		return sqlite.Open(ctx, tg.Path)
	case "postgres":
		return postgres.Open(ctx, tg.DSN, postgres.WithSchema(tg.Schema), postgres.WithMaxConns(maxConns))
	}
	return nil, fmt.Errorf("crashtest: unknown store %q", tg.Kind)
}

// schemas collects the PostgreSQL schemas a test created, to drop them at its end.
type schemas struct {
	mu    sync.Mutex
	dsn   string
	names []string
}

func newSchemas(t *testing.T, dsn string) *schemas {
	s := &schemas{dsn: dsn}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.names) == 0 {
			return
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schemas: %v", err)
			return
		}
		defer conn.Close(ctx)
		for _, name := range s.names {
			if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{name}.Sanitize()+` CASCADE`); err != nil {
				t.Errorf("drop schema %s: %v", name, err)
			}
		}
	})
	return s
}

func (s *schemas) next() string {
	b := make([]byte, 6)
	rand.Read(b)
	name := "toolgen_crash_" + hex.EncodeToString(b)
	s.mu.Lock()
	s.names = append(s.names, name)
	s.mu.Unlock()
	return name
}

// Helper processes.

// helperResult is what a helper that was not killed reports.
type helperResult struct {
	Steps    []string                `json:",omitempty"` // AfterStep names, in order (run, retry)
	Status   runtime.OutcomeStatus   `json:",omitempty"`
	Reason   runtime.ReasonCode      `json:",omitempty"`
	Replayed bool                    `json:",omitempty"`
	Report   *runtime.RecoveryReport `json:",omitempty"`
	Note     string                  `json:",omitempty"`
}

// exited is how a helper process ended.
type exited struct {
	Killed bool  // by SIGKILL
	Err    error // nil: exit 0
	Stderr string
	Result helperResult
}

func (e exited) String() string {
	if e.Killed {
		return "killed by SIGKILL"
	}
	if e.Err == nil {
		return "exit 0"
	}
	return fmt.Sprintf("%v: %s", e.Err, strings.TrimSpace(e.Stderr))
}

func helperCmd(ctx context.Context, env []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashHelperProcess$", "-test.count=1", "-test.v=false")
	cmd.Env = append(append(os.Environ(), envHelper+"=1"), env...)
	return cmd
}

// spawn runs one helper process to its end.
func spawn(ctx context.Context, env []string, resultPath string) exited {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := helperCmd(ctx, append(env, envResult+"="+resultPath))
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	err := cmd.Run()
	return finish(err, stderr.String(), resultPath)
}

func finish(err error, stderr, resultPath string) exited {
	e := exited{Err: err, Stderr: stderr}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			e.Killed, e.Err = true, nil
		}
	}
	if b, rerr := os.ReadFile(resultPath); rerr == nil {
		if jerr := json.Unmarshal(b, &e.Result); jerr != nil && e.Err == nil {
			e.Err = fmt.Errorf("helper result: %w", jerr)
		}
	} else if err == nil {
		e.Err = fmt.Errorf("helper wrote no result: %w", rerr)
	}
	return e
}

// die is the crash: a real SIGKILL of this process, from inside it.
func die() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	for {
		time.Sleep(time.Hour) // SIGKILL is never handled; this is not reached
	}
}

// TestCrashHelperProcess is not a test: it is the body of the helper processes the
// crash tests start (the test binary re-executed). Run directly it does nothing.
func TestCrashHelperProcess(t *testing.T) {
	if os.Getenv(envHelper) != "1" {
		return
	}
	if err := helperMain(); err != nil {
		fmt.Fprintln(os.Stderr, "crashtest helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func helperMain() error {
	ctx := context.Background()
	role, dir := os.Getenv(envRole), os.Getenv(envDir)
	if role == roleSoak {
		return soakHelperMain(ctx) // soak_helper_test.go
	}
	receipts := filepath.Join(dir, "receipts.log")
	lease := 300 * time.Millisecond
	if ms, err := strconv.Atoi(os.Getenv(envLeaseMS)); err == nil && ms > 0 {
		lease = time.Duration(ms) * time.Millisecond
	}
	st, err := targetFromEnv().open(ctx, 4)
	if err != nil {
		return err
	}
	defer st.Close()

	var res helperResult
	kill := ""
	switch role {
	case roleRun:
		kill = os.Getenv(envKill)
	case roleRecover:
		kill = os.Getenv(envKillRec)
	}
	pid := os.Getpid()
	who := role
	if role == roleWorker {
		who = "w" + os.Getenv(envWorker)
	}
	effect := func(ctx context.Context, tc *runtime.ExecContext) error {
		if err := appendReceipt(receipts, "effect", tc.IdempotencyKey(), who, pid); err != nil {
			return err
		}
		if kill == "effect" {
			die() // the effect happened and is on disk; the pipeline never hears back
		}
		return nil
	}
	if role == roleWorker || role == roleDrain {
		effect = func(ctx context.Context, tc *runtime.ExecContext) error {
			if err := appendReceipt(receipts, "begin", tc.IdempotencyKey(), who, pid); err != nil {
				return err
			}
			time.Sleep(time.Millisecond) // the effect takes a while: kills land inside it too
			return appendReceipt(receipts, "end", tc.IdempotencyKey(), who, pid)
		}
	}
	reg := runtime.NewRegistry()
	prepare := func() {
		if kill == "prepare" {
			die() // inside the tool, before the watermark: nothing can have been sent
		}
	}
	if err := reg.Register(newTools(prepare, effect)...); err != nil {
		return err
	}
	cfg := runtime.Config{
		Registry: reg, Store: st, Lease: lease, ApprovalPoll: 10 * time.Millisecond,
		WorkerID:  fmt.Sprintf("%s-%s%s-%d", role, os.Getenv(envWorker), os.Getenv(envGen), pid),
		Artifacts: runtime.NewFSArtifactWriter(filepath.Join(dir, "artifacts")),
	}
	if role == roleRun || role == roleRetry || role == roleRecover {
		cfg.AfterStep = func(step string) {
			res.Steps = append(res.Steps, step)
			if step == kill {
				die()
			}
		}
	}
	p, err := runtime.NewPipeline(cfg)
	if err != nil {
		return err
	}

	switch role {
	case roleRun, roleRetry:
		c, ok := classByName(os.Getenv(envClass))
		if !ok {
			return fmt.Errorf("unknown class %q", os.Getenv(envClass))
		}
		o, err := p.Execute(ctx, callOf(c, "c1", 1))
		if err != nil {
			return err
		}
		res.Status, res.Reason, res.Replayed = o.Status, o.ReasonCode, o.Replayed
	case roleRecover:
		rep, err := p.Recover(ctx)
		if err != nil {
			return err
		}
		res.Report = &rep
	case roleWorker:
		if err := workerLoop(ctx, p); err != nil {
			return err
		}
	case roleDrain:
		note, err := drain(ctx, p, st)
		if err != nil {
			return err
		}
		res.Note = note
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return os.WriteFile(os.Getenv(envResult), b, 0o644)
}
