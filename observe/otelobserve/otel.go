// Package otelobserve is memstack's OpenTelemetry sink: it turns each
// observe.Report into a span and metrics. It is a module of its own
// (github.com/memstack/memstack/observe/otelobserve), so a program that
// does not export to OpenTelemetry pays for none of it; the observe
// package in the core module has the API and the func and log/slog sinks.
package otelobserve

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/memstack/memstack/observe"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// InstrumentationName names the tracer and the meter of the OTel sink.
const InstrumentationName = "github.com/memstack/memstack/observe"

// Metric names of the OTel sink. Every metric has the attributes op and
// layer; MetricDropped also has reason.
const (
	MetricDuration       = "memstack.duration"        // histogram, seconds
	MetricInjected       = "memstack.items.injected"  // counter, items
	MetricDropped        = "memstack.items.dropped"   // counter, items
	MetricTokens         = "memstack.tokens"          // counter, tokens injected
	MetricLLMCalls       = "memstack.llm.calls"       // counter, calls
	MetricEmbeddingCalls = "memstack.embedding.calls" // counter, calls
	MetricErrors         = "memstack.errors"          // counter, failed calls
)

// maxSpanEvents caps the "dropped" events of one span.
const maxSpanEvents = 32

// New returns an observe.Sink that turns each observe.Report into an OpenTelemetry span and
// metrics.
//
// Span: one per observe.Report, named "memstack.<op> <layer>" (for example
// "memstack.load 1:RecentN"), a child of the span in the call's context,
// with the observe.Report's start and end as its timestamps (the span is recorded
// when the call has finished, so it cannot be the parent of spans made
// inside the call). Attributes: memstack.op, memstack.layer,
// memstack.identity_hash, memstack.injected and memstack.dropped (item
// counts), memstack.tokens, memstack.llm_calls, memstack.embedding_calls,
// and memstack.at (observe.Report.At in RFC 3339 with nanoseconds, when set); one
// "dropped" event per dropped item (at most 32) with its kind, id, reason,
// score, tokens and, when known, time (memstack.item.time, RFC 3339);
// status Error with the error's text when the call failed.
//
// Metrics (attributes op and layer; reason too on MetricDropped):
// MetricDuration, a histogram of call durations in seconds, and the
// counters MetricInjected, MetricDropped, MetricTokens, MetricLLMCalls,
// MetricEmbeddingCalls and MetricErrors.
//
// A nil provider turns its half off; both nil is an error. Nothing carries
// message text or the identity itself, except as far as an error's text
// does (see Slog).
func New(tracerProvider trace.TracerProvider, meterProvider metric.MeterProvider) (observe.Sink, error) {
	if tracerProvider == nil && meterProvider == nil {
		return nil, errors.New("observe: OTel: both the tracer provider and the meter provider are nil")
	}
	if tracerProvider == nil {
		tracerProvider = tracenoop.NewTracerProvider()
	}
	if meterProvider == nil {
		meterProvider = metricnoop.NewMeterProvider()
	}
	s := &otelSink{tracer: tracerProvider.Tracer(InstrumentationName)}
	meter := meterProvider.Meter(InstrumentationName)
	var err error
	if s.duration, err = meter.Float64Histogram(MetricDuration,
		metric.WithUnit("s"),
		metric.WithDescription("Duration of a memory layer's load, save, add or clear."),
		metric.WithExplicitBucketBoundaries(0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
	); err != nil {
		return nil, fmt.Errorf("observe: OTel: creating %s: %w", MetricDuration, err)
	}
	counters := []struct {
		dst        *metric.Int64Counter
		name, unit string
		desc       string
	}{
		{&s.injected, MetricInjected, "{item}", "Items a memory layer put into the prompt."},
		{&s.dropped, MetricDropped, "{item}", "Items a memory layer considered and left out, by reason."},
		{&s.tokens, MetricTokens, "{token}", "Tokens a memory layer put into the prompt."},
		{&s.llm, MetricLLMCalls, "{call}", "Language model calls made by memory layers."},
		{&s.embedding, MetricEmbeddingCalls, "{call}", "Embedding model calls made by memory layers."},
		{&s.errors, MetricErrors, "{call}", "Memory layer calls that failed."},
	}
	for _, c := range counters {
		if *c.dst, err = meter.Int64Counter(c.name, metric.WithUnit(c.unit), metric.WithDescription(c.desc)); err != nil {
			return nil, fmt.Errorf("observe: OTel: creating %s: %w", c.name, err)
		}
	}
	return s, nil
}

type otelSink struct {
	tracer                                            trace.Tracer
	duration                                          metric.Float64Histogram
	injected, dropped, tokens, llm, embedding, errors metric.Int64Counter
}

func (s *otelSink) Observe(ctx context.Context, r observe.Report) {
	if ctx == nil {
		ctx = context.Background()
	}
	end := time.Now()
	start := r.Start
	if start.IsZero() {
		start = end.Add(-r.Duration)
	} else {
		end = start.Add(r.Duration)
	}
	s.span(ctx, r, start, end)

	set := attribute.NewSet(attribute.String("op", r.Op), attribute.String("layer", r.Layer))
	opt := metric.WithAttributeSet(set)
	s.duration.Record(ctx, r.Duration.Seconds(), opt)
	s.injected.Add(ctx, int64(len(r.Injected)), opt)
	s.tokens.Add(ctx, int64(r.Tokens), opt)
	s.llm.Add(ctx, int64(r.LLMCalls), opt)
	s.embedding.Add(ctx, int64(r.EmbeddingCalls), opt)
	if r.Err != nil {
		s.errors.Add(ctx, 1, opt)
	}
	if len(r.Dropped) > 0 {
		reasons := observe.CountReasons(r.Dropped)
		for reason, n := range reasons {
			s.dropped.Add(ctx, int64(n), metric.WithAttributes(
				attribute.String("op", r.Op), attribute.String("layer", r.Layer), attribute.String("reason", reason)))
		}
	}
}

func (s *otelSink) span(ctx context.Context, r observe.Report, start, end time.Time) {
	_, span := s.tracer.Start(ctx, "memstack."+r.Op+" "+r.Layer,
		trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("memstack.op", r.Op),
			attribute.String("memstack.layer", r.Layer),
			attribute.String("memstack.identity_hash", r.IdentityHash),
			attribute.Int("memstack.injected", len(r.Injected)),
			attribute.Int("memstack.dropped", len(r.Dropped)),
			attribute.Int("memstack.tokens", r.Tokens),
			attribute.Int("memstack.llm_calls", r.LLMCalls),
			attribute.Int("memstack.embedding_calls", r.EmbeddingCalls),
		))
	if !span.IsRecording() {
		span.End(trace.WithTimestamp(end))
		return
	}
	if !r.At.IsZero() {
		span.SetAttributes(attribute.String("memstack.at", r.At.Format(time.RFC3339Nano)))
	}
	dropped := r.Dropped
	if len(dropped) > maxSpanEvents {
		dropped = append([]observe.Item(nil), dropped...)
		// Keep the most telling ones: the highest-scored first.
		sort.SliceStable(dropped, func(i, j int) bool { return dropped[i].Score > dropped[j].Score })
		dropped = dropped[:maxSpanEvents]
	}
	for _, it := range dropped {
		attrs := []attribute.KeyValue{
			attribute.String("memstack.item.kind", it.Kind),
			attribute.String("memstack.item.id", it.ID),
			attribute.String("memstack.item.reason", it.Reason),
			attribute.Float64("memstack.item.score", it.Score),
			attribute.Int("memstack.item.tokens", it.Tokens),
		}
		if !it.Time.IsZero() {
			attrs = append(attrs, attribute.String("memstack.item.time", it.Time.Format(time.RFC3339Nano)))
		}
		span.AddEvent("dropped", trace.WithTimestamp(end), trace.WithAttributes(attrs...))
	}
	if r.Err != nil {
		span.SetStatus(codes.Error, r.Err.Error())
	}
	span.End(trace.WithTimestamp(end))
}
