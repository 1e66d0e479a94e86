package telemetry

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// spanExporter is the OTLP exporter of otlptrace with a cheaper encoding
// of the spans: each span is written straight to protobuf wire bytes
// (spanwire.go), into buffers reused batch after batch, and the bytes ride
// in the ScopeSpans message as its unknown fields, which the client's
// proto.Marshal copies verbatim. The receiver reads the same wire format:
// field 2 of ScopeSpans is its repeated Span. The upstream exporter's
// conversion to protobuf objects (three to four per attribute) and their
// reflective marshalling were half of the gateway's tracing CPU, with the
// garbage they left. The client (gRPC or HTTP, configured by the OTEL_*
// variables, with its retries and compression) is the upstream one.
//
// The batch span processor calls ExportSpans from one goroutine, one batch
// at a time; mu keeps that true for any caller. The buffers are reused
// only after UploadTraces returned, when the client holds none of them.
type spanExporter struct {
	client otlptrace.Client

	mu        sync.Mutex
	resources map[attribute.Distinct]*resourcepb.Resource
	scopes    map[instrumentation.Scope]*commonpb.InstrumentationScope
	bufs      [][]byte // the encoded spans of each scope of the last batch
	scratch   []byte   // one span's fields, before its length is known
}

func newSpanExporter(ctx context.Context, client otlptrace.Client) (*spanExporter, error) {
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	return &spanExporter{client: client, resources: map[attribute.Distinct]*resourcepb.Resource{},
		scopes: map[instrumentation.Scope]*commonpb.InstrumentationScope{}}, nil
}

// ExportSpans implements sdktrace.SpanExporter.
func (e *spanExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	rss := e.group(spans)
	if err := e.client.UploadTraces(ctx, rss); err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	return nil
}

// Shutdown implements sdktrace.SpanExporter.
func (e *spanExporter) Shutdown(ctx context.Context) error { return e.client.Stop(ctx) }

// maxKeptBuf bounds a buffer kept for the next batch.
const maxKeptBuf = 4 << 20

// group encodes spans, grouped by resource and instrumentation scope as
// OTLP wants them.
func (e *spanExporter) group(spans []sdktrace.ReadOnlySpan) []*tracepb.ResourceSpans {
	type scopeKey struct {
		res   attribute.Distinct
		scope instrumentation.Scope
	}
	var rss []*tracepb.ResourceSpans
	var keys []scopeKey // of e.bufs[i] in this batch; a batch has one or two
	var scopes []*tracepb.ScopeSpans
	for _, sd := range spans {
		if sd == nil {
			continue
		}
		k := scopeKey{sd.Resource().Equivalent(), sd.InstrumentationScope()}
		i := slices.Index(keys, k)
		if i < 0 {
			i = len(keys)
			keys = append(keys, k)
			ss := &tracepb.ScopeSpans{Scope: e.scope(k.scope), SchemaUrl: k.scope.SchemaURL}
			scopes = append(scopes, ss)
			rss = addScope(rss, e.resource(sd.Resource()), sd.Resource().SchemaURL(), ss)
			if i == len(e.bufs) {
				e.bufs = append(e.bufs, nil)
			}
			e.bufs[i] = e.bufs[i][:0]
		}
		e.scratch = appendSpan(e.scratch[:0], sd)
		b := protowire.AppendTag(e.bufs[i], scopeSpansSpans, protowire.BytesType)
		e.bufs[i] = append(protowire.AppendVarint(b, uint64(len(e.scratch))), e.scratch...)
	}
	for i, ss := range scopes {
		ss.ProtoReflect().SetUnknown(protoreflect.RawFields(e.bufs[i]))
	}
	for i, b := range e.bufs {
		if cap(b) > maxKeptBuf {
			e.bufs[i] = nil // after this batch is sent, let a rare giant go
		}
	}
	return rss
}

// addScope adds ss to the ResourceSpans of res in rss (a new one if res
// has none yet).
func addScope(rss []*tracepb.ResourceSpans, res *resourcepb.Resource, schema string, ss *tracepb.ScopeSpans) []*tracepb.ResourceSpans {
	for _, rs := range rss {
		if rs.Resource == res {
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
			return rss
		}
	}
	return append(rss, &tracepb.ResourceSpans{Resource: res, SchemaUrl: schema, ScopeSpans: []*tracepb.ScopeSpans{ss}})
}

// resource is r as OTLP, converted once per distinct resource.
func (e *spanExporter) resource(r *resource.Resource) *resourcepb.Resource {
	k := r.Equivalent()
	if pb, ok := e.resources[k]; ok {
		return pb
	}
	pb := &resourcepb.Resource{Attributes: newKeyValues(r.Attributes())}
	if len(e.resources) < 64 { // a provider has one; bound it anyway
		e.resources[k] = pb
	}
	return pb
}

// scope is s as OTLP, converted once per scope.
func (e *spanExporter) scope(s instrumentation.Scope) *commonpb.InstrumentationScope {
	if s == (instrumentation.Scope{}) {
		return nil
	}
	if pb, ok := e.scopes[s]; ok {
		return pb
	}
	pb := &commonpb.InstrumentationScope{Name: s.Name, Version: s.Version, Attributes: newKeyValues(s.Attributes.ToSlice())}
	if len(e.scopes) < 64 {
		e.scopes[s] = pb
	}
	return pb
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
func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	if parent.IsRemote() {
		f |= uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	}
	return f
}

func clampUint32(v int) uint32 {
	return uint32(min(max(v, 0), math.MaxUint32)) //nolint:gosec // clamped
}
