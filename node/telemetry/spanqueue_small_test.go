package telemetry

import "testing"

// With a queue no larger than a batch (OTEL_BSP_MAX_QUEUE_SIZE below
// OTEL_BSP_MAX_EXPORT_BATCH_SIZE makes them equal), the exporter is woken
// while the queue still has room, by half a queue, and takes those spans:
// woken only once the queue is full, every span ended until it ran would
// be dropped. (The test plays the exporter.)
func TestSmallQueueWakesTheExporterBeforeItIsFull(t *testing.T) {
	c := &captureClient{}
	q := idleQueue(c, 4, 4)
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
