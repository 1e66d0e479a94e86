package telemetry

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
)

// typedAttrs is an attribute source writing kvs (of the types an
// AttrWriter takes) through its typed calls.
type typedAttrs []attribute.KeyValue

func (t typedAttrs) WriteAttrs(w AttrWriter) {
	for _, kv := range t {
		k := string(kv.Key)
		switch kv.Value.Type() {
		case attribute.STRING:
			w.String(k, kv.Value.AsString())
		case attribute.INT64:
			w.Int(k, kv.Value.AsInt64())
		case attribute.FLOAT64:
			w.Float(k, kv.Value.AsFloat64())
		case attribute.BOOL:
			w.Bool(k, kv.Value.AsBool())
		case attribute.STRINGSLICE:
			w.Strings(k, kv.Value.AsStringSlice())
		}
	}
}

// A span's attributes written from a typed source reach the wire byte
// for byte as the same attributes set as a list (whose encoding
// TestRecordedSpansArriveAsTheUpstreamExporterSendsThem holds to the
// upstream exporter's), after the span's own: invalid UTF-8, empty and
// long values, empty and long slices included.
func TestAttrSourceEncodesAsTheSameAttributeList(t *testing.T) {
	own := []attribute.KeyValue{attribute.String("gen_ai.operation.name", "chat")}
	typed := []attribute.KeyValue{attribute.String("s", "ü\xff"), attribute.String("empty", ""), attribute.Bool("f", false),
		attribute.Bool("t", true), attribute.Int64("i", -7), attribute.Int64("zero", 0), attribute.Int64("big", math.MaxInt64),
		attribute.Float64("d", 0.25), attribute.Float64("dz", 0), attribute.StringSlice("ss", []string{"stop", "", "\xfe"}),
		attribute.StringSlice("none", nil), attribute.String("long", strings.Repeat("x", 300)),
		attribute.StringSlice("ls", []string{strings.Repeat("z", 200), "a"})}
	for i, sd := range stubSpans(2) {
		list := recordOf(sd)
		list.extra().attrs = append(append([]attribute.KeyValue(nil), own...), typed...)
		src := recordOf(sd)
		src.extra().attrs = own
		src.SetAttrSource(typedAttrs(typed))
		w := &wireAttrs{}
		want := appendSpan(w, nil, list)
		got := appendSpan(w, []byte("kept"), src)
		if !bytes.Equal(got[len("kept"):], want) || string(got[:len("kept")]) != "kept" {
			t.Errorf("span %d from a typed source:\n %x\nwant\n %x", i, got, want)
		}
	}
}

// A source set after the span ended is not taken, and one set before is
// let go of with the span's other parts once exported.
func TestAttrSourceFollowsTheSpansLife(t *testing.T) {
	tr := testTracer(t, &captureClient{}, 4, defaultSampler)
	_, s := tr.Start(t.Context(), "r")
	sp := s.(*span)
	sp.SetAttrSource(typedAttrs{attribute.Int("n", 1)})
	s.End()
	sp.SetAttrSource(typedAttrs{attribute.Int("n", 2)})
	if got := sp.src.(typedAttrs); got[0].Value.AsInt64() != 1 {
		t.Fatalf("source set after End taken: %v", got)
	}
	if queued := <-tr.q.ch; queued != sp {
		t.Fatal("another span queued")
	}
	sp.release()
	if sp.src != nil {
		t.Error("a released span still holds its source")
	}
}
