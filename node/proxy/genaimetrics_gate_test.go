package proxy

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// sampledRecord is a record whose span is sampled, and its trace id.
func sampledRecord(t *testing.T, tp *sdktrace.TracerProvider) (*Record, string) {
	t.Helper()
	_, span := tp.Tracer("t").Start(context.Background(), "r")
	t.Cleanup(func() { span.End() })
	return &Record{span: span}, span.SpanContext().TraceID().String()
}

// exemplarOf returns the trace id of the exemplar of o's one non-empty
// bucket ("" for none) and o's count.
func exemplarOf(t *testing.T, o prometheus.Observer) (string, uint64) {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	trace := ""
	for _, b := range m.GetHistogram().GetBucket() {
		for _, lp := range b.GetExemplar().GetLabel() {
			if lp.GetName() == "trace_id" {
				trace = lp.GetValue()
			}
		}
	}
	return trace, m.GetHistogram().GetSampleCount()
}

// A series takes a sampled request's trace as exemplar at most once a
// second: the observations in between count without one (the bucket keeps
// the last exemplar), each series has its own second, and a request that
// is not sampled does not use up the series' turn. The time is the
// request's end.
func TestExemplarsAtMostOncePerSecondPerSeries(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	vec := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h", Buckets: []float64{10}}, []string{"s"})
	a, b := vec.WithLabelValues("a"), vec.WithLabelValues("b")
	now := time.Unix(1000, 0)
	var g exemplarGate
	observe := func(o prometheus.Observer, rec *Record) {
		rec.Start, rec.Latency = now.Add(-time.Second), time.Second // it ends now
		var ex prometheus.Labels
		g.observe(o, 1, rec, &ex)
	}

	observe(a, &Record{}) // not traced
	first, firstTrace := sampledRecord(t, tp)
	observe(a, first)
	if tr, n := exemplarOf(t, a); tr != firstTrace || n != 2 {
		t.Fatalf("series a: exemplar %q count %d, want the first sampled request's %s and 2", tr, n, firstTrace)
	}
	now = now.Add(999 * time.Millisecond)
	second, secondTrace := sampledRecord(t, tp)
	observe(a, second)
	if tr, n := exemplarOf(t, a); tr != firstTrace || n != 3 {
		t.Errorf("series a within the second: exemplar %q count %d, want still %s and 3", tr, n, firstTrace)
	}
	observe(b, second)
	if tr, _ := exemplarOf(t, b); tr != secondTrace {
		t.Errorf("series b: exemplar %q, want %s (its own second)", tr, secondTrace)
	}
	now = now.Add(time.Millisecond)
	third, thirdTrace := sampledRecord(t, tp)
	observe(a, third)
	if tr, n := exemplarOf(t, a); tr != thirdTrace || n != 4 {
		t.Errorf("series a a second later: exemplar %q count %d, want %s and 4", tr, n, thirdTrace)
	}
}

// The gate notes at most maxExemplarSeries series: one more makes it
// forget them all, and a forgotten series takes the next sampled
// request's trace at once, even within its second.
func TestExemplarGateForgetsItsSeriesPastItsBound(t *testing.T) {
	var g exemplarGate
	vec := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h", Buckets: []float64{10}}, []string{"s"})
	series := func(i int) prometheus.Observer { return vec.WithLabelValues(strconv.Itoa(i)) }
	now := time.Unix(1000, 0).UnixNano()
	for i := range maxExemplarSeries {
		if !g.due(series(i), now) {
			t.Fatalf("series %d: no exemplar for its first observation", i)
		}
	}
	if n := g.noted(); n != maxExemplarSeries {
		t.Fatalf("%d series noted, want %d", n, maxExemplarSeries)
	}
	if g.due(series(0), now+1) {
		t.Fatal("series 0 within its second: an exemplar again")
	}
	if !g.due(series(maxExemplarSeries), now+2) {
		t.Fatal("one series more: no exemplar for its first observation")
	}
	if n := g.noted(); n != 1 {
		t.Fatalf("%d series noted after one past the bound, want 1 (the others forgotten)", n)
	}
	if !g.due(series(0), now+3) {
		t.Error("series 0 once forgotten: no exemplar, want one at once")
	}
}

// noted counts the series g notes.
func (g *exemplarGate) noted() int {
	n := 0
	g.last.Range(func(any, any) bool { n++; return true })
	return n
}
