package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/node/telemetry/otlptest"
)

// captureClient is an otlptrace.Client that keeps the spans it is sent,
// decoded from the wire bytes; with hold set, an upload waits until hold
// is closed, after saying so on entered.
type captureClient struct {
	mu      sync.Mutex
	spans   []*tracepb.Span
	hold    chan struct{}
	entered chan struct{}
}

func (*captureClient) Start(context.Context) error { return nil }
func (*captureClient) Stop(context.Context) error  { return nil }
func (c *captureClient) UploadTraces(_ context.Context, rss []*tracepb.ResourceSpans) error {
	if c.hold != nil {
		c.entered <- struct{}{}
		<-c.hold
	}
	b, err := proto.Marshal(&tracepb.TracesData{ResourceSpans: rss})
	if err != nil {
		return err
	}
	var td tracepb.TracesData
	if err := proto.Unmarshal(b, &td); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range td.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	return nil
}

func (c *captureClient) got() []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.Span(nil), c.spans...)
}

func testTracer(t testing.TB, c otlptrace.Client, size int, smp sampler) *Tracer {
	return &Tracer{sampler: smp, q: testQueue(t, c, size)}
}

// Spans recorded one after another into pooled records each carry only
// their own attributes, events, status and name: a reused record keeps
// nothing of the request before.
func TestPooledSpansDoNotLeakAttributesBetweenRequests(t *testing.T) {
	c := &captureClient{}
	tr := testTracer(t, c, 64, defaultSampler)
	const n = 40
	for i := range n {
		_, s := tr.Start(context.Background(), fmt.Sprint("req ", i), trace.WithSpanKind(trace.SpanKindServer))
		if i%2 == 0 { // the even ones have more of everything
			s.SetAttributes(attribute.String("even", "yes"), attribute.Int("i", i))
			s.AddEvent("tollgate.retry", trace.WithAttributes(attribute.Int("n", i)))
			s.SetStatus(codes.Error, "failed")
		} else {
			s.SetAttributes(attribute.Int("i", i))
		}
		if s.TracerProvider().Tracer("other") != trace.Tracer(tr) {
			t.Fatal("a span's provider does not give its tracer")
		}
		s.End()
		s.SetAttributes(attribute.String("after", "end")) // ignored: ended
	}
	if err := tr.q.shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := c.got()
	if len(spans) != n {
		t.Fatalf("%d spans exported, want %d", len(spans), n)
	}
	for i, s := range spans {
		attrs := otlptest.Attrs(s.GetAttributes())
		want := map[string]string{"i": fmt.Sprint(i)}
		wantEvents, wantCode := 0, tracepb.Status_STATUS_CODE_UNSET
		if i%2 == 0 {
			want["even"], wantEvents, wantCode = "yes", 1, tracepb.Status_STATUS_CODE_ERROR
		}
		if fmt.Sprint(attrs) != fmt.Sprint(want) || len(s.GetEvents()) != wantEvents || s.GetStatus().GetCode() != wantCode ||
			s.GetName() != fmt.Sprint("req ", i) || s.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
			t.Fatalf("span %d: %v", i, s)
		}
	}
}

// A released span lets go of what it recorded: its attribute slice, back
// in the pool, is cleared; its SpanContext stays its own.
func TestReleasedSpanIsEmpty(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}})
	b := &attrBuf{kv: []attribute.KeyValue{attribute.String("k", "secret")}}
	s := &span{sc: sc, x: &spanExtra{attrs: b.kv, buf: b, events: []sdktrace.Event{{Name: "e"}}}, ended: true}
	attrs := s.x.attrs
	s.release()
	if s.x != nil || attrs[:1][0].Value.AsString() != "" || !s.SpanContext().Equal(sc) {
		t.Fatalf("released span keeps %+v", s)
	}
}

