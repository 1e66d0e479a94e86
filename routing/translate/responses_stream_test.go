package translate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Tests of the Responses stream encoder's function_call items when the
// upstream interleaves the pieces of parallel tool calls, and of the
// streams whose calls arrive one after the other (which must not change).

// rsChunk is a chunk of choice 0 with the given tool-call pieces.
func rsChunk(calls ...ToolCall) *Chunk {
	return &Chunk{ID: "chatcmpl-il", Created: 1741294021, Model: "m", Choices: []ChunkChoice{{Delta: Delta{ToolCalls: calls}}}}
}

// rsCall is one tool-call piece; index < 0 means no index.
func rsCall(index int, id, name, args string) ToolCall {
	tc := ToolCall{ID: id, Function: FunctionCall{Name: name, Arguments: args}}
	if id != "" {
		tc.Type = "function"
	}
	if index >= 0 {
		tc.Index = &index
	}
	return tc
}

func rsText(s string) *Chunk {
	return &Chunk{ID: "chatcmpl-il", Created: 1741294021, Model: "m", Choices: []ChunkChoice{{Delta: Delta{Content: &s}}}}
}

func rsRefusal(s string) *Chunk {
	return &Chunk{ID: "chatcmpl-il", Created: 1741294021, Model: "m", Choices: []ChunkChoice{{Delta: Delta{Refusal: &s}}}}
}

// rsFinish is a chunk that finishes choice 0 (with optional pieces).
func rsFinish(reason string, calls ...ToolCall) *Chunk {
	c := rsChunk(calls...)
	c.Choices[0].FinishReason = &reason
	return c
}

// rsUsage is the usage-only last chunk.
func rsUsage() *Chunk {
	return &Chunk{ID: "chatcmpl-il", Created: 1741294021, Model: "m", Choices: []ChunkChoice{},
		Usage: &Usage{PromptTokens: 10, CompletionTokens: 20, TotalTokens: 30}}
}

// rsRun streams the chunks and then Closes (fail nil) or Fails, returning
// the raw bytes written and the parsed events.
func rsRun(t *testing.T, chunks []*Chunk, fail *Error) ([]byte, []respSSE) {
	t.Helper()
	var w respWriter
	enc := ResponsesInbound.NewStreamEncoder(&w, "m")
	for _, c := range chunks {
		if err := enc.WriteChunk(c); err != nil {
			t.Fatalf("WriteChunk: %v", err)
		}
	}
	if fail != nil {
		if err := enc.Fail(fail); err != nil {
			t.Fatalf("Fail: %v", err)
		}
	} else if err := enc.Close(nil); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var raw []byte
	for _, b := range w.writes {
		raw = append(raw, b...)
	}
	return raw, respParseEvents(t, w.writes)
}

// rsEvent is the part of an event the call checks read.
type rsEvent struct {
	Type           string          `json:"type"`
	SequenceNumber int             `json:"sequence_number"`
	ItemID         string          `json:"item_id"`
	OutputIndex    *int            `json:"output_index"`
	Delta          string          `json:"delta"`
	Name           string          `json:"name"`
	Arguments      *string         `json:"arguments"`
	Item           json.RawMessage `json:"item"`
	Response       json.RawMessage `json:"response"`
}

// rsItem is an output item as events and Responses show it.
type rsItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// rsCallResult is what a client building from events learns of one
// function_call item.
type rsCallResult struct {
	index  int
	item   rsItem // as output_item.done shows it (or as added, if never done)
	deltas string // the argument deltas, concatenated
	done   *string
	final  rsItem // as the last event's Response shows it
}

