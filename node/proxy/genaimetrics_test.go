package proxy_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
)

// histogram returns the histogram called name with exactly labels, nil
// when there is none.
func histogram(tb testing.TB, reg *prometheus.Registry, name string, labels map[string]string) *dto.Histogram {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == name && labelsEqual(m.GetLabel(), labels) {
				return m.GetHistogram()
			}
		}
	}
	return nil
}

// exemplarTraces returns the trace ids of a histogram's bucket exemplars.
func exemplarTraces(h *dto.Histogram) []string {
	var out []string
	for _, b := range h.GetBucket() {
		for _, lp := range b.GetExemplar().GetLabel() {
			if lp.GetName() == "trace_id" {
				out = append(out, lp.GetValue())
			}
		}
	}
	return out
}

// A streamed answer is observed in the GenAI histograms (token usage by
// type, duration, time to first token, time per output token) by model
// route and deployment, with the request's trace as exemplar.
func TestGenAIMetricsOfAStreamWithExemplars(t *testing.T) {
	t.Parallel()
	_, url := startMock(t, mock.Options{Chunks: 4})
	_, secret := newKey(t)
	reg := prometheus.NewRegistry()
	tr, exp := tracer(t)
	g := startGateway(t, proxy.Config{Tracer: tr, Recorders: []proxy.Recorder{proxy.NewMetrics(reg)}})
	depID := uniq("dep")
	route := newRoute(t, "genai", dep(depID, url, "m"))
	r := g.post(t, "/v1/chat/completions", secret, chatBody(route, `"stream":true`))
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	rec := g.rec.of(t, r)
	base := map[string]string{"gen_ai_operation_name": "chat", "model": route, "deployment": depID}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for bk, bv := range base {
			m[bk] = bv
		}
		return m
	}
	for typ, want := range map[string]int64{"input": rec.Usage.PromptTokens, "output": rec.Usage.CompletionTokens} {
		h := histogram(t, reg, "gen_ai_client_token_usage", with("gen_ai_token_type", typ))
		if h.GetSampleCount() != 1 || int64(h.GetSampleSum()) != want || want <= 0 {
			t.Errorf("%s tokens: count %d sum %v, want 1 and %d", typ, h.GetSampleCount(), h.GetSampleSum(), want)
		}
	}
	dur := histogram(t, reg, "gen_ai_server_request_duration_seconds", with("error_type", ""))
	for name, h := range map[string]*dto.Histogram{"duration": dur,
		"ttft": histogram(t, reg, "gen_ai_server_time_to_first_token_seconds", base),
		"tpot": histogram(t, reg, "gen_ai_server_time_per_output_token_seconds", base)} {
		if h.GetSampleCount() != 1 || h.GetSampleSum() <= 0 {
			t.Errorf("%s: %v", name, h)
		}
	}
	waitFor(t, "the span", func() bool { return len(exp.GetSpans()) >= 2 })
	traceID := exp.GetSpans()[0].SpanContext.TraceID().String()
	if ex := exemplarTraces(dur); len(ex) != 1 || ex[0] != traceID {
		t.Errorf("duration exemplars %v, want the request's trace %s", ex, traceID)
	}
}

// A refused request of a known route counts in the duration histogram
// under its status; one of an unknown model not at all (the label sets
// stay bounded by the configured routes).
func TestGenAIMetricsKeepLabelsBounded(t *testing.T) {
	t.Parallel()
	_, url := startMock(t, mock.Options{})
	_, secret := newKey(t)
	reg := prometheus.NewRegistry()
	g := startGateway(t, proxy.Config{Recorders: []proxy.Recorder{proxy.NewMetrics(reg)}})
	depID := uniq("dep")
	route := newRoute(t, "genai-err", dep(depID, url, "m?status=400"))
	if r := g.post(t, "/v1/chat/completions", secret, chatBody(route)); r.status != 400 {
		t.Fatalf("status %d", r.status)
	}
	if r := g.post(t, "/v1/chat/completions", secret, chatBody("no-such-model-xyz")); r.status != 404 {
		t.Fatalf("status %d", r.status)
	}
	h := histogram(t, reg, "gen_ai_server_request_duration_seconds",
		map[string]string{"gen_ai_operation_name": "chat", "model": route, "deployment": depID, "error_type": "400"})
	if h.GetSampleCount() != 1 || len(exemplarTraces(h)) != 0 {
		t.Errorf("the refused request: %v (no exemplar without tracing)", h)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetValue() == "no-such-model-xyz" {
					t.Errorf("%s has a series for a model that is no route", mf.GetName())
				}
			}
		}
	}
}