// When the exporter is behind and the queue is full, a span ending is
// dropped at once and counted, not waited for; what was queued is still
// exported at shutdown.
func TestFullQueueDropsAndCountsSpans(t *testing.T) {
	c := &captureClient{hold: make(chan struct{}), entered: make(chan struct{}, 8)}
	q, err := newSpanQueue(context.Background(), c, queueConfig{size: 1, batch: 1, delay: time.Hour, timeout: time.Minute},
		stubRes, &commonpb.InstrumentationScope{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	tr := &Tracer{sampler: defaultSampler, q: q}
	end := func(name string) { _, s := tr.Start(context.Background(), name); s.End() }
	end("exporting")
	<-c.entered // the exporter holds the first span in its upload
	end("queued")
	end("dropped 1")
	end("dropped 2")
	if d := q.Dropped(); d != 2 {
		t.Fatalf("dropped %d spans, want 2", d)
	}
	close(c.hold)
	if err := q.shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range c.got() {
		names = append(names, s.GetName())
	}
	if fmt.Sprint(names) != "[exporting queued]" {
		t.Fatalf("exported %v", names)
	}
	end("after shutdown")
	if d := q.Dropped(); d != 3 {
		t.Fatalf("a span ended after shutdown: dropped %d, want 3", d)
	}
}

// requestWith is a context carrying the traceparent header tp, extracted
// as the data plane does.
func requestWith(tp string) context.Context {
	h := http.Header{}
	if tp != "" {
		h.Set("Traceparent", tp)
	}
	return propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(h))
}

const (
	clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	sampledTP   = "00-" + clientTrace + "-00f067aa0ba902b7-01"
	unsampledTP = "00-" + clientTrace + "-00f067aa0ba902b7-00"
)

// The sampler of each OTEL_TRACES_SAMPLER setting decides at the server
// span, from the client's traceparent when parent based; the attempt's
// span under it follows; an unsampled span still carries the trace on.
func TestSamplerDecidesOncePerRequestFromTheEnvironment(t *testing.T) {
	cases := []struct {
		sampler, arg string
		tp           string
		sampled      bool
	}{
		{"", "", "", true},
		{"", "", unsampledTP, false},
		{"", "", sampledTP, true},
		{"parentbased_always_off", "", "", false},
		{"parentbased_always_off", "", sampledTP, true},
		{"always_on", "", unsampledTP, true},
		{"always_off", "", sampledTP, false},
		{"traceidratio", "0", sampledTP, false},
		{"traceidratio", "1", unsampledTP, true},
		{"parentbased_traceidratio", "0", sampledTP, true},
		{"parentbased_traceidratio", "0", "", false},
		{"parentbased_traceidratio", "1", unsampledTP, false},
		// 0xa3ce929d0e0e4736 >> 1 is 0.64 of 2^63: in at 0.65, out at 0.63.
		{"traceidratio", "0.65", unsampledTP, true},
		{"traceidratio", "0.63", sampledTP, false},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s %s %s", tc.sampler, tc.arg, tc.tp), func(t *testing.T) {
			env := map[string]string{"OTEL_TRACES_SAMPLER": tc.sampler, "OTEL_TRACES_SAMPLER_ARG": tc.arg}
			smp, err := samplerFrom(func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			c := &captureClient{}
			tr := testTracer(t, c, 8, smp)
			ctx, server := tr.Start(requestWith(tc.tp), "chat", trace.WithSpanKind(trace.SpanKindServer))
			_, attempt := tr.Start(ctx, "chat m", trace.WithSpanKind(trace.SpanKindClient))
			sc := server.SpanContext()
			if server.IsRecording() != tc.sampled || attempt.IsRecording() != tc.sampled || sc.IsSampled() != tc.sampled ||
				attempt.SpanContext().IsSampled() != tc.sampled {
				t.Fatalf("sampled: server %v attempt %v, want %v", server.IsRecording(), attempt.IsRecording(), tc.sampled)
			}
			if tc.tp != "" && sc.TraceID().String() != clientTrace || sc.SpanID().String() == "00f067aa0ba902b7" ||
				attempt.SpanContext().TraceID() != sc.TraceID() {
				t.Fatalf("the client's trace is not continued: server %v attempt %v", sc, attempt.SpanContext())
			}
			attempt.End()
			server.End()
			if err := tr.q.shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			spans := c.got()
			if !tc.sampled {
				if len(spans) != 0 {
					t.Fatalf("%d spans of an unsampled trace exported", len(spans))
				}
				return
			}
			if len(spans) != 2 || string(spans[0].GetParentSpanId()) != string(spans[1].GetSpanId()) {
				t.Fatalf("want the attempt under the server span: %v", spans)
			}
			remote := spans[1].GetFlags()&uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK) != 0
			if remote != (tc.tp != "") || otlptest.Hex(spans[1].GetParentSpanId()) != map[bool]string{true: "00f067aa0ba902b7"}[remote] {
				t.Fatalf("server span's parent: %x (remote %v)", spans[1].GetParentSpanId(), remote)
			}
		})
	}
}