// rsCheckCalls checks, for every function_call item of a stream, what an
// SDK building the response from the events relies on: output_item.added
// comes before every event of the item; the argument deltas carry the
// item's id; function_call_arguments.done and output_item.done come once,
// after all the deltas, and hold the deltas' concatenation, which is also
// what the final Response holds; sequence numbers strictly increase. With
// wantDone, every call must be done and its arguments valid JSON. It
// returns the calls in output order.
func rsCheckCalls(t *testing.T, events []respSSE, wantDone bool) []rsCallResult {
	t.Helper()
	type state struct {
		rsCallResult
		added, itemDone bool
		addedID         string
	}
	calls := map[int]*state{}
	var order []int
	prevSeq := -1
	var final struct {
		Output []json.RawMessage `json:"output"`
	}
	for i, e := range events {
		var d rsEvent
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if d.SequenceNumber <= prevSeq {
			t.Errorf("event %d (%s): sequence_number %d after %d", i, e.Event, d.SequenceNumber, prevSeq)
		}
		prevSeq = d.SequenceNumber
		if i == len(events)-1 {
			if err := json.Unmarshal(d.Response, &final); err != nil {
				t.Fatalf("last event %s: %v", e.Event, err)
			}
		}
		switch e.Event {
		case "response.output_item.added":
			var it rsItem
			if err := json.Unmarshal(d.Item, &it); err != nil {
				t.Fatal(err)
			}
			if it.Type != "function_call" {
				continue
			}
			if calls[*d.OutputIndex] != nil {
				t.Errorf("event %d: call item %d added twice", i, *d.OutputIndex)
				continue
			}
			if it.Arguments != "" || it.Status != "in_progress" {
				t.Errorf("event %d: call added as %+v", i, it)
			}
			calls[*d.OutputIndex] = &state{rsCallResult: rsCallResult{index: *d.OutputIndex, item: it}, added: true, addedID: it.ID}
			order = append(order, *d.OutputIndex)
		case "response.function_call_arguments.delta", "response.function_call_arguments.done":
			st := calls[*d.OutputIndex]
			if st == nil {
				t.Errorf("event %d: %s for item %d before its output_item.added", i, e.Event, *d.OutputIndex)
				continue
			}
			if d.ItemID != st.addedID {
				t.Errorf("event %d: %s item_id %s, item %d is %s", i, e.Event, d.ItemID, *d.OutputIndex, st.addedID)
			}
			if st.done != nil || st.itemDone {
				t.Errorf("event %d: %s for item %d after its arguments were done", i, e.Event, *d.OutputIndex)
			}
			if e.Event == "response.function_call_arguments.delta" {
				st.deltas += d.Delta
				continue
			}
			st.done = d.Arguments
			if d.Arguments == nil || *d.Arguments != st.deltas {
				t.Errorf("event %d: item %d arguments done %v, deltas %q", i, *d.OutputIndex, d.Arguments, st.deltas)
			}
			if d.Name != st.item.Name {
				t.Errorf("event %d: item %d done with name %q, added as %q", i, *d.OutputIndex, d.Name, st.item.Name)
			}
		case "response.output_item.done":
			st := calls[*d.OutputIndex]
			if st == nil {
				continue // a message (respCheckStream checks those)
			}
			if st.itemDone || st.done == nil {
				t.Errorf("event %d: call item %d done twice or before its arguments", i, *d.OutputIndex)
			}
			st.itemDone = true
			var it rsItem
			if err := json.Unmarshal(d.Item, &it); err != nil {
				t.Fatal(err)
			}
			if it.ID != st.addedID || it.Arguments != st.deltas {
				t.Errorf("event %d: item %d done as %+v, deltas %q", i, *d.OutputIndex, it, st.deltas)
			}
			st.item = it
		}
	}
	var out []rsCallResult
	for _, idx := range order {
		st := calls[idx]
		if idx >= len(final.Output) {
			t.Errorf("call item %d missing from the final Response", idx)
			continue
		}
		if err := json.Unmarshal(final.Output[idx], &st.final); err != nil {
			t.Fatal(err)
		}
		if st.final.ID != st.addedID || st.final.Arguments != st.deltas {
			t.Errorf("call item %d: final %+v, deltas %q", idx, st.final, st.deltas)
		}
		if wantDone {
			if !st.itemDone {
				t.Errorf("call item %d never done", idx)
			} else if st.final != st.item {
				t.Errorf("call item %d: final %+v, done %+v", idx, st.final, st.item)
			}
			if st.final.Status == "completed" && !json.Valid([]byte(st.deltas)) {
				t.Errorf("call item %d: arguments %q are not JSON", idx, st.deltas)
			}
		}
		out = append(out, st.rsCallResult)
	}
	return out
}

// rsSummary lists the calls as "call_id:name(arguments)/status".
func rsSummary(calls []rsCallResult) string {
	var s []string
	for _, c := range calls {
		s = append(s, fmt.Sprintf("%s:%s(%s)/%s", c.final.CallID, c.final.Name, c.final.Arguments, c.final.Status))
	}
	return strings.Join(s, " ")
}

