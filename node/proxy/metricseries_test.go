package proxy_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/node/proxy"
	"github.com/tollgate/tollgate/routing"
)

func chatRecord(status int, usage bool) *proxy.Record {
	return &proxy.Record{Endpoint: routing.EndpointChat, Model: "bench", Deployment: "dep-1", Status: status,
		KeyID: "key-1", Latency: 800 * time.Microsecond, UpstreamLatency: 600 * time.Microsecond,
		Usage: routing.Usage{PromptTokens: 262, CompletionTokens: 250, TotalTokens: 512, Present: usage}}
}

// TestMetricsOfRepeatedRequestsAddUpInTheirSeries: requests with the same
// labels count in one series each time (the cached children are the ones a
// scrape reads), and a child a request does not observe (tokens of a
// request without usage) appears only once one does.
func TestMetricsOfRepeatedRequestsAddUpInTheirSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := proxy.NewMetrics(reg)
	m.Record(chatRecord(200, false))
	tokens := map[string]string{"model": "bench", "type": "prompt"}
	if got := metricValue(t, reg, "tollgate_tokens_total", tokens); got != -1 {
		t.Fatalf("tokens series after a request without usage = %v, want none", got)
	}
	genIn := map[string]string{"gen_ai_operation_name": "chat", "model": "bench", "deployment": "dep-1", "gen_ai_token_type": "input"}
	if got := metricValue(t, reg, "gen_ai_client_token_usage", genIn); got != -1 {
		t.Fatalf("gen_ai token series after a request without usage = %v, want none", got)
	}
	for range 3 {
		m.Record(chatRecord(200, true))
	}
	m.Record(chatRecord(502, true))
	wantMetrics(t, reg, []wantMetric{
		{"tollgate_requests_total", map[string]string{"endpoint": "chat", "model": "bench", "status": "200"}, 4},
		{"tollgate_requests_total", map[string]string{"endpoint": "chat", "model": "bench", "status": "502"}, 1},
		{"tollgate_request_duration_seconds", map[string]string{"endpoint": "chat", "model": "bench"}, 5},
		{"tollgate_upstream_duration_seconds", map[string]string{"model": "bench", "deployment": "dep-1"}, 5},
		{"tollgate_tokens_total", tokens, 4 * 262},
		{"gen_ai_client_token_usage", genIn, 4},
		{"gen_ai_server_request_duration_seconds", map[string]string{"gen_ai_operation_name": "chat", "model": "bench", "deployment": "dep-1", "error_type": ""}, 4},
		{"gen_ai_server_request_duration_seconds", map[string]string{"gen_ai_operation_name": "chat", "model": "bench", "deployment": "dep-1", "error_type": "502"}, 1},
	})
}

// TestMetricsRecordAllocatesNothingForAKnownSeries: once a request's series
// exist, recording another like it allocates nothing (the cache's lazy
// children must not cost an allocation per request).
func TestMetricsRecordAllocatesNothingForAKnownSeries(t *testing.T) {
	m := proxy.NewMetrics(prometheus.NewRegistry())
	rec := chatRecord(200, true)
	m.Record(rec)
	if n := testing.AllocsPerRun(200, func() { m.Record(rec) }); n != 0 {
		t.Fatalf("Metrics.Record allocates %.0f times per request", n)
	}
}

// BenchmarkMetricsRecord: the data plane's metrics for one finished
// non-streaming chat request with usage.
func BenchmarkMetricsRecord(b *testing.B) {
	m := proxy.NewMetrics(prometheus.NewRegistry())
	rec := chatRecord(200, true)
	b.ReportAllocs()
	for b.Loop() {
		m.Record(rec)
	}
}
