package proxy_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/node/proxy"
)

// A client's Content-Length is a claim too: a request that says 8 MB (the
// body limit) and breaks off after a few bytes costs the gateway about
// what arrived, not an 8 MB buffer made before the body's first byte (a
// client with a key could hold that much per connection by claiming and
// stalling until the body-read timeout). The request fails as a body that
// could not be read.
func TestRequestClaimingAHugeBodyAllocatesOnlyWhatArrives(t *testing.T) {
	route := newRoute(t, "bodyclaim", dep(uniq("dep"), "http://127.0.0.1:1", "m"))
	_, secret := newKey(t, route)
	g := startGateway(t, proxy.Config{})
	addr := strings.TrimPrefix(g.URL, "http://")
	claim := func() int {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"model\":", secret, 8<<20-1)
		_ = c.(*net.TCPConn).CloseWrite()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	claim() // connections and lazy state made

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	status := claim()
	runtime.ReadMemStats(&after)
	if status != http.StatusBadRequest {
		t.Errorf("status %d, want 400", status)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
		t.Errorf("a request that claimed an 8 MB body and brought a few bytes allocated %d MB", n>>20)
	}
}
