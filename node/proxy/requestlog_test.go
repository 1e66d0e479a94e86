package proxy_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/log/embedded"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
)

// logSink is an OpenTelemetry logger that keeps what is emitted.
type logSink struct {
	embedded.Logger
	mu      sync.Mutex
	records []otellog.Record
	traces  []trace.SpanContext
}

func (s *logSink) Emit(ctx context.Context, r otellog.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = append(s.records, r.Clone())
	s.traces = append(s.traces, trace.SpanContextFromContext(ctx))
}

func (s *logSink) Enabled(context.Context, otellog.EnabledParameters) bool { return true }

func logAttrs(r otellog.Record) map[string]string {
	m := map[string]string{}
	r.WalkAttributes(func(kv attribute.KeyValue) bool {
		m[string(kv.Key)] = kv.Value.String()
		return true
	})
	return m
}

// Every finished request, refused ones too, leaves one OTLP log record and
// one access-log line with the ledger's fields, in the request's trace,
// and neither holds the key's secret.
func TestRequestLogWritesOneRecordAndLinePerRequest(t *testing.T) {
	t.Parallel()
	_, url := startMock(t, mock.Options{})
	keyID, secret := newKey(t)
	sink := &logSink{}
	var access syncBuffer
	tr, _ := tracer(t)
	g := startGateway(t, proxy.Config{Tracer: tr, Recorders: []proxy.Recorder{proxy.NewRequestLog("node-a", sink, &access)}})
	route := newRoute(t, "logged", dep(uniq("dep"), url, "m"))

	ok := g.post(t, "/v1/chat/completions", secret, chatBody(route))
	bad := g.post(t, "/v1/chat/completions", "wrong-key", chatBody(route))
	if ok.status != 200 || bad.status != 401 {
		t.Fatalf("statuses %d, %d", ok.status, bad.status)
	}
	recOK, recBad := g.rec.of(t, ok), g.rec.of(t, bad)

	lines := strings.Split(strings.TrimSpace(access.String()), "\n")
	sink.mu.Lock()
	records, traces := sink.records, sink.traces
	sink.mu.Unlock()
	if len(lines) != 2 || len(records) != 2 {
		t.Fatalf("%d access lines and %d log records for 2 requests:\n%s", len(lines), len(records), access.String())
	}
	for i, want := range []proxy.Record{recOK, recBad} {
		var line map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &line); err != nil {
			t.Fatalf("access line %d is not JSON: %v\n%s", i, err, lines[i])
		}
		la := logAttrs(records[i])
		for k, v := range map[string]any{"request_id": want.RequestID, "node": "node-a", "key_id": want.KeyID,
			"model": want.Model, "status": float64(want.Status), "prompt_tokens": float64(want.Usage.PromptTokens),
			"completion_tokens": float64(want.Usage.CompletionTokens), "cost_nanos": float64(want.CostNanos),
			"endpoint": "chat", "attempts": float64(want.Attempts)} {
			if line[k] != v {
				t.Errorf("request %d: access %s = %v, want %v", i, k, line[k], v)
			}
			if s, isStr := v.(string); isStr && la[k] != s {
				t.Errorf("request %d: log record %s = %q, want %q", i, k, la[k], s)
			}
		}
		if line["trace_id"] != traces[i].TraceID().String() || !traces[i].IsValid() {
			t.Errorf("request %d: access trace %v, log record trace %v", i, line["trace_id"], traces[i].TraceID())
		}
		if records[i].EventName() != "tollgate.request" || records[i].Timestamp().IsZero() {
			t.Errorf("request %d: event %q at %v", i, records[i].EventName(), records[i].Timestamp())
		}
	}
	if recOK.KeyID != keyID {
		t.Fatalf("the served request's key %q, want %q", recOK.KeyID, keyID)
	}
	if strings.Contains(access.String(), secret) || strings.Contains(access.String(), "wrong-key") {
		t.Error("the access log holds a key's secret")
	}
}
