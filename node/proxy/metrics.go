package proxy

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics records finished requests as Prometheus metrics.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	upstream *prometheus.HistogramVec
	tokens   *prometheus.CounterVec
	keys     *keyMetrics
	genAI    *genAIMetrics
	series   seriesCache // the children above, by request
}

// NewMetrics registers the data plane's metrics with reg, with the default
// MetricsConfig.
func NewMetrics(reg prometheus.Registerer) *Metrics { return NewMetricsWith(reg, MetricsConfig{}) }

// NewMetricsWith registers the data plane's metrics with reg; cfg bounds
// the per-key series.
func NewMetricsWith(reg prometheus.Registerer, cfg MetricsConfig) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_requests_total",
			Help: "Requests answered by the data plane, by endpoint, model and HTTP status (499: client went away).",
		}, []string{"endpoint", "model", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tollgate_request_duration_seconds",
			Help:    "Time from request arrival to the last byte of the answer.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"endpoint", "model"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tollgate_upstream_duration_seconds",
			Help:    "Time from sending a request upstream to its response headers.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"model", "deployment"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_tokens_total",
			Help: "Tokens reported by upstreams, by model and type (prompt, completion; cached and cache_write, counted in prompt too).",
		}, []string{"model", "type"}),
	}
	m.keys = newKeyMetrics(cfg)
	m.genAI = newGenAIMetrics(reg)
	reg.MustRegister(m.requests, m.latency, m.upstream, m.tokens, m.keys)
	return m
}

// Record implements Recorder.
func (m *Metrics) Record(rec *Record) {
	s := m.series.get(seriesKey{rec.Endpoint, rec.Model, rec.Deployment, rec.Status})
	model := rec.Model
	if model == "" {
		model = "none"
	}
	ep := rec.Endpoint.Name()
	s.requests.counter(m.requests, ep, model, statusLabel(rec.Status)).Inc()
	m.genAI.ex.observe(s.latency.observer(m.latency, ep, model), rec.Latency.Seconds(), rec, new(prometheus.Labels))
	if rec.UpstreamLatency > 0 {
		s.upstream.observer(m.upstream, model, rec.Deployment).Observe(rec.UpstreamLatency.Seconds())
	}
	m.keys.record(rec, model)
	m.genAI.record(rec, s)
	if u := rec.Usage; u.Present {
		s.promptTok.counter(m.tokens, model, "prompt").Add(float64(u.PromptTokens))
		s.complTok.counter(m.tokens, model, "completion").Add(float64(u.CompletionTokens))
		if u.CachedTokens > 0 {
			s.cachedTok.counter(m.tokens, model, "cached").Add(float64(u.CachedTokens))
		}
		if u.CacheWriteTokens > 0 {
			s.writeTok.counter(m.tokens, model, "cache_write").Add(float64(u.CacheWriteTokens))
		}
	}
}

var statusLabels = func() [600]string {
	var l [600]string
	for i := range l {
		l[i] = strconv.Itoa(i)
	}
	return l
}()

func statusLabel(s int) string {
	if s >= 0 && s < len(statusLabels) {
		return statusLabels[s]
	}
	return strconv.Itoa(s)
}
