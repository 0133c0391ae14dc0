package chaostest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	rt "github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/postgres"
)

// TestAbandonedCallIsReclaimed pins what the chaos run found: a call whose settle
// failed because the database went down (Execute returned the store's error) must not
// stay RUNNING for the life of its worker. Its worker no longer runs it, so after a
// lease the sweep must be able to classify it (here UNCERTAIN: non-idempotent, the
// effect was sent), and the caller's retry must stop getting call_in_progress.
//
// The lease renewal used to renew every RUNNING row whose lease_owner was the worker, the
// abandoned one included, so its lease never expired while the process lived; it now
// renews only the calls the pipeline is executing.
func TestAbandonedCallIsReclaimed(t *testing.T) {
	cl := newCluster(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, cl.DSN(), postgres.WithMaxConns(4))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	receipts := filepath.Join(t.TempDir(), "receipts.log")
	const lease = time.Second

	// The effect is sent, then the database goes down before the settle.
	reg := rt.NewRegistry()
	send := specs()[2]
	if send.Name != toolSend {
		t.Fatal("specs() changed order")
	}
	var outage bool
	tool := &chaosTool{spec: send, effect: func(ctx context.Context, tc *rt.ExecContext) error {
		if err := appendReceipt(receipts, "begin", tc.IdempotencyKey(), "w", os.Getpid(), "t"); err != nil {
			return err
		}
		if !outage {
			outage = true
			if _, err := cl.stop("immediate"); err != nil {
				return err
			}
		}
		return appendReceipt(receipts, "end", tc.IdempotencyKey(), "w", os.Getpid(), "t")
	}}
	if err := reg.Register(tool); err != nil {
		t.Fatal(err)
	}
	p, err := rt.NewPipeline(rt.Config{Registry: reg, Store: st, Lease: lease, WorkerID: "w-abandons"})
	if err != nil {
		t.Fatal(err)
	}

	idx := 0 // class non_idempotent
	if classOf(idx).Tool != toolSend {
		t.Fatal("classOf(0) is not the non-idempotent class")
	}
	_, err = p.Execute(ctx, callOf(idx))
	if err == nil {
		t.Fatal("Execute succeeded although the database was down at the settle")
	}
	t.Logf("Execute with the database down at the settle: %v", err)
	if _, err := cl.start(); err != nil {
		t.Fatal(err)
	}

	// The worker lives on (its renewal runs); its call is over. Another worker's
	// recovery passes reclaim the call once its lease, no longer renewed, has run out by
	// the database clock: the wait is for that condition, bounded as a failure guard (a
	// renewal that went on would keep the row RUNNING for as long as the worker lives).
	other, err := rt.NewPipeline(rt.Config{Registry: reg, Store: st, Lease: lease, WorkerID: "w-other"})
	if err != nil {
		t.Fatal(err)
	}
	var rep rt.RecoveryReport
	for deadline := time.Now().Add(time.Minute); ; {
		// An error is retried: the pool may hand out a connection from before the restart.
		if rep, err = other.Recover(ctx); err == nil {
			if row, gerr := st.InvocationGetByKey(ctx, keyOf(idx)); gerr == nil && row.Status != store.StatusRunning {
				break
			}
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(lease / 4) // between passes only
	}
	if err != nil {
		t.Fatal(err)
	}
	inv, err := st.InvocationGetByKey(ctx, keyOf(idx))
	if err != nil {
		t.Fatal(err)
	}
	retry, retryErr := p.Execute(ctx, callOf(idx))
	describe := fmt.Sprintf("row %s (lease_owner %q, lease_expires_at %v, watermark %v); sweep report %+v; the caller's retry: %s/%s err=%v",
		inv.Status, inv.LeaseOwner, inv.LeaseExpiresAt, inv.EffectSentAt != nil, rep, retry.Status, retry.ReasonCode, retryErr)
	if inv.Status != store.StatusUncertain {
		t.Errorf("a minute after its Execute returned, the abandoned call is still not reclaimed: %s", describe)
	} else {
		t.Log(describe)
	}
	if retry.ReasonCode == rt.ReasonCallInProgress {
		t.Errorf("the caller's retry still gets call_in_progress")
	}
}
