package translate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

func TestAnthropicInboundDecodeGolden(t *testing.T) {
	for _, name := range []string{"inbound_basic", "inbound_tools", "inbound_structured"} {
		t.Run(name, func(t *testing.T) {
			req, err := AnthropicInbound.DecodeRequest(anthRead(t, name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			anthGolden(t, name+".want.json", anthMarshal(t, req))
		})
	}
}

func TestAnthropicInboundDecodeRefusals(t *testing.T) {
	base := func(extra string) string {
		return `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"Hi"}]` + extra + `}`
	}
	msgs := func(content string) string {
		return `{"model":"m","max_tokens":16,"messages":[` + content + `]}`
	}
	cases := []struct {
		name, body, param string
	}{
		{"not json", `{"model":`, ""},
		{"array body", `[]`, ""},
		{"wrong type", `{"model":"m","max_tokens":"16","messages":[]}`, ""},
		{"no model", `{"max_tokens":16,"messages":[]}`, "model"},
		{"no messages", `{"model":"m","max_tokens":16}`, "messages"},
		{"no max_tokens", `{"model":"m","messages":[{"role":"user","content":"Hi"}]}`, "max_tokens"},
		{"zero max_tokens", `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"Hi"}]}`, "max_tokens"},
		{"server tool", base(`,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}]`), "tools.0.type"},
		{"computer tool", base(`,"tools":[{"name":"f","input_schema":{"type":"object"}},{"type":"computer_20250124","name":"computer","display_width_px":1024,"display_height_px":768}]`), "tools.1.type"},
		{"tool without name", base(`,"tools":[{"input_schema":{"type":"object"}}]`), "tools.0.name"},
		{"tool without schema", base(`,"tools":[{"name":"f"}]`), "tools.0.input_schema"},
		{"bad tool choice", base(`,"tool_choice":{"type":"sometimes"}`), "tool_choice.type"},
		{"tool choice without name", base(`,"tool_choice":{"type":"tool"}`), "tool_choice.name"},
		{"mcp servers", base(`,"mcp_servers":[{"type":"url","url":"https://mcp.example/sse","name":"x"}]`), "mcp_servers"},
		{"text output format", base(`,"output_config":{"format":{"type":"text"}}`), "output_config.format"},
		{"bad output format", base(`,"output_format":[1]`), "output_config.format"},
		{"system image", base(`,"system":[{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]`), "system.0.type"},
		{"system number", base(`,"system":42`), "system"},
		{"developer role", msgs(`{"role":"developer","content":"x"}`), "messages.0.role"},
		{"no content", msgs(`{"role":"user"}`), "messages.0.content"},
		{"content object", msgs(`{"role":"user","content":{"type":"text"}}`), "messages.0.content"},
		{"content blocks malformed", msgs(`{"role":"user","content":[{"type":1}]}`), "messages.0.content"},
		{"document", msgs(`{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}}]}`), "messages.0.content.0.type"},
		{"file image", msgs(`{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"file_011"}}]}`), "messages.0.content.0.source.type"},
		{"image without source", msgs(`{"role":"user","content":[{"type":"image"}]}`), "messages.0.content.0.source"},
		{"image without data", msgs(`{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png"}}]}`), "messages.0.content.0.source"},
		{"image without url", msgs(`{"role":"user","content":[{"type":"image","source":{"type":"url"}}]}`), "messages.0.content.0.source.url"},
		{"tool_use in user", msgs(`{"role":"user","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}`), "messages.0.content.0.type"},
		{"tool_result without id", msgs(`{"role":"user","content":[{"type":"tool_result","content":"x"}]}`), "messages.0.content.0.tool_use_id"},
		{"tool_result document", msgs(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"document"}]}]}`), "messages.0.content.0.content.0.type"},
		{"tool_result object", msgs(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":{"a":1}}]}`), "messages.0.content.0.content"},
		{"image in assistant", msgs(`{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]}`), "messages.1.content.0.type"},
		{"tool_use without id", msgs(`{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{}}]}`), "messages.1.content.0.id"},
		{"tool_use without name", msgs(`{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t","input":{}}]}`), "messages.1.content.0.name"},
		{"tool_use array input", msgs(`{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":[1]}]}`), "messages.1.content.0.input"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := AnthropicInbound.DecodeRequest([]byte(c.body))
			e := anthAsError(t, err)
			if e.Status != http.StatusBadRequest || e.Kind != KindInvalidRequest || e.Param != c.param {
				t.Errorf("status %d kind %d param %q (%s), want 400 param %q", e.Status, e.Kind, e.Param, e.Message, c.param)
			}
			var body struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(AnthropicInbound.EncodeError(e), &body); err != nil || body.Type != "error" ||
				body.Error.Type != "invalid_request_error" || body.Error.Message != e.Message {
				t.Errorf("error body %+v (%v)", body, err)
			}
		})
	}
}

