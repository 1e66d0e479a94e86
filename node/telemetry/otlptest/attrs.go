package otlptest

import (
	"encoding/hex"
	"strconv"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
)

type commonKV = commonpb.KeyValue

// Attrs flattens OTLP attributes into strings: string values as they are,
// numbers and booleans formatted, arrays as their elements joined by ",".
func Attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		out[kv.GetKey()] = Value(kv.GetValue())
	}
	return out
}

// Value formats one OTLP value as Attrs does.
func Value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_ArrayValue:
		s := ""
		for i, e := range x.ArrayValue.GetValues() {
			if i > 0 {
				s += ","
			}
			s += Value(e)
		}
		return s
	}
	return ""
}

// Hex formats a trace or span id.
func Hex(id []byte) string { return hex.EncodeToString(id) }
