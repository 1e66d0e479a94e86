package proxy_test

import (
	"net/http"
	"runtime"
	"testing"

	"github.com/tollgate/tollgate/node/proxy"
)

// An upstream's Content-Length is a claim, not bytes: an answer that says
// 60 MB and breaks off after a few bytes costs the gateway what arrived,
// not a 60 MB buffer made before the first byte (an upstream that sends
// such headers and stalls held that much per request in flight). The
// request fails as a broken answer, 502.
func TestAnswerClaimingAHugeLengthAllocatesOnlyWhatArrives(t *testing.T) {
	url := rawUpstream(t, func(c *rawConn) {
		c.raw("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 60000000\r\n\r\n{\"id\":")
	})
	route := newRoute(t, "claim", dep(uniq("dep"), url, "m"))
	_, secret := newKey(t, route)
	g := startGateway(t, proxy.Config{})
	g.post(t, "/v1/chat/completions", secret, chatBody(route)) // connections and lazy state made

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := g.post(t, "/v1/chat/completions", secret, chatBody(route))
	runtime.ReadMemStats(&after)
	if r.status != http.StatusBadGateway {
		t.Errorf("status %d, want 502: %s", r.status, r.body)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 8<<20 {
		t.Errorf("a request whose answer claimed 60 MB and brought a few bytes allocated %d MB", n>>20)
	}
}
