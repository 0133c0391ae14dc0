package sandbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
	"github.com/toolgen/toolgen/sandbox"
)

// testTool is a hand-written tool for the sandbox's tests: it counts its executions.
type testTool struct {
	spec runtime.ToolSpec
	runs atomic.Int64
	mark bool // marks the watermark before its effect
	fn   func(args map[string]any) any
}

func (t *testTool) Spec() *runtime.ToolSpec { return &t.spec }

func (t *testTool) Execute(ctx context.Context, tc *runtime.ExecContext, raw json.RawMessage) (runtime.ToolResult, error) {
	if t.mark {
		if err := tc.MarkEffectSent(ctx); err != nil {
			return runtime.ToolResult{}, err
		}
	}
	t.runs.Add(1)
	var args map[string]any
	json.Unmarshal(raw, &args)
	res, err := runtime.StructuredResult(&t.spec, t.fn(args))
	if err != nil {
		return res, err
	}
	res.Trust = t.spec.OutputTrust
	return res, nil
}

const anyArgs = `{"type":"object"}`

func spec(name string, se runtime.SideEffect, idem runtime.Idempotency, risk runtime.Risk, trust runtime.Trust) runtime.ToolSpec {
	return runtime.ToolSpec{Name: name, Version: 1, Kind: runtime.KindAction, SideEffect: se, Idempotency: idem,
		Risk: risk, OutputTrust: trust, OutputMaxBytes: 65536, InputSchema: json.RawMessage(anyArgs),
		SchemaSHA256: "sha-" + name, Timeout: 30 * time.Second}
}

// harness is a pipeline on a fresh SQLite store with the test tools and
// sandbox.run_script registered as toolrun registers it.
type harness struct {
	t     *testing.T
	p     *runtime.Pipeline
	st    store.Store
	read  *testTool // t.read: external_untrusted text of a path
	note  *testTool // t.note: a system value
	write *testTool // t.write: a non_idempotent, low-risk write
	pub   *testTool // t.publish: a non_idempotent, medium-risk write (held on untrusted arguments)
	crit  *testTool // t.deploy: critical, always held
	mu    sync.Mutex
	wrote []string
}

func newHarness(t *testing.T, hold time.Duration) *harness {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newHarnessOn(t, st, hold)
}

// newHarnessOn is newHarness on the store st.
func newHarnessOn(t *testing.T, st store.Store, hold time.Duration) *harness {
	t.Helper()
	h := &harness{t: t, st: st}
	h.read = &testTool{spec: spec("t.read", runtime.SideEffectRead, runtime.Idempotent, runtime.RiskLow, runtime.TrustExternalUntrusted),
		fn: func(a map[string]any) any { return map[string]any{"text": fmt.Sprintf("content of %v", a["path"])} }}
	h.note = &testTool{spec: spec("t.note", runtime.SideEffectNone, runtime.Idempotent, runtime.RiskLow, runtime.TrustSystem),
		fn: func(a map[string]any) any { return map[string]any{"v": a["v"]} }}
	h.pub = &testTool{spec: spec("t.publish", runtime.SideEffectWrite, runtime.NonIdempotent, runtime.RiskMedium, runtime.TrustTool), mark: true,
		fn: func(a map[string]any) any { return map[string]any{"published": a["text"]} }}
	h.write = &testTool{spec: spec("t.write", runtime.SideEffectWrite, runtime.NonIdempotent, runtime.RiskLow, runtime.TrustTool), mark: true,
		fn: func(a map[string]any) any {
			h.mu.Lock()
			h.wrote = append(h.wrote, fmt.Sprint(a["text"]))
			h.mu.Unlock()
			return map[string]any{"ok": true}
		}}
	h.crit = &testTool{spec: spec("t.deploy", runtime.SideEffectWrite, runtime.NonIdempotent, runtime.RiskCritical, runtime.TrustTool), mark: true,
		fn: func(a map[string]any) any { return map[string]any{"deployed": true} }}
	h.p = h.pipeline(st, hold)
	return h
}

// pipeline is another pipeline, on st, with the harness's tools (the same counters)
// and sandbox.run_script: another worker, or another process when st is another handle
// on the same database.
func (h *harness) pipeline(st store.Store, hold time.Duration) *runtime.Pipeline {
	h.t.Helper()
	reg := runtime.NewRegistry()
	if err := reg.Register(h.read, h.note, h.write, h.pub, h.crit); err != nil {
		h.t.Fatal(err)
	}
	if err := reg.RegisterAdapter(sandbox.Domain, sandbox.NewTool()); err != nil {
		h.t.Fatal(err)
	}
	p, err := runtime.NewPipeline(runtime.Config{Registry: reg, Store: st, ApprovalHold: hold, ApprovalPoll: time.Millisecond})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// result is sandbox.run_script's structured result.
type result struct {
	Result  string `json:"result"`
	Printed string `json:"printed"`
	Calls   []struct {
		Ordinal    int    `json:"ordinal"`
		Tool       string `json:"tool"`
		CallID     string `json:"call_id"`
		Status     string `json:"status"`
		ReasonCode string `json:"reason_code"`
		Replayed   bool   `json:"replayed"`
	} `json:"calls"`
	ScriptHash string `json:"script_hash"`
	Untrusted  bool   `json:"untrusted"`
}

// run submits script as the call callID of run r1, step 1, with argument trust user.
func (h *harness) run(callID, script string, extra map[string]any) (runtime.Outcome, result) {
	h.t.Helper()
	return h.runTrust(callID, script, extra, runtime.TrustUser)
}

func (h *harness) runTrust(callID, script string, extra map[string]any, trust runtime.Trust) (runtime.Outcome, result) {
	h.t.Helper()
	args := map[string]any{"script": script}
	for k, v := range extra {
		args[k] = v
	}
	raw, _ := json.Marshal(args)
	o, err := h.p.Execute(context.Background(), runtime.Call{
		Tenant: "t1", Principal: runtime.Principal{ID: "agent", Tenant: "t1"}, SessionID: "s1", RunID: "r1", Step: 1,
		CallID: callID, Tool: "sandbox.run_script", Args: raw, ContextTrust: []runtime.Trust{runtime.TrustUser}, ArgumentTrust: trust,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	var res result
	if o.Result != nil && len(o.Result.Structured) > 0 {
		if err := json.Unmarshal(o.Result.Structured, &res); err != nil {
			h.t.Fatal(err)
		}
	}
	return o, res
}

// approveAll approves every held call of the store, as another principal.
func (h *harness) approveAll() int {
	h.t.Helper()
	ctx := context.Background()
	held, err := h.st.InvocationList(ctx, store.InvocationFilter{Tenant: "t1", AwaitingApproval: true, Limit: 100})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, inv := range held {
		if err := runtime.DecideApproval(ctx, h.st, inv.Key, runtime.Principal{ID: "reviewer", Tenant: "t1"}, true, "ok", nil); err != nil {
			h.t.Fatal(err)
		}
	}
	return len(held)
}
