package telemetry

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// AttrWriter takes a span's attributes one by one, typed. A key is a
// name of the code's own: not empty, valid UTF-8 (it is written as is;
// values are made valid).
type AttrWriter interface {
	String(key, v string)
	Int(key string, v int64)
	Float(key string, v float64)
	Bool(key string, v bool)
	Strings(key string, v []string)
}

// AttrSource is a span's attributes kept by their owner as typed fields
// (a record of fixed layout) rather than as an attribute list: the
// exporter has it write them straight to OTLP, after the attributes set
// on the span, in the background. It must not change once handed over.
type AttrSource interface {
	WriteAttrs(w AttrWriter)
}

// SetAttrSource has src's attributes exported with the span's (see
// AttrSource); the last one set counts. A no-op once the span ended.
func (s *span) SetAttrSource(src AttrSource) {
	if !s.ended {
		s.src = src
	}
}

// wireAttrs writes attributes as repeated KeyValue messages of field num,
// as appendKeyValues writes the same attributes from a list.
type wireAttrs struct {
	b   []byte
	num protowire.Number
}

// begin appends a KeyValue's key and opens its value, for end.
func (w *wireAttrs) begin(key string) (at, vat int) {
	w.b, at = beginMsg(w.b, w.num)
	w.b = protowire.AppendTag(w.b, kvKey, protowire.BytesType)
	w.b = protowire.AppendString(w.b, key)
	w.b, vat = beginMsg(w.b, kvValue)
	return at, vat
}

func (w *wireAttrs) end(at, vat int) { w.b = endMsg(endMsg(w.b, vat), at) }

func (w *wireAttrs) String(key, v string) {
	at, vat := w.begin(key)
	w.b = appendAnyString(w.b, v)
	w.end(at, vat)
}

func (w *wireAttrs) Int(key string, v int64) {
	at, vat := w.begin(key)
	w.b = protowire.AppendTag(w.b, anyInt, protowire.VarintType)
	w.b = protowire.AppendVarint(w.b, uint64(v))
	w.end(at, vat)
}

func (w *wireAttrs) Float(key string, v float64) {
	at, vat := w.begin(key)
	w.b = protowire.AppendTag(w.b, anyDouble, protowire.Fixed64Type)
	w.b = protowire.AppendFixed64(w.b, math.Float64bits(v))
	w.end(at, vat)
}

func (w *wireAttrs) Bool(key string, v bool) {
	at, vat := w.begin(key)
	w.b = protowire.AppendTag(w.b, anyBool, protowire.VarintType)
	w.b = protowire.AppendVarint(w.b, protowire.EncodeBool(v))
	w.end(at, vat)
}

func (w *wireAttrs) Strings(key string, v []string) {
	at, vat := w.begin(key)
	var aat, eat int
	w.b, aat = beginMsg(w.b, anyArray)
	for _, s := range v {
		w.b, eat = beginMsg(w.b, listValues)
		w.b = endMsg(appendAnyString(w.b, s), eat)
	}
	w.b = endMsg(w.b, aat)
	w.end(at, vat)
}

// appendAnyString appends an AnyValue's string member (written even when
// empty, as a one-of member is).
func appendAnyString(b []byte, v string) []byte {
	b = protowire.AppendTag(b, anyString, protowire.BytesType)
	return protowire.AppendString(b, validUTF8(v))
}
