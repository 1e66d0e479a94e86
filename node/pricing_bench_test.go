package node

import (
	"testing"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
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

// BenchmarkPricingCostOverride prices a request at a deployment's own
// price with a long-context tier.
func BenchmarkPricingCostOverride(b *testing.B) {
	p := pricing{table: prices.Builtin}
	d := &raftstore.Deployment{ID: "own", Provider: "openai-compatible", UpstreamModel: "x", Price: &pb.Price{
		InputMicrosPerMtok: 1_000_000, OutputMicrosPerMtok: 2_000_000,
		Tiers: []*pb.PriceTier{{AbovePromptTokens: 200_000, InputMicrosPerMtok: 2_000_000, OutputMicrosPerMtok: 4_000_000}}}}
	u := routing.Usage{PromptTokens: 3000, CompletionTokens: 500, Present: true}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := p.Cost(d, u); !ok {
			b.Fatal("unpriced")
		}
	}
}
