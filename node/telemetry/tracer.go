package telemetry

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// Tracer records the data plane's spans without the SDK: a span is a
// record taken from a pool, filled in place (its attributes appended to a
// slice the record keeps), and handed when it ends to the exporter's
// bounded queue, which drops and counts when full and never blocks; the
// exporter encodes it to OTLP protobuf in the background and puts it back
// in the pool. The sampling decision (OTEL_TRACES_SAMPLER) is taken at the
// server span; the spans of an unsampled trace are not recorded, only
// propagated.
//
// As with the SDK, a span may still be used after End: every call is
// then a no-op but SpanContext, which stays the span's own.
type Tracer struct {
	embedded.Tracer
	sampler sampler
	q       *spanQueue
}

// provider is the TracerProvider of a Tracer's spans: every tracer it
// gives is that one.
type provider struct {
	embedded.TracerProvider
	t *Tracer
}

// Tracer implements trace.TracerProvider.
func (p provider) Tracer(string, ...trace.TracerOption) trace.Tracer { return p.t }

// Start implements trace.Tracer.
func (t *Tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := trace.SpanContextFromContext(ctx)
	cfg := trace.NewSpanStartConfig(opts...)
	if cfg.NewRoot() {
		parent = trace.SpanContext{}
	}
	sc := newSpanContext(parent)
	if !t.sampler.sampled(parent, sc.TraceID()) {
		ctx = trace.ContextWithSpanContext(ctx, sc.WithTraceFlags(sc.TraceFlags()&^trace.FlagsSampled)) // propagated, not recorded
		return ctx, trace.SpanFromContext(ctx)
	}
	s := &span{t: t, sc: sc.WithTraceFlags(sc.TraceFlags() | trace.FlagsSampled), parentID: parent.SpanID(),
		parentRemote: parent.IsRemote(), name: name}
	s.kind = uint8(trace.ValidateSpanKind(cfg.SpanKind())) // unspecified: internal, as the SDK
	if s.start = cfg.Timestamp(); s.start.IsZero() {
		s.start = time.Now()
	}
	s.SetAttributes(cfg.Attributes()...)
	for _, l := range cfg.Links() {
		s.AddLink(l)
	}
	return trace.ContextWithSpan(ctx, s), s
}

// newSpanContext is a new span's context: a fresh span id, in parent's
// trace (with its trace state and flags, as the SDK's: the sampled flag
// is then set or cleared by the decision) or a new one.
func newSpanContext(parent trace.SpanContext) trace.SpanContext {
	c := trace.SpanContextConfig{TraceID: parent.TraceID(), TraceState: parent.TraceState(), TraceFlags: parent.TraceFlags()}
	if !parent.IsValid() {
		c.TraceID, c.TraceState, c.TraceFlags = newTraceID(), trace.TraceState{}, 0
	}
	for !c.SpanID.IsValid() {
		putUint64(c.SpanID[:], rand.Uint64()) // the runtime's per-thread generator: no lock
	}
	return trace.NewSpanContext(c)
}

func newTraceID() trace.TraceID {
	var id trace.TraceID
	for !id.IsValid() {
		putUint64(id[:8], rand.Uint64())
		putUint64(id[8:], rand.Uint64())
	}
	return id
}

func putUint64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (56 - 8*i))
	}
}

// span is one recorded span: what the OTLP Span message says. Its
// attributes (if any are set) are appended to a slice taken from a pool,
// which the exporter puts back once it has encoded the span; the span
// itself is not reused, so that a caller still holding it after End (End
// again, SpanContext, as the SDK allows) touches only its own, ended span.
type span struct {
	embedded.Span
	t        *Tracer
	sc       trace.SpanContext
	parentID trace.SpanID
	name     string
	start    time.Time
	dur      time.Duration // from start to end, on the monotonic clock
	src      AttrSource    // attributes written by the exporter
	x        *spanExtra    // what the data plane's spans rarely have
	code     codes.Code
	kind     uint8 // a trace.SpanKind
	// parentRemote: the parent came from a traceparent. ended is set by
	// End, never by the exporter: a late call reads it safely.
	parentRemote, ended bool
	ending              atomic.Bool // End began: set once, by the one End that runs
}

