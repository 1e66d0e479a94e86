package telemetry

import (
	"testing"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
)

// With a queue no larger than a batch (OTEL_BSP_MAX_QUEUE_SIZE below
// OTEL_BSP_MAX_EXPORT_BATCH_SIZE makes them equal), the exporter is woken
// while the queue still has room, by half a queue, and takes those spans:
// woken only once the queue is full, every span ended until it ran would
// be dropped. (The test plays the exporter.)
func TestSmallQueueWakesTheExporterBeforeItIsFull(t *testing.T) {
	c := &captureClient{}
	q := &spanQueue{ch: make(chan *span, 4), full: make(chan struct{}, 1), done: make(chan struct{}), client: c, batch: 4,
		timeout: time.Minute, resource: &resourcepb.Resource{}, scope: &commonpb.InstrumentationScope{Name: "t"}}
	q.push(&span{name: "1"})
	q.push(&span{name: "2"})
	if len(q.full) != 1 {
		t.Fatal("half a full queue did not wake the exporter")
	}
	<-q.full
	q.exportQueued(nil, true)
	if got := len(c.got()); got != 2 || len(q.ch) != 0 {
		t.Fatalf("woken: exported %d spans, %d left; want 2 and none", got, len(q.ch))
	}
}
