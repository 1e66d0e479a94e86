package proxy_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// tollctl model test over a stream that breaks mid-way answers 502; the
// abort panic net/http would recover must not reach the gRPC handler.
func TestModelTestReports502ForAStreamThatBreaks(t *testing.T) {
	t.Parallel()
	_, url := startMock(t, mock.Options{})
	route := newRoute(t, "tmpanic", dep(uniq("dep"), url, "m?chunks=10&fault=reset-mid-stream"))
	h := proxy.New(proxy.Config{State: testStore(t), Logger: slog.New(slog.DiscardHandler)})
	resp, err := h.TestModel(context.Background(), &pb.TestModelRequest{Model: route, Stream: true})
	if err != nil || resp.GetStatus() != http.StatusBadGateway {
		t.Fatalf("TestModel = %v, %v; want a 502 report", resp, err)
	}
}
