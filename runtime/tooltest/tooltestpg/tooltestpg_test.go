package tooltestpg_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/tooltest"
	"github.com/toolgen/toolgen/runtime/tooltest/tooltestpg"
)

type sendTool struct {
	spec  runtime.ToolSpec
	execs int
}

func (s *sendTool) Spec() *runtime.ToolSpec { return &s.spec }

func (s *sendTool) Execute(ctx context.Context, tc *runtime.ExecContext, _ json.RawMessage) (runtime.ToolResult, error) {
	if err := tc.MarkEffectSent(ctx); err != nil {
		return runtime.ToolResult{}, err
	}
	s.execs++
	return runtime.ToolResult{OK: true}, nil
}

func newSend(risk runtime.Risk) *sendTool {
	return &sendTool{spec: runtime.ToolSpec{
		Name: "demo.send", Version: 1, Kind: runtime.KindAction, SideEffect: runtime.SideEffectWrite,
		Idempotency: runtime.NonIdempotent, Risk: risk, OutputTrust: runtime.TrustTool, SchemaSHA256: "sha",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}}
}

// The Worker on PostgreSQL: the call, its row, its replay through a second handle, a
// held call approved — and the schema gone when the test that made it has ended.
func TestWorker_OnAFreshSchema(t *testing.T) {
	dsn := tooltestpg.DSN(t)
	var schema string
	t.Run("calls", func(t *testing.T) {
		ctx := context.Background()
		db := tooltestpg.NewSchema(t, dsn)
		schema = db.Name
		send := newSend(runtime.RiskLow)
		w := tooltest.NewWorker(t, send, tooltest.WorkerOptions{Database: db})
		first := w.Call(ctx, `{"a": 1}`)
		if first.Outcome.Status != runtime.OutcomeSucceeded || first.Row == nil || first.Row.EffectSentAt == nil {
			t.Fatalf("outcome %s/%s, row %+v", first.Outcome.Status, first.Outcome.ReasonCode, first.Row)
		}
		again := w.Reopen().Call(ctx, `{ "a" : 1 }`, tooltest.SameCallAs(first))
		if !again.Outcome.Replayed || again.Executed || again.Row.ID != first.Row.ID || send.execs != 1 {
			t.Errorf("replay through a second handle: replayed %v, executed %v, row %d (first %d), %d executions",
				again.Outcome.Replayed, again.Executed, again.Row.ID, first.Row.ID, send.execs)
		}

		deploy := newSend(runtime.RiskCritical)
		deploy.spec.Name = "demo.deploy"
		dw := tooltest.NewWorker(t, deploy, tooltest.WorkerOptions{Database: tooltestpg.NewSchema(t, dsn)})
		held := dw.Call(ctx, `{}`)
		if !held.Held || held.Outcome.Status != runtime.OutcomeSucceeded || held.Row.Status != store.StatusSucceeded {
			t.Errorf("held call: held %v, outcome %s/%s, row %s", held.Held, held.Outcome.Status, held.Outcome.ReasonCode, held.Row.Status)
		}
		left := dw.Call(ctx, `{}`, tooltest.LeaveHeld())
		if !left.Held || left.Outcome.ReasonCode != runtime.ReasonApprovalPending || left.Row.Status != store.StatusPending || left.Executed {
			t.Errorf("call left held: held %v, outcome %s/%s, row %s, executed %v", left.Held, left.Outcome.Status, left.Outcome.ReasonCode, left.Row.Status, left.Executed)
		}
	})
	if t.Failed() {
		return
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("schema %s still exists after its test ended", schema)
	}
}
