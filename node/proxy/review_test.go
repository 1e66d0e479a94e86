package proxy_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// Regression tests for a review of the retry and translation paths.

// tollctl model test over a stream that breaks mid-way answers 502; the
// abort panic net/http would recover must not reach the gRPC handler.
func TestModelTestBrokenStream(t *testing.T) {
	t.Parallel()
	_, url := startMock(t, mock.Options{})
	route := newRoute(t, "tmpanic", dep(uniq("dep"), url, "m?chunks=10&fault=reset-mid-stream"))
	h := proxy.New(proxy.Config{State: testStore(t), Logger: slog.New(slog.DiscardHandler)})
	resp, err := h.TestModel(context.Background(), &pb.TestModelRequest{Model: route, Stream: true})
	if err != nil || resp.GetStatus() != http.StatusBadGateway {
		t.Fatalf("TestModel = %v, %v; want a 502 report", resp, err)
	}
}

// count_tokens allows what /v1/messages allows (an alias of an allowed
// route).
func TestCountTokensAlias(t *testing.T) {
	t.Parallel()
	_, url := startMock(t, mock.Options{})
	route := newRoute(t, "ctalias", dep(uniq("dep"), url, "ok"))
	alias := uniq("alias")
	setRouteOptions(t, route, &pb.RouteOptions{Aliases: []string{alias}})
	_, secret := newKey(t, route)
	g := startGateway(t, proxy.Config{})
	body := `{"model":"` + alias + `","max_tokens":20,"messages":[{"role":"user","content":"ping"}]}`
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		if r := g.do(t, http.MethodPost, path, "", body, "X-Api-Key", secret); r.status != 200 {
			t.Errorf("%s: %d %s", path, r.status, r.body)
		}
	}
}

// An upstream that says Retry-After is not hit again in the same request.
func TestRetryAfterNotRetried(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(429)
		_, _ = io.WriteString(w, `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`)
	}))
	t.Cleanup(up.Close)
	route := newRoute(t, "ra", dep(uniq("dep"), up.URL, "m"))
	_, secret := newKey(t, route)
	g := startGateway(t, proxy.Config{RetryBackoff: time.Millisecond})
	r := g.post(t, "/v1/chat/completions", secret, chatBody(route))
	if r.status != 429 || r.header.Get("Retry-After") != "30" || hits.Load() != 1 {
		t.Errorf("status %d Retry-After %q, upstream hit %d times; want 429, 30, once", r.status, r.header.Get("Retry-After"), hits.Load())
	}
}

// A keep-alive comment is not the first token: the first-token timeout
// still fails over to the next deployment.
func TestFirstTokenTimeoutIgnoresKeepAlive(t *testing.T) {
	t.Parallel()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, ": PROCESSING\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(3 * time.Second):
		}
	}))
	t.Cleanup(slow.Close)
	_, url := startMock(t, mock.Options{})
	d1 := dep(uniq("slow"), slow.URL, "m")
	d1.FirstTokenTimeoutMs = 200
	d2 := dep(uniq("fast"), url, "ok")
	d2.Priority = 1
	route := newRoute(t, "ftt", d1, d2)
	_, secret := newKey(t, route)
	g := startGateway(t, proxy.Config{})
	start := time.Now()
	r := g.post(t, "/v1/chat/completions", secret, chatBody(route, `"stream":true`))
	if el := time.Since(start); r.status != 200 || r.header.Get("X-Tollgate-Deployment") != d2.Id || el > 2*time.Second {
		t.Errorf("status %d from %s after %v; want the fast deployment soon after 200ms", r.status, r.header.Get("X-Tollgate-Deployment"), el)
	}
}

// A translated stream that is empty fails over; one cut off before its
// finish reason is aborted rather than ended as if complete.
func TestTranslatedStreamEmptyOrCut(t *testing.T) {
	t.Parallel()
	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
	}))
	t.Cleanup(empty.Close)
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":"The answer is"}}]}`+"\n\n")
	}))
	t.Cleanup(cut.Close)
	_, url := startMock(t, mock.Options{})
	good := dep(uniq("good"), url, "ok")
	good.Priority = 1
	route := newRoute(t, "es", dep(uniq("empty"), empty.URL, "m"), good)
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{})
	body := func(model string) string {
		return `{"model":"` + model + `","max_tokens":20,"stream":true,"messages":[{"role":"user","content":"ping"}]}`
	}
	r := g.do(t, http.MethodPost, "/v1/messages", "", body(route), "X-Api-Key", secret)
	if r.status != 200 || r.header.Get("X-Tollgate-Deployment") != good.Id || !strings.Contains(string(r.body), "message_stop") {
		t.Errorf("empty stream: %d from %s: %s", r.status, r.header.Get("X-Tollgate-Deployment"), r.body)
	}
	cutRoute := newRoute(t, "cut", dep(uniq("cut"), cut.URL, "m"))
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/messages", strings.NewReader(body(cutRoute)))
	req.Header.Set("X-Api-Key", secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	if rerr == nil || strings.Contains(string(b), "message_stop") {
		t.Errorf("a cut-off stream ended cleanly (read error %v): %s", rerr, b)
	}
	if rec := g.rec.wait(t, resp.Header.Get("X-Request-Id")); rec.Status != http.StatusBadGateway {
		t.Errorf("cut-off stream recorded as %d, want 502", rec.Status)
	}
}
