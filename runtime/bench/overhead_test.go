package bench

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// TestStorePlan checks that each class asks of the store exactly what the baselines
// of BenchmarkPostgresCalls and BenchmarkSQLiteCalls run, and that MemStore carries
// all three classes (and a replay) through the pipeline. It runs in make test.
func TestStorePlan(t *testing.T) {
	for _, c := range Classes {
		calls := capture(t, c)
		var commits int
		for _, sc := range calls {
			switch sc.Method {
			case "InvocationInsert", "InvocationMarkEffectSentIfLeased", "InvocationSettleIfLeased":
				commits++
			}
		}
		if commits != c.Commits {
			t.Errorf("%s: %d commits, want %d", c.Name, commits, c.Commits)
		}
	}
	st := NewMemStore()
	p, err := NewPipeline(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Classes {
		call := Call(c, "r1", "c1", Args(1))
		for i, wantReplayed := range []bool{false, true} {
			o, err := p.Execute(context.Background(), call)
			if err != nil || o.Status != runtime.OutcomeSucceeded || o.Replayed != wantReplayed {
				t.Fatalf("%s call %d: %v %s/%s replayed=%v", c.Name, i, err, o.Status, o.ReasonCode, o.Replayed)
			}
		}
	}
	if st.Len() != len(Classes) {
		t.Errorf("MemStore has %d rows, want %d", st.Len(), len(Classes))
	}
}

// BenchmarkPipelineOverhead is (a) of issue 3: the cost of one call through the
// pipeline over an in-memory store, against calling the tool directly.
//
//   - direct: tool.Execute with an ExecContext built once (what the tool itself costs:
//     argument decoding and result encoding, as a generated wrapper does).
//   - pipeline/<class>: Execute, each call with its own call id (so its own key).
//   - store-only/read: the three MemStore calls of a read call, without the pipeline.
func BenchmarkPipelineOverhead(b *testing.B) {
	ctx := context.Background()
	for _, c := range []Class{Classes[0], Classes[2]} {
		name := "direct"
		if c.Name != "read" {
			name = "direct-" + c.Name
		}
		b.Run(name, func(b *testing.B) {
			tool := NewNopTool(c)
			tc := runtime.NewExecContext(runtime.ExecContextConfig{
				Identity: runtime.Identity{Tenant: "acme", Principal: "alice", RunID: "r1", Step: 1, CallID: "c1", IdempotencyKey: "k"},
				Budget:   runtime.Budget{MaxOutputBytes: 65536}, Deadline: time.Now().Add(time.Hour),
				MarkEffectSent: func(context.Context) error { return nil },
			})
			args := Args(1)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := tool.Execute(ctx, tc, args)
				if err != nil || !res.OK {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("pipeline", func(b *testing.B) {
		for _, c := range Classes {
			b.Run(c.Name, func(b *testing.B) {
				p, err := NewPipeline(NewMemStore())
				if err != nil {
					b.Fatal(err)
				}
				ids := callIDs(b.N)
				args := Args(1)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					o, err := p.Execute(ctx, Call(c, "r1", ids[i], args))
					if err != nil || o.Status != runtime.OutcomeSucceeded || o.Replayed {
						b.Fatalf("%v %s/%s", err, o.Status, o.ReasonCode)
					}
				}
			})
		}
	})
	b.Run("store-only/read", func(b *testing.B) {
		calls := capture(b, Classes[0])
		params := recordOf(b, calls)
		keys := callIDs(b.N)
		for i := range keys {
			keys[i] = runtime.IdempotencyKey(runtime.KeyInput{Tenant: "acme", RunID: "r1", Step: 1, CallID: keys[i], Tool: params.Tool, ToolVersion: 1})
		}
		st := NewMemStore()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if pc, err := st.InvocationPriorCalls(ctx, store.PriorCallsParams{Tenant: params.Tenant, RunID: params.RunID,
				Step: params.Step, ArgsHash: params.ArgsHash, Key: keys[i]}); err != nil || pc.KeyTaken {
				b.Fatal(err)
			}
			p := params
			p.Key = keys[i]
			if _, ok, err := st.InvocationInsert(ctx, p); err != nil || !ok {
				b.Fatal(err)
			}
		}
	})
}

// callIDs returns n distinct call ids, built before the timer starts.
func callIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "call-" + strconv.Itoa(i)
	}
	return ids
}
