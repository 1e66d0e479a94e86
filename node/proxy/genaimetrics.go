package proxy

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// genAIMetrics are the OpenTelemetry GenAI semantic conventions' metrics
// as Prometheus histograms (names as OpenTelemetry's Prometheus exporter
// writes them, buckets as the conventions advise), by operation, model
// route and deployment: label sets bounded by the configured routes.
type genAIMetrics struct {
	tokens, duration, ttft, tpot *prometheus.HistogramVec
	// ex gates the exemplars of these and of the data plane's latency
	// histogram.
	ex *exemplarGate
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
		ex: new(exemplarGate),
	}
	reg.MustRegister(m.tokens, m.duration, m.ttft, m.tpot)
	return m
}

// record observes a finished request of a known model route; s holds
// rec's children.
func (m *genAIMetrics) record(rec *Record, s *series) {
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
	var ex prometheus.Labels
	m.ex.observe(s.gDuration.observer(m.duration, op, rec.Model, dep, errType), rec.Latency.Seconds(), rec, &ex)
	if u := rec.Usage; u.Present {
		m.ex.observe(s.gInput.observer(m.tokens, op, rec.Model, dep, "input"), float64(u.PromptTokens), rec, &ex)
		m.ex.observe(s.gOutput.observer(m.tokens, op, rec.Model, dep, "output"), float64(u.CompletionTokens), rec, &ex)
	}
	if !rec.Stream || rec.FirstByte <= 0 || rec.Status >= 400 {
		return
	}
	m.ex.observe(s.gTTFT.observer(m.ttft, op, rec.Model, dep), rec.FirstByte.Seconds(), rec, &ex)
	if n := rec.Usage.CompletionTokens; n > 1 && rec.Latency > rec.FirstByte {
		m.ex.observe(s.gTPOT.observer(m.tpot, op, rec.Model, dep), (rec.Latency-rec.FirstByte).Seconds()/float64(n-1), rec, &ex)
	}
}

// exemplar is the request's trace as exemplar labels: rec's span is
// sampled (see sampled).
func exemplar(rec *Record) prometheus.Labels {
	sc := rec.span.SpanContext()
	return prometheus.Labels{"trace_id": sc.TraceID().String(), "span_id": sc.SpanID().String()}
}

// sampled reports whether rec's span is sampled: its trace may be an
// exemplar.
func sampled(rec *Record) bool { return rec.span != nil && rec.span.SpanContext().IsSampled() }

// exemplarEvery is the least time between two exemplars of one series.
// Prometheus keeps only the latest exemplar of a bucket, and the client
// library builds each one (labels copied, a timestamp taken) on the
// request's path: one a second per series links every busy bucket to a
// trace for a fraction of the cost.
const exemplarEvery = int64(time.Second)

// exemplarGate lets at most one observation per exemplarEvery per series
// carry its request's trace as exemplar; the others are plain. It notes
// at most maxExemplarSeries series: past that it forgets them all (each
// then takes its next sampled request's trace at once, as a new one), so
// series that come and go (routes and deployments renamed, removed) do
// not pile up in it.
type exemplarGate struct {
	last sync.Map // prometheus.Observer -> *atomic.Int64: unix ns of its last exemplar, 0 for none
	n    atomic.Int64
}

// maxExemplarSeries bounds the series an exemplarGate notes: far more
// than a node's routes × deployments × the label values of a series.
const maxExemplarSeries = 4096

// due reports whether o's observation at now (unix ns) carries an
// exemplar, and if so notes it as made then. A now a second or more
// before the last exemplar is the wall clock stepping back: due too, or
// the series would wait for the clock to catch up.
func (g *exemplarGate) due(o prometheus.Observer, now int64) bool {
	v, ok := g.last.Load(o)
	if !ok {
		if g.n.Add(1) > maxExemplarSeries {
			g.last.Clear()
			g.n.Store(1)
		}
		var loaded bool
		if v, loaded = g.last.LoadOrStore(o, new(atomic.Int64)); loaded {
			g.n.Add(-1)
		}
	}
	last := v.(*atomic.Int64)
	t := last.Load()
	d := now - t
	return (t == 0 || d >= exemplarEvery || d <= -exemplarEvery) && last.CompareAndSwap(t, now)
}

// observe records v in o, with the request's trace as the exemplar when
// its span is sampled and o is due one, so a dashboard can jump from a
// slow bucket to a trace. *ex is the request's exemplar, made on first
// use and shared by its observations (the histograms copy the labels).
func (g *exemplarGate) observe(o prometheus.Observer, v float64, rec *Record, ex *prometheus.Labels) {
	// The request's end is the time: reading the clock for each
	// observation cost more than the gate saved.
	if sampled(rec) && g.due(o, rec.Start.UnixNano()+int64(rec.Latency)) {
		if eo, ok := o.(prometheus.ExemplarObserver); ok {
			if *ex == nil {
				*ex = exemplar(rec)
			}
			eo.ObserveWithExemplar(v, *ex)
			return
		}
	}
	o.Observe(v)
}
