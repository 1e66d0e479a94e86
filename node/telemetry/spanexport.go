package telemetry

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// spanQueue takes ended spans from the data plane and exports them in
// batches from a goroutine of its own, as the SDK's batch span processor
// would: OTEL_BSP_MAX_QUEUE_SIZE spans wait at most (a span that finds the
// queue full is dropped and counted, never waited for), a batch goes when
// it has OTEL_BSP_MAX_EXPORT_BATCH_SIZE spans or OTEL_BSP_SCHEDULE_DELAY
// after the last, each export within OTEL_BSP_EXPORT_TIMEOUT.
//
// An export writes each span straight to protobuf wire bytes (spanwire.go)
// into a buffer reused batch after batch. Over HTTP the queue frames the
// whole request around them in place and httpExporter posts it
// (otlphttp.go: the OTEL_EXPORTER_OTLP_* variables, retries and
// compression as the upstream client's). Over gRPC the bytes ride in the
// ScopeSpans message as its unknown fields (field 2 of ScopeSpans is its
// repeated Span), which the upstream client's proto.Marshal copies.
type spanQueue struct {
	ch chan *span
	// full wakes the exporter when wakeAt spans are queued: a span is queued
	// without waking it (a wake-up per span cost the data plane more than
	// the span's encoding), and the exporter takes the queued spans when
	// a batch is full or the delay is up.
	full    chan struct{}
	dropped atomic.Uint64
	closed  atomic.Bool
	stop    chan struct{}
	done    chan struct{}

	client         otlptrace.Client
	batch          int
	delay, timeout time.Duration
	resource       *resourcepb.Resource
	resourceSchema string
	scope          *commonpb.InstrumentationScope
	buf, scratch   []byte // the encoded spans of the last batch, one span
	pre            []byte // a request's framing
	framing
	wire wireAttrs
}

// queueConfig is the batching the OTEL_BSP_* variables ask for.
type queueConfig struct {
	size, batch    int
	delay, timeout time.Duration
}

// DefaultSpanQueue is the span queue unless OTEL_BSP_MAX_QUEUE_SIZE says
// otherwise: at 10,000 requests a second of two spans each, about 400 ms
// of spans (the SDK's 2,048 is 100 ms).
const DefaultSpanQueue = 8192

// queueConfigFrom reads the OTEL_BSP_* variables with the SDK's defaults
// (but DefaultSpanQueue); a bad value keeps the default, and is reported.
func queueConfigFrom(getenv func(string) string) (queueConfig, error) {
	c := queueConfig{size: DefaultSpanQueue, batch: 512, delay: 5 * time.Second, timeout: 30 * time.Second}
	var errs []error
	intVar := func(name string, into *int) {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				errs = append(errs, fmt.Errorf("%s=%q: want a positive integer", name, v))
				return
			}
			*into = n
		}
	}
	var delay, timeout int
	intVar("OTEL_BSP_MAX_QUEUE_SIZE", &c.size)
	intVar("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", &c.batch)
	intVar("OTEL_BSP_SCHEDULE_DELAY", &delay)
	intVar("OTEL_BSP_EXPORT_TIMEOUT", &timeout)
	if delay > 0 {
		c.delay = time.Duration(delay) * time.Millisecond
	}
	if timeout > 0 {
		c.timeout = time.Duration(timeout) * time.Millisecond
	}
	c.batch = min(c.batch, c.size) // as the SDK
	return c, errors.Join(errs...)
}

// newSpanQueue starts client and the exporting goroutine.
func newSpanQueue(ctx context.Context, client otlptrace.Client, c queueConfig, res *resource.Resource, scope *commonpb.InstrumentationScope) (*spanQueue, error) {
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	q := &spanQueue{ch: make(chan *span, c.size), full: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		client: client, batch: c.batch, delay: c.delay, timeout: c.timeout, scope: scope,
		resource: &resourcepb.Resource{Attributes: newKeyValues(res.Attributes())}, resourceSchema: res.SchemaURL()}
	q.framing = newFraming(q.resource, q.resourceSchema, scope)
	go q.run()
	return q, nil
}

// push hands an ended span to the exporter, or drops it when the queue is
// full or shut down.
func (q *spanQueue) push(s *span) {
	if !q.closed.Load() {
		select {
		case q.ch <- s:
			if len(q.ch) >= q.wakeAt() {
				select {
				case q.full <- struct{}{}:
				default: // already woken
				}
			}
			select {
			case <-q.done: // shut down after the look at closed: none will export it
				q.dropLeft()
			default:
			}
			return
		default:
		}
	}
	q.dropped.Add(1)
	s.release()
}

// dropLeft counts as dropped what is left in the queue once the exporter
// stopped.
func (q *spanQueue) dropLeft() {
	for {
		select {
		case s := <-q.ch:
			q.dropped.Add(1)
			s.release()
		default:
			return
		}
	}
}

// Dropped is how many spans were dropped because the queue was full (or
// the exporter shut down).
func (q *spanQueue) Dropped() uint64 { return q.dropped.Load() }

func (q *spanQueue) run() {
	defer close(q.done)
	batch := make([]*span, 0, q.batch)
	tick := time.NewTimer(q.delay)
	defer tick.Stop()
	for {
		select {
		case <-q.full:
			batch = q.exportQueued(batch, true)
			tick.Reset(q.delay)
		case <-tick.C:
			batch = q.exportQueued(batch, false)
			tick.Reset(q.delay)
		case <-q.stop:
			q.drain(batch)
			return
		}
	}
}

