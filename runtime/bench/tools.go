package bench

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// Class is a call class of issue 3, by the commits a call of it costs.
type Class struct {
	Name        string
	Tool        string // the name of its NopTool
	SideEffect  runtime.SideEffect
	Idempotency runtime.Idempotency
	Commits     int // what the pipeline commits for one successful call
}

// Classes are the three classes the benchmarks measure.
var Classes = []Class{
	{Name: "read", Tool: "bench.read", SideEffect: runtime.SideEffectRead, Idempotency: runtime.Idempotent, Commits: 1},
	{Name: "write-idempotent", Tool: "bench.write_idempotent", SideEffect: runtime.SideEffectWrite, Idempotency: runtime.Idempotent, Commits: 2},
	{Name: "write-nonidempotent", Tool: "bench.write_nonidempotent", SideEffect: runtime.SideEffectWrite, Idempotency: runtime.NonIdempotent, Commits: 3},
}

// The schemas of every NopTool: one optional integer in, an object of two fields out.
var (
	NopInputSchema  = json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,"properties":{"n":{"type":"integer"}},"type":"object"}`)
	NopOutputSchema = json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,"properties":{"n":{"type":"integer"},"ok":{"type":"boolean"}},"required":["ok","n"],"type":"object"}`)
)

// NopTool does nothing, shaped like a generated wrapper (gen/tool.*.gen.go): it decodes
// its arguments with runtime.DecodeArgs, marks the watermark when its class needs one,
// and returns a tiny typed result through runtime.StructuredResult.
type NopTool struct {
	spec runtime.ToolSpec
}

type nopArgs struct {
	N int64 `json:"n,omitempty"`
}

type nopResult struct {
	OK bool  `json:"ok"`
	N  int64 `json:"n"`
}

// NewNopTool returns the no-op tool of class c.
func NewNopTool(c Class) *NopTool {
	return &NopTool{spec: runtime.ToolSpec{
		Name: c.Tool, Version: 1, Kind: runtime.KindAction, SideEffect: c.SideEffect,
		Idempotency: c.Idempotency, Risk: runtime.RiskLow, OutputTrust: runtime.TrustTool,
		ParallelSafe: true, Timeout: 30 * time.Second, OutputMaxBytes: 65536,
		InputSchema: NopInputSchema, OutputSchema: NopOutputSchema, SchemaSHA256: "bench-" + c.Name,
	}}
}

func (t *NopTool) Spec() *runtime.ToolSpec { return &t.spec }

func (t *NopTool) Execute(ctx context.Context, tc *runtime.ExecContext, raw json.RawMessage) (runtime.ToolResult, error) {
	var args nopArgs
	if err := runtime.DecodeArgs(raw, &args); err != nil {
		return runtime.ToolResult{}, err
	}
	if t.spec.Idempotency.NeedsWatermark() {
		if err := tc.MarkEffectSent(ctx); err != nil {
			return runtime.ToolResult{}, err
		}
	}
	return runtime.StructuredResult(&t.spec, nopResult{OK: true, N: args.N})
}

// WorkerID is the lease owner of every benchmark pipeline.
const WorkerID = "bench-worker"

// NewPipeline returns a pipeline over st with one NopTool per class, no policy rules,
// no modes, no metrics and the default (discarding) logger.
func NewPipeline(st store.Store) (*runtime.Pipeline, error) {
	reg := runtime.NewRegistry()
	for _, c := range Classes {
		if err := reg.Register(NewNopTool(c)); err != nil {
			return nil, err
		}
	}
	return runtime.NewPipeline(runtime.Config{Registry: reg, Store: st, WorkerID: WorkerID})
}

// Principal is the caller of every benchmark call.
var Principal = runtime.Principal{ID: "alice", Tenant: "acme", Scopes: []string{"all"}}

var userTrust = []runtime.Trust{runtime.TrustUser}

// Call is a call of class c, as a caller makes it. Calls with distinct callID have
// distinct keys; calls with distinct n are distinct for the breaker.
func Call(c Class, runID, callID string, args json.RawMessage) runtime.Call {
	return runtime.Call{
		Tenant: "acme", Principal: Principal, SessionID: "s1", RunID: runID, Step: 1,
		CallID: callID, Tool: c.Tool, Args: args,
		ContextTrust: userTrust, ArgumentTrust: runtime.TrustUser,
	}
}

// Args are the arguments {"n":n}.
func Args(n int64) json.RawMessage {
	b := make([]byte, 0, 32)
	b = append(b, `{"n":`...)
	b = strconv.AppendInt(b, n, 10)
	return append(b, '}')
}