func TestResponsesStreamInterleavedToolCalls(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks []*Chunk
		want   string
	}{
		{"two calls, alternating pieces", []*Chunk{
			rsChunk(rsCall(0, "call_a", "get_weather", `{"location":`)),
			rsChunk(rsCall(1, "call_b", "get_time", `{"zone":`)),
			rsChunk(rsCall(0, "", "", `"Paris"}`)),
			rsChunk(rsCall(1, "", "", `"CET"}`)),
			rsFinish("tool_calls"),
			rsUsage(),
		}, `call_a:get_weather({"location":"Paris"})/completed call_b:get_time({"zone":"CET"})/completed`},
		{"three calls, round robin, name and id before arguments", []*Chunk{
			rsChunk(rsCall(0, "call_a", "f", "")),
			rsChunk(rsCall(1, "call_b", "g", "")),
			rsChunk(rsCall(2, "call_c", "h", "")),
			rsChunk(rsCall(0, "", "", `{"a"`)),
			rsChunk(rsCall(1, "", "", `{"b"`)),
			rsChunk(rsCall(2, "", "", `{"c"`)),
			rsChunk(rsCall(2, "", "", `:3}`)),
			rsChunk(rsCall(0, "", "", `:1}`)),
			rsChunk(rsCall(1, "", "", `:2}`)),
			rsFinish("tool_calls"),
		}, `call_a:f({"a":1})/completed call_b:g({"b":2})/completed call_c:h({"c":3})/completed`},
		{"pieces of both calls in one chunk, later call first", []*Chunk{
			rsChunk(rsCall(0, "call_a", "f", `{"a":`), rsCall(1, "call_b", "g", `{"b":`)),
			rsChunk(rsCall(1, "", "", `2}`), rsCall(0, "", "", `1}`)),
			rsFinish("tool_calls"),
		}, `call_a:f({"a":1})/completed call_b:g({"b":2})/completed`},
		{"last pieces in the finishing chunk", []*Chunk{
			rsChunk(rsCall(0, "call_a", "f", `{"a":`)),
			rsChunk(rsCall(1, "call_b", "g", `{"b":`)),
			rsFinish("tool_calls", rsCall(0, "", "", `1}`), rsCall(1, "", "", `2}`)),
		}, `call_a:f({"a":1})/completed call_b:g({"b":2})/completed`},
		{"no finish_reason: Close ends the calls", []*Chunk{
			rsChunk(rsCall(0, "call_a", "f", `{"a":`)),
			rsChunk(rsCall(1, "call_b", "g", `{"b":`)),
			rsChunk(rsCall(0, "", "", `1}`)),
			rsChunk(rsCall(1, "", "", `2}`)),
		}, `call_a:f({"a":1})/completed call_b:g({"b":2})/completed`},
		{"name of the later call arrives late", []*Chunk{
			rsChunk(rsCall(0, "call_a", "f", `{"a":`)),
			rsChunk(rsCall(1, "call_b", "", `{"b":`)),
			rsChunk(rsCall(1, "", "g", `2}`)),
			rsChunk(rsCall(0, "", "", `1}`)),
			rsFinish("tool_calls"),
		}, `call_a:f({"a":1})/completed call_b:g({"b":2})/completed`},
		// The call the model was writing when it stopped is incomplete (as
		// in a Response that is not streamed, where it is the last one).
		{"cut short by length", []*Chunk{
			rsChunk(rsCall(0, "call_a", "f", `{"a":`)),
			rsChunk(rsCall(1, "call_b", "g", `{"b":`)),
			rsChunk(rsCall(0, "", "", `1}`)),
			rsFinish("length", rsCall(1, "", "", `2`)),
		}, `call_a:f({"a":1})/completed call_b:g({"b":2)/incomplete`},
		{"cut short by length in the earlier call", []*Chunk{
			rsChunk(rsCall(0, "call_a", "f", `{"a":`)),
			rsChunk(rsCall(1, "call_b", "g", `{"b":`)),
			rsChunk(rsCall(1, "", "", `2}`)),
			rsChunk(rsCall(0, "", "", `1`)),
			rsFinish("length"),
		}, `call_a:f({"a":1)/incomplete call_b:g({"b":2})/completed`},
		{"text first, then interleaved calls", []*Chunk{
			rsText("Checking both."),
			rsChunk(rsCall(0, "call_a", "f", `{"a":`)),
			rsChunk(rsCall(1, "call_b", "g", `{"b":`)),
			rsChunk(rsCall(0, "", "", `1}`)),
			rsChunk(rsCall(1, "", "", `2}`)),
			rsFinish("tool_calls"),
		}, `call_a:f({"a":1})/completed call_b:g({"b":2})/completed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, events := rsRun(t, tc.chunks, nil)
			respCheckStream(t, events)
			calls := rsCheckCalls(t, events, true)
			if got := rsSummary(calls); got != tc.want {
				t.Errorf("calls\n%s\nwant\n%s", got, tc.want)
			}
			rsCheckItemsInOrder(t, events)
		})
	}
}

// rsCheckItemsInOrder checks that the items' events are not interleaved:
// between an item's output_item.added and its output_item.done, every
// event that names an output item names that one.
func rsCheckItemsInOrder(t *testing.T, events []respSSE) {
	t.Helper()
	open := -1
	for i, e := range events {
		var d rsEvent
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.OutputIndex == nil {
			continue
		}
		switch {
		case e.Event == "response.output_item.added" && open < 0:
			open = *d.OutputIndex
		case *d.OutputIndex != open:
			t.Errorf("event %d: %s for item %d while item %d is open", i, e.Event, *d.OutputIndex, open)
		case e.Event == "response.output_item.done":
			open = -1
		}
	}
}

// TestResponsesStreamInterleavedItemsInOrder checks that interleaved
// calls still come out one item after the other, in output order, as
// the Responses API streams them: each item's events are contiguous.
func TestResponsesStreamInterleavedItemsInOrder(t *testing.T) {
	_, events := rsRun(t, []*Chunk{
		rsChunk(rsCall(0, "call_a", "f", `{"a":`)),
		rsChunk(rsCall(1, "call_b", "g", `{"b":`)),
		rsChunk(rsCall(0, "", "", `1}`)),
		rsChunk(rsCall(1, "", "", `2}`)),
		rsFinish("tool_calls"),
	}, nil)
	var got []string
	for _, e := range events {
		var d rsEvent
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		s := strings.TrimPrefix(e.Event, "response.")
		if d.OutputIndex != nil {
			s += fmt.Sprintf(" %d", *d.OutputIndex)
		}
		if d.Delta != "" {
			s += " " + d.Delta
		}
		got = append(got, s)
	}
	want := []string{
		"created", "in_progress",
		"output_item.added 0", `function_call_arguments.delta 0 {"a":`, `function_call_arguments.delta 0 1}`,
		"function_call_arguments.done 0", "output_item.done 0",
		"output_item.added 1", `function_call_arguments.delta 1 {"b":`, `function_call_arguments.delta 1 2}`,
		"function_call_arguments.done 1", "output_item.done 1",
		"completed",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestResponsesStreamInterleavedFail fails a stream while interleaved
// calls are open: every open call is in the events (added, with the
// arguments received as deltas) and marked incomplete in response.failed,
// none of them done.
func TestResponsesStreamInterleavedFail(t *testing.T) {
	_, events := rsRun(t, []*Chunk{
		rsChunk(rsCall(0, "call_a", "f", `{"a":`)),
		rsChunk(rsCall(1, "call_b", "g", `{"b":`)),
		rsChunk(rsCall(0, "", "", `1`)),
		rsChunk(rsCall(1, "", "", `2`)),
	}, &Error{Status: 502, Message: "upstream went away", Kind: KindBadResponse})
	respCheckStream(t, events)
	calls := rsCheckCalls(t, events, false)
	if got, want := rsSummary(calls), `call_a:f({"a":1)/incomplete call_b:g({"b":2)/incomplete`; got != want {
		t.Errorf("calls\n%s\nwant\n%s", got, want)
	}
	for _, e := range events {
		if strings.HasSuffix(e.Event, ".done") {
			t.Errorf("%s in a failed stream: %s", e.Event, e.Data)
		}
	}
	if got := events[len(events)-2].Event; got != "error" {
		t.Errorf("event before response.failed is %s", got)
	}
}

// TestResponsesStreamTextAfterInterleavedCalls sends text while calls are
// open: the calls are finished, with all their arguments, before the
// message item starts. A piece for a call that arrives after that is
// dropped: the stream and its final Response stay consistent.
func TestResponsesStreamTextAfterInterleavedCalls(t *testing.T) {
	_, events := rsRun(t, []*Chunk{
		rsChunk(rsCall(0, "call_a", "f", `{"a":`)),
		rsChunk(rsCall(1, "call_b", "g", `{"b":`)),
		rsChunk(rsCall(0, "", "", `1}`)),
		rsChunk(rsCall(1, "", "", `2}`)),
		rsText("Done"),
		rsChunk(rsCall(0, "", "", `,"late":true}`)),
		rsRefusal("no"),
		rsFinish("stop"),
	}, nil)
	respCheckStream(t, events)
	calls := rsCheckCalls(t, events, true)
	if got, want := rsSummary(calls), `call_a:f({"a":1})/completed call_b:g({"b":2})/completed`; got != want {
		t.Errorf("calls\n%s\nwant\n%s", got, want)
	}
	// The message item opens after both calls are done.
	var seen []string
	for _, e := range events {
		if e.Event == "response.output_item.added" || e.Event == "response.output_item.done" {
			var d rsEvent
			_ = json.Unmarshal(e.Data, &d)
			seen = append(seen, fmt.Sprintf("%s %d", strings.TrimPrefix(e.Event, "response.output_item."), *d.OutputIndex))
		}
	}
	if got, want := strings.Join(seen, " "), "added 0 done 0 added 1 done 1 added 2 done 2"; got != want {
		t.Errorf("items: %s, want %s", got, want)
	}
	if last := events[len(events)-1]; !strings.Contains(string(last.Data), `"text":"Done"`) || !strings.Contains(string(last.Data), `"refusal":"no"`) {
		t.Errorf("final response: %s", last.Data)
	}
}

// TestResponsesStreamInterleavedReusedKey: an upstream that numbers every
// call 0 (telling them apart by id) cannot interleave them; each new id
// starts a new call as before, while another call (index 1) stays open.
func TestResponsesStreamInterleavedReusedKey(t *testing.T) {
	_, events := rsRun(t, []*Chunk{
		rsChunk(rsCall(1, "call_x", "x", `{"x":`)),
		rsChunk(rsCall(0, "call_a", "f", `{"a":1}`)),
		rsChunk(rsCall(0, "call_b", "g", `{"b":`)),
		rsChunk(rsCall(1, "", "", `0}`)),
		rsChunk(rsCall(0, "", "", `2}`)),
		rsFinish("tool_calls"),
	}, nil)
	respCheckStream(t, events)
	calls := rsCheckCalls(t, events, true)
	if got, want := rsSummary(calls), `call_x:x({"x":0})/completed call_a:f({"a":1})/completed call_b:g({"b":2})/completed`; got != want {
		t.Errorf("calls\n%s\nwant\n%s", got, want)
	}
}

// rsCompact summarises a stream for comparison: each event's data as
// written, except that Response objects are reduced to their status,
// output, incomplete_details, error and usage (the rest is the echo of
// the request parameters, covered by the goldens).
func rsCompact(t *testing.T, events []respSSE) string {
	t.Helper()
	var b strings.Builder
	for _, e := range events {
		var d struct {
			Type           string `json:"type"`
			SequenceNumber int    `json:"sequence_number"`
			Response       *struct {
				ID                string          `json:"id"`
				Status            string          `json:"status"`
				Output            json.RawMessage `json:"output"`
				IncompleteDetails json.RawMessage `json:"incomplete_details"`
				Error             json.RawMessage `json:"error"`
				Usage             json.RawMessage `json:"usage"`
			} `json:"response"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Response == nil {
			fmt.Fprintf(&b, "%s\n", e.Data)
			continue
		}
		r, err := json.Marshal(d.Response)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%d %s %s\n", d.SequenceNumber, d.Type, r)
	}
	return b.String()
}

// rsContiguous are streams whose calls arrive one after the other (each
// call's pieces together), with the events the encoder wrote for them
// before interleaved calls were kept open; they must not change.
var rsContiguous = []struct {
	name   string
	chunks []*Chunk
	fail   *Error
	want   string
}{
	{"two calls", []*Chunk{
		rsChunk(rsCall(0, "call_a", "get_weather", "")),
		rsChunk(rsCall(0, "", "", `{"location":`)),
		rsChunk(rsCall(0, "", "", `"Paris"}`)),
		rsChunk(rsCall(1, "call_b", "get_weather", `{"location":"Bogotá"}`)),
		rsFinish("tool_calls"),
		rsUsage(),
	}, nil, `
0 response.created {"id":"resp_il","status":"in_progress","output":[],"incomplete_details":null,"error":null,"usage":null}
1 response.in_progress {"id":"resp_il","status":"in_progress","output":[],"incomplete_details":null,"error":null,"usage":null}
{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"fc_il_0","type":"function_call","status":"in_progress","arguments":"","call_id":"call_a","name":"get_weather"}}
{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_il_0","output_index":0,"delta":"{\"location\":"}
{"type":"response.function_call_arguments.delta","sequence_number":4,"item_id":"fc_il_0","output_index":0,"delta":"\"Paris\"}"}
{"type":"response.function_call_arguments.done","sequence_number":5,"item_id":"fc_il_0","output_index":0,"name":"get_weather","arguments":"{\"location\":\"Paris\"}"}
{"type":"response.output_item.done","sequence_number":6,"output_index":0,"item":{"id":"fc_il_0","type":"function_call","status":"completed","arguments":"{\"location\":\"Paris\"}","call_id":"call_a","name":"get_weather"}}
{"type":"response.output_item.added","sequence_number":7,"output_index":1,"item":{"id":"fc_il_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_b","name":"get_weather"}}
{"type":"response.function_call_arguments.delta","sequence_number":8,"item_id":"fc_il_1","output_index":1,"delta":"{\"location\":\"Bogotá\"}"}
{"type":"response.function_call_arguments.done","sequence_number":9,"item_id":"fc_il_1","output_index":1,"name":"get_weather","arguments":"{\"location\":\"Bogotá\"}"}
{"type":"response.output_item.done","sequence_number":10,"output_index":1,"item":{"id":"fc_il_1","type":"function_call","status":"completed","arguments":"{\"location\":\"Bogotá\"}","call_id":"call_b","name":"get_weather"}}
11 response.completed {"id":"resp_il","status":"completed","output":[{"id":"fc_il_0","type":"function_call","status":"completed","arguments":"{\"location\":\"Paris\"}","call_id":"call_a","name":"get_weather"},{"id":"fc_il_1","type":"function_call","status":"completed","arguments":"{\"location\":\"Bogotá\"}","call_id":"call_b","name":"get_weather"}],"incomplete_details":null,"error":null,"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":30}}
`},
	{"three whole calls in one chunk", []*Chunk{
		rsFinish("tool_calls", rsCall(0, "call_a", "f", `{}`), rsCall(1, "call_b", "g", `{"b":2}`), rsCall(2, "call_c", "h", `{"c":3}`)),
	}, nil, `
0 response.created {"id":"resp_il","status":"in_progress","output":[],"incomplete_details":null,"error":null,"usage":null}
1 response.in_progress {"id":"resp_il","status":"in_progress","output":[],"incomplete_details":null,"error":null,"usage":null}
{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"fc_il_0","type":"function_call","status":"in_progress","arguments":"","call_id":"call_a","name":"f"}}
{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_il_0","output_index":0,"delta":"{}"}
{"type":"response.function_call_arguments.done","sequence_number":4,"item_id":"fc_il_0","output_index":0,"name":"f","arguments":"{}"}
{"type":"response.output_item.done","sequence_number":5,"output_index":0,"item":{"id":"fc_il_0","type":"function_call","status":"completed","arguments":"{}","call_id":"call_a","name":"f"}}
{"type":"response.output_item.added","sequence_number":6,"output_index":1,"item":{"id":"fc_il_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_b","name":"g"}}
{"type":"response.function_call_arguments.delta","sequence_number":7,"item_id":"fc_il_1","output_index":1,"delta":"{\"b\":2}"}
{"type":"response.function_call_arguments.done","sequence_number":8,"item_id":"fc_il_1","output_index":1,"name":"g","arguments":"{\"b\":2}"}
{"type":"response.output_item.done","sequence_number":9,"output_index":1,"item":{"id":"fc_il_1","type":"function_call","status":"completed","arguments":"{\"b\":2}","call_id":"call_b","name":"g"}}
{"type":"response.output_item.added","sequence_number":10,"output_index":2,"item":{"id":"fc_il_2","type":"function_call","status":"in_progress","arguments":"","call_id":"call_c","name":"h"}}
{"type":"response.function_call_arguments.delta","sequence_number":11,"item_id":"fc_il_2","output_index":2,"delta":"{\"c\":3}"}
{"type":"response.function_call_arguments.done","sequence_number":12,"item_id":"fc_il_2","output_index":2,"name":"h","arguments":"{\"c\":3}"}
{"type":"response.output_item.done","sequence_number":13,"output_index":2,"item":{"id":"fc_il_2","type":"function_call","status":"completed","arguments":"{\"c\":3}","call_id":"call_c","name":"h"}}
14 response.completed {"id":"resp_il","status":"completed","output":[{"id":"fc_il_0","type":"function_call","status":"completed","arguments":"{}","call_id":"call_a","name":"f"},{"id":"fc_il_1","type":"function_call","status":"completed","arguments":"{\"b\":2}","call_id":"call_b","name":"g"},{"id":"fc_il_2","type":"function_call","status":"completed","arguments":"{\"c\":3}","call_id":"call_c","name":"h"}],"incomplete_details":null,"error":null,"usage":null}
`},
	{"index 0 for every call", []*Chunk{
		rsChunk(rsCall(0, "call_a", "f", `{"a":`)),
		rsChunk(rsCall(0, "", "", `1}`)),
		rsChunk(rsCall(0, "call_b", "g", `{"b":`)),
		rsChunk(rsCall(0, "", "", `2}`)),
		rsChunk(rsCall(0, "call_c", "h", `{}`)),
		rsFinish("tool_calls"),
	}, nil, `
0 response.created {"id":"resp_il","status":"in_progress","output":[],"incomplete_details":null,"error":null,"usage":null}
1 response.in_progress {"id":"resp_il","status":"in_progress","output":[],"incomplete_details":null,"error":null,"usage":null}
{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"fc_il_0","type":"function_call","status":"in_progress","arguments":"","call_id":"call_a","name":"f"}}
{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_il_0","output_index":0,"delta":"{\"a\":"}
{"type":"response.function_call_arguments.delta","sequence_number":4,"item_id":"fc_il_0","output_index":0,"delta":"1}"}
{"type":"response.function_call_arguments.done","sequence_number":5,"item_id":"fc_il_0","output_index":0,"name":"f","arguments":"{\"a\":1}"}
{"type":"response.output_item.done","sequence_number":6,"output_index":0,"item":{"id":"fc_il_0","type":"function_call","status":"completed","arguments":"{\"a\":1}","call_id":"call_a","name":"f"}}
{"type":"response.output_item.added","sequence_number":7,"output_index":1,"item":{"id":"fc_il_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_b","name":"g"}}
{"type":"response.function_call_arguments.delta","sequence_number":8,"item_id":"fc_il_1","output_index":1,"delta":"{\"b\":"}
{"type":"response.function_call_arguments.delta","sequence_number":9,"item_id":"fc_il_1","output_index":1,"delta":"2}"}
{"type":"response.function_call_arguments.done","sequence_number":10,"item_id":"fc_il_1","output_index":1,"name":"g","arguments":"{\"b\":2}"}
{"type":"response.output_item.done","sequence_number":11,"output_index":1,"item":{"id":"fc_il_1","type":"function_call","status":"completed","arguments":"{\"b\":2}","call_id":"call_b","name":"g"}}
{"type":"response.output_item.added","sequence_number":12,"output_index":2,"item":{"id":"fc_il_2","type":"function_call","status":"in_progress","arguments":"","call_id":"call_c","name":"h"}}
{"type":"response.function_call_arguments.delta","sequence_number":13,"item_id":"fc_il_2","output_index":2,"delta":"{}"}
{"type":"response.function_call_arguments.done","sequence_number":14,"item_id":"fc_il_2","output_index":2,"name":"h","arguments":"{}"}
{"type":"response.output_item.done","sequence_number":15,"output_index":2,"item":{"id":"fc_il_2","type":"function_call","status":"completed","arguments":"{}","call_id":"call_c","name":"h"}}
16 response.completed {"id":"resp_il","status":"completed","output":[{"id":"fc_il_0","type":"function_call","status":"completed","arguments":"{\"a\":1}","call_id":"call_a","name":"f"},{"id":"fc_il_1","type":"function_call","status":"completed","arguments":"{\"b\":2}","call_id":"call_b","name":"g"},{"id":"fc_il_2","type":"function_call","status":"completed","arguments":"{}","call_id":"call_c","name":"h"}],"incomplete_details":null,"error":null,"usage":null}
`},
	{"no index", []*Chunk{
		rsChunk(rsCall(-1, "call_a", "f", `{"a":`)),
		rsChunk(rsCall(-1, "", "", `1}`)),
		rsChunk(rsCall(-1, "call_b", "g", `{}`)),
		rsFinish("tool_calls"),
	}, nil, `
0 response.created {"id":"resp_il","status":"in_progress","output":[],"incomplete_details":null,"error":null,"usage":null}
1 response.in_progress {"id":"resp_il","status":"in_progress","output":[],"incomplete_details":null,"error":null,"usage":null}
{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"fc_il_0","type":"function_call","status":"in_progress","arguments":"","call_id":"call_a","name":"f"}}
{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_il_0","output_index":0,"delta":"{\"a\":"}
{"type":"response.function_call_arguments.delta","sequence_number":4,"item_id":"fc_il_0","output_index":0,"delta":"1}"}
{"type":"response.function_call_arguments.done","sequence_number":5,"item_id":"fc_il_0","output_index":0,"name":"f","arguments":"{\"a\":1}"}
{"type":"response.output_item.done","sequence_number":6,"output_index":0,"item":{"id":"fc_il_0","type":"function_call","status":"completed","arguments":"{\"a\":1}","call_id":"call_a","name":"f"}}
{"type":"response.output_item.added","sequence_number":7,"output_index":1,"item":{"id":"fc_il_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_b","name":"g"}}
{"type":"response.function_call_arguments.delta","sequence_number":8,"item_id":"fc_il_1","output_index":1,"delta":"{}"}
{"type":"response.function_call_arguments.done","sequence_number":9,"item_id":"fc_il_1","output_index":1,"name":"g","arguments":"{}"}
{"type":"response.output_item.done","sequence_number":10,"output_index":1,"item":{"id":"fc_il_1","type":"function_call","status":"completed","arguments":"{}","call_id":"call_b","name":"g"}}
11 response.completed {"id":"resp_il","status":"completed","output":[{"id":"fc_il_0","type":"function_call","status":"completed","arguments":"{\"a\":1}","call_id":"call_a","name":"f"},{"id":"fc_il_1","type":"function_call","status":"completed","arguments":"{}","call_id":"call_b","name":"g"}],"incomplete_details":null,"error":null,"usage":null}
`},
	{"text, calls, text, refusal", []*Chunk{
		rsText("Let me check."),
		rsChunk(rsCall(0, "call_a", "f", `{"a":1}`)),
		rsChunk(rsCall(1, "call_b", "g", `{"b":`)),
		rsChunk(rsCall(1, "", "", `2}`)),
		rsText("Also"),
		rsRefusal("no"),
		rsText(" done."),
		rsFinish("stop"),
	}, nil, `
0 response.created {"id":"resp_il","status":"in_progress","output":[],"incomplete_details":null,"error":null,"usage":null}
1 response.in_progress {"id":"resp_il","status":"in_progress","output":[],"incomplete_details":null,"error":null,"usage":null}
{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_il","type":"message","status":"in_progress","content":[],"role":"assistant"}}
{"type":"response.content_part.added","sequence_number":3,"item_id":"msg_il","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}
{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_il","output_index":0,"content_index":0,"delta":"Let me check.","logprobs":[]}
{"type":"response.output_text.done","sequence_number":5,"item_id":"msg_il","output_index":0,"content_index":0,"text":"Let me check.","logprobs":[]}
{"type":"response.content_part.done","sequence_number":6,"item_id":"msg_il","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":"Let me check."}}
{"type":"response.output_item.done","sequence_number":7,"output_index":0,"item":{"id":"msg_il","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Let me check."}],"role":"assistant"}}
{"type":"response.output_item.added","sequence_number":8,"output_index":1,"item":{"id":"fc_il_0","type":"function_call","status":"in_progress","arguments":"","call_id":"call_a","name":"f"}}
{"type":"response.function_call_arguments.delta","sequence_number":9,"item_id":"fc_il_0","output_index":1,"delta":"{\"a\":1}"}
{"type":"response.function_call_arguments.done","sequence_number":10,"item_id":"fc_il_0","output_index":1,"name":"f","arguments":"{\"a\":1}"}
{"type":"response.output_item.done","sequence_number":11,"output_index":1,"item":{"id":"fc_il_0","type":"function_call","status":"completed","arguments":"{\"a\":1}","call_id":"call_a","name":"f"}}
{"type":"response.output_item.added","sequence_number":12,"output_index":2,"item":{"id":"fc_il_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_b","name":"g"}}
{"type":"response.function_call_arguments.delta","sequence_number":13,"item_id":"fc_il_1","output_index":2,"delta":"{\"b\":"}
{"type":"response.function_call_arguments.delta","sequence_number":14,"item_id":"fc_il_1","output_index":2,"delta":"2}"}
{"type":"response.function_call_arguments.done","sequence_number":15,"item_id":"fc_il_1","output_index":2,"name":"g","arguments":"{\"b\":2}"}
{"type":"response.output_item.done","sequence_number":16,"output_index":2,"item":{"id":"fc_il_1","type":"function_call","status":"completed","arguments":"{\"b\":2}","call_id":"call_b","name":"g"}}
{"type":"response.output_item.added","sequence_number":17,"output_index":3,"item":{"id":"msg_il_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}
{"type":"response.content_part.added","sequence_number":18,"item_id":"msg_il_1","output_index":3,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}
{"type":"response.output_text.delta","sequence_number":19,"item_id":"msg_il_1","output_index":3,"content_index":0,"delta":"Also","logprobs":[]}
{"type":"response.output_text.done","sequence_number":20,"item_id":"msg_il_1","output_index":3,"content_index":0,"text":"Also","logprobs":[]}
{"type":"response.content_part.done","sequence_number":21,"item_id":"msg_il_1","output_index":3,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":"Also"}}
{"type":"response.content_part.added","sequence_number":22,"item_id":"msg_il_1","output_index":3,"content_index":1,"part":{"type":"refusal","refusal":""}}
{"type":"response.refusal.delta","sequence_number":23,"item_id":"msg_il_1","output_index":3,"content_index":1,"delta":"no"}
{"type":"response.refusal.done","sequence_number":24,"item_id":"msg_il_1","output_index":3,"content_index":1,"refusal":"no"}
{"type":"response.content_part.done","sequence_number":25,"item_id":"msg_il_1","output_index":3,"content_index":1,"part":{"type":"refusal","refusal":"no"}}
{"type":"response.content_part.added","sequence_number":26,"item_id":"msg_il_1","output_index":3,"content_index":2,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}
{"type":"response.output_text.delta","sequence_number":27,"item_id":"msg_il_1","output_index":3,"content_index":2,"delta":" done.","logprobs":[]}
{"type":"response.output_text.done","sequence_number":28,"item_id":"msg_il_1","output_index":3,"content_index":2,"text":" done.","logprobs":[]}
{"type":"response.content_part.done","sequence_number":29,"item_id":"msg_il_1","output_index":3,"content_index":2,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":" done."}}
{"type":"response.output_item.done","sequence_number":30,"output_index":3,"item":{"id":"msg_il_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Also"},{"type":"refusal","refusal":"no"},{"type":"output_text","annotations":[],"logprobs":[],"text":" done."}],"role":"assistant"}}
31 response.completed {"id":"resp_il","status":"completed","output":[{"id":"msg_il","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Let me check."}],"role":"assistant"},{"id":"fc_il_0","type":"function_call","status":"completed","arguments":"{\"a\":1}","call_id":"call_a","name":"f"},{"id":"fc_il_1","type":"function_call","status":"completed","arguments":"{\"b\":2}","call_id":"call_b","name":"g"},{"id":"msg_il_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Also"},{"type":"refusal","refusal":"no"},{"type":"output_text","annotations":[],"logprobs":[],"text":" done."}],"role":"assistant"}],"incomplete_details":null,"error":null,"usage":null}
`},
	{"calls cut short by length", []*Chunk{
		rsChunk(rsCall(0, "call_a", "f", `{"a":1}`)),
		rsChunk(rsCall(1, "call_b", "g", `{"b":`)),
		rsFinish("length"),
	}, nil, `
0 response.created {"id":"resp_il","status":"in_progress","output":[],"incomplete_details":null,"error":null,"usage":null}
1 response.in_progress {"id":"resp_il","status":"in_progress","output":[],"incomplete_details":null,"error":null,"usage":null}
{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"fc_il_0","type":"function_call","status":"in_progress","arguments":"","call_id":"call_a","name":"f"}}
{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_il_0","output_index":0,"delta":"{\"a\":1}"}
{"type":"response.function_call_arguments.done","sequence_number":4,"item_id":"fc_il_0","output_index":0,"name":"f","arguments":"{\"a\":1}"}
{"type":"response.output_item.done","sequence_number":5,"output_index":0,"item":{"id":"fc_il_0","type":"function_call","status":"completed","arguments":"{\"a\":1}","call_id":"call_a","name":"f"}}
{"type":"response.output_item.added","sequence_number":6,"output_index":1,"item":{"id":"fc_il_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_b","name":"g"}}
{"type":"response.function_call_arguments.delta","sequence_number":7,"item_id":"fc_il_1","output_index":1,"delta":"{\"b\":"}
{"type":"response.function_call_arguments.done","sequence_number":8,"item_id":"fc_il_1","output_index":1,"name":"g","arguments":"{\"b\":"}
{"type":"response.output_item.done","sequence_number":9,"output_index":1,"item":{"id":"fc_il_1","type":"function_call","status":"incomplete","arguments":"{\"b\":","call_id":"call_b","name":"g"}}
10 response.incomplete {"id":"resp_il","status":"incomplete","output":[{"id":"fc_il_0","type":"function_call","status":"completed","arguments":"{\"a\":1}","call_id":"call_a","name":"f"},{"id":"fc_il_1","type":"function_call","status":"incomplete","arguments":"{\"b\":","call_id":"call_b","name":"g"}],"incomplete_details":{"reason":"max_output_tokens"},"error":null,"usage":null}
`},
	{"calls without finish_reason", []*Chunk{
		rsChunk(rsCall(0, "call_a", "f", `{"a":1}`)),
		rsChunk(rsCall(1, "call_b", "g", `{"b":2}`)),
	}, nil, `
0 response.created {"id":"resp_il","status":"in_progress","output":[],"incomplete_details":null,"error":null,"usage":null}
1 response.in_progress {"id":"resp_il","status":"in_progress","output":[],"incomplete_details":null,"error":null,"usage":null}
{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"fc_il_0","type":"function_call","status":"in_progress","arguments":"","call_id":"call_a","name":"f"}}
{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_il_0","output_index":0,"delta":"{\"a\":1}"}
{"type":"response.function_call_arguments.done","sequence_number":4,"item_id":"fc_il_0","output_index":0,"name":"f","arguments":"{\"a\":1}"}
{"type":"response.output_item.done","sequence_number":5,"output_index":0,"item":{"id":"fc_il_0","type":"function_call","status":"completed","arguments":"{\"a\":1}","call_id":"call_a","name":"f"}}
{"type":"response.output_item.added","sequence_number":6,"output_index":1,"item":{"id":"fc_il_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_b","name":"g"}}
{"type":"response.function_call_arguments.delta","sequence_number":7,"item_id":"fc_il_1","output_index":1,"delta":"{\"b\":2}"}
{"type":"response.function_call_arguments.done","sequence_number":8,"item_id":"fc_il_1","output_index":1,"name":"g","arguments":"{\"b\":2}"}
{"type":"response.output_item.done","sequence_number":9,"output_index":1,"item":{"id":"fc_il_1","type":"function_call","status":"completed","arguments":"{\"b\":2}","call_id":"call_b","name":"g"}}
10 response.completed {"id":"resp_il","status":"completed","output":[{"id":"fc_il_0","type":"function_call","status":"completed","arguments":"{\"a\":1}","call_id":"call_a","name":"f"},{"id":"fc_il_1","type":"function_call","status":"completed","arguments":"{\"b\":2}","call_id":"call_b","name":"g"}],"incomplete_details":null,"error":null,"usage":null}
`},
	{"one call, failed", []*Chunk{
		rsChunk(rsCall(0, "call_a", "f", `{"a":`)),
	}, &Error{Status: 500, Message: "boom", Kind: KindOverloaded}, `
0 response.created {"id":"resp_il","status":"in_progress","output":[],"incomplete_details":null,"error":null,"usage":null}
1 response.in_progress {"id":"resp_il","status":"in_progress","output":[],"incomplete_details":null,"error":null,"usage":null}
{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"fc_il_0","type":"function_call","status":"in_progress","arguments":"","call_id":"call_a","name":"f"}}
{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_il_0","output_index":0,"delta":"{\"a\":"}
{"type":"error","sequence_number":4,"code":null,"message":"boom","param":null}
5 response.failed {"id":"resp_il","status":"failed","output":[{"id":"fc_il_0","type":"function_call","status":"incomplete","arguments":"{\"a\":","call_id":"call_a","name":"f"}],"incomplete_details":null,"error":{"code":"server_error","message":"boom"},"usage":null}
`},
}

func TestResponsesStreamContiguousUnchanged(t *testing.T) {
	for _, tc := range rsContiguous {
		t.Run(tc.name, func(t *testing.T) {
			_, events := rsRun(t, tc.chunks, tc.fail)
			respCheckStream(t, events)
			rsCheckCalls(t, events, tc.fail == nil)
			if got, want := rsCompact(t, events), strings.TrimPrefix(tc.want, "\n"); got != want {
				t.Errorf("events\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestResponsesStreamContiguousFail fails a stream after two calls that
// came one after the other. The earlier call is still open (more of it
// could have come), so, unlike before interleaved calls were kept open,
// it is not done but incomplete, like the last one.
func TestResponsesStreamContiguousFail(t *testing.T) {
	_, events := rsRun(t, []*Chunk{
		rsChunk(rsCall(0, "call_a", "f", `{"a":1}`)),
		rsChunk(rsCall(1, "call_b", "g", `{"b":`)),
	}, &Error{Status: 500, Message: "boom", Kind: KindOverloaded})
	respCheckStream(t, events)
	calls := rsCheckCalls(t, events, false)
	if got, want := rsSummary(calls), `call_a:f({"a":1})/incomplete call_b:g({"b":)/incomplete`; got != want {
		t.Errorf("calls\n%s\nwant\n%s", got, want)
	}
	want := []string{
		"response.created", "response.in_progress",
		"response.output_item.added", "response.function_call_arguments.delta",
		"response.output_item.added", "response.function_call_arguments.delta",
		"error", "response.failed",
	}
	if got := respSSETypes(events); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
