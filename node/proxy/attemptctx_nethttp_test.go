package proxy_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/routing"
)

// Through net/http's own transport (HTTP/2 and proxied upstreams, and
// every upstream where the gateway's HTTP/1.1 client is not built), which
// waits on the attempt's Done channel rather than the gateway client's
// interrupt: an attempt's timeout still ends it with a 504 naming the
// attempt's timeout, each retry gets a clock of its own, and a client
// that goes away still cancels the upstream request at once.
func TestAttemptClockThroughNetHTTPTransport(t *testing.T) {
	ms, url := startMock(t, mock.Options{})
	_, secret := newKey(t)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	g := startGateway(t, proxy.Config{Transport: tr})

	t.Run("attempt timeout", func(t *testing.T) {
		d := &pb.Deployment{Id: uniq("dep"), Provider: routing.ProviderOpenAICompatible, BaseUrl: url + "/v1",
			UpstreamModel: "m?latency=1m", TimeoutMs: 100}
		before := ms.Stats().Cancelled
		r := g.post(t, "/v1/chat/completions", secret, chatBody(newRoute(t, "nh-timeout", d)))
		e := wantError(t, r, 504, "timeout_error", "upstream_timeout")
		if !strings.Contains(e.Error.Message, "100ms") {
			t.Errorf("message %q", e.Error.Message)
		}
		if rec := g.rec.of(t, r); rec.Attempts != 3 {
			t.Errorf("%d attempts, want 3 (each with a clock of its own)", rec.Attempts)
		}
		waitFor(t, "three cancelled upstream requests", func() bool { return ms.Stats().Cancelled == before+3 })
	})
	t.Run("client goes away", func(t *testing.T) {
		goAwayWhileTheUpstreamWaits(t, g, ms, secret, newRoute(t, "nh-away", dep(uniq("dep"), url, "m?latency=1m")))
	})
	t.Cleanup(func() { waitFor(t, "no upstream request in flight", func() bool { return ms.Stats().InFlight == 0 }) })
}

// goAwayWhileTheUpstreamWaits sends a request to route, cancels it once
// it reached the upstream (which answers in a minute), and waits until
// the gateway cancelled the upstream request.
func goAwayWhileTheUpstreamWaits(t *testing.T, g *gateway, ms *mock.Server, secret, route string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := ms.Stats()
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(chatBody(route)))
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := g.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	waitFor(t, "the request to reach the upstream", func() bool { return ms.Stats().Requests == before.Requests+1 })
	cancel()
	if err := <-done; err == nil {
		t.Error("request succeeded")
	}
	waitFor(t, "the upstream request to be cancelled", func() bool { return ms.Stats().Cancelled == before.Cancelled+1 })
}
