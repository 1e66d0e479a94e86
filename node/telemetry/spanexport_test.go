package telemetry

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/node/telemetry/otlptest"
)

// stubRes and stubScope are the resource and scope of the stub spans.
var (
	stubRes   = resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0", attribute.String("service.name", "a"), attribute.Int("n", 1))
	stubScope = instrumentation.Scope{Name: "tollgate", Version: "1"}
)

// stubSpans are spans with every kind of field and attribute value the
// recorder keeps (it drops nothing, so no dropped counts); n of them
// (n ≤ 4), so that a smaller second batch shows whether reused buffers
// leak the first one's bytes.
func stubSpans(n int) []sdktrace.ReadOnlySpan {
	tid := trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	ts, _ := trace.ParseTraceState("vendor=x,other=y")
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{9, 9}, TraceFlags: trace.FlagsSampled, Remote: true})
	at := time.Unix(1_700_000_000, 123456789)
	all := []tracetest.SpanStub{
		{
			Name: "chat gpt", SpanKind: trace.SpanKindServer, Parent: remote, StartTime: at, EndTime: at.Add(time.Millisecond),
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled, TraceState: ts}),
			Attributes: []attribute.KeyValue{attribute.String("s", "ü"), attribute.String("empty", ""), attribute.Bool("f", false),
				attribute.Bool("t", true), attribute.Int64("i", -7), attribute.Int64("zero", 0), attribute.Int64("big", math.MaxInt64),
				attribute.Float64("d", 0.25), attribute.Float64("dz", 0), attribute.StringSlice("ss", []string{"stop", ""}),
				attribute.BoolSlice("bs", []bool{true, false}), attribute.Int64Slice("is", []int64{1, -1}),
				attribute.Float64Slice("fs", []float64{1.5}), attribute.ByteSlice("b", []byte{0, 1}),
				attribute.Slice("sl", attribute.IntValue(3), attribute.StringValue("x")),
				attribute.Map("m", attribute.String("k", "v"), attribute.Int("n", 2)), attribute.StringSlice("none", nil),
				// lengths of two and three bytes, in nested messages
				attribute.String("long", strings.Repeat("x", 300)), attribute.Map("lm", attribute.String("k", strings.Repeat("y", 20000))),
				attribute.StringSlice("ls", []string{strings.Repeat("z", 200), "a"})},
			Events: []sdktrace.Event{{Name: "tollgate.retry", Time: at.Add(time.Microsecond), Attributes: []attribute.KeyValue{attribute.Int64("ms", 5)}},
				{Name: "bare"}},
			Links:  []sdktrace.Link{{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.String("l", "v")}}},
			Status: sdktrace.Status{Code: codes.Error, Description: "upstream 500"},
		},
		{
			Name: "chat m", SpanKind: trace.SpanKindClient, StartTime: at, EndTime: at.Add(time.Second),
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled}),
			Parent:      trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1}}),
			Attributes:  []attribute.KeyValue{attribute.Int("tollgate.attempt", 1)}, Status: sdktrace.Status{Code: codes.Ok},
		},
		{
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{3}}),
		},
		{
			Name: "internal", SpanKind: trace.SpanKindInternal, StartTime: at, EndTime: at,
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{4}, TraceFlags: trace.FlagsSampled}),
		},
	}
	for i := range all {
		all[i].Resource, all[i].InstrumentationScope = stubRes, stubScope
	}
	return tracetest.SpanStubs(all[:n]).Snapshots()
}

// recordOf is the recorder's span of what sd says.
func recordOf(sd sdktrace.ReadOnlySpan) *span {
	return &span{sc: sd.SpanContext(), parentID: sd.Parent().SpanID(), parentRemote: sd.Parent().IsRemote(), name: sd.Name(),
		kind: uint8(sd.SpanKind()), start: sd.StartTime(), dur: sd.EndTime().Sub(sd.StartTime()), code: sd.Status().Code,
		x: &spanExtra{attrs: slices.Clone(sd.Attributes()), events: slices.Clone(sd.Events()), links: slices.Clone(sd.Links()),
			desc: sd.Status().Description}}
}

// testQueue is a span queue exporting through client whose batches go
// only when the test exports them (or at shutdown).
func testQueue(t testing.TB, client otlptrace.Client, size int) *spanQueue {
	q, err := newSpanQueue(context.Background(), client, queueConfig{size: size, batch: size, delay: time.Hour, timeout: 10 * time.Second},
		stubRes, &commonpb.InstrumentationScope{Name: stubScope.Name, Version: stubScope.Version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.shutdown(context.Background()) })
	return q
}

