package telemetry

import (
	"bytes"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The OTLP protobuf field numbers written here
// (opentelemetry/proto/trace/v1/trace.proto, common/v1/common.proto).
const (
	scopeSpansSpans protowire.Number = 2

	spanTraceID, spanSpanID, spanTraceState, spanParentSpanID, spanName, spanKind = 1, 2, 3, 4, 5, 6
	spanStart, spanEnd, spanAttributes, spanDroppedAttributes                     = 7, 8, 9, 10
	spanEvents, spanDroppedEvents, spanLinks, spanDroppedLinks, spanStatus        = 11, 12, 13, 14, 15
	spanFlagsField                                                                = 16

	eventTime, eventName, eventAttributes, eventDroppedAttributes = 1, 2, 3, 4

	linkTraceID, linkSpanID, linkTraceState, linkAttributes, linkDroppedAttributes, linkFlags = 1, 2, 3, 4, 5, 6

	statusMessage, statusCodeField = 2, 3

	kvKey, kvValue = 1, 2

	anyString, anyBool, anyInt, anyDouble, anyArray, anyKvlist, anyBytes = 1, 2, 3, 4, 5, 6, 7

	listValues = 1 // ArrayValue.values and KeyValueList.values
)

// appendSpan appends the fields of s as an OTLP Span message, as
// proto.Marshal writes the upstream exporter's conversion of the SDK's
// span: scalar fields at their zero value are left out, the status is
// always there. Nothing is dropped: no dropped counts. The span's
// attribute source writes through w (b lent to it, taken back).
func appendSpan(w *wireAttrs, b []byte, s *span) []byte {
	sc := s.sc
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytesField(b, spanTraceID, tid[:])
	b = appendBytesField(b, spanSpanID, sid[:])
	if ts := sc.TraceState(); ts.Len() > 0 {
		b = appendStringField(b, spanTraceState, ts.String())
	}
	if p := s.parentID; p.IsValid() {
		b = appendBytesField(b, spanParentSpanID, p[:])
	}
	b = appendStringField(b, spanName, s.name)
	if k := trace.SpanKind(s.kind); k >= trace.SpanKindInternal && k <= trace.SpanKindConsumer {
		b = appendVarintField(b, spanKind, uint64(k)) // the enums agree: 1 internal ... 5 consumer
	}
	b = appendFixed64Field(b, spanStart, unixNano(s.start.UnixNano()))
	b = appendFixed64Field(b, spanEnd, unixNano(s.start.UnixNano()+int64(s.dur)))
	x := s.x
	if x == nil {
		x = &noExtra
	}
	b = appendKeyValues(b, spanAttributes, x.attrs)
	if s.src != nil {
		w.b, w.num = b, spanAttributes
		s.src.WriteAttrs(w)
		b, w.b = w.b, nil
	}
	var at int
	for _, ev := range x.events {
		b, at = beginMsg(b, spanEvents)
		b = appendFixed64Field(b, eventTime, unixNano(ev.Time.UnixNano()))
		b = appendStringField(b, eventName, ev.Name)
		b = appendKeyValues(b, eventAttributes, ev.Attributes)
		b = endMsg(b, at)
	}
	for _, l := range x.links {
		b, at = beginMsg(b, spanLinks)
		b = appendLink(b, l)
		b = endMsg(b, at)
	}
	b, at = beginMsg(b, spanStatus)
	b = appendStringField(b, statusMessage, x.desc)
	b = appendVarintField(b, statusCodeField, uint64(statusCode(s.code)))
	b = endMsg(b, at)
	b = protowire.AppendTag(b, spanFlagsField, protowire.Fixed32Type) // never 0: it has the has-is-remote bit
	return protowire.AppendFixed32(b, spanFlags(sc.TraceFlags(), s.parentRemote))
}

// noExtra stands for a span's extra fields when it has none.
var noExtra spanExtra

func unixNano(n int64) uint64 { return uint64(max(0, n)) }

// beginMsg appends the tag of a message field num and one byte for its
// length, and returns where that byte is, for endMsg.
func beginMsg(b []byte, num protowire.Number) ([]byte, int) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return append(b, 0), len(b)
}

// endMsg writes the length of the message that began at the length byte at:
// in place when it is under 128 bytes (most), else moving the message to
// make room for a longer varint. One pass, no size computed beforehand.
func endMsg(b []byte, at int) []byte {
	n := len(b) - at - 1
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	k := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, k-1)...)
	copy(b[at+k:], b[at+1:at+1+n])
	protowire.AppendVarint(b[at:at], uint64(n))
	return b
}

