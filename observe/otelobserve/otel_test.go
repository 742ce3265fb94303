package otelobserve_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/observe/otelobserve"
)

type otelHarness struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
	sink   observe.Sink
}

func newOTel(t *testing.T) *otelHarness {
	t.Helper()
	h := &otelHarness{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	t.Cleanup(func() {
		_ = h.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	sink, err := otelobserve.New(h.tp, mp)
	require.NoError(t, err)
	h.sink = sink
	return h
}

func (h *otelHarness) metrics(t *testing.T) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, otelobserve.InstrumentationName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

func attrs(kv []attribute.KeyValue) map[string]any {
	out := map[string]any{}
	for _, a := range kv {
		out[string(a.Key)] = a.Value.AsInterface()
	}
	return out
}

// sumFor returns the value of the counter's data point with exactly the
// given attributes.
func sumFor(t *testing.T, data metricdata.Aggregation, want map[string]any) int64 {
	t.Helper()
	sum, ok := data.(metricdata.Sum[int64])
	require.Truef(t, ok, "not an int64 sum: %T", data)
	for _, dp := range sum.DataPoints {
		if assert.ObjectsAreEqual(want, attrs(dp.Attributes.ToSlice())) {
			return dp.Value
		}
	}
	t.Fatalf("no data point with attributes %v in %+v", want, sum.DataPoints)
	return 0
}

func TestOTelSpanFromAReport(t *testing.T) {
	h := newOTel(t)
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	rep := observe.Report{
		Op: observe.OpLoad, Layer: "recall", IdentityHash: "0123456789abcdef",
		Injected: []observe.Item{{Kind: "exchange", ID: "7", Score: 0.9}, {Kind: "exchange", ID: "9", Score: 0.8}},
		Dropped: []observe.Item{
			{Kind: "exchange", ID: "3", Score: 0.2, Reason: observe.ReasonThreshold},
			{Kind: "exchange", ID: "4", Score: 0.5, Tokens: 40, Reason: observe.ReasonBudget},
		},
		Tokens: 120, Duration: 250 * time.Millisecond, LLMCalls: 0, EmbeddingCalls: 1,
		Start: start,
	}
	h.sink.Observe(context.Background(), rep)
	spans := h.spans.Ended()
	require.Len(t, spans, 1)
	s := spans[0]
	assert.Equal(t, "memstack.load recall", s.Name())
	assert.Equal(t, start, s.StartTime())
	assert.Equal(t, start.Add(250*time.Millisecond), s.EndTime())
	assert.Equal(t, codes.Unset, s.Status().Code)
	assert.Equal(t, map[string]any{
		"memstack.op": "load", "memstack.layer": "recall", "memstack.identity_hash": "0123456789abcdef",
		"memstack.injected": int64(2), "memstack.dropped": int64(2), "memstack.tokens": int64(120),
		"memstack.llm_calls": int64(0), "memstack.embedding_calls": int64(1),
	}, attrs(s.Attributes()))
	require.Len(t, s.Events(), 2)
	assert.Equal(t, "dropped", s.Events()[0].Name)
	assert.Equal(t, map[string]any{
		"memstack.item.kind": "exchange", "memstack.item.id": "3", "memstack.item.reason": observe.ReasonThreshold,
		"memstack.item.score": 0.2, "memstack.item.tokens": int64(0),
	}, attrs(s.Events()[0].Attributes))

	m := h.metrics(t)
	opLayer := map[string]any{"op": "load", "layer": "recall"}
	hist, ok := m[otelobserve.MetricDuration].(metricdata.Histogram[float64])
	require.True(t, ok)
	require.Len(t, hist.DataPoints, 1)
	assert.Equal(t, opLayer, attrs(hist.DataPoints[0].Attributes.ToSlice()))
	assert.Equal(t, uint64(1), hist.DataPoints[0].Count)
	assert.InDelta(t, 0.25, hist.DataPoints[0].Sum, 1e-9)
	assert.Equal(t, int64(2), sumFor(t, m[otelobserve.MetricInjected], opLayer))
	assert.Equal(t, int64(120), sumFor(t, m[otelobserve.MetricTokens], opLayer))
	assert.Equal(t, int64(0), sumFor(t, m[otelobserve.MetricLLMCalls], opLayer))
	assert.Equal(t, int64(1), sumFor(t, m[otelobserve.MetricEmbeddingCalls], opLayer))
	assert.Equal(t, int64(1), sumFor(t, m[otelobserve.MetricDropped], map[string]any{"op": "load", "layer": "recall", "reason": observe.ReasonThreshold}))
	assert.Equal(t, int64(1), sumFor(t, m[otelobserve.MetricDropped], map[string]any{"op": "load", "layer": "recall", "reason": observe.ReasonBudget}))
	assert.NotContains(t, m, otelobserve.MetricErrors, "no call failed")
}

func TestOTelSpanCarriesTimes(t *testing.T) {
	h := newOTel(t)
	at := time.Date(2023, 5, 8, 12, 30, 0, 5, time.FixedZone("", 2*3600))
	said := time.Date(2023, 5, 1, 9, 0, 0, 0, time.UTC)
	h.sink.Observe(context.Background(), observe.Report{
		Op: observe.OpSave, Layer: "recent", At: at, Duration: time.Millisecond,
		Dropped: []observe.Item{
			{Kind: "message", ID: "3", Reason: observe.ReasonWindow, Time: said},
			{Kind: "summary", ID: "2", Reason: observe.ReasonBudget},
		},
	})
	spans := h.spans.Ended()
	require.Len(t, spans, 1)
	got := attrs(spans[0].Attributes())
	assert.Equal(t, "2023-05-08T12:30:00.000000005+02:00", got["memstack.at"])
	require.Len(t, spans[0].Events(), 2)
	assert.Equal(t, "2023-05-01T09:00:00Z", attrs(spans[0].Events()[0].Attributes)["memstack.item.time"])
	assert.NotContains(t, attrs(spans[0].Events()[1].Attributes), "memstack.item.time", "no time, no attribute")

	// A report without a time has no memstack.at.
	h.sink.Observe(context.Background(), observe.Report{Op: observe.OpLoad, Layer: "recent"})
	spans = h.spans.Ended()
	require.Len(t, spans, 2)
	assert.NotContains(t, attrs(spans[1].Attributes()), "memstack.at")
}

func TestOTelErrorStatusAndErrorCounter(t *testing.T) {
	h := newOTel(t)
	h.sink.Observe(context.Background(), observe.Report{Op: observe.OpSave, Layer: "facts", Err: errors.New("extractor timed out"), Duration: time.Second})
	spans := h.spans.Ended()
	require.Len(t, spans, 1)
	assert.Equal(t, codes.Error, spans[0].Status().Code)
	assert.Equal(t, "extractor timed out", spans[0].Status().Description)
	// No start in the report: the span ends now and lasts the duration.
	assert.Equal(t, time.Second, spans[0].EndTime().Sub(spans[0].StartTime()))
	assert.WithinDuration(t, time.Now(), spans[0].EndTime(), 5*time.Second)
	assert.Equal(t, int64(1), sumFor(t, h.metrics(t)[otelobserve.MetricErrors], map[string]any{"op": "save", "layer": "facts"}))
}

func TestOTelSpanIsAChildOfTheCallersSpan(t *testing.T) {
	h := newOTel(t)
	ctx, parent := h.tp.Tracer("test").Start(context.Background(), "chain")
	h.sink.Observe(ctx, observe.Report{Op: observe.OpLoad, Layer: "x"})
	parent.End()
	spans := h.spans.Ended()
	require.Len(t, spans, 2)
	assert.Equal(t, parent.SpanContext().SpanID(), spans[0].Parent().SpanID())
	assert.Equal(t, parent.SpanContext().TraceID(), spans[0].SpanContext().TraceID())
}

func TestOTelCapsDroppedEvents(t *testing.T) {
	h := newOTel(t)
	dropped := make([]observe.Item, 100)
	for i := range dropped {
		dropped[i] = observe.Item{Kind: "message", ID: "m", Score: float64(i), Reason: observe.ReasonWindow}
	}
	h.sink.Observe(context.Background(), observe.Report{Op: observe.OpLoad, Layer: "x", Dropped: dropped})
	spans := h.spans.Ended()
	require.Len(t, spans, 1)
	require.Len(t, spans[0].Events(), 32)
	assert.Equal(t, 99.0, attrs(spans[0].Events()[0].Attributes)["memstack.item.score"], "the highest scores first")
	assert.Equal(t, int64(100), sumFor(t, h.metrics(t)[otelobserve.MetricDropped], map[string]any{"op": "load", "layer": "x", "reason": observe.ReasonWindow}))
}

func TestOTelProviders(t *testing.T) {
	_, err := otelobserve.New(nil, nil)
	assert.Error(t, err)

	// Only traces, or only metrics.
	spans := tracetest.NewSpanRecorder()
	sink, err := otelobserve.New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)), nil)
	require.NoError(t, err)
	sink.Observe(context.Background(), observe.Report{Op: observe.OpLoad, Layer: "x"})
	assert.Len(t, spans.Ended(), 1)

	reader := sdkmetric.NewManualReader()
	sink, err = otelobserve.New(nil, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	require.NoError(t, err)
	//lint:ignore SA1012 a nil context is tolerated
	sink.Observe(nil, observe.Report{Op: observe.OpLoad, Layer: "x"})
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	require.Len(t, rm.ScopeMetrics, 1)
}

func TestOTelThroughWrap(t *testing.T) {
	h := newOTel(t)
	id := memstack.Identity{User: "u"}
	ctx := memstack.WithIdentity(context.Background(), id)
	tw, err := memories.NewTokenWindow(1000)
	require.NoError(t, err)
	mem := observe.Wrap(tw, "window", h.sink)
	require.NoError(t, mem.SaveContext(ctx, map[string]any{"input": "hello"}, map[string]any{"output": "hi"}))
	_, err = mem.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	spans := h.spans.Ended()
	require.Len(t, spans, 2)
	assert.Equal(t, "memstack.save window", spans[0].Name())
	assert.Equal(t, "memstack.load window", spans[1].Name())
	a := attrs(spans[1].Attributes())
	assert.Equal(t, id.Hash(), a["memstack.identity_hash"])
	assert.Equal(t, int64(2), a["memstack.injected"])
	assert.Positive(t, a["memstack.tokens"].(int64))
	assert.True(t, spans[1].EndTime().After(spans[1].StartTime()))
	m := h.metrics(t)
	hist := m[otelobserve.MetricDuration].(metricdata.Histogram[float64])
	assert.Len(t, hist.DataPoints, 2, "one series per op")
}
