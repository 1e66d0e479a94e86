package mcp

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkToolCall measures one tool call (the Go SDK's client, a small
// echo tool of a Go SDK server on 127.0.0.1) directly and through the
// gateway, at both protocol eras; it reports the p50 of the calls. The
// gateway's added latency is the difference of the p50s.
//
//	go test -run '^$' -bench ToolCall -benchtime 2000x ./node/mcp/
func BenchmarkToolCall(b *testing.B) {
	e := newEnv(b, newLimiter())
	e.addServer("up", e.upstream.url)
	secret := e.addKey("k1", []string{"*"}, nil)
	args := map[string]any{"text": "hello"}
	for _, v := range versions {
		b.Run("direct-"+v, func(b *testing.B) {
			c := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
			cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: e.upstream.url, HTTPClient: http.DefaultClient},
				&sdk.ClientSessionOptions{ProtocolVersion: v})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = cs.Close() }()
			benchCalls(b, cs, "echo", args)
		})
		b.Run("gateway-"+v, func(b *testing.B) {
			benchCalls(b, e.connect("/mcp", secret, v, nil), "up__echo", args)
		})
	}
}

func benchCalls(b *testing.B, cs *sdk.ClientSession, tool string, args any) {
	lat := make([]time.Duration, 0, b.N)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
