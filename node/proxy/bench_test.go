package proxy_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
)

// benchGateway serves the proxy in front of an in-process mock and returns
// a request factory for route with the given extra body members.
func benchGateway(b *testing.B, o mock.Options, extra ...string) (*gateway, func() *http.Request) {
	b.Helper()
	_, url := startMock(b, o)
	route := newRoute(b, "bench", dep(uniq("dep"), url, "mock-up"))
	_, secret := newKey(b, route)
	g := startGateway(b, proxy.Config{})
	g.client.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	body := []byte(chatBody(route, extra...))
	return g, func() *http.Request {
		req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		return req
	}
}

func drain(b *testing.B, g *gateway, req *http.Request) {
	resp, err := g.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || n == 0 {
		b.Fatalf("status %d, %d bytes, %v", resp.StatusCode, n, err)
	}
	// Keep the test recorder's channel from filling up.
	select {
	case <-g.rec.ch:
	default:
	}
}

// BenchmarkProxyChat: a non-streaming chat completion (1000 bytes of
// content) from client through the gateway to the mock and back, over
// loopback HTTP/1.1. Allocations include the client and the mock.
func BenchmarkProxyChat(b *testing.B) {
	g, newReq := benchGateway(b, mock.Options{})
	b.ReportAllocs()
	for b.Loop() {
		drain(b, g, newReq())
	}
}

// BenchmarkProxyStream: a streamed chat completion of 10 chunks, with the
// gateway injecting and hiding include_usage.
func BenchmarkProxyStream(b *testing.B) {
	g, newReq := benchGateway(b, mock.Options{Chunks: 10}, `"stream":true`)
	b.ReportAllocs()
	for b.Loop() {
		drain(b, g, newReq())
	}
}

// BenchmarkProxyChatParallel: as BenchmarkProxyChat with concurrent clients.
func BenchmarkProxyChatParallel(b *testing.B) {
	g, newReq := benchGateway(b, mock.Options{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			drain(b, g, newReq())
		}
	})
}

// cannedTransport answers every upstream request with the same response,
// without a network: the Handler benchmarks below measure the gateway alone.
type cannedTransport struct {
	resp *http.Response
	body *bytes.Reader
	data []byte
}

func newCannedTransport(contentType string, data []byte) *cannedTransport {
	c := &cannedTransport{data: data, body: bytes.NewReader(data)}
	c.resp = &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {contentType}}, Body: io.NopCloser(c.body)}
	return c
}

func (c *cannedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, req.Body)
	_ = req.Body.Close()
	c.body.Reset(c.data)
	return c.resp, nil
}

type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// SetReadDeadline stands for net/http's, which the body read deadline sets.
func (d *discardWriter) SetReadDeadline(time.Time) error { return nil }
func (d *discardWriter) WriteHeader(int)                 {}
func (d *discardWriter) Flush()                          {}

func benchHandler(b *testing.B, tr http.RoundTripper, extra ...string) {
	serve := handlerLoop(b, tr, extra...)
	b.ReportAllocs()
	for b.Loop() {
		serve()
	}
}

// handlerLoop returns a function that serves one request for a route to
// tr through a proxy.Handler, in memory.
func handlerLoop(tb testing.TB, tr http.RoundTripper, extra ...string) (serve func()) {
	route := newRoute(tb, "hbench", dep(uniq("dep"), "http://upstream.invalid", "mock-up"))
	_, secret := newKey(tb, route)
	h := proxy.New(proxy.Config{State: testStore(tb), Transport: tr})
	body := []byte(chatBody(route, extra...))
	rd := bytes.NewReader(body)
	req, _ := http.NewRequest(http.MethodPost, "http://gateway/v1/chat/completions", rd)
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	w := &discardWriter{h: http.Header{}}
	return func() {
		rd.Reset(body)
		req.Body = io.NopCloser(rd)
		req.ContentLength = int64(len(body))
		clear(w.h)
		h.ServeHTTP(w, req)
	}
}

// BenchmarkHandlerChat: the gateway's own cost for a non-streaming chat
// completion (request and canned upstream response in memory).
func BenchmarkHandlerChat(b *testing.B) {
	benchHandler(b, newCannedTransport("application/json", []byte(cannedAnswer)))
}

// BenchmarkHandlerStream: the gateway's own cost for relaying a 10-chunk
// stream with the injected usage hidden.
func BenchmarkHandlerStream(b *testing.B) {
	benchHandler(b, newCannedTransport("text/event-stream", []byte(cannedStream())), `"stream":true`)
}

// cannedAnswer is a non-streaming chat completion of 1000 bytes of content.
var cannedAnswer = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"mock-up","choices":[{"index":0,` +
	`"message":{"role":"assistant","content":"` + strings.Repeat("x", 1000) + `"},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":6,"completion_tokens":250,"total_tokens":256}}`

// cannedStream is a 10-chunk chat stream with a usage chunk and [DONE].
func cannedStream() string {
	var sb strings.Builder
	for i := range 10 {
		fmt.Fprintf(&sb, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"mock-up","choices":[{"index":0,"delta":{"content":"tok%d"},"finish_reason":null}],"usage":null}`+"\n\n", i)
	}
	sb.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"mock-up","choices":[],"usage":{"prompt_tokens":6,"completion_tokens":10,"total_tokens":16}}` + "\n\ndata: [DONE]\n\n")
	return sb.String()
}