// A bad or unknown setting falls back as the SDK's does, with an error
// to log.
func TestBadSamplerSettingsFallBackAsTheSDK(t *testing.T) {
	for _, env := range []map[string]string{
		{"OTEL_TRACES_SAMPLER": "jaeger_remote"},
		{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "x"},
		{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"},
	} {
		smp, err := samplerFrom(func(k string) string { return env[k] })
		if err == nil || !smp.all {
			t.Errorf("%v: sampler %+v, err %v: want every root sampled and an error", env, smp, err)
		}
	}
}

// BenchmarkRecordRequestSpans: what tracing costs a request on its own
// goroutine: the server span and one attempt's, with the gateway's
// attributes, started, filled and ended into the queue (the exporter
// drains it meanwhile); and an unsampled request's.
func BenchmarkRecordRequestSpans(b *testing.B) {
	for _, c := range []struct {
		name string
		smp  sampler
	}{{"sampled", defaultSampler}, {"unsampled", sampler{none: true}}} {
		b.Run(c.name, func(b *testing.B) {
			q, err := newSpanQueue(context.Background(), discardClient{}, queueConfig{size: DefaultSpanQueue, batch: 512, delay: 5 * time.Second,
				timeout: time.Minute}, stubRes, &commonpb.InstrumentationScope{Name: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = q.shutdown(context.Background()) })
			tr := &Tracer{sampler: c.smp, q: q}
			attrs := make([]attribute.KeyValue, 0, 32)
			b.ReportAllocs()
			for b.Loop() {
				ctx, server := tr.Start(requestWith(""), "chat", trace.WithSpanKind(trace.SpanKindServer))
				_, attempt := tr.Start(ctx, "chat m", trace.WithSpanKind(trace.SpanKindClient))
				attrs = append(attrs[:0], attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.request.model", "m"),
					attribute.Int("http.response.status_code", 200), attribute.Int64("gen_ai.usage.input_tokens", 6),
					attribute.Int64("gen_ai.usage.output_tokens", 10), attribute.String("tollgate.deployment", "d"))
				attempt.SetAttributes(attrs...)
				attempt.End()
				attrs = append(attrs, attribute.String("tollgate.key_id", "k"), attribute.String("tollgate.team_id", "t"),
					attribute.Float64("tollgate.cost_usd", 0.0001), attribute.String("tollgate.request_id", "r"))
				server.SetAttributes(attrs...)
				server.End()
			}
			b.ReportMetric(float64(tr.q.Dropped())/float64(b.N), "dropped/op")
		})
	}
}

type discardClient struct{}

func (discardClient) Start(context.Context) error                                  { return nil }
func (discardClient) Stop(context.Context) error                                   { return nil }
func (discardClient) UploadTraces(context.Context, []*tracepb.ResourceSpans) error { return nil }
