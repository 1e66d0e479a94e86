package telemetry

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// waitClient is a captureClient that closes reached once it holds want
// spans.
type waitClient struct {
	captureClient
	want    int
	reached chan struct{}
	once    sync.Once
}

func (c *waitClient) UploadTraces(ctx context.Context, rss []*tracepb.ResourceSpans) error {
	err := c.captureClient.UploadTraces(ctx, rss)
	if len(c.got()) >= c.want {
		c.once.Do(func() { close(c.reached) })
	}
	return err
}

// Spans pushed from many goroutines at once all go out in full batches
// without the delay (an hour here) and in each producer's order; what is
// left below a batch goes at shutdown; none is dropped.
func TestConcurrentProducersLoseNoSpan(t *testing.T) {
	const producers, each, batch = 4, 100, 8
	c := &waitClient{want: producers * each, reached: make(chan struct{})}
	q, err := newSpanQueue(context.Background(), c, queueConfig{size: 1024, batch: batch, delay: time.Hour, timeout: 10 * time.Second},
		stubRes, &commonpb.InstrumentationScope{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				q.push(&span{name: fmt.Sprintf("%d/%03d", p, i)})
			}
		})
	}
	wg.Wait()
	<-c.reached // 400 spans: 50 full batches, no delay needed
	for i := range batch - 1 {
		q.push(&span{name: fmt.Sprintf("late/%d", i)})
	}
	if err := q.shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := c.got()
	if len(got) != producers*each+batch-1 || q.Dropped() != 0 {
		t.Fatalf("exported %d spans, dropped %d; want %d and 0", len(got), q.Dropped(), producers*each+batch-1)
	}
	last := map[byte]string{}
	for _, s := range got {
		k := s.GetName()[0]
		if s.GetName() <= last[k] {
			t.Fatalf("%s after %s: a producer's spans out of order", s.GetName(), last[k])
		}
		last[k] = s.GetName()
	}
}