// spanExtra is what a span holds besides its own fields, made on first
// use: a span that has none of it (the data plane's, but for a failed
// attempt's status or a retry's event) is less than half the size.
type spanExtra struct {
	attrs  []attribute.KeyValue
	buf    *attrBuf // where attrs came from
	events []sdktrace.Event
	links  []sdktrace.Link
	desc   string // the status's description
}

// extra returns s's extra fields, made if need be.
func (s *span) extra() *spanExtra {
	if s.x == nil {
		s.x = new(spanExtra)
	}
	return s.x
}

// attrBuf holds a pooled attribute slice.
type attrBuf struct{ kv []attribute.KeyValue }

var attrBufs = sync.Pool{New: func() any { return &attrBuf{kv: make([]attribute.KeyValue, 0, 32)} }}

// maxKeptAttrs bounds the attribute slice put back in the pool.
const maxKeptAttrs = 128

// release puts the ended s's attribute slice back in the pool, cleared
// (its strings go to the collector), and lets go of its events and links.
// Only the exporter (or a dropping push) calls it, once.
func (s *span) release() {
	if x := s.x; x != nil {
		clear(x.attrs)
		if b := x.buf; b != nil && cap(x.attrs) <= maxKeptAttrs {
			b.kv = x.attrs[:0]
			attrBufs.Put(b)
		}
		s.x = nil
	}
	s.src = nil
}

// End implements trace.Span: the span goes to the exporter's queue.
// Only its first call does, whichever goroutines call it.
func (s *span) End(opts ...trace.SpanEndOption) {
	if !s.ending.CompareAndSwap(false, true) {
		return
	}
	s.ended = true
	var end time.Time
	if len(opts) > 0 {
		c := trace.NewSpanEndConfig(opts...)
		end = c.Timestamp()
	}
	if end.IsZero() {
		end = time.Now()
	}
	s.dur = end.Sub(s.start)
	s.t.q.push(s)
}

// AddEvent implements trace.Span.
func (s *span) AddEvent(name string, opts ...trace.EventOption) {
	if s.ended {
		return
	}
	c := trace.NewEventConfig(opts...)
	x := s.extra()
	x.events = append(x.events, sdktrace.Event{Name: name, Attributes: c.Attributes(), Time: c.Timestamp()})
}

// AddLink implements trace.Span.
func (s *span) AddLink(l trace.Link) {
	if !s.ended && l.SpanContext.IsValid() {
		x := s.extra()
		x.links = append(x.links, sdktrace.Link{SpanContext: l.SpanContext, Attributes: l.Attributes})
	}
}

// RecordError implements trace.Span as the SDK does: an "exception" event.
func (s *span) RecordError(err error, opts ...trace.EventOption) {
	if err == nil || s.ended {
		return
	}
	opts = append(opts, trace.WithAttributes(attribute.String("exception.message", err.Error())))
	s.AddEvent("exception", opts...)
}

// SetStatus implements trace.Span with the SDK's rules: Ok is final, a
// description only goes with Error.
func (s *span) SetStatus(code codes.Code, description string) {
	if s.ended || s.code == codes.Ok || code < s.code {
		return
	}
	if code != codes.Error {
		description = ""
	}
	s.code = code
	if description != "" || s.x != nil {
		s.extra().desc = description
	}
}

// SetAttributes implements trace.Span: appended (the data plane sets each
// attribute once), invalid ones left out. The pooled slice is taken only
// then: a span whose attributes come from an AttrSource needs none.
func (s *span) SetAttributes(kv ...attribute.KeyValue) {
	if s.ended || len(kv) == 0 {
		return
	}
	x := s.extra()
	if x.buf == nil {
		x.buf = attrBufs.Get().(*attrBuf)
		x.attrs = x.buf.kv[:0]
	}
	for _, a := range kv {
		if a.Valid() {
			x.attrs = append(x.attrs, a)
		}
	}
}

// SetName implements trace.Span.
func (s *span) SetName(name string) {
	if !s.ended {
		s.name = name
	}
}

// IsRecording implements trace.Span.
func (s *span) IsRecording() bool { return !s.ended }

// SpanContext implements trace.Span.
func (s *span) SpanContext() trace.SpanContext { return s.sc }

// TracerProvider implements trace.Span.
func (s *span) TracerProvider() trace.TracerProvider { return provider{t: s.t} }
