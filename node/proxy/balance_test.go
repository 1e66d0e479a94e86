package proxy

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
)

// tierPricing: deployment "tiered" costs 1 a token, 100 a token once the
// prompt passes 200,000 tokens (a long-context tier); "flat" costs 2.
type tierPricing struct{}

func (tierPricing) Cost(d *raftstore.Deployment, u routing.Usage) (int64, bool) {
	n := u.PromptTokens + u.CompletionTokens
	if d.ID == "flat" {
		return 2 * n, true
	}
	if u.PromptTokens > 200_000 {
		return 100 * n, true
	}
	return n, true
}

func (p tierPricing) MaxCost(d *raftstore.Deployment, prompt, completion int64) (int64, bool) {
	return p.Cost(d, routing.Usage{PromptTokens: prompt, CompletionTokens: completion})
}

// The cost strategy ranks deployments by what a short call costs, not by
// long-context rates that few requests pay.
func TestCostStrategyRanksByShortCalls(t *testing.T) {
	h := New(Config{Pricing: tierPricing{}})
	r := &raftstore.Route{Name: "r", Strategy: "cost", Deployments: []*raftstore.Deployment{
		{ID: "flat", Key: "r/flat", Weight: 1}, {ID: "tiered", Key: "r/tiered", Weight: 1}}}
	for range 20 {
		if got, _ := h.order(nil, r, time.Now().UnixNano()); got[0].ID != "tiered" {
			t.Fatalf("cost order starts with %s; want tiered, the cheaper below its tier", got[0].ID)
		}
	}
}