func TestAnthropicInboundDecodeDetails(t *testing.T) {
	req, err := AnthropicInbound.DecodeRequest(anthRead(t, "inbound_tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	if req.StreamOptions == nil || !req.StreamOptions.IncludeUsage {
		t.Error("a stream request does not ask for usage")
	}
	if req.ParallelToolCalls == nil || *req.ParallelToolCalls {
		t.Error("disable_parallel_tool_use was not carried")
	}
	// A user turn with only tool results yields no user message, and one
	// with nothing in it yields an empty user message.
	req, err = AnthropicInbound.DecodeRequest([]byte(`{"model":"m","max_tokens":5,"messages":[
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"}]},
		{"role":"user","content":[]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Message{{Role: "tool", ToolCallID: "t1", Content: TextContent("")}, {Role: "user", Content: PartsContent()}}
	if !reflect.DeepEqual(req.Messages, want) {
		t.Errorf("messages %s", anthMarshal(t, req.Messages))
	}
	for tc, want := range map[string]string{`{"type":"auto"}`: `"auto"`, `{"type":"any"}`: `"required"`, `{"type":"none"}`: `"none"`,
		`{"type":"tool","name":"f"}`: `{"type":"function","function":{"name":"f"}}`} {
		req, err := AnthropicInbound.DecodeRequest([]byte(`{"model":"m","max_tokens":5,"messages":[],"tool_choice":` + tc + `}`))
		if err != nil {
			t.Fatal(err)
		}
		anthJSONEq(t, anthMarshal(t, req.ToolChoice), want)
		if req.ParallelToolCalls != nil {
			t.Errorf("%s: parallel_tool_calls set", tc)
		}
	}
}

func TestAnthropicEncodeResponseGolden(t *testing.T) {
	for _, name := range []string{"encode_tool_calls", "encode_text"} {
		t.Run(name, func(t *testing.T) {
			var resp ChatResponse
			if err := json.Unmarshal(anthRead(t, name+".in.json"), &resp); err != nil {
				t.Fatal(err)
			}
			out, err := AnthropicInbound.EncodeResponse(&resp)
			if err != nil {
				t.Fatal(err)
			}
			anthGolden(t, name+".want.json", out)
		})
	}
}

func TestAnthropicEncodeResponseDetails(t *testing.T) {
	resp := &ChatResponse{ID: "chatcmpl-1", Model: "m", Choices: []Choice{{Message: Message{Role: "assistant",
		Content: Content{Null: true}, Refusal: "I can't help with that."}, FinishReason: FinishContentFilter}},
		Usage: &Usage{PromptTokens: 1300, CompletionTokens: 5, PromptTokensDetails: &TokenDetails{CachedTokens: 1000}, CacheCreationTokens: 200}}
	out, err := AnthropicInbound.EncodeResponse(resp)
	if err != nil {
		t.Fatal(err)
	}
	anthJSONEq(t, out, `{"id":"msg_chatcmpl-1","type":"message","role":"assistant","model":"m",
		"content":[{"type":"text","text":"I can't help with that."}],"stop_reason":"refusal","stop_sequence":null,
		"usage":{"input_tokens":100,"output_tokens":5,"cache_creation_input_tokens":200,"cache_read_input_tokens":1000}}`)

	// No choices, no usage, no id: still a well-formed message.
	out, err = AnthropicInbound.EncodeResponse(&ChatResponse{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		ID      string `json:"id"`
		Content []any  `json:"content"`
		Stop    string `json:"stop_reason"`
	}
	if err := json.Unmarshal(out, &msg); err != nil || !strings.HasPrefix(msg.ID, "msg_") || len(msg.ID) != 28 || msg.Content == nil || msg.Stop != "end_turn" {
		t.Errorf("empty response → %s (%v)", out, err)
	}
}

func TestAnthropicEncodeError(t *testing.T) {
	for status, typ := range map[int]string{400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
		403: "permission_error", 404: "not_found_error", 409: "invalid_request_error", 413: "request_too_large",
		429: "rate_limit_error", 500: "api_error", 502: "api_error", 503: "api_error", 504: "timeout_error", 529: "overloaded_error"} {
		out := AnthropicInbound.EncodeError(&Error{Status: status, Message: "went \"wrong\"", Type: "whatever"})
		anthJSONEq(t, out, `{"type":"error","error":{"type":"`+typ+`","message":"went \"wrong\""}}`)
	}
	anthJSONEq(t, AnthropicInbound.EncodeError(nil), `{"type":"error","error":{"type":"api_error","message":"Internal error."}}`)
	if _, err := AnthropicInbound.EncodeResponse(nil); err == nil {
		t.Error("a nil response encodes")
	}
	// An upstream's classified error keeps its meaning for Anthropic clients.
	e := Anthropic.ParseError(529, nil, []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	anthJSONEq(t, AnthropicInbound.EncodeError(e), `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
}

// anthSSEEvent is one parsed SSE event of the encoder's output.
type anthSSEEvent struct {
	Event string
	Data  string // normalised JSON
}

// anthParseSSE splits the encoder's output into events, checking that each
// is exactly "event: NAME\ndata: JSON\n\n".
func anthParseSSE(t testing.TB, out string) []anthSSEEvent {
	t.Helper()
	if !strings.HasSuffix(out, "\n\n") {
		t.Fatalf("output does not end with a blank line: %q", out)
	}
	var evs []anthSSEEvent
	for _, raw := range strings.Split(strings.TrimSuffix(out, "\n\n"), "\n\n") {
		lines := strings.Split(raw, "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "event: ") || !strings.HasPrefix(lines[1], "data: ") {
			t.Fatalf("malformed event %q", raw)
		}
		name, data := strings.TrimPrefix(lines[0], "event: "), strings.TrimPrefix(lines[1], "data: ")
		var typed struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(data), &typed); err != nil || typed.Type != name {
			t.Fatalf("event %q has data type %q (%v)", name, typed.Type, err)
		}
		evs = append(evs, anthSSEEvent{name, anthNorm(t, []byte(data))})
	}
	return evs
}

// anthEncodeStream runs chunks through the stream encoder, one Write per
// call checked to hold whole events.
func anthEncodeStream(t testing.TB, chunks []*Chunk, usage *Usage) string {
	t.Helper()
	var w anthWholeEvents
	enc := AnthropicInbound.NewStreamEncoder(&w, "claude-public")
	for _, c := range chunks {
		if err := enc.WriteChunk(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(usage); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(usage); err != nil { // a second Close writes nothing
		t.Fatal(err)
	}
	if w.err != "" {
		t.Fatal(w.err)
	}
	return w.buf.String()
}

// anthWholeEvents records writes, noting any that is not whole events.
type anthWholeEvents struct {
	buf bytes.Buffer
	err string
}

func (w *anthWholeEvents) Write(p []byte) (int, error) {
	if len(p) == 0 || !bytes.HasPrefix(p, []byte("event: ")) || !bytes.HasSuffix(p, []byte("\n\n")) {
		w.err = "a write of partial events: " + string(p)
	}
	return w.buf.Write(p)
}

func TestAnthropicStreamEncodeGolden(t *testing.T) {
	for _, name := range []string{"encode_stream_tools", "encode_stream_text"} {
		t.Run(name, func(t *testing.T) {
			var chunks []*Chunk
			if err := json.Unmarshal(anthRead(t, name+".chunks.json"), &chunks); err != nil {
				t.Fatal(err)
			}
			got := anthEncodeStream(t, chunks, nil)
			path := filepath.Join(anthDir, name+".want.sse")
			if *anthUpdate {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want := anthParseSSE(t, string(anthRead(t, name+".want.sse")))
			if g := anthParseSSE(t, got); !reflect.DeepEqual(g, want) {
				t.Errorf("events differ\n--- got\n%s\n--- want\n%s", got, anthRead(t, name+".want.sse"))
			}
		})
	}
}

func TestAnthropicStreamEncodeDetails(t *testing.T) {
	str := func(s string) *string { return &s }
	idx := func(i int) *int { return &i }
	t.Run("empty stream", func(t *testing.T) {
		evs := anthParseSSE(t, anthEncodeStream(t, nil, &Usage{PromptTokens: 10, CompletionTokens: 0}))
		names := []string{}
		for _, e := range evs {
			names = append(names, e.Event)
		}
		if strings.Join(names, ",") != "message_start,message_delta,message_stop" {
			t.Errorf("events %v", names)
		}
		if !strings.Contains(evs[1].Data, `"input_tokens": 10`) || !strings.Contains(evs[1].Data, `"stop_reason": "end_turn"`) {
			t.Errorf("message_delta %s", evs[1].Data)
		}
	})
	t.Run("text after a tool call, close usage wins", func(t *testing.T) {
		out := anthEncodeStream(t, []*Chunk{
			{ID: "msg_x", Usage: &Usage{PromptTokens: 50}, Choices: []ChunkChoice{{Delta: Delta{ToolCalls: []ToolCall{{Index: idx(0), Function: FunctionCall{Name: "f", Arguments: `{}`}}}}}}},
			{Choices: []ChunkChoice{{Delta: Delta{Content: str("after"), Refusal: str(" and a refusal")}}, {Index: 1, Delta: Delta{Content: str("ignored")}}}},
			{Choices: []ChunkChoice{{Delta: Delta{ToolCalls: []ToolCall{{Index: idx(0), Function: FunctionCall{Arguments: `late`}}}}}}},
		}, &Usage{PromptTokens: 70, CompletionTokens: 3, PromptTokensDetails: &TokenDetails{CachedTokens: 20}})
		evs := anthParseSSE(t, out)
		want := []string{
			`message_start {"message":{"content":[],"id":"msg_x","model":"claude-public","role":"assistant","stop_reason":null,"stop_sequence":null,"type":"message","usage":{"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"input_tokens":50,"output_tokens":0}},"type":"message_start"}`,
			`content_block_start {"content_block":{"id":"","input":{},"name":"f","type":"tool_use"},"index":0,"type":"content_block_start"}`,
			`content_block_delta {"delta":{"partial_json":"{}","type":"input_json_delta"},"index":0,"type":"content_block_delta"}`,
			`content_block_stop {"index":0,"type":"content_block_stop"}`,
			`content_block_start {"content_block":{"text":"","type":"text"},"index":1,"type":"content_block_start"}`,
			`content_block_delta {"delta":{"text":"after","type":"text_delta"},"index":1,"type":"content_block_delta"}`,
			`content_block_delta {"delta":{"text":" and a refusal","type":"text_delta"},"index":1,"type":"content_block_delta"}`,
			`content_block_delta {"delta":{"partial_json":"late","type":"input_json_delta"},"index":0,"type":"content_block_delta"}`,
			`content_block_stop {"index":1,"type":"content_block_stop"}`,
			`message_delta {"delta":{"stop_reason":"end_turn","stop_sequence":null},"type":"message_delta","usage":{"cache_creation_input_tokens":0,"cache_read_input_tokens":20,"input_tokens":50,"output_tokens":3}}`,
			`message_stop {"type":"message_stop"}`,
		}
		if len(evs) != len(want) {
			t.Fatalf("%d events, want %d:\n%s", len(evs), len(want), out)
		}
		for i, e := range evs {
			var compact bytes.Buffer
			_ = json.Compact(&compact, []byte(e.Data))
			got := e.Event + " " + compact.String()
			if strings.Contains(want[i], `"id":""`) {
				// the missing tool-call id is generated
				var ev struct {
					ContentBlock struct{ ID string } `json:"content_block"`
				}
				_ = json.Unmarshal([]byte(e.Data), &ev)
				if !strings.HasPrefix(ev.ContentBlock.ID, "toolu_") {
					t.Errorf("generated id %q", ev.ContentBlock.ID)
				}
				got = strings.Replace(got, `"id":"`+ev.ContentBlock.ID+`"`, `"id":""`, 1)
			}
			if got != want[i] {
				t.Errorf("event %d\n got %s\nwant %s", i, got, want[i])
			}
		}
	})
	t.Run("tool calls without an index", func(t *testing.T) {
		out := anthEncodeStream(t, []*Chunk{
			{ID: "x", Choices: []ChunkChoice{{Delta: Delta{ToolCalls: []ToolCall{{ID: "a", Function: FunctionCall{Name: "f", Arguments: `{"x":`}}}}}}},
			{Choices: []ChunkChoice{{Delta: Delta{ToolCalls: []ToolCall{{Function: FunctionCall{Arguments: `1}`}}}}}}},
			{Choices: []ChunkChoice{{Delta: Delta{ToolCalls: []ToolCall{{ID: "b", Function: FunctionCall{Name: "g"}}}}}}},
			{Choices: []ChunkChoice{{Delta: Delta{ToolCalls: []ToolCall{{Index: idx(1), ID: "c", Function: FunctionCall{Name: "h", Arguments: `{}`}}}}, FinishReason: str("tool_calls")}}},
		}, nil)
		chunks, err := anthDecodeAll(t, strings.NewReader(out))
		if err != io.EOF {
			t.Fatal(err)
		}
		// a and its continuation are call 0, b is a new call 1; the
		// explicit index 1 then belongs to b's block.
		if got := anthSummary(chunks); !strings.Contains(got, `"0":{"id":"a","function":{"name":"f","arguments":"{\"x\":1}"}}`) ||
			!strings.Contains(got, `"1":{"id":"b","function":{"name":"g","arguments":"{}"}}`) || !strings.Contains(got, `"finish":"tool_calls"`) {
			t.Errorf("summary %s\n%s", got, out)
		}
	})
	t.Run("fail", func(t *testing.T) {
		var w bytes.Buffer
		enc := AnthropicInbound.NewStreamEncoder(&w, "m")
		if err := enc.WriteChunk(&Chunk{ID: "c", Choices: []ChunkChoice{{Delta: Delta{Content: str("Hi")}}}}); err != nil {
			t.Fatal(err)
		}
		if err := enc.Fail(&Error{Status: 529, Message: "Overloaded"}); err != nil {
			t.Fatal(err)
		}
		_ = enc.Close(nil) // after Fail: nothing more
		_ = enc.WriteChunk(&Chunk{Choices: []ChunkChoice{{Delta: Delta{Content: str("more")}}}})
		out := w.String()
		if !strings.HasSuffix(out, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n") ||
			strings.Contains(out, "message_stop") || strings.Contains(out, "more") {
			t.Errorf("output %q", out)
		}
		// Our own decoder reads the error event back as the same kind.
		_, err := anthDecodeAll(t, strings.NewReader(out))
		if e := anthAsError(t, err); e.Kind != KindOverloaded {
			t.Errorf("decoded %+v", e)
		}
	})
	t.Run("write error", func(t *testing.T) {
		boom := errors.New("client gone")
		enc := AnthropicInbound.NewStreamEncoder(anthFailWriter{boom}, "m")
		if err := enc.WriteChunk(&Chunk{Choices: []ChunkChoice{{Delta: Delta{Content: str("Hi")}}}}); !errors.Is(err, boom) {
			t.Errorf("got %v", err)
		}
	})
}

type anthFailWriter struct{ err error }

func (w anthFailWriter) Write([]byte) (int, error) { return 0, w.err }

// anthNormRequest rewrites a Messages request so that equivalent forms
// compare equal: string content becomes one text block, and the fields
// the gateway documents as dropped are removed.
func anthNormRequest(t testing.TB, b []byte) string {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"thinking", "service_tier"} {
		delete(v, k)
	}
	textBlocks := func(c any) any {
		if s, ok := c.(string); ok {
			return []any{map[string]any{"type": "text", "text": s}}
		}
		return c
	}
	var strip func(x any)
	strip = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			// cache_control is carried: compared as is
			delete(x, "is_error")
			delete(x, "strict") // a tool's strict flag is not sent to Anthropic
			if x["type"] == "custom" {
				delete(x, "type")
			}
			for _, y := range x {
				strip(y)
			}
		case []any:
			for _, y := range x {
				strip(y)
			}
		}
	}
	if s, ok := v["system"]; ok {
		v["system"] = textBlocks(s)
	}
	if msgs, ok := v["messages"].([]any); ok {
		for _, m := range msgs {
			mm := m.(map[string]any)
			mm["content"] = textBlocks(mm["content"])
			// thinking blocks are dropped
			if blocks, ok := mm["content"].([]any); ok {
				kept := []any{}
				for _, b := range blocks {
					if bm, ok := b.(map[string]any); ok && bm["type"] == "thinking" {
						continue
					}
					kept = append(kept, b)
				}
				mm["content"] = kept
			}
		}
	}
	strip(v)
	return anthNorm(t, anthMarshal(t, v))
}

// TestAnthropicRoundTripRequest: Messages → canonical → Messages keeps the
// request's meaning.
func TestAnthropicRoundTripRequest(t *testing.T) {
	for _, name := range []string{"inbound_basic", "inbound_tools"} {
		t.Run(name, func(t *testing.T) {
			in := anthRead(t, name+".json")
			req, err := AnthropicInbound.DecodeRequest(in)
			if err != nil {
				t.Fatal(err)
			}
			tgt := *anthTarget
			tgt.UpstreamModel = req.Model
			hr, err := Anthropic.NewRequest(req, &tgt, req.Stream)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(hr.Body)
			if g, w := anthNormRequest(t, out), anthNormRequest(t, in); g != w {
				t.Errorf("round trip changed the request\n--- got\n%s\n--- want\n%s", g, w)
			}
		})
	}
}

// TestAnthropicRoundTripCanonical: canonical → Messages → canonical keeps
// the conversation.
func TestAnthropicRoundTripCanonical(t *testing.T) {
	var req ChatRequest
	if err := json.Unmarshal(anthRead(t, "request_tools.in.json"), &req); err != nil {
		t.Fatal(err)
	}
	hr, err := Anthropic.NewRequest(&req, anthTarget, true)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(hr.Body)
	back, err := AnthropicInbound.DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	// Tool calls and results survive with their (sanitised) ids and
	// arguments, and every text and image arrives in order.
	var texts, calls, results []string
	for _, m := range back.Messages {
		for _, tc := range m.ToolCalls {
			calls = append(calls, tc.ID+" "+tc.Function.Name+" "+tc.Function.Arguments)
		}
		if m.Role == "tool" {
			results = append(results, m.ToolCallID+" "+m.Content.String())
			continue
		}
		if m.Content.IsParts {
			for _, p := range m.Content.Parts {
				if p.Type == "image_url" {
					texts = append(texts, m.Role+" image "+p.ImageURL.URL)
				} else {
					texts = append(texts, m.Role+" "+p.Text)
				}
			}
		} else if m.Content.Text != "" {
			texts = append(texts, m.Role+" "+m.Content.Text)
		}
	}
	want := []string{
		"system Use tools when helpful.", "system Answer in English.",
		"user What's the weather like in San Francisco?", "user image data:image/jpeg;base64,/9j/4AAQSkZJRg==",
		"assistant I'll check the current weather in San Francisco for you.",
		"user And in Paris?", "user image https://upload.wikimedia.org/wikipedia/commons/a/a7/Camponotus_flavomarginatus_ant.jpg",
		"user Thanks.",
	}
	if !reflect.DeepEqual(texts, want) {
		t.Errorf("texts\n%q\nwant\n%q", texts, want)
	}
	if w := []string{`toolu_01A09q90qw90lq917835lq9 get_weather {"location":"San Francisco, CA","unit":"celsius"}`, `call_time_2 get_time {}`}; !reflect.DeepEqual(calls, w) {
		t.Errorf("calls %q", calls)
	}
	if w := []string{"toolu_01A09q90qw90lq917835lq9 15 degrees", "call_time_2 09:30 PST"}; !reflect.DeepEqual(results, w) {
		t.Errorf("results %q", results)
	}
	if back.OutputLimit() != 2048 || *back.TopK != 40 || back.ToolChoice.Mode != "required" || *back.ParallelToolCalls || len(back.Tools) != 2 {
		t.Errorf("options %+v", back)
	}
}

// TestAnthropicRoundTripResponse: a Messages response through the
// canonical form comes back the same (thinking dropped, id kept).
func TestAnthropicRoundTripResponse(t *testing.T) {
	for _, name := range []string{"response_text", "response_tool_use", "response_tool_only"} {
		t.Run(name, func(t *testing.T) {
			in := anthRead(t, name+".anthropic.json")
			resp, err := Anthropic.ParseResponse(in, "claude-public")
			if err != nil {
				t.Fatal(err)
			}
			out, err := AnthropicInbound.EncodeResponse(resp)
			if err != nil {
				t.Fatal(err)
			}
			var want map[string]any
			_ = json.Unmarshal(in, &want)
			want["model"] = "claude-public"
			blocks := []any{}
			for _, b := range want["content"].([]any) {
				if b.(map[string]any)["type"] != "thinking" {
					blocks = append(blocks, b)
				}
			}
			want["content"] = blocks
			u := want["usage"].(map[string]any)
			delete(u, "service_tier")
			for _, k := range []string{"cache_creation_input_tokens", "cache_read_input_tokens"} {
				if _, ok := u[k]; !ok {
					u[k] = 0
				}
			}
			anthJSONEq(t, out, string(anthMarshal(t, want)))
		})
	}
}

// TestAnthropicRoundTripStream: an Anthropic stream decoded and encoded
// again decodes to the same chunks.
func TestAnthropicRoundTripStream(t *testing.T) {
	anthFixedClock(t)
	for _, name := range []string{"stream_text", "stream_tool_use", "stream_server_tool"} {
		t.Run(name, func(t *testing.T) {
			chunks, err := anthDecodeAll(t, bytes.NewReader(anthRead(t, name+".sse")))
			if err != io.EOF {
				t.Fatal(err)
			}
			var usage *Usage
			for _, c := range chunks {
				if c.Usage != nil {
					usage = c.Usage
				}
			}
			sse := anthEncodeStream(t, chunks, usage)
			again, err := anthDecodeAll(t, strings.NewReader(sse))
			if err != io.EOF {
				t.Fatal(err)
			}
			// The re-encoded stream has one text block per run of text, so
			// compare the content, calls, finish and usage.
			if g, w := anthSummary(again), anthSummary(chunks); g != w {
				t.Errorf("round trip changed the stream\n got %s\nwant %s", g, w)
			}
		})
	}
}

// anthSummary folds chunks into the message they build.
func anthSummary(chunks []*Chunk) string {
	var text strings.Builder
	calls := map[int]*ToolCall{}
	var finish string
	var usage *Usage
	for _, c := range chunks {
		if c.Usage != nil {
			usage = c.Usage
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				text.WriteString(*ch.Delta.Content)
			}
			for _, tc := range ch.Delta.ToolCalls {
				cur, ok := calls[*tc.Index]
				if !ok {
					cur = &ToolCall{ID: tc.ID, Function: FunctionCall{Name: tc.Function.Name}}
					calls[*tc.Index] = cur
				}
				cur.Function.Arguments += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	b, _ := json.Marshal(map[string]any{"text": text.String(), "calls": calls, "finish": finish, "usage": usage,
		"cache_creation": usage.CacheCreationTokens})
	return string(b)
}

func TestAnthropicCountTokens(t *testing.T) {
	n, err := AnthropicCountTokens([]byte(`{"model":"claude-sonnet-4-5","system":"12345678",
		"messages":[{"role":"user","content":[{"type":"text","text":"abcd"},{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"fn","input":{"a":1}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"ok"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]}],
		"tools":[{"name":"fn","description":"does","input_schema":{"type":"object"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	// text: 8 + 4 + (2 + 7) + 2 = 23 bytes; tools: 2 + 4 + 17 = 23 bytes → 46 bytes ≈ 12 tokens; 2 images
	if want := int64(12 + 2*1600); n != want {
		t.Errorf("count %d, want %d", n, want)
	}
	if string(AnthropicCountTokensResponse(n)) != `{"input_tokens":3212}` {
		t.Errorf("response %s", AnthropicCountTokensResponse(n))
	}
	if _, err := AnthropicCountTokens([]byte(`{"model":"m"}`)); anthAsError(t, err).Param != "messages" {
		t.Error("a request without messages is counted")
	}
}

func FuzzAnthropicInboundRequest(f *testing.F) {
	for _, name := range []string{"inbound_basic", "inbound_tools", "inbound_structured"} {
		f.Add(anthRead(f, name+".json"))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := AnthropicCountTokens(body)
		if err != nil {
			anthAsError(t, err)
		} else if n < 0 {
			t.Fatalf("negative count %d", n)
		}
		req, err := AnthropicInbound.DecodeRequest(body)
		if err != nil {
			if e := anthAsError(t, err); e.Status != http.StatusBadRequest {
				t.Fatalf("status %d", e.Status)
			}
			return
		}
		if _, err := json.Marshal(req); err != nil {
			t.Fatal(err)
		}
		// Whatever was accepted can be sent on to Anthropic or refused.
		if _, err := Anthropic.NewRequest(req, anthTarget, req.Stream); err != nil {
			anthAsError(t, err)
		}
	})
}

// FuzzAnthropicStreamEncode writes arbitrary chunk sequences: the output
// must always be a stream our decoder reads to its end.
func FuzzAnthropicStreamEncode(f *testing.F) {
	for _, name := range []string{"encode_stream_tools", "encode_stream_text"} {
		f.Add(anthRead(f, name+".chunks.json"))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var chunks []*Chunk
		if json.Unmarshal(body, &chunks) != nil {
			return
		}
		var w bytes.Buffer
		enc := AnthropicInbound.NewStreamEncoder(&w, "m")
		for _, c := range chunks {
			if c == nil {
				continue
			}
			if err := enc.WriteChunk(c); err != nil {
				t.Fatal(err)
			}
		}
		if err := enc.Close(nil); err != nil {
			t.Fatal(err)
		}
		if _, err := anthDecodeAll(t, &w); err != io.EOF {
			t.Fatalf("the encoder's output does not decode: %v", err)
		}
	})
}

// FuzzAnthropicEncodeResponse writes arbitrary canonical responses.
func FuzzAnthropicEncodeResponse(f *testing.F) {
	for _, name := range []string{"encode_tool_calls", "encode_text"} {
		f.Add(anthRead(f, name+".in.json"))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var resp ChatResponse
		if json.Unmarshal(body, &resp) != nil {
			return
		}
		out, err := AnthropicInbound.EncodeResponse(&resp)
		if err != nil {
			t.Fatal(err)
		}
		// The answer is a Messages response our adapter reads back.
		if _, err := Anthropic.ParseResponse(out, "m"); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
	})
}

// An OpenAI-compatible upstream (Ollama) that numbers every parallel call
// 0 still yields one tool_use block per call (and one Responses item).
func TestAnthropicStreamEncoderSeparatesCallsThatReuseAnIndex(t *testing.T) {
	zero := 0
	str := func(s string) *string { return &s }
	chunks := []*Chunk{
		{ID: "c", Choices: []ChunkChoice{{Delta: Delta{Role: "assistant", Content: str("")}}}},
		{ID: "c", Choices: []ChunkChoice{{Delta: Delta{ToolCalls: []ToolCall{{Index: &zero, ID: "call_a", Type: "function", Function: FunctionCall{Name: "read", Arguments: `{"path":"a"}`}}}}}}},
		{ID: "c", Choices: []ChunkChoice{{Delta: Delta{ToolCalls: []ToolCall{{Index: &zero, ID: "call_b", Type: "function", Function: FunctionCall{Name: "write", Arguments: `{"path":"b"}`}}}}}}},
		{ID: "c", Choices: []ChunkChoice{{Delta: Delta{}, FinishReason: str("tool_calls")}}},
	}
	var buf bytes.Buffer
	enc := AnthropicInbound.NewStreamEncoder(&buf, "m")
	for _, c := range chunks {
		if err := enc.WriteChunk(c); err != nil {
			t.Fatal(err)
		}
	}
	enc.Close(nil)
	msg := accumulate(t, buf.String())
	for _, b := range msg.Content {
		t.Logf("block %s id=%s name=%s input=%s", b.Type, b.ID, b.Name, b.Input)
	}
	if len(msg.Content) != 2 {
		t.Errorf("%d tool_use blocks, want 2 (second call merged into first)", len(msg.Content))
	}
	// The Responses encoder handles the same input:
	buf.Reset()
	renc := ResponsesInbound.NewStreamEncoder(&buf, "m")
	for _, c := range chunks {
		if err := renc.WriteChunk(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := renc.Close(nil); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), `event: response.output_item.done`); n != 2 {
		t.Errorf("%d Responses output items, want 2:\n%s", n, buf.String())
	}
}

func accumulate(t *testing.T, sse string) anthropic.Message {
	var msg anthropic.Message
	sc := bufio.NewScanner(strings.NewReader(sse))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		var ev anthropic.MessageStreamEventUnion
		if err := json.Unmarshal([]byte(line[6:]), &ev); err != nil {
			t.Fatalf("sdk: %v", err)
		}
		if err := msg.Accumulate(ev); err != nil {
			t.Fatalf("sdk accumulate: %v", err)
		}
	}
	return msg
}