// received flattens what rv got into "resource|scope|schemas" → spans.
func received(rv *otlptest.Receiver) map[string][]*tracepb.Span {
	out := map[string][]*tracepb.Span{}
	for _, rs := range rv.ResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			k := strings.Join([]string{fmt.Sprint(otlptest.Attrs(rs.GetResource().GetAttributes())), ss.GetScope().String(),
				rs.GetSchemaUrl(), ss.GetSchemaUrl()}, "|")
			out[k] = append(out[k], ss.GetSpans()...)
		}
	}
	return out
}

// The recorder's spans reach a receiver as the SDK's spans exported by
// the upstream exporter do, field for field, over both protocols; batch
// after batch (reused buffers).
func TestRecordedSpansArriveAsTheUpstreamExporterSendsThem(t *testing.T) {
	ctx := context.Background()
	for _, protocol := range []string{ProtocolHTTP, ProtocolGRPC} {
		t.Run(strings.ReplaceAll(protocol, "/", "-"), func(t *testing.T) {
			want, got := otlptest.Start(t), otlptest.Start(t)
			upstream := otlptracehttp.NewClient(otlptracehttp.WithEndpoint(want.HTTPAddr), otlptracehttp.WithInsecure())
			hc, err := httpConfigFrom(mapEnv(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + got.HTTPAddr}), nil)
			if err != nil {
				t.Fatal(err)
			}
			var ours otlptrace.Client = newHTTPExporter(hc)
			if protocol == ProtocolGRPC {
				upstream = otlptracegrpc.NewClient(otlptracegrpc.WithEndpoint(want.GRPCAddr), otlptracegrpc.WithInsecure())
				ours = otlptracegrpc.NewClient(otlptracegrpc.WithEndpoint(got.GRPCAddr), otlptracegrpc.WithInsecure())
			}
			ref, err := otlptrace.New(ctx, upstream)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ref.Shutdown(ctx) })
			q := testQueue(t, ours, 8)
			for _, n := range []int{4, 1, 4} { // reused buffers: a big batch, a small one, a big one
				if err := ref.ExportSpans(ctx, stubSpans(n)); err != nil {
					t.Fatal(err)
				}
				var batch []*span
				for _, sd := range stubSpans(n) {
					batch = append(batch, recordOf(sd))
				}
				q.export(batch)
			}
			w, g := received(want), received(got)
			if len(w) != 1 || len(g) != len(w) {
				t.Fatalf("groups by resource and scope: upstream %d, ours %d (want 1)", len(w), len(g))
			}
			for k, ws := range w {
				gs := g[k]
				if len(gs) != len(ws) {
					t.Fatalf("group %s: %d spans, upstream %d", k, len(gs), len(ws))
				}
				for i := range ws {
					if !proto.Equal(ws[i], gs[i]) {
						t.Errorf("group %s span %d:\n ours     %v\n upstream %v", k, i, gs[i], ws[i])
					}
				}
			}
		})
	}
}

// marshalClient is an otlptrace.Client that marshals what it is given, as
// both OTLP clients do, and sends nothing.
type marshalClient struct{ bytes int }

func (*marshalClient) Start(context.Context) error { return nil }
func (*marshalClient) Stop(context.Context) error  { return nil }
func (c *marshalClient) UploadTraces(_ context.Context, rss []*tracepb.ResourceSpans) error {
	b, err := proto.Marshal(&coltrace.ExportTraceServiceRequest{ResourceSpans: rss})
	c.bytes = len(b)
	return err
}

