package server_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/mcp/server"
	"github.com/toolgen/toolgen/runtime"
)

// A held call reports its wait as progress and ends approval_pending; after another
// principal approves it, the same call retried runs exactly once, and a different
// call's approval is never consumed (POL-3).
func TestHold_ProgressThenApproveAndRetry(t *testing.T) {
	transports(t, func(t *testing.T, e *env, connect func(*progressLog) *mcp.ClientSession) {
		progress := &progressLog{}
		cs := connect(progress)
		deploy := e.tools["demo.deploy"]

		params := &mcp.CallToolParams{Name: "demo__deploy", Arguments: map[string]any{"n": 1}}
		params.SetProgressToken("tok-1")
		res, err := cs.CallTool(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		s := wantReason(t, res, "unavailable", "approval_pending")
		if !s.Retryable {
			t.Error("approval_pending is not retryable")
		}
		got := progress.received(t)
		for i, p := range got {
			if p.ProgressToken != "tok-1" || p.Message != server.HoldProgressMessage || p.Total != 0.2 {
				t.Errorf("progress %d = %+v, want token tok-1, %q, total 0.2 (the bound in seconds)", i, p, server.HoldProgressMessage)
			}
			if i > 0 && p.Progress <= got[i-1].Progress {
				t.Errorf("progress does not increase: %v then %v", got[i-1].Progress, p.Progress)
			}
		}
		if n := deploy.execs.Load(); n != 0 {
			t.Fatalf("the held call executed %d times before approval", n)
		}

		// Another call (other arguments) is held too, under another key.
		other := call(t, cs, "demo__deploy", map[string]any{"n": 2}, nil)
		wantReason(t, other, "unavailable", "approval_pending")

		// The caller cannot approve its own call; bob can, as `toolrun approve` will.
		key := keyOf(t, res, "demo.deploy", `{"n":1}`)
		if err := runtime.DecideApproval(e.ctx, e.store, key, alice, true, "", nil); !errors.Is(err, runtime.ErrSelfApproval) {
			t.Fatalf("self-approval: %v, want ErrSelfApproval", err)
		}
		if err := runtime.DecideApproval(e.ctx, e.store, key, bob, true, "looks fine", nil); err != nil {
			t.Fatalf("approve: %v", err)
		}

		// The retry of the same call (no _meta: derived ids) finds the decision and runs.
		retry := call(t, cs, "demo__deploy", map[string]any{"n": 1}, nil)
		if retry.IsError {
			t.Fatalf("retry after approval: %s", dump(retry))
		}
		if n := deploy.execs.Load(); n != 1 {
			t.Fatalf("demo.deploy executed %d times, want 1", n)
		}
		// Once more: the recorded outcome, no second execution.
		if again := call(t, cs, "demo__deploy", map[string]any{"n": 1}, nil); again.IsError || again.Meta[server.MetaReplayed] != true {
			t.Errorf("second retry: %s, want the replayed success", dump(again))
		}
		// The other call did not consume the approval: it is still held.
		wantReason(t, call(t, cs, "demo__deploy", map[string]any{"n": 2}, nil), "unavailable", "approval_pending")
		// Neither does the same arguments in another step (another key).
		wantReason(t, call(t, cs, "demo__deploy", map[string]any{"n": 1}, mcp.Meta{server.MetaStep: 1}), "unavailable", "approval_pending")
		if n := deploy.execs.Load(); n != 1 {
			t.Fatalf("demo.deploy executed %d times, want 1", n)
		}
	})
}

// A held call whose approval arrives while it waits runs in the same request.
func TestHold_ApprovalDuringWait(t *testing.T) {
	e := newEnv(t, envConfig{hold: time.Minute})
	cs := e.connectMemory("", nil)
	done := make(chan *mcp.CallToolResult, 1)
	meta := mcp.Meta{server.MetaSessionID: "s-wait", server.MetaCallID: "c-wait"}
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "demo__deploy", Arguments: map[string]any{"n": 3}, Meta: meta})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	key := runtime.IdempotencyKey(runtime.KeyInput{Tenant: "acme", RunID: "s-wait", CallID: "c-wait", Tool: "demo.deploy", ToolVersion: 1, CanonicalArgs: []byte(`{"n":3}`)})
	// Wait for the row to be held, then approve (no timing assertion: we poll for state).
	for {
		if err := runtime.DecideApproval(e.ctx, e.store, key, bob, true, "", nil); err == nil {
			break
		} else if !errors.Is(err, runtime.ErrNotHeld) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	res := <-done
	if res == nil || res.IsError {
		t.Fatalf("approved during the hold: %s", dump(res))
	}
	if n := e.tools["demo.deploy"].execs.Load(); n != 1 {
		t.Fatalf("executed %d times", n)
	}
}
