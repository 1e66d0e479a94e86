package telemetry

import (
	"go.opentelemetry.io/otel/attribute"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
)

// newKeyValues converts attributes to OTLP, allocating (for what is
// converted once: resources, scopes, links).
func newKeyValues(attrs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(attrs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, len(attrs))
	for i, kv := range attrs {
		out[i] = &commonpb.KeyValue{Key: string(kv.Key), Value: newValue(kv.Value)}
	}
	return out
}

// newValue converts one attribute value to OTLP, as the upstream exporter
// does (an invalid value becomes the string "INVALID").
func newValue(v attribute.Value) *commonpb.AnyValue {
	av := &commonpb.AnyValue{}
	switch v.Type() {
	case attribute.BOOL:
		av.Value = &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}
	case attribute.INT64:
		av.Value = &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}
	case attribute.FLOAT64:
		av.Value = &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}
	case attribute.STRING:
		av.Value = &commonpb.AnyValue_StringValue{StringValue: v.AsString()}
	case attribute.BYTESLICE:
		av.Value = &commonpb.AnyValue_BytesValue{BytesValue: v.AsByteSlice()}
	case attribute.BOOLSLICE:
		av.Value = array(v.AsBoolSlice(), func(b bool) attribute.Value { return attribute.BoolValue(b) })
	case attribute.INT64SLICE:
		av.Value = array(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		av.Value = array(v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		av.Value = array(v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		av.Value = array(v.AsSlice(), func(x attribute.Value) attribute.Value { return x })
	case attribute.MAP:
		av.Value = &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: newKeyValues(v.AsMap())}}
	default:
		av.Value = &commonpb.AnyValue_StringValue{StringValue: "INVALID"}
	}
	return av
}

func array[T any](xs []T, val func(T) attribute.Value) *commonpb.AnyValue_ArrayValue {
	vs := make([]*commonpb.AnyValue, len(xs))
	for i, x := range xs {
		vs[i] = newValue(val(x))
	}
	return &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}
}