// BenchmarkSpanExport: a batch of 512 spans like the gateway's (a server
// span of 22 attributes and a client span of 14), converted and marshalled
// by the upstream exporter and by the span queue; per span.
func BenchmarkSpanExport(b *testing.B) {
	tid := trace.TraceID{1, 2, 3}
	attrs := func(n int) []attribute.KeyValue {
		a := []attribute.KeyValue{attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop"}),
			attribute.Float64("tollgate.cost_usd", 0.000123), attribute.Bool("tollgate.stream", true)}
		for i := len(a); i < n; i++ {
			a = append(a, attribute.String(fmt.Sprintf("gen_ai.attribute_%d", i), "a value of some length"))
		}
		return a
	}
	stubs := make(tracetest.SpanStubs, 512)
	for i := range stubs {
		n := 22
		if i%2 == 1 {
			n = 14
		}
		stubs[i] = tracetest.SpanStub{Name: "chat bench", SpanKind: trace.SpanKindServer, StartTime: time.Now(), EndTime: time.Now(),
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{byte(i)}, TraceFlags: trace.FlagsSampled}),
			Attributes:  attrs(n), Resource: resource.Default(), InstrumentationScope: instrumentation.Scope{Name: "tollgate"}}
	}
	spans := stubs.Snapshots()
	ctx := context.Background()
	b.Run("upstream", func(b *testing.B) {
		exp, err := otlptrace.New(ctx, &marshalClient{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := exp.ExportSpans(ctx, spans); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
	})
	b.Run("ours", func(b *testing.B) {
		mc := &marshalClient{}
		q := testQueue(b, mc, len(spans))
		batch := make([]*span, len(spans))
		b.ReportAllocs()
		for b.Loop() {
			for i, sd := range spans {
				s := &span{sc: sd.SpanContext(), name: sd.Name(), kind: uint8(sd.SpanKind()), start: sd.StartTime(),
					dur: sd.EndTime().Sub(sd.StartTime()), x: &spanExtra{buf: attrBufs.Get().(*attrBuf)}}
				s.x.attrs = append(s.x.buf.kv[:0], sd.Attributes()...)
				batch[i] = s
			}
			batch = q.export(batch)[:len(spans)]
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
		b.ReportMetric(float64(mc.bytes)/float64(len(spans)), "B/span-wire")
	})
}

// OTEL_BSP_* set the queue and batching as they set the SDK's batch
// processor; a bad value keeps the default and is reported.
func TestQueueSettingsFollowTheBSPVariables(t *testing.T) {
	env := map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "512",
		"OTEL_BSP_SCHEDULE_DELAY": "250", "OTEL_BSP_EXPORT_TIMEOUT": "1000"}
	c, err := queueConfigFrom(func(k string) string { return env[k] })
	want := queueConfig{size: 100, batch: 100, delay: 250 * time.Millisecond, timeout: time.Second}
	if err != nil || c != want {
		t.Fatalf("got %+v, %v; want %+v", c, err, want)
	}
	env = map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "-1", "OTEL_BSP_SCHEDULE_DELAY": "soon"}
	c, err = queueConfigFrom(func(k string) string { return env[k] })
	want = queueConfig{size: DefaultSpanQueue, batch: 512, delay: 5 * time.Second, timeout: 30 * time.Second}
	if err == nil || c != want {
		t.Fatalf("bad values: got %+v, %v; want the defaults %+v and an error", c, err, want)
	}
}

// A string that is not valid UTF-8 (a model name or finish reason as a
// client or upstream sent it) goes out with U+FFFD in its place: protobuf
// strings must be UTF-8, and a receiver rejects the whole batch, other
// requests' spans with it, when one is not.
func TestInvalidUTF8DoesNotSpoilTheBatch(t *testing.T) {
	c := &captureClient{}
	tr := testTracer(t, c, 8, defaultSampler)
	_, ok := tr.Start(context.Background(), "fine")
	ok.End()
	_, bad := tr.Start(context.Background(), "chat gpt\xff")
	bad.SetAttributes(attribute.String("gen_ai.request.model", "gpt\xff"), attribute.String("k\xfe", "v"),
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop\xc3"}))
	bad.AddEvent("ev\xff", trace.WithAttributes(attribute.String("e", "\xff")))
	bad.SetStatus(codes.Error, "bad \xff")
	bad.End()
	if err := tr.q.shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := c.got()
	if len(spans) != 2 {
		t.Fatalf("%d spans arrived, want 2", len(spans))
	}
	s := spans[1]
	attrs := otlptest.Attrs(s.GetAttributes())
	if s.GetName() != "chat gpt\uFFFD" || attrs["gen_ai.request.model"] != "gpt\uFFFD" || attrs["k\uFFFD"] != "v" ||
		s.GetEvents()[0].GetName() != "ev\uFFFD" || s.GetStatus().GetMessage() != "bad \uFFFD" ||
		s.GetAttributes()[2].GetValue().GetArrayValue().GetValues()[0].GetStringValue() != "stop\uFFFD" {
		t.Fatalf("span %v", s)
	}
}
