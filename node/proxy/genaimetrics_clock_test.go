package proxy

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The gate's time is the wall clock (a request's end): when it steps back
// (NTP, a resumed VM), a series takes an exemplar again at once rather
// than waiting for the clock to pass its last exemplar's time again.
func TestExemplarsResumeAfterTheClockStepsBack(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	vec := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h", Buckets: []float64{10}}, []string{"s"})
	o := vec.WithLabelValues("a")
	var g exemplarGate
	observeAt := func(end time.Time) string {
		rec, trace := sampledRecord(t, tp)
		rec.Start, rec.Latency = end.Add(-time.Second), time.Second
		var ex prometheus.Labels
		g.observe(o, 1, rec, &ex)
		return trace
	}
	now := time.Unix(2_000_000, 0)
	observeAt(now)
	back := observeAt(now.Add(-time.Hour)) // the clock stepped back an hour
	if tr, _ := exemplarOf(t, o); tr != back {
		t.Fatalf("after the clock stepped back: exemplar %q, want the request's %s", tr, back)
	}
	// Requests ending slightly out of order (within the second) still
	// share the series' turn.
	observeAt(now.Add(-time.Hour - 10*time.Millisecond))
	if tr, _ := exemplarOf(t, o); tr != back {
		t.Fatalf("a request ending 10 ms earlier took the exemplar %q, want still %s", tr, back)
	}
}

// Requests of one series ending in the same second on many goroutines at
// once: exactly one of them takes the exemplar.
func TestExemplarGateGivesOneTurnToConcurrentRequests(t *testing.T) {
	vec := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h", Buckets: []float64{10}}, []string{"s"})
	o := vec.WithLabelValues("a")
	var g exemplarGate
	now := time.Unix(3_000_000, 0).UnixNano()
	var turns atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				if g.due(o, now+int64(i*50+j)*int64(time.Microsecond)) {
					turns.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := turns.Load(); n != 1 {
		t.Fatalf("%d exemplars in 400 µs of one series, want 1", n)
	}
}
