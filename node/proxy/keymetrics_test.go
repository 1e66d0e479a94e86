package proxy_test

import (
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/node/proxy"
	"github.com/tollgate/tollgate/routing"
)

// seriesOf counts the series of one metric.
func seriesOf(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

// Only the TopKeys keys with the most spend get series of their own; the
// others are summed under key="other"; a key that is revoked or deleted
// loses its series (and leaves "other") at the next scrape.
func TestPerKeySeriesAreBoundedAndDropGoneKeys(t *testing.T) {
	var mu sync.Mutex
	gone := map[string]bool{}
	reg := prometheus.NewRegistry()
	m := proxy.NewMetricsWith(reg, proxy.MetricsConfig{TopKeys: 2, KeyLive: func(id string) bool {
		mu.Lock()
		defer mu.Unlock()
		return !gone[id]
	}})
	spend := map[string]int64{"a": 100, "b": 50, "c": 10, "d": 5}
	for id, cost := range spend {
		m.Record(&proxy.Record{KeyID: id, TeamID: "t-" + id, Model: "m", Status: 200, CostNanos: cost,
			Usage: routing.Usage{PromptTokens: cost, CompletionTokens: 1, Present: true}})
	}
	m.Record(&proxy.Record{KeyID: "d", TeamID: "t-d", Model: "m", Status: 429, RateLimited: "rpm"})

	spendOf := func(key, team string) float64 {
		return metricValue(t, reg, "tollgate_spend_nanodollars_total", map[string]string{"key": key, "team": team, "model": "m"})
	}
	if a, b, other := spendOf("a", "t-a"), spendOf("b", "t-b"), spendOf("other", ""); a != 100 || b != 50 || other != 15 {
		t.Errorf("spend a %v, b %v, other %v; want 100, 50, 15", a, b, other)
	}
	if c := spendOf("c", "t-c"); c != -1 {
		t.Errorf("key c, outside the top 2, has its own series (%v)", c)
	}
	if n := seriesOf(t, reg, "tollgate_spend_nanodollars_total"); n != 3 {
		t.Errorf("%d spend series, want 3 (two keys and other)", n)
	}
	if v := metricValue(t, reg, "tollgate_ratelimit_refused_total", map[string]string{"key": "other", "team": "", "reason": "rpm"}); v != 1 {
		t.Errorf("refusals of keys outside the top under other: %v", v)
	}
	if v := metricValue(t, reg, "tollgate_key_tokens_total", map[string]string{"key": "other", "team": "", "model": "m", "type": "prompt"}); v != 15 {
		t.Errorf("prompt tokens under other: %v", v)
	}

	mu.Lock()
	gone["b"], gone["d"] = true, true
	mu.Unlock()
	if b := spendOf("b", "t-b"); b != -1 {
		t.Errorf("revoked key b still has a series (%v)", b)
	}
	if c, other := spendOf("c", "t-c"), spendOf("other", ""); c != 10 || other != -1 {
		t.Errorf("after b and d went: c %v, other %v; want 10 and no other", c, other)
	}
	if v := metricValue(t, reg, "tollgate_admitted_total", map[string]string{"key": "b", "team": "t-b"}); v != -1 {
		t.Errorf("revoked key b still counted as admitted (%v)", v)
	}
}
