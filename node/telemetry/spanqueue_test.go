package telemetry

import (
	"fmt"
	"testing"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
)

// A span queued does not wake the exporter; a full batch of them does,
// once however many more arrive before it runs. Woken so, the exporter
// takes only full batches; the rest wait for another batch or the delay,
// which takes them all. (The queue here has no exporter goroutine: the
// test plays it.)
func TestQueueWakesTheExporterOncePerFullBatch(t *testing.T) {
	c := &captureClient{}
	q := idleQueue(c, 16, 3)
	n := 0
	push := func(k int) {
		for range k {
			n++
			q.push(&span{name: fmt.Sprint(n)})
		}
	}
	push(2)
	if len(q.full) != 0 {
		t.Fatal("two spans of a batch of three woke the exporter")
	}
	push(1)
	if len(q.full) != 1 {
		t.Fatal("a full batch did not wake the exporter")
	}
	push(4)
	if len(q.full) != 1 || q.Dropped() != 0 {
		t.Fatalf("more spans: wake-ups %d, dropped %d; want 1 and 0", len(q.full), q.Dropped())
	}
	<-q.full
	q.exportQueued(nil, true)
	if got := len(c.got()); got != 6 || len(q.ch) != 1 {
		t.Fatalf("woken: exported %d spans, %d left; want two batches (6) and 1 left", got, len(q.ch))
	}
	q.exportQueued(nil, false) // the delay is up
	var names []string
	for _, s := range c.got() {
		names = append(names, s.GetName())
	}
	if fmt.Sprint(names) != "[1 2 3 4 5 6 7]" {
		t.Fatalf("exported %v, want every span once, in order", names)
	}
}

// idleQueue is a span queue of size spans sending batches of batch to c,
// without its exporter goroutine (the test plays it).
func idleQueue(c *captureClient, size, batch int) *spanQueue {
	return &spanQueue{ch: make(chan *span, size), full: make(chan struct{}, 1), done: make(chan struct{}), client: c, batch: batch,
		timeout: time.Minute, resource: &resourcepb.Resource{}, scope: &commonpb.InstrumentationScope{Name: "t"}}
}
