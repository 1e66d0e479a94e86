package proxy_test

import (
	"context"
	"maps"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
)

// otlpPoint returns the data point of the float histogram called name
// whose attributes are exactly attrs.
func otlpPoint(rm metricdata.ResourceMetrics, name string, attrs map[string]string) *metricdata.HistogramDataPoint[float64] {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if m.Name != name || !ok {
				continue
			}
			for i, p := range h.DataPoints {
				got := map[string]string{}
				for _, kv := range p.Attributes.ToSlice() {
					got[string(kv.Key)] = kv.Value.AsString()
				}
				if maps.Equal(got, attrs) {
					return &h.DataPoints[i]
				}
			}
		}
	}
	return nil
}

// A streamed answer is recorded in the four OpenTelemetry GenAI histograms
// with the GenAI attributes, and its sampled trace is the exemplar.
func TestGenAIOTLPRecordsAStreamWithItsTrace(t *testing.T) {
	t.Parallel()
	_, url := startMock(t, mock.Options{Chunks: 4})
	_, secret := newKey(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := proxy.NewGenAIOTLP(mp.Meter("test"))
	if err != nil {
		t.Fatal(err)
	}
	tr, exp := tracer(t)
	g := startGateway(t, proxy.Config{Tracer: tr, Recorders: []proxy.Recorder{m}})
	depID := uniq("dep")
	route := newRoute(t, "genai-otlp", dep(depID, url, "m"))
	r := g.post(t, "/v1/chat/completions", secret, chatBody(route, `"stream":true`))
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	rec := g.rec.of(t, r)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{"gen_ai.operation.name": "chat", "gen_ai.request.model": route, "tollgate.deployment": depID,
		"gen_ai.provider.name": "openai-compatible"}
	with := func(k, v string) map[string]string { c := maps.Clone(base); c[k] = v; return c }
	for typ, want := range map[string]int64{"input": rec.Usage.PromptTokens, "output": rec.Usage.CompletionTokens} {
		p := otlpPoint(rm, "gen_ai.client.token.usage", with("gen_ai.token.type", typ))
		if p == nil || p.Count != 1 || int64(p.Sum) != want || want <= 0 {
			t.Errorf("%s tokens: %+v, want one of %d", typ, p, want)
		}
	}
	dur := otlpPoint(rm, "gen_ai.server.request.duration", base)
	for _, name := range []string{"gen_ai.server.request.duration", "gen_ai.server.time_to_first_token", "gen_ai.server.time_per_output_token"} {
		if p := otlpPoint(rm, name, base); p == nil || p.Count != 1 || p.Sum <= 0 {
			t.Errorf("%s: %+v", name, p)
		}
	}
	waitFor(t, "the span", func() bool { return len(exp.GetSpans()) >= 2 })
	traceID := exp.GetSpans()[0].SpanContext.TraceID()
	if dur == nil || len(dur.Exemplars) != 1 || [16]byte(dur.Exemplars[0].TraceID) != traceID {
		t.Errorf("duration exemplars %+v, want the request's trace %s", dur, traceID)
	}
}
