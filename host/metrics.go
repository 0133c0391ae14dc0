package host

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"

	"github.com/toolgen/toolgen/runtime"
)

// promMetrics are the pipeline's metrics of one serving process, exported for
// Prometheus: an OpenTelemetry SDK MeterProvider whose only reader is the Prometheus
// exporter, registered on a registry of its own — never the global default registry,
// so nothing else in the process leaks into /metrics, and two servers in one process
// (the testscripts run toolrun in-process) never collide on a registration.
//
// Names follow the Prometheus conventions (dots become underscores, counters end in
// _total, the unit is a suffix): toolgen.tool.calls is toolgen_tool_calls_total,
// toolgen.tool.call.duration (s) is toolgen_tool_call_duration_seconds.
type promMetrics struct {
	// Pipeline goes into runtime.Config.Metrics.
	Pipeline *runtime.Metrics
	// Handler serves the exposition; mount it at MetricsPath.
	Handler  http.Handler
	provider *sdkmetric.MeterProvider
}

func newPromMetrics() (*promMetrics, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg),
		// Explicit: the exporter's default otherwise depends on a global of
		// prometheus/common/model, and dashboards depend on the names.
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes))
	if err != nil {
		return nil, fmt.Errorf("metrics: prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp),
		// Exemplars off: the handler serves the Prometheus text format, which has no
		// exemplars (OpenMetrics is not negotiated), so offering every measurement to
		// a reservoir, after walking the call's context for a span, is work nobody sees.
		sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))
	m, err := runtime.NewMetrics(mp)
	if err != nil {
		mp.Shutdown(context.Background())
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return &promMetrics{Pipeline: m, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), provider: mp}, nil
}

// Close shuts the MeterProvider down: the handler serves nothing useful afterwards.
func (m *promMetrics) Close(ctx context.Context) error {
	return m.provider.Shutdown(ctx)
}
