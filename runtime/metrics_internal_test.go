package runtime

import (
	"context"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The attribute sets callAttributes keeps are one per label triple: a call is counted
// under its own tool, status and reason whether its set was cached, found in the cache
// or built past the bound.
func TestMetrics_CallAttributeSets(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	// Above the SDK's default cardinality limit (2,000 series), past which it counts
	// every new series under one overflow set.
	m, err := NewMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader),
		sdkmetric.WithCardinalityLimit(2*maxCallAttributeSets)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ok, denied := Outcome{Status: OutcomeSucceeded}, Outcome{Status: OutcomeDenied, ReasonCode: ReasonUnknownTool}
	odd := Outcome{Status: OutcomeDenied, ReasonCode: "no_such_reason"}
	// Fill the cache past its bound, then record the three triples twice each.
	for i := range maxCallAttributeSets + 10 {
		m.call(ctx, "fill."+strconv.Itoa(i), ok, time.Millisecond)
	}
	if n := m.callSetCount.Load(); n != maxCallAttributeSets {
		t.Fatalf("cached sets = %d, want the bound %d", n, maxCallAttributeSets)
	}
	for range 2 {
		for _, tool := range []string{"fill.0", "fill." + strconv.Itoa(maxCallAttributeSets+5)} {
			m.call(ctx, tool, ok, time.Millisecond)
			m.call(ctx, tool, denied, time.Millisecond)
			m.call(ctx, tool, odd, time.Millisecond)
		}
	}
	got := CallsByLabels(t, reader, func(a attribute.Set) string {
		tool, _ := a.Value("gen_ai.tool.name")
		status, _ := a.Value("toolgen.status")
		reason, _ := a.Value("error.type")
		return tool.AsString() + " " + status.AsString() + " " + reason.AsString()
	})
	past := "fill." + strconv.Itoa(maxCallAttributeSets+5)
	for key, want := range map[string]int64{
		"fill.0 succeeded ":              3,
		"fill.0 denied unknown_tool":     2,
		"fill.0 denied " + UnknownLabel:  2,
		past + " succeeded ":             3,
		past + " denied unknown_tool":    2,
		past + " denied " + UnknownLabel: 2,
		"fill.1 succeeded ":              1,
	} {
		if got[key] != want {
			t.Errorf("calls{%s} = %d, want %d", key, got[key], want)
		}
	}
}

// CallsByLabels is toolgen.tool.calls as reader collects it, summed by key of each
// point's attributes (for this package's tests and runtime_test's).
func CallsByLabels(tb testing.TB, reader *sdkmetric.ManualReader, key func(attribute.Set) string) map[string]int64 {
	tb.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		tb.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != "toolgen.tool.calls" {
				continue
			}
			for _, dp := range mt.Data.(metricdata.Sum[int64]).DataPoints {
				got[key(dp.Attributes)] += dp.Value
			}
		}
	}
	return got
}

// BenchmarkMetricsCall is what recording one call costs (Metrics.call: the counter and
// the histogram), under a context as deep as a served call's (the HTTP server's, the
// go-sdk's and the pipeline's values and cancellations: about twenty), with the
// SDK's default exemplar filter and with exemplars off, as the host configures it.
func BenchmarkMetricsCall(b *testing.B) {
	ctx := context.Background()
	for i := range 20 {
		if i%2 == 0 {
			ctx = context.WithValue(ctx, benchCtxKey(i), i)
		} else {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			b.Cleanup(cancel)
		}
	}
	for _, c := range []struct {
		name string
		opts []sdkmetric.Option
	}{
		{"exemplars=trace-based", nil},
		{"exemplars=off", []sdkmetric.Option{sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			mp := sdkmetric.NewMeterProvider(append(c.opts, sdkmetric.WithReader(sdkmetric.NewManualReader()))...)
			b.Cleanup(func() { mp.Shutdown(context.Background()) })
			m, err := NewMetrics(mp)
			if err != nil {
				b.Fatal(err)
			}
			// A registry's worth of tools, each with a success and a refusal.
			tools := make([]string, 32)
			for i := range tools {
				tools[i] = "bench.tool" + strconv.Itoa(i)
			}
			ok, denied := Outcome{Status: OutcomeSucceeded}, Outcome{Status: OutcomeDenied, ReasonCode: ReasonUnknownTool}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				o := ok
				if i%8 == 0 {
					o = denied
				}
				m.call(ctx, tools[i%len(tools)], o, time.Millisecond)
			}
		})
	}
}

type benchCtxKey int
