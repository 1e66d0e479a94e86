package telemetry

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
)

// A resource larger than the span buffer's first size (attributes from
// OTEL_RESOURCE_ATTRIBUTES can be) is exported with its spans, the
// buffer made large enough for the request's framing.
func TestLargeResourceIsExportedWithItsSpans(t *testing.T) {
	res := resource.NewSchemaless(attribute.String("service.name", "tollgate"), attribute.String("big", strings.Repeat("r", 70<<10)))
	c := &captureClient{}
	q, err := newSpanQueue(context.Background(), c, queueConfig{size: 4, batch: 4, delay: time.Hour, timeout: 10 * time.Second},
		res, &commonpb.InstrumentationScope{Name: ScopeName})
	if err != nil {
		t.Fatal(err)
	}
	for _, sd := range stubSpans(2) {
		q.push(recordOf(sd))
	}
	if err := q.shutdown(context.Background()); err != nil { // exports what is queued
		t.Fatal(err)
	}
	if got := len(c.got()); got != 2 {
		t.Fatalf("%d spans exported, want 2", got)
	}
}