func appendLink(b []byte, l sdktrace.Link) []byte {
	tid, sid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
	b = appendBytesField(b, linkTraceID, tid[:])
	b = appendBytesField(b, linkSpanID, sid[:])
	b = appendStringField(b, linkTraceState, l.SpanContext.TraceState().String())
	b = appendKeyValues(b, linkAttributes, l.Attributes)
	b = protowire.AppendTag(b, linkFlags, protowire.Fixed32Type) // never 0: it has the has-is-remote bit
	return protowire.AppendFixed32(b, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext.IsRemote()))
}

// appendKeyValues appends attrs as repeated KeyValue messages of field num.
func appendKeyValues(b []byte, num protowire.Number, attrs []attribute.KeyValue) []byte {
	var at, vat int
	for _, kv := range attrs {
		b, at = beginMsg(b, num)
		b = appendStringField(b, kvKey, string(kv.Key))
		b, vat = beginMsg(b, kvValue)
		b = appendValue(b, kv.Value)
		b = endMsg(b, vat)
		b = endMsg(b, at)
	}
	return b
}

// appendValue appends the one-of member of v's AnyValue: written even at
// its zero value, as one-of members are.
func appendValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		b = protowire.AppendTag(b, anyBool, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = protowire.AppendTag(b, anyInt, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = protowire.AppendTag(b, anyDouble, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		return appendAnyString(b, v.AsString())
	case attribute.BYTESLICE:
		b = protowire.AppendTag(b, anyBytes, protowire.BytesType)
		return protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.MAP:
		b, at := beginMsg(b, anyKvlist)
		return endMsg(appendKeyValues(b, listValues, v.AsMap()), at)
	}
	switch v.Type() {
	case attribute.BOOLSLICE, attribute.INT64SLICE, attribute.FLOAT64SLICE, attribute.STRINGSLICE:
		return appendCachedSlice(b, v)
	case attribute.SLICE:
		return appendSlice(b, v)
	}
	b = protowire.AppendTag(b, anyString, protowire.BytesType)
	return protowire.AppendString(b, "INVALID")
}

// encodedSlices caches the encoding of slice values of comparable
// elements (the finish reasons: a handful of distinct values, each of
// which would otherwise be copied out by reflection, span after span).
var (
	encodedSlices     sync.Map // attribute.Value → []byte
	encodedSliceCount atomic.Int32
)

// maxEncodedSlices bounds encodedSlices.
const maxEncodedSlices = 256

func appendCachedSlice(b []byte, v attribute.Value) []byte {
	if enc, ok := encodedSlices.Load(v); ok {
		return append(b, enc.([]byte)...)
	}
	start := len(b)
	b = appendSlice(b, v)
	if encodedSliceCount.Add(1) <= maxEncodedSlices {
		encodedSlices.Store(v, bytes.Clone(b[start:]))
	}
	return b
}

// appendSlice appends the array value of a slice value.
func appendSlice(b []byte, v attribute.Value) []byte {
	elems, _ := sliceElems(v)
	b, at := beginMsg(b, anyArray)
	for _, e := range elems {
		var eat int
		b, eat = beginMsg(b, listValues)
		b = endMsg(appendValue(b, e), eat)
	}
	return endMsg(b, at)
}

// sliceElems returns the elements of a slice value as values.
func sliceElems(v attribute.Value) ([]attribute.Value, bool) {
	switch v.Type() {
	case attribute.BOOLSLICE:
		return valuesOf(v.AsBoolSlice(), attribute.BoolValue), true
	case attribute.INT64SLICE:
		return valuesOf(v.AsInt64Slice(), attribute.Int64Value), true
	case attribute.FLOAT64SLICE:
		return valuesOf(v.AsFloat64Slice(), attribute.Float64Value), true
	case attribute.STRINGSLICE:
		return valuesOf(v.AsStringSlice(), attribute.StringValue), true
	case attribute.SLICE:
		return v.AsSlice(), true
	}
	return nil, false
}

func valuesOf[T any](xs []T, val func(T) attribute.Value) []attribute.Value {
	out := make([]attribute.Value, len(xs))
	for i, x := range xs {
		out[i] = val(x)
	}
	return out
}

// The field helpers leave out a scalar at its zero value, as proto3 does.

func appendBytesField(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendStringField(b []byte, num protowire.Number, v string) []byte {
	if v == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, validUTF8(v))
}

// validUTF8 is s with U+FFFD for each invalid sequence: a protobuf string
// must be UTF-8, and a receiver refuses the whole batch when one is not
// (the model a client named, a finish reason an upstream wrote, may not).
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendFixed64Field(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}
