package proxy_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
	"github.com/tollgate/tollgate/routing"
)

// metricValue gathers reg and returns the value of the counter (or the
// sample count of the histogram) called name with exactly labels; -1 when
// there is no such series.
func metricValue(tb testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !labelsEqual(m.GetLabel(), labels) {
				continue
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount())
			default:
				tb.Fatalf("%s has type %v", name, mf.GetType())
			}
		}
	}
	return -1
}

func labelsEqual(got []*dto.LabelPair, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, lp := range got {
		if v, ok := want[lp.GetName()]; !ok || v != lp.GetValue() {
			return false
		}
	}
	return true
}

// wantMetric is one series metricValue must find with value want (-1:
// none).
type wantMetric struct {
	name   string
	labels map[string]string
	want   float64
}

func wantMetrics(t *testing.T, reg *prometheus.Registry, want []wantMetric) {
	t.Helper()
	for _, c := range want {
		if got := metricValue(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

func TestMetricsThroughHandler(t *testing.T) {
	t.Parallel()
	_, url := startMock(t, mock.Options{Chunks: 4})
	depID := uniq("dep")
	route := newRoute(t, "metrics", dep(depID, url, "m"))
	_, secret := newKey(t)
	reg := prometheus.NewRegistry()
	g := startGateway(t, proxy.Config{Recorders: []proxy.Recorder{proxy.NewMetrics(reg)}})

	for range 2 {
		if r := g.post(t, "/v1/chat/completions", secret, chatBody(route)); r.status != 200 {
			t.Fatalf("status %d: %s", r.status, r.body)
		} else {
			g.rec.of(t, r) // the metrics recorder ran before the test's
		}
	}
	if r := g.post(t, "/v1/chat/completions", secret, chatBody(route, `"stream":true`)); r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	} else {
		g.rec.of(t, r)
	}
	r := g.post(t, "/v1/chat/completions", secret, chatBody(uniq("nope")))
	wantError(t, r, 404, "invalid_request_error", "model_not_found")
	g.rec.of(t, r)
	r = g.post(t, "/v1/chat/completions", "sk-wrong", chatBody(route))
	wantError(t, r, 401, "invalid_request_error", "invalid_api_key")
	g.rec.of(t, r)

	wantMetrics(t, reg, []wantMetric{
		{"tollgate_requests_total", map[string]string{"endpoint": "chat", "model": route, "status": "200"}, 3},
		{"tollgate_requests_total", map[string]string{"endpoint": "chat", "model": "none", "status": "404"}, 1},
		{"tollgate_requests_total", map[string]string{"endpoint": "chat", "model": "none", "status": "401"}, 1},
		{"tollgate_tokens_total", map[string]string{"model": route, "type": "prompt"}, float64(3 * chatPromptTokens)},
		{"tollgate_tokens_total", map[string]string{"model": route, "type": "completion"}, 2*250 + 4},
		{"tollgate_tokens_total", map[string]string{"model": route, "type": "cached"}, -1},
		{"tollgate_request_duration_seconds", map[string]string{"endpoint": "chat", "model": route}, 3},
		{"tollgate_request_duration_seconds", map[string]string{"endpoint": "chat", "model": "none"}, 2},
		{"tollgate_upstream_duration_seconds", map[string]string{"model": route, "deployment": depID}, 3},
	})
}

func TestMetricsRecord(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := proxy.NewMetrics(reg)
	m.Record(&proxy.Record{Endpoint: routing.EndpointEmbeddings, Model: "emb", Status: 200, Latency: time.Millisecond,
		UpstreamLatency: time.Millisecond / 2, Deployment: "d1",
		Usage: routing.Usage{PromptTokens: 10, TotalTokens: 10, CachedTokens: 4, Present: true}})
	m.Record(&proxy.Record{Endpoint: routing.EndpointCompletions, Model: "txt", Status: 499, Latency: time.Second})
	m.Record(&proxy.Record{Endpoint: routing.EndpointChat, Status: 1000})
	m.Record(&proxy.Record{Endpoint: routing.EndpointChat, Model: "x", Status: 200, Usage: routing.Usage{Present: false, PromptTokens: 99}})
	wantMetrics(t, reg, []wantMetric{
		{"tollgate_requests_total", map[string]string{"endpoint": "embeddings", "model": "emb", "status": "200"}, 1},
		{"tollgate_requests_total", map[string]string{"endpoint": "completions", "model": "txt", "status": "499"}, 1},
		{"tollgate_requests_total", map[string]string{"endpoint": "chat", "model": "none", "status": "1000"}, 1},
		{"tollgate_tokens_total", map[string]string{"model": "emb", "type": "prompt"}, 10},
		{"tollgate_tokens_total", map[string]string{"model": "emb", "type": "completion"}, 0},
		{"tollgate_tokens_total", map[string]string{"model": "emb", "type": "cached"}, 4},
		{"tollgate_tokens_total", map[string]string{"model": "x", "type": "prompt"}, -1},
		{"tollgate_upstream_duration_seconds", map[string]string{"model": "emb", "deployment": "d1"}, 1},
		{"tollgate_upstream_duration_seconds", map[string]string{"model": "txt", "deployment": ""}, -1},
		{"tollgate_request_duration_seconds", map[string]string{"endpoint": "completions", "model": "txt"}, 1},
	})
}

func TestNewMetricsTwiceOnOneRegistryPanics(t *testing.T) {
	reg := prometheus.NewRegistry()
	proxy.NewMetrics(reg)
	defer func() {
		if recover() == nil {
			t.Error("registering the metrics twice did not panic")
		}
	}()
	proxy.NewMetrics(reg)
}
