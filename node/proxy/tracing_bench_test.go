package proxy_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
	"github.com/tollgate/tollgate/node/telemetry"
)

// benchTracer is the tracer a node makes (package telemetry, configured by
// the OTEL_* variables) with sampler, exporting over OTLP/HTTP to an
// in-process collector that drops the bodies unread: the gateway's side of
// exporting, not a collector's.
func benchTracer(b *testing.B, sampler, arg string) trace.Tracer {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(sink.Close)
	b.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", sink.URL+"/v1/traces")
	b.Setenv("OTEL_TRACES_SAMPLER", sampler)
	b.Setenv("OTEL_TRACES_SAMPLER_ARG", arg)
	tel, err := telemetry.New(context.Background(), "bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return tel.Tracer()
}

// discardExporter drops the spans: the cost of making them, alone.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// tracingModes runs bench with tracing off, on (100% sampled) with the
// spans dropped after the batcher, on with them exported over OTLP, and
// on with one trace in ten sampled and exported.
func tracingModes(b *testing.B, bench func(b *testing.B, tr trace.Tracer)) {
	b.Run("off", func(b *testing.B) { bench(b, nil) })
	b.Run("on-discard", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		bench(b, tp.Tracer("bench"))
	})
	b.Run("on-otlp", func(b *testing.B) { bench(b, benchTracer(b, "always_on", "")) })
	b.Run("on-otlp-10pct", func(b *testing.B) { bench(b, benchTracer(b, "traceidratio", "0.1")) })
}

// BenchmarkTracingHandlerStream: the gateway's own cost of relaying a
// 10-chunk stream from a canned upstream (no network), with the data
// plane's metrics (whose exemplars tracing turns on), without and with
// tracing: where tracing weighs most, since nothing else does.
func BenchmarkTracingHandlerStream(b *testing.B) {
	var sb strings.Builder
	for i := range 10 {
		fmt.Fprintf(&sb, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"mock-up","choices":[{"index":0,"delta":{"content":"tok%d"},"finish_reason":null}],"usage":null}`+"\n\n", i)
	}
	sb.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"mock-up","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n")
	sb.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"mock-up","choices":[],"usage":{"prompt_tokens":6,"completion_tokens":10,"total_tokens":16}}` + "\n\ndata: [DONE]\n\n")
	benchTracingHandler(b, "text/event-stream", []byte(sb.String()), `"stream":true`)
}

// BenchmarkTracingHandlerChat: as BenchmarkTracingHandlerStream, for a
// non-streaming answer of about 1.3 KB (as the harness's scenario (c)).
func BenchmarkTracingHandlerChat(b *testing.B) {
	content := strings.Repeat("lorem ipsum dolor sit amet ", 40)
	data := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"mock-up","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"` + content + `"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":60,"completion_tokens":250,"total_tokens":310}}`)
	benchTracingHandler(b, "application/json", data)
}

// benchTracingHandler serves a chat completion (extra: its request's
// further members) from a canned upstream answering data, in every
// tracing mode.
func benchTracingHandler(b *testing.B, contentType string, data []byte, extra ...string) {
	tracingModes(b, func(b *testing.B, tr trace.Tracer) {
		route := newRoute(b, "tbench", dep(uniq("dep"), "http://upstream.invalid", "mock-up"))
		_, secret := newKey(b, route)
		h := proxy.New(proxy.Config{State: testStore(b), Transport: newCannedTransport(contentType, data), Tracer: tr,
			Recorders: []proxy.Recorder{proxy.NewMetrics(prometheus.NewRegistry())}})
		body := []byte(chatBody(route, extra...))
		rd := bytes.NewReader(body)
		req, _ := http.NewRequest(http.MethodPost, "http://gateway/v1/chat/completions", rd)
		req.Header.Set("Authorization", "Bearer "+secret)
		w := &discardWriter{h: http.Header{}}
		b.ReportAllocs()
		cpu := startCPU(b)
		for b.Loop() {
			rd.Reset(body)
			req.Body = io.NopCloser(rd)
			req.ContentLength = int64(len(body))
			clear(w.h)
			h.ServeHTTP(w, req)
		}
		cpu.report()
	})
}

// BenchmarkTracingProxyChat: as scenario (c) of the benchmark harness in
// small: concurrent clients flat out, each a non-streaming chat completion
// from client through the gateway to the mock and back over loopback,
// without and with tracing. The client and the mock share the CPU.
func BenchmarkTracingProxyChat(b *testing.B) { benchTracingProxy(b) }

// BenchmarkTracingProxyStream: as BenchmarkTracingProxyChat, streamed in
// 10 chunks.
func BenchmarkTracingProxyStream(b *testing.B) { benchTracingProxy(b, `"stream":true`) }

func benchTracingProxy(b *testing.B, extra ...string) {
	tracingModes(b, func(b *testing.B, tr trace.Tracer) {
		_, url := startMock(b, mock.Options{Chunks: 10})
		route := newRoute(b, "tpbench", dep(uniq("dep"), url, "mock-up"))
		_, secret := newKey(b, route)
		g := startGateway(b, proxy.Config{Tracer: tr})
		g.client.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
		body := []byte(chatBody(route, extra...))
		b.ReportAllocs()
		cpu := startCPU(b)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+secret)
				drain(b, g, req)
			}
		})
		cpu.report()
	})
}

// cpuMeter reports the CPU time of the whole process per operation
// (cpu-ns/op): every goroutine's, the batch span processor's and the
// garbage collector's among them. On a shared, busy machine it is steadier
// than ns/op, which counts the time spent waiting for a core.
type cpuMeter struct {
	b     *testing.B
	start time.Duration
}

func startCPU(b *testing.B) cpuMeter { return cpuMeter{b: b, start: processCPU(b)} }

func (m cpuMeter) report() {
	if n := m.b.N; n > 0 {
		m.b.ReportMetric(float64(processCPU(m.b)-m.start)/float64(n), "cpu-ns/op")
	}
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
