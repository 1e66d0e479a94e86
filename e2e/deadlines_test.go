package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestDeadlinesThroughANode: a client that trickles its body gets 408 in
// OpenAI's shape within --body-read-timeout, and a hung upstream is given
// up on at --request-timeout, whatever the attempts left, with a 504 that
// names that timeout.
func TestDeadlinesThroughANode(t *testing.T) {
	mock := mockLLM(t)
	g := startGateway(t, t.TempDir(), "t", "--body-read-timeout", "500ms", "--request-timeout", "1500ms", "--retry-backoff", "10ms")
	g.ctl(t, "model", "add", "hung", "--provider", "openai-compatible", "--base-url", mock,
		"--upstream-model", "mock-model?fault=hang", "--upstream-timeout", "1s")
	_, key := g.createKey(t, "--name", "deadlines")

	conn, err := net.Dial("tcp", g.http)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":", key)
	stop := make(chan struct{})
	defer close(stop)
	go func() { // one byte every 100 ms, for at most 10 s
		for range 100 {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || openAIError(t, b) != "request_timeout" {
		t.Errorf("trickled body: %d %s; want 408 request_timeout", resp.StatusCode, b)
	}

	start := time.Now()
	code, body := post(t, "http://"+g.http+"/v1/chat/completions", key, `{"model":"hung","messages":[{"role":"user","content":"hi"}]}`)
	took := time.Since(start)
	if code != http.StatusGatewayTimeout || openAIError(t, body) != "request_timeout" || !strings.Contains(string(body), "1.5s") {
		t.Errorf("hung upstream: %d %s; want 504 request_timeout naming 1.5s", code, body)
	}
	if took > 5*time.Second {
		t.Errorf("hung upstream answered after %v; the request timeout is 1.5s", took)
	}
	t.Logf("hung upstream with a 1s per-attempt timeout and 3 attempts: 504 after %v", took.Round(10*time.Millisecond))
}
