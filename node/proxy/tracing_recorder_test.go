package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
	"github.com/tollgate/tollgate/node/telemetry/otlptest"
)

// Concurrent requests traced by the gateway's own recorder (pooled
// attribute slices, a small queue exported in small batches while the
// requests run) each get their own spans: every exported server span
// carries its own request's id in its own client's trace, every attempt
// sits under its request's server span, no span is sent twice, and the
// access log names each request's own trace and server span; a span
// not exported is counted as dropped. Run with
// -race, it checks the recorder against the exporter.
func TestConcurrentRequestsKeepTheirOwnRecordedSpans(t *testing.T) {
	rv, tel := proxy.RecordingTelemetry(t, "OTEL_BSP_MAX_QUEUE_SIZE", "16", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "3",
		"OTEL_BSP_SCHEDULE_DELAY", "1")
	_, url := startMock(t, mock.Options{Chunks: 3})
	_, secret := newKey(t)
	route := newRoute(t, "conc", dep(uniq("dep"), url, "m"))
	access := &syncBuffer{}
	g := startGateway(t, proxy.Config{Tracer: tel.Tracer(), Recorders: []proxy.Recorder{proxy.NewRequestLog("n", nil, access)}})
	const workers, each = 8, 6
	traceOf := make([][]string, workers) // request id → client trace, per worker
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				tid := fmt.Sprintf("%016x%016x", w+1, i+1)
				extra := []string{}
				if i%2 == 1 {
					extra = append(extra, `"stream":true`)
				}
				r := g.do(t, "POST", "/v1/chat/completions", secret, chatBody(route, extra...), "Traceparent", "00-"+tid+"-00f067aa0ba902b7-01")
				if r.status != 200 {
					t.Errorf("status %d: %s", r.status, r.body)
					return
				}
				traceOf[w] = append(traceOf[w], r.header.Get("X-Request-Id")+"="+tid)
			}
		})
	}
	wg.Wait()
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{} // request id → trace
	for _, l := range traceOf {
		for _, kv := range l {
			id, tid, _ := strings.Cut(kv, "=")
			want[id] = tid
		}
	}
	servers := checkRecordedSpans(t, rv, want)
	for _, line := range strings.Split(strings.TrimSpace(access.String()), "\n") {
		var l struct{ RequestID, TraceID, SpanID string }
		if err := json.Unmarshal([]byte(strings.NewReplacer(`"request_id"`, `"RequestID"`, `"trace_id"`, `"TraceID"`, `"span_id"`, `"SpanID"`).Replace(line)), &l); err != nil {
			t.Fatal(err)
		}
		if l.TraceID != want[l.RequestID] || servers[l.RequestID] != "" && servers[l.RequestID] != l.SpanID {
			t.Errorf("access log of %s names trace %s span %s, want %s span %s", l.RequestID, l.TraceID, l.SpanID, want[l.RequestID], servers[l.RequestID])
		}
	}
	if n, d := len(rv.Spans()), int(tel.DroppedSpans()); n+d != 2*len(want) || len(servers) == 0 {
		t.Errorf("%d spans arrived (%d server spans) and %d were dropped, of %d requests of one attempt each", n, len(servers), d, len(want))
	}
}

// checkRecordedSpans checks the spans rv got against want (request id →
// trace) and returns the server span id of each request that arrived.
func checkRecordedSpans(t *testing.T, rv *otlptest.Receiver, want map[string]string) map[string]string {
	t.Helper()
	servers, serverTrace, seen := map[string]string{}, map[string]string{}, map[string]bool{}
	spans := rv.Spans()
	for _, s := range spans {
		sid := otlptest.Hex(s.GetSpanId())
		if seen[sid] {
			t.Errorf("span %s sent twice", sid)
		}
		seen[sid] = true
		if id := otlptest.Attrs(s.GetAttributes())["tollgate.request_id"]; id != "" {
			if tid := otlptest.Hex(s.GetTraceId()); tid != want[id] {
				t.Errorf("server span of request %s in trace %s, want %s", id, tid, want[id])
			}
			servers[id], serverTrace[sid] = sid, otlptest.Hex(s.GetTraceId())
		}
	}
	for _, s := range spans {
		if p := otlptest.Hex(s.GetParentSpanId()); p != "00f067aa0ba902b7" && serverTrace[p] != "" && serverTrace[p] != otlptest.Hex(s.GetTraceId()) {
			t.Errorf("attempt %x in trace %x under a server span of trace %s", s.GetSpanId(), s.GetTraceId(), serverTrace[p])
		}
	}
	return servers
}
