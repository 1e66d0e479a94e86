package proxy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/node/proxy"
)

// relayBenchEvents is a pass-through stream of n content chunks (with the
// "usage":null member the gateway hides), the usage chunk and [DONE], as
// an OpenAI-wire upstream sends it when the gateway asked for the usage.
func relayBenchEvents(n int) string {
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"mock-up",`+
			`"choices":[{"index":0,"delta":{"content":"token %d "},"finish_reason":null}],"usage":null}`+"\n\n", i)
	}
	sb.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"mock-up","choices":[],` +
		`"usage":{"prompt_tokens":6,"completion_tokens":50,"total_tokens":56}}` + "\n\ndata: [DONE]\n\n")
	return sb.String()
}

// BenchmarkRelayStream50: the gateway's own cost of relaying a 50-chunk
// stream that arrives in one read (an upstream ahead of the gateway), to a
// writer that only counts: ns/event is the relay's CPU per event, with
// the request's fixed cost spread over the 52 events.
func BenchmarkRelayStream50(b *testing.B) {
	const events = 52
	benchHandler(b, newCannedTransport("text/event-stream", []byte(relayBenchEvents(50))), `"stream":true`)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/events, "ns/event")
}

// BenchmarkRelayStream50Loopback: the same stream through net/http's
// server over loopback to a client that reads it to the end, so net/http's
// response writer (chunked encoding, its buffers, the write system calls)
// is counted too.
func BenchmarkRelayStream50Loopback(b *testing.B) {
	const events = 52
	route := newRoute(b, "rbench", dep(uniq("dep"), "http://upstream.invalid", "mock-up"))
	_, secret := newKey(b, route)
	g := startGateway(b, proxy.Config{Transport: newCannedTransport("text/event-stream", []byte(relayBenchEvents(50)))})
	body := []byte(chatBody(route, `"stream":true`))
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		drain(b, g, req)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/events, "ns/event")
}

// BenchmarkRelayStream50Upstream: the same stream from an upstream on a
// real socket that sends it in one TCP write (each event its own chunk),
// read by the gateway's own HTTP/1.1 client over a kept-alive connection,
// to a writer that only counts: the upstream read side (buffers, chunked
// decoding, system calls) and the relay, without net/http's server.
func BenchmarkRelayStream50Upstream(b *testing.B) {
	const events = 52
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
	for _, ev := range strings.SplitAfter(relayBenchEvents(50), "\n\n") {
		answer = fmt.Appendf(answer, "%x\r\n%s\r\n", len(ev), ev) // the last is "": the end of the body
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go answerEach(conn, answer)
		}
	}()
	route := newRoute(b, "ubench", dep(uniq("dep"), "http://"+ln.Addr().String(), "mock-up"))
	_, secret := newKey(b, route)
	tr := proxy.NewTransport()
	b.Cleanup(tr.CloseIdleConnections)
	h := proxy.New(proxy.Config{State: testStore(b), Transport: tr})
	body := []byte(chatBody(route, `"stream":true`))
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, "http://gateway/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		clear(w.h)
		h.ServeHTTP(w, req)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/events, "ns/event")
}

// answerEach answers every request on conn with answer, in one write.
func answerEach(conn net.Conn, answer []byte) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		if _, err := conn.Write(answer); err != nil {
			return
		}
	}
}
