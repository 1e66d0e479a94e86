package proxy

import (
	"github.com/prometheus/client_golang/prometheus"
)

// genAIMetrics are the OpenTelemetry GenAI semantic conventions' metrics
// as Prometheus histograms (names as OpenTelemetry's Prometheus exporter
// writes them, buckets as the conventions advise), by operation, model
// route and deployment: label sets bounded by the configured routes.
type genAIMetrics struct {
	tokens, duration, ttft, tpot *prometheus.HistogramVec
}

func newGenAIMetrics(reg prometheus.Registerer) *genAIMetrics {
	h := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets},
			append([]string{"gen_ai_operation_name", "model", "deployment"}, labels...))
	}
	m := &genAIMetrics{
		tokens: h("gen_ai_client_token_usage", "Tokens per request reported by the upstream (gen_ai.client.token.usage), by type (input, output).",
			[]float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}, "gen_ai_token_type"),
		duration: h("gen_ai_server_request_duration_seconds", "Time from a request's arrival to the last byte of its answer (gen_ai.server.request.duration); error_type is the status of a failed one.",
			[]float64{.01, .02, .04, .08, .16, .32, .64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}, "error_type"),
		ttft: h("gen_ai_server_time_to_first_token_seconds", "Time from a streamed request's arrival to the first byte of its answer (gen_ai.server.time_to_first_token).",
			[]float64{.001, .005, .01, .02, .04, .06, .08, .1, .25, .5, .75, 1, 2.5, 5, 7.5, 10}),
		tpot: h("gen_ai_server_time_per_output_token_seconds", "Time per output token after the first of a streamed answer (gen_ai.server.time_per_output_token).",
			[]float64{.01, .025, .05, .075, .1, .15, .2, .3, .4, .5, .75, 1, 2.5}),
	}
	reg.MustRegister(m.tokens, m.duration, m.ttft, m.tpot)
	return m
}

// record observes a finished request of a known model route.
func (m *genAIMetrics) record(rec *Record) {
	if rec.Model == "" {
		return // refused before its model was known: tollgate_requests_total counts it
	}
	op, dep := operationName(rec.Endpoint), rec.Deployment
	if dep == "" {
		dep = "none"
	}
	errType := ""
	if rec.Status >= 400 {
		errType = statusLabel(rec.Status)
	}
	ex := exemplar(rec)
	observeEx(m.duration.WithLabelValues(op, rec.Model, dep, errType), rec.Latency.Seconds(), ex)
	if u := rec.Usage; u.Present {
		observeEx(m.tokens.WithLabelValues(op, rec.Model, dep, "input"), float64(u.PromptTokens), ex)
		observeEx(m.tokens.WithLabelValues(op, rec.Model, dep, "output"), float64(u.CompletionTokens), ex)
	}
	if !rec.Stream || rec.FirstByte <= 0 || rec.Status >= 400 {
		return
	}
	observeEx(m.ttft.WithLabelValues(op, rec.Model, dep), rec.FirstByte.Seconds(), ex)
	if n := rec.Usage.CompletionTokens; n > 1 && rec.Latency > rec.FirstByte {
		observeEx(m.tpot.WithLabelValues(op, rec.Model, dep), (rec.Latency-rec.FirstByte).Seconds()/float64(n-1), ex)
	}
}

// exemplar is the request's trace, when its span is sampled, made once for
// all its observations (the histograms copy the labels); nil otherwise.
func exemplar(rec *Record) prometheus.Labels {
	if rec.span == nil {
		return nil
	}
	sc := rec.span.SpanContext()
	if !sc.IsSampled() {
		return nil
	}
	return prometheus.Labels{"trace_id": sc.TraceID().String(), "span_id": sc.SpanID().String()}
}

// observe records v, with the request's trace as the exemplar when its
// span is sampled, so a dashboard can jump from a slow bucket to a trace.
func observe(o prometheus.Observer, v float64, rec *Record) { observeEx(o, v, exemplar(rec)) }

// observeEx records v, with ex as the exemplar when there is one.
func observeEx(o prometheus.Observer, v float64, ex prometheus.Labels) {
	if ex != nil {
		if eo, ok := o.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, ex)
			return
		}
	}
	o.Observe(v)
}
