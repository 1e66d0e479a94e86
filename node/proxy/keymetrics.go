package proxy

import (
	"container/heap"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricsConfig bounds the per-key series of Metrics.
type MetricsConfig struct {
	// TopKeys is how many keys, those with the most spend, get series of
	// their own; the others are summed under key="other" (team ""). Default
	// 500.
	TopKeys int
	// KeyLive reports whether a key still exists and is not revoked; the
	// series of one that is not disappear at the next scrape. Nil: every
	// key is live.
	KeyLive func(id string) bool
}

// otherKey labels the sum of the keys outside the top TopKeys.
const otherKey = "other"

var (
	spendDesc = prometheus.NewDesc("tollgate_spend_nanodollars_total",
		"Cost of answered requests in nano-dollars (1e-9 USD), by key, team and model; the keys beyond --metrics-top-keys (by spend) are summed under key=\"other\".",
		[]string{"key", "team", "model"}, nil)
	keyTokensDesc = prometheus.NewDesc("tollgate_key_tokens_total",
		"Tokens by key, team, model and type (prompt, completion); keys beyond --metrics-top-keys under key=\"other\".",
		[]string{"key", "team", "model", "type"}, nil)
	limitedDesc = prometheus.NewDesc("tollgate_ratelimit_refused_total",
		"Requests refused by a rate limit, by key, team and reason (rpm, tpm, parallel); keys beyond --metrics-top-keys under key=\"other\".",
		[]string{"key", "team", "reason"}, nil)
	admittedDesc = prometheus.NewDesc("tollgate_admitted_total",
		"Authenticated requests admitted past rate limits and budgets, by key and team; keys beyond --metrics-top-keys under key=\"other\".",
		[]string{"key", "team"}, nil)
)

type modelCounts struct{ spend, prompt, completion float64 }

type keyCounts struct {
	id, team string
	spend    float64 // over every model: the rank
	models   map[string]*modelCounts
	limited  map[string]float64 // by reason
	admitted float64
}

// keyMetrics keeps the per-key counters and exposes at most TopKeys keys'
// series plus one "other" set.
type keyMetrics struct {
	cfg  MetricsConfig
	mu   sync.Mutex
	keys map[string]*keyCounts
}

func newKeyMetrics(cfg MetricsConfig) *keyMetrics {
	if cfg.TopKeys <= 0 {
		cfg.TopKeys = 500
	}
	return &keyMetrics{cfg: cfg, keys: make(map[string]*keyCounts)}
}

func (km *keyMetrics) record(rec *Record, model string) {
	if rec.KeyID == "" {
		return
	}
	admitted := rec.RateLimited == "" && rec.Status != 429
	if rec.RateLimited == "" && !admitted && rec.CostNanos <= 0 && !rec.Usage.Present {
		return
	}
	km.mu.Lock()
	defer km.mu.Unlock()
	k := km.keys[rec.KeyID]
	if k == nil {
		k = &keyCounts{id: rec.KeyID, models: make(map[string]*modelCounts, 1)}
		km.keys[rec.KeyID] = k
	}
	k.team = rec.TeamID
	switch {
	case rec.RateLimited != "":
		if k.limited == nil {
			k.limited = make(map[string]float64, 1)
		}
		k.limited[rec.RateLimited]++
	case admitted:
		k.admitted++
	}
	if rec.CostNanos <= 0 && !rec.Usage.Present {
		return
	}
	mc := k.models[model]
	if mc == nil {
		mc = &modelCounts{}
		k.models[model] = mc
	}
	if rec.CostNanos > 0 {
		mc.spend += float64(rec.CostNanos)
		k.spend += float64(rec.CostNanos)
	}
	if u := rec.Usage; u.Present {
		mc.prompt += float64(u.PromptTokens)
		mc.completion += float64(u.CompletionTokens)
	}
}

func (km *keyMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- spendDesc
	ch <- keyTokensDesc
	ch <- limitedDesc
	ch <- admittedDesc
}

// Collect drops the keys that are gone or revoked, emits the top keys by
// spend, and sums the rest under key="other".
func (km *keyMetrics) Collect(ch chan<- prometheus.Metric) {
	km.mu.Lock()
	defer km.mu.Unlock()
	if km.cfg.KeyLive != nil {
		for id := range km.keys {
			if !km.cfg.KeyLive(id) {
				delete(km.keys, id)
			}
		}
	}
	top := topBySpend(km.keys, km.cfg.TopKeys)
	other := &keyCounts{id: otherKey, models: make(map[string]*modelCounts), limited: make(map[string]float64)}
	for id, k := range km.keys {
		if top[id] {
			emitKey(ch, k)
			continue
		}
		for m, c := range k.models {
			oc := other.models[m]
			if oc == nil {
				oc = &modelCounts{}
				other.models[m] = oc
			}
			oc.spend += c.spend
			oc.prompt += c.prompt
			oc.completion += c.completion
		}
		for r, n := range k.limited {
			other.limited[r] += n
		}
		other.admitted += k.admitted
	}
	if len(top) < len(km.keys) {
		emitKey(ch, other)
	}
}

func emitKey(ch chan<- prometheus.Metric, k *keyCounts) {
	for m, c := range k.models {
		if c.spend > 0 {
			ch <- prometheus.MustNewConstMetric(spendDesc, prometheus.CounterValue, c.spend, k.id, k.team, m)
		}
		ch <- prometheus.MustNewConstMetric(keyTokensDesc, prometheus.CounterValue, c.prompt, k.id, k.team, m, "prompt")
		ch <- prometheus.MustNewConstMetric(keyTokensDesc, prometheus.CounterValue, c.completion, k.id, k.team, m, "completion")
	}
	for r, n := range k.limited {
		ch <- prometheus.MustNewConstMetric(limitedDesc, prometheus.CounterValue, n, k.id, k.team, r)
	}
	if k.admitted > 0 {
		ch <- prometheus.MustNewConstMetric(admittedDesc, prometheus.CounterValue, k.admitted, k.id, k.team)
	}
}

// topBySpend returns the n keys with the most spend (ties by id).
func topBySpend(keys map[string]*keyCounts, n int) map[string]bool {
	if len(keys) <= n {
		out := make(map[string]bool, len(keys))
		for id := range keys {
			out[id] = true
		}
		return out
	}
	h := make(spendHeap, 0, n)
	for _, k := range keys {
		if len(h) < n {
			heap.Push(&h, k)
		} else if less(h[0], k) {
			h[0] = k
			heap.Fix(&h, 0)
		}
	}
	out := make(map[string]bool, n)
	for _, k := range h {
		out[k.id] = true
	}
	return out
}

// less orders keys by spend, then by id (the larger id ranks lower).
func less(a, b *keyCounts) bool {
	if a.spend != b.spend {
		return a.spend < b.spend
	}
	return a.id > b.id
}

// spendHeap is a min-heap: its root is the smallest of the top keys.
type spendHeap []*keyCounts

func (h spendHeap) Len() int           { return len(h) }
func (h spendHeap) Less(i, j int) bool { return less(h[i], h[j]) }
func (h spendHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *spendHeap) Push(x any)        { *h = append(*h, x.(*keyCounts)) }
func (h *spendHeap) Pop() any {
	old := *h
	k := old[len(old)-1]
	*h = old[:len(old)-1]
	return k
}
