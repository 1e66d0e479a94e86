package proxy

import (
	"context"
	"io"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/trace"
)

// RequestLog is a Recorder that logs every finished request once: as an
// OpenTelemetry log record (exported over OTLP by the logger's provider)
// and as a JSON line on an access log. The fields are the ledger's; no
// secret, header or content is among them.
type RequestLog struct {
	node   string
	logger otellog.Logger // nil: no OTLP records
	mu     sync.Mutex     // one line at a time
	access io.Writer      // nil: no access log
}

// NewRequestLog returns a RequestLog of node's requests to logger and
// access; either may be nil.
func NewRequestLog(node string, logger otellog.Logger, access io.Writer) *RequestLog {
	return &RequestLog{node: node, logger: logger, access: access}
}

// Record implements Recorder.
func (l *RequestLog) Record(rec *Record) {
	fields := l.fields(rec)
	end := rec.Start.Add(rec.Latency)
	if l.logger != nil {
		l.emit(rec, end, fields)
	}
	if l.access != nil {
		line := appendJSONLine(make([]byte, 0, 768), end, rec.span, fields)
		l.mu.Lock()
		_, _ = l.access.Write(line) // a full disk must not fail requests
		l.mu.Unlock()
	}
}

// fields are a request's ledger fields, named as tollctl spend logs -o
// json names them.
func (l *RequestLog) fields(rec *Record) []attribute.KeyValue {
	f := make([]attribute.KeyValue, 0, 24)
	f = append(f, attribute.String("request_id", rec.RequestID), attribute.String("node", l.node),
		attribute.String("key_id", rec.KeyID), attribute.String("team_id", rec.TeamID),
		attribute.String("model", rec.Model), attribute.String("deployment", rec.Deployment),
		attribute.String("provider", rec.Provider), attribute.String("endpoint", rec.Endpoint.Name()),
		attribute.Bool("stream", rec.Stream), attribute.Int("status", rec.Status),
		attribute.Int64("prompt_tokens", rec.Usage.PromptTokens), attribute.Int64("completion_tokens", rec.Usage.CompletionTokens),
		attribute.Int64("cached_tokens", rec.Usage.CachedTokens), attribute.Int64("cache_write_tokens", rec.Usage.CacheWriteTokens),
		attribute.Int64("cost_nanos", rec.CostNanos), attribute.Bool("unpriced", rec.Unpriced),
		attribute.Bool("usage_rejected", rec.UsageRejected), attribute.Int64("latency_micros", rec.Latency.Microseconds()),
		attribute.Int64("ttft_micros", rec.FirstByte.Microseconds()), attribute.Int("attempts", rec.Attempts))
	if rec.RateLimited != "" {
		f = append(f, attribute.String("rate_limited", rec.RateLimited))
	}
	return f
}

// emit sends the OTLP log record, in the request's trace when it has one.
func (l *RequestLog) emit(rec *Record, end time.Time, fields []attribute.KeyValue) {
	var r otellog.Record
	r.SetEventName("tollgate.request")
	r.SetTimestamp(end)
	r.SetObservedTimestamp(end)
	r.SetSeverity(otellog.SeverityInfo)
	if rec.Status >= 500 {
		r.SetSeverity(otellog.SeverityWarn)
	}
	r.SetSeverityText(r.Severity().String())
	r.SetBody(attribute.StringValue("request " + rec.RequestID + " " + statusLabel(rec.Status)))
	r.AddAttributes(fields...)
	ctx := context.Background()
	if rec.span != nil {
		ctx = trace.ContextWithSpan(ctx, rec.span)
	}
	l.logger.Emit(ctx, r)
}

// appendJSONLine appends one JSON object of fields, with the time and the
// trace it belongs to, and a newline.
func appendJSONLine(b []byte, at time.Time, span trace.Span, fields []attribute.KeyValue) []byte {
	b = append(b, `{"time":"`...)
	b = at.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	for _, kv := range fields {
		b = append(b, ',')
		b = appendJSONString(b, string(kv.Key))
		b = append(b, ':')
		switch kv.Value.Type() {
		case attribute.BOOL:
			b = strconv.AppendBool(b, kv.Value.AsBool())
		case attribute.INT64:
			b = strconv.AppendInt(b, kv.Value.AsInt64(), 10)
		default:
			b = appendJSONString(b, kv.Value.AsString())
		}
	}
	if span != nil {
		if sc := span.SpanContext(); sc.IsValid() {
			b = append(b, `,"trace_id":"`...)
			b = append(b, sc.TraceID().String()...)
			b = append(b, `","span_id":"`...)
			b = append(b, sc.SpanID().String()...)
			b = append(b, '"')
		}
	}
	return append(b, "}\n"...)
}
