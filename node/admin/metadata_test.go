package admin

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/metadata"
)

// withHeaders returns ctx carrying n more incoming headers than it has:
// what a call brings besides the ones the admin API reads (user agent,
// content type, tracing, a client's own).
func withHeaders(ctx context.Context, n int) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	md = md.Copy()
	for i := range n {
		md.Set(fmt.Sprintf("x-extra-%d", i), "some value of a header")
	}
	return metadata.NewIncomingContext(ctx, md)
}

// allocsWithHeaders counts the allocations of fn on ctx, and on ctx with
// 30 more headers.
func allocsWithHeaders(ctx context.Context, fn func(context.Context)) (few, many float64) {
	more := withHeaders(ctx, 30)
	few = testing.AllocsPerRun(100, func() { fn(ctx) })
	many = testing.AllocsPerRun(100, func() { fn(more) })
	return few, many
}

// A write reads its request id three times (forwarding, the handler,
// the proposal): reading it copies that one value, not every header of
// the call.
func TestRequestIDCostDoesNotGrowWithTheCallsHeaders(t *testing.T) {
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(MetadataRequestID, "0123456789abcdef0123456789abcdef"))
	few, many := allocsWithHeaders(ctx, func(ctx context.Context) {
		if id, err := RequestID(ctx); err != nil || id == "" {
			t.Fatalf("RequestID = %q, %v", id, err)
		}
	})
	if few > 1 || many != few {
		t.Errorf("RequestID allocates %.0f times, %.0f with 30 more headers; want at most 1, and the same", few, many)
	}
}

// Authenticating a call reads its token and the forwarded actor, not a
// copy of all its headers.
func TestAuthorizeCostDoesNotGrowWithTheCallsHeaders(t *testing.T) {
	s := New(Config{Store: openStore(t), BootstrapToken: "boot-token"})
	ctx := incoming(context.Background(), "Bearer boot-token")
	few, many := allocsWithHeaders(ctx, func(ctx context.Context) {
		if _, err := s.authorize(ctx, "/tollgate.v1.KeyService/CreateKey"); err != nil {
			t.Fatalf("authorize: %v", err)
		}
	})
	if many != few {
		t.Errorf("authorize allocates %.0f times, %.0f with 30 more headers; want the same", few, many)
	}
}
