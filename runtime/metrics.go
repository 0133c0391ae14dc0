package runtime

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metrics are the pipeline's instruments, through the OpenTelemetry API only (the
// application chooses the SDK and exporter). A nil *Metrics records nothing.
//
//   - tool_watermark_missing_total: a non_idempotent or conditionally_idempotent call
//     returned without marking the watermark (RT-13), by gen_ai.tool.name.
//   - tool_invocations_uncertain_total: calls resolved UNCERTAIN, in flight or by the
//     sweep (RT-13), by gen_ai.tool.name.
//   - toolgen.tool.calls and toolgen.tool.call.duration (s): every call by
//     gen_ai.tool.name, toolgen.status and, for non-success outcomes, error.type (the
//     reason code).
//
// Every label value comes from a bounded set, never from the caller (SEC-2): an
// exporter keeps one series per distinct label set for the life of the process, and
// serves each on every scrape, so a caller who could choose a label value could grow
// the process and the scrape without bound (issue 14, finding 3). gen_ai.tool.name is
// a name the registry knows — registered, or pinned by the session from it — and
// UnknownLabel for anything else (a misspelt, invented or another tenant's tool);
// toolgen.status is one of the five statuses and error.type a code of the reason table,
// each UnknownLabel otherwise.
type Metrics struct {
	watermarkMissingC metric.Int64Counter
	uncertainC        metric.Int64Counter
	callsC            metric.Int64Counter
	durationH         metric.Float64Histogram

	callSets     sync.Map // callLabels → metric.MeasurementOption; see callAttributes
	callSetCount atomic.Int64
}

// NewMetrics creates the instruments on mp's meter "github.com/toolgen/toolgen/runtime".
func NewMetrics(mp metric.MeterProvider) (*Metrics, error) {
	m := mp.Meter("github.com/toolgen/toolgen/runtime")
	var (
		out Metrics
		err error
	)
	if out.watermarkMissingC, err = m.Int64Counter("tool_watermark_missing_total",
		metric.WithDescription("Watermark-requiring tool calls that returned without marking the effect (RT-13).")); err != nil {
		return nil, err
	}
	if out.uncertainC, err = m.Int64Counter("tool_invocations_uncertain_total",
		metric.WithDescription("Tool calls resolved UNCERTAIN: the effect may have happened and a retry is not safe.")); err != nil {
		return nil, err
	}
	if out.callsC, err = m.Int64Counter("toolgen.tool.calls",
		metric.WithDescription("Tool calls by outcome.")); err != nil {
		return nil, err
	}
	if out.durationH, err = m.Float64Histogram("toolgen.tool.call.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of a tool call through the pipeline."),
		// Seconds, as the OpenTelemetry GenAI conventions use for durations (the SDK's
		// default bounds are for milliseconds: every call would land in the first bucket).
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)); err != nil {
		return nil, err
	}
	return &out, nil
}

// UnknownLabel is the one label value that stands for every value outside a metric
// label's bounded set (a tool name the registry does not know, above all).
const UnknownLabel = "unknown"

// statusLabel and reasonLabel keep the other labels in their closed sets: an Outcome
// replayed from a row written by another version could carry a value this one lacks.
func statusLabel(s OutcomeStatus) string {
	if !s.Known() {
		return UnknownLabel
	}
	return string(s)
}

func reasonLabel(c ReasonCode) string {
	if !c.Known() {
		return UnknownLabel
	}
	return string(c)
}

func (m *Metrics) watermarkMissing(ctx context.Context, tool string) {
	if m == nil {
		return
	}
	m.watermarkMissingC.Add(ctx, 1, metric.WithAttributes(attribute.String("gen_ai.tool.name", tool)))
}

func (m *Metrics) uncertain(ctx context.Context, tool string) {
	if m == nil {
		return
	}
	m.uncertainC.Add(ctx, 1, metric.WithAttributes(attribute.String("gen_ai.tool.name", tool)))
}

// call records one call; tool must already be a bounded label (call.toolLabel).
func (m *Metrics) call(ctx context.Context, tool string, o Outcome, d time.Duration) {
	if m == nil {
		return
	}
	l := callLabels{tool: tool, status: statusLabel(o.Status)}
	if o.ReasonCode != "" {
		l.reason = reasonLabel(o.ReasonCode)
	}
	set := m.callAttributes(l)
	m.callsC.Add(ctx, 1, set)
	m.durationH.Record(ctx, d.Seconds(), set)
}

// callLabels are one call's label values; reason is "" for a call without a reason.
type callLabels struct{ tool, status, reason string }

// maxCallAttributeSets bounds the label sets Metrics keeps built (callAttributes).
const maxCallAttributeSets = 4096

// callAttributes is the option carrying l's attribute set. The set is built once
// per distinct l, not per call (building one sorts and hashes its attributes), up to
// maxCallAttributeSets of them (a few more when calls race at the bound): the labels
// come from bounded sets, but a registry's tools times the reason codes can still be
// many, so past the bound a set is built for each call, as before the cache.
func (m *Metrics) callAttributes(l callLabels) metric.MeasurementOption {
	if opt, ok := m.callSets.Load(l); ok {
		return opt.(metric.MeasurementOption)
	}
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.tool.name", l.tool),
		attribute.String("toolgen.status", l.status),
	}
	if l.reason != "" {
		attrs = append(attrs, attribute.String("error.type", l.reason))
	}
	opt := metric.WithAttributeSet(attribute.NewSet(attrs...))
	if m.callSetCount.Load() < maxCallAttributeSets {
		if _, loaded := m.callSets.LoadOrStore(l, opt); !loaded {
			m.callSetCount.Add(1)
		}
	}
	return opt
}
