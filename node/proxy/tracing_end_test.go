package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/node/telemetry"
	"github.com/tollgate/tollgate/node/telemetry/otlptest"
	"github.com/tollgate/tollgate/routing"
)

// RecordingTelemetry is the gateway's telemetry exporting its spans over
// OTLP/HTTP to a receiver of its own, with env (name, value, ...) set.
func RecordingTelemetry(t *testing.T, env ...string) (*otlptest.Receiver, *telemetry.Telemetry) {
	t.Helper()
	rv := otlptest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://"+rv.HTTPAddr+"/v1/traces")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	for i := 0; i+1 < len(env); i += 2 {
		t.Setenv(env[i], env[i+1])
	}
	tel, err := telemetry.New(context.Background(), "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	return rv, tel
}

// A span ended from two goroutines at once (a client that goes away
// racing the relay's end) is recorded once, and without a data race (run
// with -race): the request's server span through endSpan, an attempt's
// span through the gateway's tracer's End.
func TestSpanEndedFromTwoGoroutinesIsRecordedOnce(t *testing.T) {
	rv, tel := RecordingTelemetry(t)
	h := &Handler{cfg: Config{Tracer: tel.Tracer()}}
	const rounds = 20
	for range rounds {
		rec := &Record{Endpoint: routing.EndpointChat, RequestID: "r", Status: http.StatusOK}
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		_, ctx := h.startSpan(httptest.NewRecorder(), r, rec)
		if !rec.recording() {
			t.Fatal("the server span does not record")
		}
		_, attempt := tel.Tracer().Start(ctx, "chat m", trace.WithSpanKind(trace.SpanKindClient))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				<-start
				h.endSpan(rec)
				attempt.End()
			})
		}
		close(start)
		wg.Wait()
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range rv.Spans() {
		id := otlptest.Hex(s.GetSpanId())
		if seen[id] {
			t.Errorf("span %s (%s) recorded twice", id, s.GetName())
		}
		seen[id] = true
	}
	if len(seen) != 2*rounds {
		t.Errorf("%d distinct spans recorded, want %d", len(seen), 2*rounds)
	}
}
