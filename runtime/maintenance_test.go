package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// hungStore is a worker's store after the worker "died": its lease renewals fail, as
// they would from a process that is gone, while the blocked call never writes again.
type hungStore struct {
	store.Store
	dead atomic.Bool
}

func (s *hungStore) InvocationRenewLeases(ctx context.Context, owner string, ids []int64, lease time.Duration) (int, error) {
	if s.dead.Load() {
		return 0, errors.New("the worker is gone")
	}
	return s.Store.InvocationRenewLeases(ctx, owner, ids, lease)
}

// crashAt runs call on a pipeline over st that "dies" right after step: the call's
// goroutine blocks there forever (until the test ends) and its lease is no longer
// renewed, which is what a SIGKILL leaves behind.
func crashAt(t *testing.T, st store.Store, step string, lease time.Duration, tool runtime.Tool, c runtime.Call) {
	t.Helper()
	hung := &hungStore{Store: st}
	reached := make(chan struct{})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	reg := runtime.NewRegistry()
	if err := reg.Register(tool); err != nil {
		t.Fatal(err)
	}
	p, err := runtime.NewPipeline(runtime.Config{Registry: reg, Store: hung, WorkerID: "dying", Lease: lease,
		Artifacts: runtime.NewFSArtifactWriter(t.TempDir()),
		AfterStep: func(s string) {
			if s == step {
				hung.dead.Store(true)
				close(reached)
				<-release
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	go p.Execute(context.Background(), c)
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatalf("the call never reached %s", step)
	}
}

// waitRow polls the store until the call's row satisfies ok (a failure guard of 30 s,
// not a measurement).
func waitRow(t *testing.T, st store.Store, ok func(*store.Invocation) bool) *store.Invocation {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rows, err := st.InvocationList(context.Background(), store.InvocationFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 1 && ok(rows[0]) {
			return rows[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the row never reached the expected state: %+v", rows)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMaintenance_PeerRecoversACrashedWorkersCall (LIFE-1): with nobody running a
// recovery command, a live worker's maintenance decides a crashed worker's call once
// its lease expires — killed before the watermark, the non-idempotent call is re-run
// once; killed after it, it becomes UNCERTAIN — and the agent's retry of the same call
// gets the recovered outcome without anything running again.
func TestMaintenance_PeerRecoversACrashedWorkersCall(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			for _, tc := range []struct {
				step    string
				status  store.Status
				effects int64
				outcome runtime.OutcomeStatus
			}{
				{"persist", store.StatusSucceeded, 1, runtime.OutcomeSucceeded},
				{"watermark", store.StatusUncertain, 0, runtime.OutcomeUncertain},
			} {
				t.Run("killed after "+tc.step, func(t *testing.T) {
					st := d.open(t)
					send := newTestTool("demo.send", runtime.SideEffectWrite, runtime.NonIdempotent)
					peer := newHarnessOn(t, st, runtime.Config{WorkerID: "peer", SweepInterval: 50 * time.Millisecond}, send)
					call := peer.call("demo.send", "c1", `{"n": 1}`)
					crashAt(t, st, tc.step, 300*time.Millisecond, send, call)
					if err := peer.p.Start(t.Context()); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { peer.p.Stop(context.Background()) })
					row := waitRow(t, st, func(inv *store.Invocation) bool { return inv.Status == tc.status })
					if n := send.effects.Load(); n != tc.effects {
						t.Errorf("the effect happened %d times, want %d", n, tc.effects)
					}
					if row.LeaseOwner == "dying" && tc.status == store.StatusSucceeded {
						t.Errorf("the re-run was recorded under the dead worker's fence")
					}
					again := peer.exec(call)
					if again.Status != tc.outcome || !again.Replayed {
						t.Errorf("the agent's retry: %s replayed=%v, want the recorded %s", again.Status, again.Replayed, tc.outcome)
					}
					if n := send.effects.Load(); n != tc.effects {
						t.Errorf("after the retry the effect happened %d times, want %d", n, tc.effects)
					}
				})
			}
		})
	}
}

// TestLease_SlowPrepareKeepsItsLease (LIFE-1): a call whose Prepare takes three times
// the lease completes — its lease is renewed while the tool runs, so the watermark
// write finds it unexpired — and a peer sweeping all along never reclaims it.
func TestLease_SlowPrepareKeepsItsLease(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			const lease = time.Second
			st := d.open(t)
			slow := newTestTool("demo.slow", runtime.SideEffectWrite, runtime.NonIdempotent)
			slow.run = func(ctx context.Context, tc *runtime.ExecContext, args json.RawMessage) (runtime.ToolResult, error) {
				time.Sleep(3 * lease) // Prepare: looks at the world, slowly
				if err := tc.MarkEffectSent(ctx); err != nil {
					return runtime.ToolResult{}, err
				}
				slow.effects.Add(1)
				return runtime.StructuredResult(&slow.spec, map[string]any{"ok": true})
			}
			h := newHarnessOn(t, st, runtime.Config{WorkerID: "w1", Lease: lease}, slow)
			peer := newHarnessOn(t, st, runtime.Config{WorkerID: "peer", SweepInterval: 20 * time.Millisecond}, slow)
			if err := peer.p.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			defer peer.p.Stop(context.Background())
			o := h.exec(h.call("demo.slow", "c1", `{}`))
			wantStatus(t, o, runtime.OutcomeSucceeded, "")
			row := waitRow(t, st, func(inv *store.Invocation) bool { return inv.Status.Terminal() })
			if row.Attempt != 1 || row.LeaseOwner != "w1" || slow.effects.Load() != 1 {
				t.Errorf("row %+v, effects %d: want one attempt by w1, one effect", row, slow.effects.Load())
			}
		})
	}
}

func TestMaintenance_StartStop(t *testing.T) {
	h := newHarness(t, runtime.Config{})
	if err := h.p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := h.p.Start(t.Context()); !errors.Is(err, runtime.ErrMaintenanceRunning) {
		t.Errorf("second Start: %v, want ErrMaintenanceRunning", err)
	}
	if err := h.p.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := h.p.Stop(t.Context()); err != nil {
		t.Errorf("Stop of a stopped pipeline: %v", err)
	}
	if err := h.p.Start(t.Context()); err != nil {
		t.Errorf("Start after Stop: %v", err)
	}
	h.p.Stop(t.Context())
}
