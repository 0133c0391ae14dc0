package host

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/postgres/pgtest"
)

type fakeTool struct{ spec runtime.ToolSpec }

func (f *fakeTool) Spec() *runtime.ToolSpec { return &f.spec }
func (f *fakeTool) Execute(context.Context, *runtime.ExecContext, json.RawMessage) (runtime.ToolResult, error) {
	return runtime.ToolResult{OK: true}, nil
}

func adapterTool(name, sha string) *fakeTool {
	return &fakeTool{spec: runtime.ToolSpec{Name: name, Version: 1, Kind: runtime.KindAction,
		SideEffect: runtime.SideEffectRead, Idempotency: runtime.Idempotent, Risk: runtime.RiskLow,
		InputSchema: json.RawMessage(`{"type":"object"}`), SchemaSHA256: sha}}
}

// TestForcedEpochReachesRunningSessions: a forced epoch recorded in the store (by
// Operator.ForceEpoch in any process) re-pins that server's tools in this
// process's running sessions, and only that server's; one recorded before the process
// started is not applied again.
func TestForcedEpochReachesRunningSessions(t *testing.T) {
	ctx := t.Context()
	h, err := New(ctx, Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// An epoch of server b from before this process: never applied here.
	if _, err := h.st.CatalogHistoryAppend(ctx, store.CatalogChange{ServerID: "b", Change: ChangeForcedEpoch}); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []*fakeTool{adapterTool("mcp.a.t", "v1"), adapterTool("mcp.b.t", "v1")} {
		if err := h.reg.RegisterAdapter("mcp", tool); err != nil {
			t.Fatal(err)
		}
	}
	s1 := runtime.SessionKey{Tenant: "default", ID: "s1"}
	pin := func() runtime.Catalog {
		c, err := h.reg.Pin(ctx, s1)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	pin()
	for _, tool := range []*fakeTool{adapterTool("mcp.a.t", "v2"), adapterTool("mcp.b.t", "v2")} {
		if err := h.reg.Replace(tool); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := h.watchForcedEpochs(wctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.CatalogHistoryAppend(ctx, store.CatalogChange{ServerID: "a", Change: ChangeForcedEpoch}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for pin()["mcp.a.t"].SchemaSHA256 != "v2" {
		if time.Now().After(deadline) {
			t.Fatal("the forced epoch was not applied to the running session")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := pin()["mcp.b.t"].SchemaSHA256; got != "v1" {
		t.Errorf("server b re-pinned (by a's epoch, or by its own from before the process): %s", got)
	}
	// The epoch is in the store too, so another process (or this one restarted) serves
	// the session the re-pinned catalog.
	pins, _, err := h.st.SessionPinsGet(ctx, s1.Tenant, s1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pins) != "[{mcp.a.t v2} {mcp.b.t v1}]" {
		t.Errorf("stored pins after the epoch: %v, want a's re-pinned and b's kept", pins)
	}
}

// appliedLog signals each "forced epoch applied" record the host logs.
type appliedLog struct {
	slog.Handler
	applied chan struct{}
}

func (l appliedLog) Enabled(context.Context, slog.Level) bool { return true }

func (l appliedLog) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "forced epoch applied") {
		l.applied <- struct{}{}
	}
	return nil
}

// TestForcedEpochFromAnotherProcessWakes_Postgres: an epoch another process records
// in the catalog history wakes this host's watcher through the store's notification:
// the watcher's own interval is an hour here, so only the wake-up can apply it.
func TestForcedEpochFromAnotherProcessWakes_Postgres(t *testing.T) {
	ctx := t.Context()
	writer, schema := pgtest.Open(t) // the operator's process: it records the epoch
	dsn := pgtest.DSN(t)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	logs := appliedLog{Handler: slog.DiscardHandler, applied: make(chan struct{}, 4)}
	h, err := New(ctx, Config{Dir: t.TempDir(), Store: dsn + sep + "search_path=" + schema, Logger: slog.New(logs),
		Test: TestConfig{EpochPoll: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.reg.RegisterAdapter("mcp", adapterTool("mcp.a.t", "v1")); err != nil {
		t.Fatal(err)
	}
	s1 := runtime.SessionKey{Tenant: "default", ID: "s1"}
	if _, err := h.reg.Pin(ctx, s1); err != nil {
		t.Fatal(err)
	}
	if err := h.reg.Replace(adapterTool("mcp.a.t", "v2")); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := h.watchForcedEpochs(wctx); err != nil {
		t.Fatal(err)
	}
	// The watcher subscribed before it returned; its subscription is ready once the
	// host store's listener listens.
	sub := h.st.(store.Waker).Subscribe(store.CatalogTopic())
	defer sub.Close()
	<-sub.Ready()
	if _, err := writer.CatalogHistoryAppend(ctx, store.CatalogChange{ServerID: "a", Change: ChangeForcedEpoch}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-logs.applied:
	case <-time.After(30 * time.Second):
		t.Fatal("the forced epoch recorded by another process was not applied (the watcher was not woken)")
	}
	pins, _, err := writer.SessionPinsGet(ctx, s1.Tenant, s1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pins) != "[{mcp.a.t v2}]" {
		t.Errorf("stored pins after the epoch: %v, want a's re-pinned", pins)
	}
}
