package node

import (
	"testing"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
	"github.com/tollgate/tollgate/routing/prices"
	"google.golang.org/protobuf/proto"
)

// A deployment's own price carries cache-write and long-context rates into
// what requests are charged, what budgets reserve and what the admin API
// shows, as the built-in table's do.
func TestPricingCacheWritesAndTiers(t *testing.T) {
	p := pricing{table: prices.Builtin}
	override := &pb.Price{InputMicrosPerMtok: 1_000_000, OutputMicrosPerMtok: 2_000_000, CacheWriteMicrosPerMtok: 1_500_000,
		Tiers: []*pb.PriceTier{{AbovePromptTokens: 1000, InputMicrosPerMtok: 4_000_000, OutputMicrosPerMtok: 8_000_000, CacheWriteMicrosPerMtok: 5_000_000}}}
	own := &raftstore.Deployment{ID: "own", Provider: "openai-compatible", BaseURL: "http://h/v1", UpstreamModel: "x", Price: override}
	builtin := &raftstore.Deployment{ID: "b", Provider: "anthropic", UpstreamModel: "claude-sonnet-4-5-20250929"}

	for _, tc := range []struct {
		name string
		d    *raftstore.Deployment
		u    routing.Usage
		want int64
	}{
		// 100 plain + 400 written at $1.50 + 10 out at $2: (100e6 + 600e6 + 20e6) / 1000.
		{"override, cache writes", own, routing.Usage{PromptTokens: 500, CacheWriteTokens: 400, CompletionTokens: 10}, 720_000},
		// 1001 prompt tokens: the tier's rates for all: 1000 at $4, 1 written at $5, 10 out at $8.
		{"override, past the tier", own, routing.Usage{PromptTokens: 1001, CacheWriteTokens: 1, CompletionTokens: 10}, 4_000_000 + 5000 + 80_000},
		// Sonnet 4.5: 1000 plain + 2000 written at $3.75 + 100 out at $15.
		{"built-in, cache writes", builtin, routing.Usage{PromptTokens: 3000, CacheWriteTokens: 2000, CompletionTokens: 100}, 3_000_000 + 7_500_000 + 1_500_000},
		{"built-in, long context", builtin, routing.Usage{PromptTokens: 200_001, CompletionTokens: 100}, 1_200_006_000 + 2_250_000},
	} {
		if got, ok := p.Cost(tc.d, tc.u); !ok || got != tc.want {
			t.Errorf("%s: Cost = %d, %v; want %d", tc.name, got, ok, tc.want)
		}
		if b, ok := p.MaxCost(tc.d, tc.u.PromptTokens, tc.u.CompletionTokens); !ok || b < tc.want {
			t.Errorf("%s: MaxCost = %d, %v; below the cost %d", tc.name, b, ok, tc.want)
		}
	}
	// The reservation of a prompt that may pass the tier takes the tier.
	if b, _ := p.MaxCost(own, 2000, 100); b != (2000*5_000_000+100*8_000_000)/1000 {
		t.Errorf("MaxCost(own, 2000, 100) = %d", b)
	}
	api, src := p.apiPrice(own.Provider, own.BaseURL, own.UpstreamModel, override)
	if src != "override" || !proto.Equal(api, override) {
		t.Errorf("apiPrice(override) = %v, %q", api, src)
	}
	api, _ = p.apiPrice(builtin.Provider, "", builtin.UpstreamModel, nil)
	if api.GetCacheWriteMicrosPerMtok() != 3_750_000 || len(api.GetTiers()) != 1 || api.GetTiers()[0].GetAbovePromptTokens() != 200_000 ||
		api.GetTiers()[0].GetOutputMicrosPerMtok() != 22_500_000 {
		t.Errorf("apiPrice(built-in sonnet) = %v", api)
	}
}
