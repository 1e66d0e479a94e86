package node

import (
	"testing"

	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
	"github.com/tollgate/tollgate/routing/prices"
)

// BenchmarkPricingCost is the price of pricing a finished request: a cached
// table lookup and the cost, for a flat and a tiered model.
func BenchmarkPricingCost(b *testing.B) {
	p := pricing{table: prices.Builtin}
	for _, d := range []*raftstore.Deployment{
		{ID: "flat", Provider: "openai", UpstreamModel: "gpt-4o-mini"},
		{ID: "tiered", Provider: "anthropic", UpstreamModel: "claude-sonnet-4-5"},
	} {
		b.Run(d.ID, func(b *testing.B) {
			u := routing.Usage{PromptTokens: 3000, CompletionTokens: 500, CachedTokens: 1000, CacheWriteTokens: 1000, Present: true}
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := p.Cost(d, u); !ok {
					b.Fatal("unpriced")
				}
			}
		})
	}
}
