package proxy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
)

// trickle sends a POST whose body comes one byte every 50 ms (for at most
// 10 s) and returns the response the gateway answers meanwhile.
func trickle(t *testing.T, gatewayURL, path, secret string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(gatewayURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Content-Length: 100000\r\n\r\n{", path, secret)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for range 200 {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestSlowRequestBodyGets408InTheClientsErrorShape(t *testing.T) {
	g := startGateway(t, proxy.Config{BodyReadTimeout: 300 * time.Millisecond})
	_, secret := newKey(t)

	start := time.Now()
	resp, body := trickle(t, g.URL, "/v1/chat/completions", secret)
	wantError(t, response{resp.StatusCode, resp.Header, body}, http.StatusRequestTimeout, "invalid_request_error", "request_timeout")
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the 408 came after %v", took)
	}
	if !resp.Close {
		t.Error("the connection is kept open after an unfinished body")
	}
	rec := g.rec.of(t, response{resp.StatusCode, resp.Header, body})
	if rec.Status != http.StatusRequestTimeout {
		t.Errorf("recorded status %d", rec.Status)
	}

	resp, body = trickle(t, g.URL, "/v1/messages", secret)
	var a struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal(body, &a); resp.StatusCode != http.StatusRequestTimeout || err != nil || a.Type != "error" ||
		a.Error.Type == "" || !strings.Contains(a.Error.Message, "did not arrive within 300ms") {
		t.Errorf("/v1/messages: %d %s, want 408 in Anthropic's shape", resp.StatusCode, body)
	}
}

// The read deadline is lifted once the body is read: an answer that takes
// longer than BodyReadTimeout is still served (net/http keeps reading the
// connection to notice a client that leaves, and a deadline left in place
// would cancel the request).
func TestAnswerSlowerThanBodyReadTimeoutIsServed(t *testing.T) {
	_, url := startMock(t, mock.Options{})
	g := startGateway(t, proxy.Config{BodyReadTimeout: 200 * time.Millisecond})
	model := newRoute(t, "deadline", dep("d1", url, "m?latency=600ms"))
	_, secret := newKey(t)
	r := g.post(t, "/v1/chat/completions", secret, chatBody(model))
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
}
