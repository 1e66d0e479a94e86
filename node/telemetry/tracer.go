package telemetry

import (
	"context"
	"math/rand/v2"
	"sync"
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
	s := &span{t: t, sc: sc.WithTraceFlags(sc.TraceFlags() | trace.FlagsSampled), parent: parent, name: name}
	s.kind = trace.ValidateSpanKind(cfg.SpanKind()) // unspecified: internal, as the SDK
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
	t          *Tracer
	sc, parent trace.SpanContext
	name       string
	kind       trace.SpanKind
	start, end time.Time
	attrs      []attribute.KeyValue
	buf        *attrBuf   // where attrs came from
	src        AttrSource // further attributes, written by the exporter
	events     []sdktrace.Event
	links      []sdktrace.Link
	status     sdktrace.Status
	ended      bool // set by End, never by the exporter: a late call reads it safely
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
	clear(s.attrs)
	if b := s.buf; b != nil && cap(s.attrs) <= maxKeptAttrs {
		b.kv = s.attrs[:0]
		attrBufs.Put(b)
	}
	s.attrs, s.buf, s.src, s.events, s.links = nil, nil, nil, nil, nil
}

// End implements trace.Span: the span goes to the exporter's queue.
func (s *span) End(opts ...trace.SpanEndOption) {
	if s.ended {
		return
	}
	s.ended = true
	if len(opts) > 0 {
		c := trace.NewSpanEndConfig(opts...)
		s.end = c.Timestamp()
	}
	if s.end.IsZero() {
		s.end = time.Now()
	}
	s.t.q.push(s)
}

// AddEvent implements trace.Span.
func (s *span) AddEvent(name string, opts ...trace.EventOption) {
	if s.ended {
		return
	}
	c := trace.NewEventConfig(opts...)
	s.events = append(s.events, sdktrace.Event{Name: name, Attributes: c.Attributes(), Time: c.Timestamp()})
}

// AddLink implements trace.Span.
func (s *span) AddLink(l trace.Link) {
	if !s.ended && l.SpanContext.IsValid() {
		s.links = append(s.links, sdktrace.Link{SpanContext: l.SpanContext, Attributes: l.Attributes})
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
	if s.ended || s.status.Code == codes.Ok || code < s.status.Code {
		return
	}
	if code != codes.Error {
		description = ""
	}
	s.status = sdktrace.Status{Code: code, Description: description}
}

// SetAttributes implements trace.Span: appended (the data plane sets each
// attribute once), invalid ones left out. The pooled slice is taken only
// then: a span whose attributes come from an AttrSource needs none.
func (s *span) SetAttributes(kv ...attribute.KeyValue) {
	if s.ended || len(kv) == 0 {
		return
	}
	if s.buf == nil {
		s.buf = attrBufs.Get().(*attrBuf)
		s.attrs = s.buf.kv[:0]
	}
	for _, a := range kv {
		if a.Valid() {
			s.attrs = append(s.attrs, a)
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