// wakeAt is how many queued spans wake the exporter: a batch, or half
// the queue when that is less, so that a queue no larger than a batch
// still has room for the spans ended until the exporter runs.
func (q *spanQueue) wakeAt() int { return max(1, min(q.batch, cap(q.ch)/2)) }

// exportQueued exports the spans queued when it begins, in batches: only
// ones of at least wakeAt spans when fullOnly (the rest wait for the next
// wake-up or the delay). batch is empty, and returned so.
func (q *spanQueue) exportQueued(batch []*span, fullOnly bool) []*span {
	for n := len(q.ch); n > 0 && (!fullOnly || n >= q.wakeAt()); {
		for range min(n, q.batch) {
			batch = append(batch, <-q.ch)
		}
		n -= len(batch)
		batch = q.export(batch)
	}
	return batch
}

// drain exports what is queued, at shutdown.
func (q *spanQueue) drain(batch []*span) {
	for {
		select {
		case s := <-q.ch:
			if batch = append(batch, s); len(batch) >= q.batch {
				batch = q.export(batch)
			}
		default:
			q.export(batch)
			return
		}
	}
}

// maxKeptBuf bounds the buffer kept for the next batch.
const maxKeptBuf = 4 << 20

// poster is a client that sends a batch as the bytes of its
// ExportTraceServiceRequest (httpExporter): the span queue writes them
// whole, the spans in place, instead of handing the client messages that
// it marshals into bytes again.
type poster interface {
	post(ctx context.Context, body []byte) error
}

// export encodes batch, releases its spans and uploads them; it returns
// batch emptied. The spans are written after q.head bytes left for the
// request's framing (frame).
func (q *spanQueue) export(batch []*span) []*span {
	if len(batch) == 0 {
		return batch
	}
	if cap(q.buf) < q.head {
		q.buf = make([]byte, q.head, max(q.head, 64<<10))
	}
	b := q.buf[:q.head]
	for i, s := range batch {
		q.scratch = appendSpan(&q.wire, q.scratch[:0], s)
		b = protowire.AppendTag(b, scopeSpansSpans, protowire.BytesType)
		b = append(protowire.AppendVarint(b, uint64(len(q.scratch))), q.scratch...)
		s.release()
		batch[i] = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	defer cancel()
	var err error
	if p, ok := q.client.(poster); ok {
		err = p.post(ctx, q.frame(&b))
	} else {
		ss := &tracepb.ScopeSpans{Scope: q.scope}
		ss.ProtoReflect().SetUnknown(protoreflect.RawFields(b[q.head:]))
		err = q.client.UploadTraces(ctx, []*tracepb.ResourceSpans{{Resource: q.resource, SchemaUrl: q.resourceSchema, ScopeSpans: []*tracepb.ScopeSpans{ss}}})
	}
	if err != nil {
		otel.Handle(fmt.Errorf("traces export: %w", err))
	}
	if cap(b) <= maxKeptBuf {
		q.buf = b // the client holds none of it once it returned
	}
	if cap(q.scratch) > maxKeptBuf {
		q.scratch = nil
	}
	return batch[:0]
}

// framing is what an ExportTraceServiceRequest of one ResourceSpans of
// one ScopeSpans holds besides its spans, encoded once as proto.Marshal
// writes it: the resource and scope fields before the spans, the schema
// after.
type framing struct {
	resourceField, scopeField, schemaField []byte
	head                                   int // room for the framing before the spans
}

func newFraming(res *resourcepb.Resource, schema string, scope *commonpb.InstrumentationScope) framing {
	f := framing{resourceField: mustMarshal(&tracepb.ResourceSpans{Resource: res}), scopeField: mustMarshal(&tracepb.ScopeSpans{Scope: scope}),
		schemaField: mustMarshal(&tracepb.ResourceSpans{SchemaUrl: schema})}
	f.head = 2*(1+binary.MaxVarintLen64) + len(f.resourceField) + len(f.scopeField)
	return f
}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err) // messages made here, of valid strings
	}
	return b
}

// frame writes the request's framing around the spans *b holds after
// q.head bytes, and returns the request: the end of that room and the
// spans, which stay where they are.
func (q *spanQueue) frame(b *[]byte) []byte {
	spans := len(*b) - q.head
	ss := len(q.scopeField) + spans
	rs := len(q.resourceField) + 1 + protowire.SizeVarint(uint64(ss)) + ss + len(q.schemaField)
	pre := protowire.AppendVarint(append(q.pre[:0], 0x0a), uint64(rs)) // resource_spans = 1
	pre = append(pre, q.resourceField...)
	pre = protowire.AppendVarint(append(pre, 0x12), uint64(ss)) // scope_spans = 2
	pre = append(pre, q.scopeField...)
	q.pre = pre
	start := q.head - len(pre)
	copy((*b)[start:], pre)
	*b = append(*b, q.schemaField...)
	return (*b)[start:]
}

// shutdown exports what is queued and stops the client, within ctx.
func (q *spanQueue) shutdown(ctx context.Context) error {
	if q.closed.Swap(true) {
		return nil
	}
	close(q.stop)
	select {
	case <-q.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	q.dropLeft() // pushed while the exporter drained
	return q.client.Stop(ctx)
}

func statusCode(c codes.Code) tracepb.Status_StatusCode {
	switch c {
	case codes.Ok:
		return tracepb.Status_STATUS_CODE_OK
	case codes.Error:
		return tracepb.Status_STATUS_CODE_ERROR
	}
	return tracepb.Status_STATUS_CODE_UNSET
}

// spanFlags are the W3C trace flags plus whether the parent is remote.
func spanFlags(tf trace.TraceFlags, remoteParent bool) uint32 {
	f := uint32(tf) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	if remoteParent {
		f |= uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	}
	return f
}
