package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// jsonOptions gives scripts stable snake_case field names. Unset fields are
// still emitted (null, "", 0, [] or {}) so every object has the same keys.
var jsonOptions = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

func (a *app) jsonOutput() bool { return a.output == "json" }

// protoJSON renders m as compact JSON; a nil message becomes null.
func protoJSON(m proto.Message) (json.RawMessage, error) {
	if m == nil || !m.ProtoReflect().IsValid() {
		return json.RawMessage("null"), nil
	}
	b, err := jsonOptions.Marshal(m)
	if err != nil {
		return nil, err
	}
	// protojson deliberately varies its whitespace; normalise it.
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// protoJSONList renders a JSON array, [] when empty.
func protoJSONList[M proto.Message](items []M) (json.RawMessage, error) {
	parts := make([][]byte, 0, len(items))
	for _, m := range items {
		b, err := protoJSON(m)
		if err != nil {
			return nil, err
		}
		parts = append(parts, b)
	}
	return append(append([]byte("["), bytes.Join(parts, []byte(","))...), ']'), nil
}

// withField adds a top-level string field to a compact JSON object,
// keeping the existing fields first.
func withField(obj json.RawMessage, name, value string) (json.RawMessage, error) {
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
		return nil, fmt.Errorf("internal error: not a JSON object")
	}
	field, err := json.Marshal(map[string]string{name: value})
	if err != nil {
		return nil, err
	}
	if string(obj) == "{}" {
		return field, nil
	}
	out := append(bytes.Clone(obj[:len(obj)-1]), ',')
	return append(out, field[1:]...), nil
}

// withRawField adds a top-level field holding raw JSON to a compact JSON
// object, keeping the existing fields first.
func withRawField(obj json.RawMessage, name string, value json.RawMessage) (json.RawMessage, error) {
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
		return nil, fmt.Errorf("internal error: not a JSON object")
	}
	n, err := json.Marshal(name)
	if err != nil {
		return nil, err
	}
	out := bytes.Clone(obj[:len(obj)-1])
	if string(obj) != "{}" {
		out = append(out, ',')
	}
	out = append(append(append(out, n...), ':'), value...)
	return append(out, '}'), nil
}

// writeJSON pretty-prints raw JSON followed by a newline.
func writeJSON(w io.Writer, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// printProto writes one message as JSON.
func (a *app) printProto(m proto.Message) error {
	raw, err := protoJSON(m)
	if err != nil {
		return err
	}
	return writeJSON(a.stdout, raw)
}

// newTable returns a tabwriter for aligned columns; call Flush when done.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
}

// row writes tab-separated cells as one table line.
func row(w io.Writer, cells ...string) {
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// fmtTime renders a timestamp for tables, "-" when unset.
func fmtTime(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return "-"
	}
	return ts.AsTime().UTC().Format(time.RFC3339)
}

// orDash shows "-" for empty table cells.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// fmtLabels renders metadata as sorted k=v pairs.
func fmtLabels(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ", ")
}
