package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/toolgen/toolgen/runtime"
)

// RT-13: a watermark-requiring call that returns without marking is flagged three ways:
// the metric, the log line and the invocation row.
func TestExecute_WatermarkMissingIsFlagged(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m, err := runtime.NewMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	lazy := newTestTool("demo.send", runtime.SideEffectWrite, runtime.NonIdempotent)
	lazy.run = func(ctx context.Context, tc *runtime.ExecContext, args json.RawMessage) (runtime.ToolResult, error) {
		return runtime.ToolResult{OK: true}, nil // the effect, without MarkEffectSent
	}
	h := newHarness(t, runtime.Config{Metrics: m}, lazy)
	c := h.call("demo.send", "c1", `{}`)
	wantStatus(t, h.exec(c), runtime.OutcomeSucceeded, "")

	key := runtime.IdempotencyKey(runtime.KeyInput{Tenant: "acme", RunID: "r1", Step: 1, CallID: "c1",
		Tool: "demo.send", ToolVersion: 1, CanonicalArgs: []byte(`{}`)})
	inv, err := h.store.InvocationGetByKey(h.ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !inv.WatermarkMissing {
		t.Error("the invocation row does not carry the watermark_missing flag")
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if got := counterValue(rm, "tool_watermark_missing_total"); got != 1 {
		t.Errorf("tool_watermark_missing_total = %d, want 1", got)
	}
}

func counterValue(rm metricdata.ResourceMetrics, name string) int64 {
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range sum.DataPoints {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// SEC-2 (issue 14, finding 3): a metric label never carries the caller's raw tool name.
// Calls to names the registry does not know share the one UnknownLabel series; a
// registered tool keeps its own.
func TestMetrics_UnknownToolNamesShareOneLabel(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m, err := runtime.NewMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, runtime.Config{Metrics: m}, newTestTool("demo.read", runtime.SideEffectRead, runtime.Idempotent))
	for i, name := range []string{"demo.nope", "x" + strings.Repeat("y", 1<<16), "demo.read\n{evil=\"1\"}"} {
		wantStatus(t, h.exec(h.call(name, fmt.Sprint("c", i), `{}`)), runtime.OutcomeDenied, runtime.ReasonUnknownTool)
	}
	wantStatus(t, h.exec(h.call("demo.read", "ok", `{}`)), runtime.OutcomeSucceeded, "")
	got := runtime.CallsByLabels(t, reader, func(a attribute.Set) string {
		v, _ := a.Value("gen_ai.tool.name")
		return v.AsString()
	})
	if want := map[string]int64{runtime.UnknownLabel: 3, "demo.read": 1}; !maps.Equal(got, want) {
		t.Fatalf("toolgen.tool.calls by gen_ai.tool.name = %v, want %v", got, want)
	}
}
