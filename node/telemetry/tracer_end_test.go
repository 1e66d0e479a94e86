package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/node/telemetry/otlptest"
)

// A span used after End, once the exporter has encoded it, behaves as the
// SDK's does: End again, SetAttributes, AddEvent and SetStatus are no-ops,
// it is not recording, and its SpanContext is still its own (a request
// log or exemplar reading the trace id late gets the right one); and none
// of it touches the span of a request started since.
func TestSpanUsedAfterItsExportIsANoOp(t *testing.T) {
	c := &captureClient{hold: make(chan struct{}), entered: make(chan struct{}, 8)}
	tr := testTracer(t, c, 1, defaultSampler)
	release := sync.OnceFunc(func() { close(c.hold) })
	t.Cleanup(release)
	ctx, a := tr.Start(context.Background(), "a", trace.WithSpanKind(trace.SpanKindServer))
	want := a.SpanContext()
	a.End()
	<-c.entered // a was encoded and its record released before the upload
	if got := trace.SpanFromContext(ctx).SpanContext(); !got.Equal(want) || a.IsRecording() {
		t.Fatalf("after its export the span says %v (recording %v), want %v, not recording", got, a.IsRecording(), want)
	}
	_, b := tr.Start(context.Background(), "b")
	b.SetAttributes(attribute.String("mine", "b"))
	a.SetAttributes(attribute.String("late", "a"))
	a.AddEvent("late")
	a.SetStatus(codes.Error, "late")
	a.SetName("late")
	a.End()
	if !b.IsRecording() {
		t.Fatal("ending a span again ended the next request's")
	}
	b.End()
	release()
	if err := tr.q.shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := c.got()
	if len(spans) != 2 {
		t.Fatalf("%d spans exported, want a and b once each: %v", len(spans), spans)
	}
	s := spans[1]
	if attrs := otlptest.Attrs(s.GetAttributes()); s.GetName() != "b" || len(attrs) != 1 || attrs["mine"] != "b" ||
		len(s.GetEvents()) != 0 || s.GetStatus().GetCode() != 0 {
		t.Fatalf("the next request's span got the late calls: %v", s)
	}
}

// A span in the client's trace keeps the trace flags its traceparent had
// (W3C's random flag, 02) besides the sampling decision, as the SDK's
// spans do: the traceparent sent upstream and the exported span say 03
// (or 02 unsampled), not 01 (00).
func TestSpanKeepsTheTraceFlagsOfTheClientsTraceparent(t *testing.T) {
	for _, tc := range []struct {
		smp  sampler
		tp   string
		want trace.TraceFlags
	}{
		{defaultSampler, "00-" + clientTrace + "-00f067aa0ba902b7-03", 0x03},
		{defaultSampler, "00-" + clientTrace + "-00f067aa0ba902b7-02", 0x02},
		{sampler{none: true}, "00-" + clientTrace + "-00f067aa0ba902b7-03", 0x02},
		{sampler{all: true}, "00-" + clientTrace + "-00f067aa0ba902b7-02", 0x03},
	} {
		tr := testTracer(t, &captureClient{}, 8, tc.smp)
		ctx, server := tr.Start(requestWith(tc.tp), "chat", trace.WithSpanKind(trace.SpanKindServer))
		ctx, attempt := tr.Start(ctx, "chat m", trace.WithSpanKind(trace.SpanKindClient))
		h := http.Header{}
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
		if f := server.SpanContext().TraceFlags(); f != tc.want || attempt.SpanContext().TraceFlags() != tc.want ||
			!strings.HasSuffix(h.Get("Traceparent"), fmt.Sprintf("-%s-%s", attempt.SpanContext().SpanID(), tc.want)) {
			t.Errorf("%+v %s: server flags %s, attempt %s, upstream traceparent %q; want %s", tc.smp, tc.tp, f,
				attempt.SpanContext().TraceFlags(), h.Get("Traceparent"), tc.want)
		}
		attempt.End()
		server.End()
	}
}

// A span that ends while the exporter shuts down (it found the queue open,
// and reached it after the exporter's last look) is counted as dropped,
// not left in the queue unexported and uncounted.
func TestSpanEndingDuringShutdownIsCountedDropped(t *testing.T) {
	c := &captureClient{}
	tr := testTracer(t, c, 8, defaultSampler)
	_, s := tr.Start(context.Background(), "late")
	if err := tr.q.shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr.q.closed.Store(false) // as the span's End saw it, just before the shutdown
	s.End()
	tr.q.closed.Store(true)
	if d, n := tr.q.Dropped(), len(tr.q.ch); d != 1 || n != 0 || len(c.got()) != 0 {
		t.Fatalf("dropped %d, %d left in the queue, %d exported; want 1 dropped", d, n, len(c.got()))
	}
}

// The client's tracestate goes on with its trace (to the spans and the
// upstream request); an invalid traceparent starts a trace of our own,
// decided as a root.
func TestTraceStateCarriesOnAndABadTraceparentStartsARoot(t *testing.T) {
	tr := testTracer(t, &captureClient{}, 8, sampler{parentBased: true, none: true})
	h := http.Header{"Traceparent": {sampledTP}, "Tracestate": {"vendor=x,other=y"}}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(h))
	ctx, server := tr.Start(ctx, "chat", trace.WithSpanKind(trace.SpanKindServer))
	ctx, attempt := tr.Start(ctx, "chat m", trace.WithSpanKind(trace.SpanKindClient))
	out := http.Header{}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(out))
	if server.SpanContext().TraceState().String() != "vendor=x,other=y" || out.Get("Tracestate") != "vendor=x,other=y" || !attempt.IsRecording() {
		t.Fatalf("tracestate %q, upstream %q (recording %v)", server.SpanContext().TraceState(), out.Get("Tracestate"), attempt.IsRecording())
	}
	attempt.End()
	server.End()
	_, bad := tr.Start(requestWith("00-"+clientTrace+"-0000000000000000-01"), "chat", trace.WithSpanKind(trace.SpanKindServer))
	if sc := bad.SpanContext(); !sc.IsValid() || sc.TraceID().String() == clientTrace || sc.IsSampled() || bad.IsRecording() {
		t.Fatalf("a bad traceparent gave %v (recording %v): want a new, unsampled root", sc, bad.IsRecording())
	}
}
