package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// Run with -responses.update to rewrite the .want.json files from the
// current output (then review the diff: the goldens follow the API
// reference, not the code).
var respUpdate = flag.Bool("responses.update", false, "rewrite the Responses golden files")

const respTestdata = "testdata/responses"

// respInputs lists the golden inputs of a directory (the files that are
// not .want.json).
func respInputs(t testing.TB, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(respTestdata, dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var in []string
	for _, f := range files {
		if !strings.HasSuffix(f, ".want.json") {
			in = append(in, f)
		}
	}
	if len(in) == 0 {
		t.Fatalf("no golden inputs in %s", dir)
	}
	return in
}

func respWantPath(in string) string { return strings.TrimSuffix(in, ".json") + ".want.json" }

func respRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// respNormalize parses JSON and writes it back indented with sorted keys,
// so that documents compare regardless of key order and spacing.
func respNormalize(t testing.TB, b []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, b)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// respGolden compares got with the golden file (or rewrites it under
// -responses.update).
func respGolden(t *testing.T, wantPath string, got []byte) {
	t.Helper()
	norm := respNormalize(t, got)
	if *respUpdate {
		if err := os.WriteFile(wantPath, []byte(norm), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := respNormalize(t, respRead(t, wantPath))
	if norm != want {
		t.Errorf("%s: mismatch\n--- got\n%s\n--- want\n%s", wantPath, norm, want)
	}
}

// respDecode decodes a Responses request or fails the test.
func respDecode(t testing.TB, body []byte) *ChatRequest {
	t.Helper()
	req, err := ResponsesInbound.DecodeRequest(body)
	if err != nil {
		t.Fatalf("DecodeRequest: %v", err)
	}
	return req
}

func TestResponsesDecodeGolden(t *testing.T) {
	for _, in := range respInputs(t, "decode") {
		t.Run(filepath.Base(in), func(t *testing.T) {
			req := respDecode(t, respRead(t, in))
			got, err := json.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			respGolden(t, respWantPath(in), got)
		})
	}
}

// TestResponsesDecodeRules checks the rules the goldens show, one by one,
// so that a regenerated golden cannot silently change them.
func TestResponsesDecodeRules(t *testing.T) {
	dir := filepath.Join(respTestdata, "decode")
	load := func(name string) *ChatRequest { return respDecode(t, respRead(t, filepath.Join(dir, name))) }

	req := load("instructions.json")
	if len(req.Messages) != 2 || req.Messages[0].Role != "system" || req.Messages[0].Content.Text != "Talk like a pirate." ||
		req.Messages[1].Role != "user" || req.Messages[1].Content.Text != "Are semicolons optional in JavaScript?" {
		t.Errorf("instructions: messages = %+v", req.Messages)
	}
	if req.Stream || req.StreamOptions != nil {
		t.Errorf("a non-streaming request got stream %v, %+v", req.Stream, req.StreamOptions)
	}

	req = load("function_call_roundtrip.json")
	// user, one assistant message with both calls (the reasoning item
	// between is dropped), two tool messages.
	if len(req.Messages) != 4 {
		t.Fatalf("function calls: %d messages, want 4: %+v", len(req.Messages), req.Messages)
	}
	if a := req.Messages[1]; a.Role != "assistant" || len(a.ToolCalls) != 2 || !a.Content.Null ||
		a.ToolCalls[0].ID != "call_12345xyz" || a.ToolCalls[1].ID != "call_67890abc" {
		t.Errorf("merged assistant message = %+v", a)
	}
	if m := req.Messages[3]; m.Role != "tool" || m.ToolCallID != "call_67890abc" || m.Content.String() != "18" {
		t.Errorf("tool message = %+v", m)
	}

	req = load("conversation_history.json")
	// The function call follows an assistant message of the same turn and
	// joins it.
	if a := req.Messages[4]; a.Role != "assistant" || a.Content.Text != "Orange who? Let me look that up." || len(a.ToolCalls) != 1 {
		t.Errorf("assistant text + call = %+v", a)
	}
	if a := req.Messages[6]; a.Refusal != "I can't tell that joke." || !a.Content.Null {
		t.Errorf("refusal = %+v", a)
	}
	if req.Messages[0].Role != "developer" {
		t.Errorf("developer role became %q", req.Messages[0].Role)
	}

	req = load("structured_output.json")
	if !req.Stream || req.StreamOptions == nil || !req.StreamOptions.IncludeUsage {
		t.Errorf("stream: %v %+v", req.Stream, req.StreamOptions)
	}
	if req.MaxCompletionTokens == nil || *req.MaxCompletionTokens != 1024 || req.MaxTokens != nil {
		t.Errorf("max_output_tokens -> %v / %v", req.MaxCompletionTokens, req.MaxTokens)
	}
	if req.ReasoningEffort != "low" {
		t.Errorf("reasoning effort %q", req.ReasoningEffort)
	}

	req = load("allowed_tools.json")
	if len(req.Tools) != 2 || req.Tools[0].Function.Name != "get_weather" || req.Tools[1].Function.Name != "get_time" ||
		req.ToolChoice == nil || req.ToolChoice.Mode != "required" {
		t.Errorf("allowed_tools: tools %+v, choice %+v", req.Tools, req.ToolChoice)
	}

	req = load("json_object_tool_choice.json")
	if req.User != "hashed-user-42" {
		t.Errorf("safety_identifier -> user %q", req.User)
	}
	if req.Tools[1].Function.Strict != nil {
		t.Errorf("a tool without strict got strict %v", *req.Tools[1].Function.Strict)
	}
}

// TestResponsesDecodeLenient covers inputs the API reference does not
// show but clients send: a chat-style image_url object, output_text in a
// user message, a null previous_response_id, store: true.
func TestResponsesDecodeLenient(t *testing.T) {
	req := respDecode(t, []byte(`{"model":"m","store":true,"previous_response_id":"","background":false,"input":[
		{"role":"user","content":[{"type":"input_image","image_url":{"url":"https://example.com/a.png","detail":"low"},"detail":"low"},
		 {"type":"output_text","text":"quoted"}]}]}`))
	parts := req.Messages[0].Content.Parts
	if len(parts) != 2 || parts[0].ImageURL == nil || parts[0].ImageURL.URL != "https://example.com/a.png" || parts[0].ImageURL.Detail != "low" ||
		parts[1].Type != "text" || parts[1].Text != "quoted" {
		t.Errorf("parts = %+v", parts)
	}
	req = respDecode(t, []byte(`{"model":"m","input":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}}]}]}`))
	if p := req.Messages[0].Content.Parts[0]; p.Type != "input_audio" || string(p.InputAudio) != `{"data":"UklGRg==","format":"wav"}` {
		t.Errorf("audio part = %+v", p)
	}
	// text.format text and a null tool_choice add nothing.
	req = respDecode(t, []byte(`{"model":"m","input":"hi","text":{"format":{"type":"text"}},"tool_choice":null,"reasoning":{"effort":null}}`))
	if req.ResponseFormat != nil || req.ToolChoice != nil || req.ReasoningEffort != "" {
		t.Errorf("req = %+v", req)
	}
}

// respRefuseCase is one entry of refuse.json.
type respRefuseCase struct {
	Name    string          `json:"name"`
	Request json.RawMessage `json:"request"`
	Want    json.RawMessage `json:"want,omitempty"`
}

func TestResponsesDecodeRefusals(t *testing.T) {
	path := filepath.Join(respTestdata, "refuse.json")
	var cases []respRefuseCase
	if err := json.Unmarshal(respRead(t, path), &cases); err != nil {
		t.Fatal(err)
	}
	for i := range cases {
		c := &cases[i]
		t.Run(c.Name, func(t *testing.T) {
			_, err := ResponsesInbound.DecodeRequest(c.Request)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v (%T), want *Error", err, err)
			}
			if e.Status != http.StatusBadRequest || e.Kind != KindInvalidRequest || e.Type != "invalid_request_error" {
				t.Errorf("status %d kind %d type %q, want a 400 invalid_request_error", e.Status, e.Kind, e.Type)
			}
			got := ResponsesInbound.EncodeError(e)
			if *respUpdate {
				c.Want = json.RawMessage(got)
				return
			}
			if len(c.Want) == 0 {
				t.Fatal("no golden error: run with -responses.update")
			}
			if g, w := respNormalize(t, got), respNormalize(t, c.Want); g != w {
				t.Errorf("mismatch\n--- got\n%s\n--- want\n%s", g, w)
			}
		})
	}
	if *respUpdate {
		var buf bytes.Buffer
		buf.WriteString("[\n")
		for i, c := range cases {
			b, err := respMarshal(c)
			if err != nil {
				t.Fatal(err)
			}
			buf.WriteString("  ")
			buf.Write(b)
			if i < len(cases)-1 {
				buf.WriteString(",")
			}
			buf.WriteString("\n")
		}
		buf.WriteString("]\n")
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestResponsesStatelessMessage checks the wording clients see for the
// stateful fields.
func TestResponsesStatelessMessage(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","input":"hi","previous_response_id":"resp_1"}`,
		`{"model":"m","input":"hi","conversation":"conv_1"}`,
		`{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`,
	} {
		_, err := ResponsesInbound.DecodeRequest([]byte(body))
		if err == nil || !strings.Contains(err.Error(), "this gateway is stateless: send the whole conversation in input") {
			t.Errorf("%s: err = %v", body, err)
		}
	}
}

func TestResponsesDecodeMalformed(t *testing.T) {
	for _, body := range []string{``, `{`, `{"model":"m","input":"hi"`, `null`, `[]`, `"text"`, `{"model":"m","input":[null]}`,
		`{"model":"m","input":[{"role":"user","content":null}]}`, `{"model":"m","input":[{"role":"user","content":7}]}`,
		`{"model":"m","input":"hi","tools":[7]}`, `{"model":"m","input":"hi","tool_choice":7}`,
		`{"model":"m","input":"hi","instructions":["a"]}`, `{"model":"m","input":"hi","text":{"format":"json"}}`} {
		req, err := ResponsesInbound.DecodeRequest([]byte(body))
		var e *Error
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest {
			t.Errorf("%q: req %+v, err %v, want a 400 *Error", body, req, err)
			continue
		}
		if !json.Valid(ResponsesInbound.EncodeError(e)) {
			t.Errorf("%q: error body is not JSON", body)
		}
	}
	// `null` decodes to an empty request: the refusal names the field.
	_, err := ResponsesInbound.DecodeRequest([]byte(`null`))
	if e := (*Error)(nil); !errors.As(err, &e) || e.Param != "model" {
		t.Errorf("null body: %v", err)
	}
}

// respEncodeInput is a golden input of encode/: the request (optional; its
// parameters are echoed) and the canonical answer.
type respEncodeInput struct {
	Request  json.RawMessage `json:"request"`
	Response *ChatResponse   `json:"response"`
}

// respInbound returns the inbound that echoes body's parameters, or the
// plain one.
func respInbound(t testing.TB, body json.RawMessage) Inbound {
	if len(body) == 0 {
		return ResponsesInbound
	}
	return ResponsesInboundFor(respDecode(t, body))
}

func TestResponsesEncodeGolden(t *testing.T) {
	for _, in := range respInputs(t, "encode") {
		t.Run(filepath.Base(in), func(t *testing.T) {
			var input respEncodeInput
			if err := json.Unmarshal(respRead(t, in), &input); err != nil {
				t.Fatal(err)
			}
			got, err := respInbound(t, input.Request).EncodeResponse(input.Response)
			if err != nil {
				t.Fatal(err)
			}
			respCheckResponseShape(t, got)
			respGolden(t, respWantPath(in), got)
		})
	}
}

// TestResponsesEncodeOutputText checks what an SDK's output_text helper
// (openai-go's Response.OutputText: the output_text parts of every item,
// in order) reads from encoded answers.
func TestResponsesEncodeOutputText(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"text.json", "In a peaceful grove beneath a silver moon"},
		{"text_and_tool_call.json", "I'll check the current weather in Paris for you."},
		{"tool_calls.json", ""},
		{"truncated_tool_call.json", "Let me look."},
	} {
		var input respEncodeInput
		if err := json.Unmarshal(respRead(t, filepath.Join(respTestdata, "encode", tc.file)), &input); err != nil {
			t.Fatal(err)
		}
		got, err := respInbound(t, input.Request).EncodeResponse(input.Response)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Output []struct {
				Content []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"output"`
		}
		if err := json.Unmarshal(got, &r); err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		for _, item := range r.Output {
			for _, c := range item.Content {
				if c.Type == "output_text" {
					text.WriteString(c.Text)
				}
			}
		}
		if !strings.HasPrefix(text.String(), tc.want) || (tc.want == "" && text.Len() != 0) {
			t.Errorf("%s: output text %q, want %q", tc.file, text.String(), tc.want)
		}
	}
}

// respCheckResponseShape checks a Response object against the fields and
// JSON types the API reference documents (and openai-go's
// responses.Response declares required).
func respCheckResponseShape(t testing.TB, b []byte) {
	t.Helper()
	var r map[string]any
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("response is not a JSON object: %v", err)
	}
	kind := func(v any) string {
		switch v.(type) {
		case nil:
			return "null"
		case string:
			return "string"
		case float64:
			return "number"
		case bool:
			return "boolean"
		case []any:
			return "array"
		case map[string]any:
			return "object"
		}
		return "?"
	}
	expect := map[string][]string{
		"id": {"string"}, "object": {"string"}, "created_at": {"number"}, "status": {"string"},
		"error": {"null", "object"}, "incomplete_details": {"null", "object"}, "instructions": {"null", "string"},
		"metadata": {"object"}, "model": {"string"}, "output": {"array"}, "parallel_tool_calls": {"boolean"},
		"temperature": {"number"}, "tool_choice": {"string", "object"}, "tools": {"array"}, "top_p": {"number"},
		"max_output_tokens": {"null", "number"}, "previous_response_id": {"null"}, "reasoning": {"object"},
		"text": {"object"}, "truncation": {"string"}, "usage": {"null", "object"}, "store": {"boolean"},
		"background": {"boolean"}, "user": {"null", "string"},
	}
	for field, kinds := range expect {
		v, ok := r[field]
		if !ok {
			t.Errorf("response has no %q", field)
			continue
		}
		k := kind(v)
		found := false
		for _, want := range kinds {
			found = found || k == want
		}
		if !found {
			t.Errorf("response %q is a %s, want %v", field, k, kinds)
		}
	}
	if r["object"] != "response" || !strings.HasPrefix(fmt.Sprint(r["id"]), "resp_") {
		t.Errorf("object %v id %v", r["object"], r["id"])
	}
	switch r["status"] {
	case "completed", "incomplete", "failed", "in_progress":
	default:
		t.Errorf("status %v", r["status"])
	}
	if u, ok := r["usage"].(map[string]any); ok {
		for _, f := range []string{"input_tokens", "output_tokens", "total_tokens"} {
			if kind(u[f]) != "number" {
				t.Errorf("usage.%s = %v", f, u[f])
			}
		}
		if d, ok := u["input_tokens_details"].(map[string]any); !ok || kind(d["cached_tokens"]) != "number" {
			t.Errorf("usage.input_tokens_details = %v", u["input_tokens_details"])
		}
		if d, ok := u["output_tokens_details"].(map[string]any); !ok || kind(d["reasoning_tokens"]) != "number" {
			t.Errorf("usage.output_tokens_details = %v", u["output_tokens_details"])
		}
	}
	for i, it := range r["output"].([]any) {
		item, _ := it.(map[string]any)
		switch item["type"] {
		case "message":
			if item["role"] != "assistant" || kind(item["content"]) != "array" || !strings.HasPrefix(fmt.Sprint(item["id"]), "msg_") {
				t.Errorf("output[%d] = %v", i, item)
			}
		case "function_call":
			for _, f := range []string{"id", "call_id", "name", "arguments", "status"} {
				if kind(item[f]) != "string" {
					t.Errorf("output[%d].%s = %v", i, f, item[f])
				}
			}
			if !strings.HasPrefix(fmt.Sprint(item["id"]), "fc_") {
				t.Errorf("output[%d].id = %v", i, item["id"])
			}
		default:
			t.Errorf("output[%d] has type %v", i, item["type"])
		}
	}
}

func TestResponsesEncodeEdgeCases(t *testing.T) {
	// No upstream id and no created time: a random id and the current
	// time.
	got, err := ResponsesInbound.EncodeResponse(&ChatResponse{Model: "m", Choices: []Choice{{Message: Message{Role: "assistant", Content: TextContent("hi")}, FinishReason: "stop"}}})
	if err != nil {
		t.Fatal(err)
	}
	respCheckResponseShape(t, got)
	var r struct {
		ID        string `json:"id"`
		CreatedAt int64  `json:"created_at"`
		Output    []struct {
			ID string `json:"id"`
		} `json:"output"`
		Usage any `json:"usage"`
	}
	if err := json.Unmarshal(got, &r); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^resp_[0-9a-f]{48}$`).MatchString(r.ID) || r.Output[0].ID != "msg_"+r.ID[len("resp_"):] {
		t.Errorf("ids %q %q", r.ID, r.Output[0].ID)
	}
	if r.CreatedAt < 1700000000 || r.Usage != nil {
		t.Errorf("created_at %d usage %v", r.CreatedAt, r.Usage)
	}

	// No choices: a completed response with no output.
	got, err = ResponsesInbound.EncodeResponse(&ChatResponse{ID: "chatcmpl-x", Created: 1, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	respCheckResponseShape(t, got)
	if !strings.Contains(string(got), `"output":[]`) {
		t.Errorf("no choices: %s", got)
	}

	if _, err := ResponsesInbound.EncodeResponse(nil); err == nil {
		t.Error("nil response encoded")
	}
}

func TestResponsesEncodeError(t *testing.T) {
	for _, tc := range []struct {
		err  *Error
		want string
	}{
		{Invalid("tools[0].type", "Tools of type %q are not supported.", "web_search"),
			`{"error":{"message":"Tools of type \"web_search\" are not supported.","type":"invalid_request_error","param":"tools[0].type","code":"invalid_request"}}`},
		{&Error{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "Slow down.", Kind: KindRateLimited},
			`{"error":{"message":"Slow down.","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`},
		{BadResponse("anthropic", "unexpected %s", "EOF"),
			`{"error":{"message":"The anthropic upstream sent an answer the gateway could not read: unexpected EOF","type":"upstream_error","param":null,"code":"bad_upstream_response"}}`},
		{&Error{Status: 503, Message: "Overloaded <upstream>"},
			`{"error":{"message":"Overloaded <upstream>","type":"api_error","param":null,"code":null}}`},
		{&Error{Status: 404, Message: "no such model"},
			`{"error":{"message":"no such model","type":"invalid_request_error","param":null,"code":null}}`},
		{nil, `{"error":{"message":"unknown error","type":"api_error","param":null,"code":null}}`},
	} {
		got := ResponsesInbound.EncodeError(tc.err)
		if g, w := respNormalize(t, got), respNormalize(t, []byte(tc.want)); g != w {
			t.Errorf("got %s\nwant %s", g, w)
		}
	}
}

// respStreamInput is a golden input of stream/: the chunks, then Close
// with close_usage, or Fail with fail.
type respStreamInput struct {
	Request    json.RawMessage `json:"request"`
	Model      string          `json:"model"`
	Chunks     []*Chunk        `json:"chunks"`
	CloseUsage *Usage          `json:"close_usage"`
	Fail       *Error          `json:"fail"`
}

// respSSE is one parsed server-sent event.
type respSSE struct {
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

// respWriter records each Write, so that tests can check that every Write
// is one whole event.
type respWriter struct {
	writes [][]byte
	failAt int // fail the Write with this 1-based number; 0: never
}

func (w *respWriter) Write(p []byte) (int, error) {
	if w.failAt > 0 && len(w.writes)+1 == w.failAt {
		return 0, errors.New("client went away")
	}
	w.writes = append(w.writes, append([]byte(nil), p...))
	return len(p), nil
}

// respParseEvents parses the stream, checking that each Write holds
// exactly one "event: X\ndata: {...}\n\n".
func respParseEvents(t testing.TB, writes [][]byte) []respSSE {
	t.Helper()
	var events []respSSE
	for _, w := range writes {
		s := string(w)
		rest, ok := strings.CutPrefix(s, "event: ")
		if !ok || !strings.HasSuffix(s, "\n\n") || strings.Count(s, "\n") != 3 {
			t.Fatalf("write is not one event: %q", s)
		}
		typ, data, ok := strings.Cut(strings.TrimSuffix(rest, "\n\n"), "\ndata: ")
		if !ok || !json.Valid([]byte(data)) {
			t.Fatalf("bad event: %q", s)
		}
		events = append(events, respSSE{Event: typ, Data: json.RawMessage(data)})
	}
	return events
}

// respRunStream encodes a stream input and returns its events.
func respRunStream(t testing.TB, input *respStreamInput) []respSSE {
	t.Helper()
	var w respWriter
	enc := respInbound(t, input.Request).NewStreamEncoder(&w, input.Model)
	for _, c := range input.Chunks {
		if err := enc.WriteChunk(c); err != nil {
			t.Fatalf("WriteChunk: %v", err)
		}
	}
	if input.Fail != nil {
		if err := enc.Fail(input.Fail); err != nil {
			t.Fatalf("Fail: %v", err)
		}
	} else if err := enc.Close(input.CloseUsage); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return respParseEvents(t, w.writes)
}

func TestResponsesStreamGolden(t *testing.T) {
	for _, in := range respInputs(t, "stream") {
		t.Run(filepath.Base(in), func(t *testing.T) {
			var input respStreamInput
			if err := json.Unmarshal(respRead(t, in), &input); err != nil {
				t.Fatal(err)
			}
			events := respRunStream(t, &input)
			respCheckStream(t, events)
			got, err := json.Marshal(events)
			if err != nil {
				t.Fatal(err)
			}
			respGolden(t, respWantPath(in), got)
		})
	}
}

// respSSETypes lists the events' types.
func respSSETypes(events []respSSE) []string {
	var types []string
	for _, e := range events {
		types = append(types, e.Event)
	}
	return types
}

func TestResponsesStreamEventOrder(t *testing.T) {
	load := func(name string) []respSSE {
		var input respStreamInput
		if err := json.Unmarshal(respRead(t, filepath.Join(respTestdata, "stream", name)), &input); err != nil {
			t.Fatal(err)
		}
		return respRunStream(t, &input)
	}
	for _, tc := range []struct {
		file string
		want []string
	}{
		{"text.json", []string{
			"response.created", "response.in_progress",
			"response.output_item.added", "response.content_part.added",
			"response.output_text.delta", "response.output_text.delta",
			"response.output_text.done", "response.content_part.done", "response.output_item.done",
			"response.completed",
		}},
		{"tool_call.json", []string{
			"response.created", "response.in_progress",
			"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
			"response.function_call_arguments.done", "response.output_item.done",
			"response.output_item.added", "response.function_call_arguments.delta",
			"response.function_call_arguments.done", "response.output_item.done",
			"response.completed",
		}},
		{"text_then_tool_call.json", []string{
			"response.created", "response.in_progress",
			"response.output_item.added", "response.content_part.added",
			"response.output_text.delta", "response.output_text.delta",
			"response.output_text.done", "response.content_part.done", "response.output_item.done",
			"response.output_item.added", "response.function_call_arguments.delta",
			"response.function_call_arguments.done", "response.output_item.done",
			"response.completed",
		}},
		{"incomplete_length.json", []string{
			"response.created", "response.in_progress",
			"response.output_item.added", "response.content_part.added",
			"response.output_text.delta", "response.output_text.delta",
			"response.output_text.done", "response.content_part.done", "response.output_item.done",
			"response.incomplete",
		}},
		{"refusal.json", []string{
			"response.created", "response.in_progress",
			"response.output_item.added", "response.content_part.added",
			"response.refusal.delta", "response.refusal.delta",
			"response.refusal.done", "response.content_part.done", "response.output_item.done",
			"response.completed",
		}},
		{"failed.json", []string{
			"response.created", "response.in_progress",
			"response.output_item.added", "response.content_part.added", "response.output_text.delta",
			"error", "response.failed",
		}},
		{"empty.json", []string{
			"response.created", "response.in_progress",
			"response.output_item.added", "response.content_part.added",
			"response.output_text.done", "response.content_part.done", "response.output_item.done",
			"response.completed",
		}},
	} {
		if got := respSSETypes(load(tc.file)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: events\n%s\nwant\n%s", tc.file, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}

// respCheckStream checks the invariants every Responses stream keeps:
// event names match data.type, sequence numbers count from 0, the response
// is created first and finished last, every item added is done (unless the
// response failed), deltas add up to the done events, and the final
// Response holds the items as done.
func respCheckStream(t testing.TB, events []respSSE) {
	t.Helper()
	if len(events) < 3 {
		t.Fatalf("%d events", len(events))
	}
	type ev struct {
		Type           string          `json:"type"`
		SequenceNumber *int            `json:"sequence_number"`
		ItemID         string          `json:"item_id"`
		OutputIndex    *int            `json:"output_index"`
		ContentIndex   int             `json:"content_index"`
		Delta          string          `json:"delta"`
		Text           *string         `json:"text"`
		Refusal        *string         `json:"refusal"`
		Arguments      *string         `json:"arguments"`
		Item           json.RawMessage `json:"item"`
		Response       json.RawMessage `json:"response"`
	}
	type itemState struct {
		id    string
		added bool
		done  json.RawMessage
		parts map[int]*strings.Builder
		args  strings.Builder
	}
	items := map[int]*itemState{}
	respID := ""
	last := events[len(events)-1].Event
	for i, e := range events {
		var d ev
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if d.Type != e.Event {
			t.Errorf("event %d: event %q, data.type %q", i, e.Event, d.Type)
		}
		if d.SequenceNumber == nil || *d.SequenceNumber != i {
			t.Errorf("event %d: sequence_number %v", i, d.SequenceNumber)
		}
		switch {
		case i == 0 && e.Event != "response.created", i == 1 && e.Event != "response.in_progress":
			t.Errorf("event %d is %s", i, e.Event)
		}
		if len(d.Response) > 0 {
			respCheckResponseShape(t, d.Response)
			var r struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(d.Response, &r)
			if respID == "" {
				respID = r.ID
			} else if r.ID != respID {
				t.Errorf("event %d: response id %s, was %s", i, r.ID, respID)
			}
		}
		item := func() *itemState {
			if d.OutputIndex == nil {
				t.Fatalf("event %d (%s) has no output_index", i, e.Event)
			}
			st := items[*d.OutputIndex]
			if st == nil {
				st = &itemState{parts: map[int]*strings.Builder{}}
				items[*d.OutputIndex] = st
			}
			return st
		}
		switch e.Event {
		case "response.output_item.added":
			st := item()
			var it struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(d.Item, &it)
			if st.added || *d.OutputIndex != len(items)-1 {
				t.Errorf("event %d: item %d added twice or out of order", i, *d.OutputIndex)
			}
			st.added, st.id = true, it.ID
		case "response.content_part.added":
			st := item()
			st.parts[d.ContentIndex] = &strings.Builder{}
		case "response.output_text.delta", "response.refusal.delta":
			st := item()
			if st.parts[d.ContentIndex] == nil || d.ItemID != st.id {
				t.Errorf("event %d: delta for a part not added", i)
				continue
			}
			st.parts[d.ContentIndex].WriteString(d.Delta)
		case "response.output_text.done", "response.refusal.done":
			st := item()
			text := d.Text
			if text == nil {
				text = d.Refusal
			}
			if p := st.parts[d.ContentIndex]; p == nil || text == nil || p.String() != *text {
				t.Errorf("event %d: done text %v, deltas %v", i, text, p)
			}
		case "response.function_call_arguments.delta":
			item().args.WriteString(d.Delta)
		case "response.function_call_arguments.done":
			st := item()
			if d.Arguments == nil || st.args.String() != *d.Arguments {
				t.Errorf("event %d: arguments done %v, deltas %q", i, d.Arguments, st.args.String())
			}
		case "response.output_item.done":
			st := item()
			if !st.added || st.done != nil {
				t.Errorf("event %d: item %d done without being added, or twice", i, *d.OutputIndex)
			}
			st.done = d.Item
		}
	}
	switch last {
	case "response.completed", "response.incomplete", "response.failed":
	default:
		t.Fatalf("stream ends with %s", last)
	}
	var final struct {
		Output []json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(events[len(events)-1].Data, &struct {
		Response any `json:"response"`
	}{&final}); err != nil {
		t.Fatal(err)
	}
	if len(final.Output) != len(items) {
		t.Errorf("final response has %d items, stream %d", len(final.Output), len(items))
	}
	if last == "response.failed" {
		return
	}
	for idx, st := range items {
		if st.done == nil {
			t.Errorf("item %d never done", idx)
			continue
		}
		if idx < len(final.Output) && respNormalize(t, final.Output[idx]) != respNormalize(t, st.done) {
			t.Errorf("item %d: final %s, done %s", idx, final.Output[idx], st.done)
		}
	}
}

func TestResponsesStreamLifecycle(t *testing.T) {
	chunk := func(content string, finish string) *Chunk {
		c := &Chunk{ID: "chatcmpl-1", Created: 1741290958, Model: "m", Choices: []ChunkChoice{{Delta: Delta{Content: &content}}}}
		if finish != "" {
			c.Choices[0].FinishReason = &finish
		}
		return c
	}

	// Close twice, Fail after Close: one terminal event only.
	var w respWriter
	enc := ResponsesInbound.NewStreamEncoder(&w, "client-model")
	if err := enc.WriteChunk(chunk("hi", "stop")); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(nil); err != nil {
		t.Fatal(err)
	}
	n := len(w.writes)
	if err := enc.Close(nil); err != nil {
		t.Fatal(err)
	}
	if err := enc.Fail(&Error{Message: "late"}); err != nil {
		t.Fatal(err)
	}
	if len(w.writes) != n {
		t.Errorf("events after the end: %d, then %d", n, len(w.writes))
	}
	if err := enc.WriteChunk(chunk("more", "")); err == nil {
		t.Error("chunk accepted after Close")
	}
	events := respParseEvents(t, w.writes)
	respCheckStream(t, events)
	// The encoder's model is the client's name for it, not the upstream's.
	if !strings.Contains(string(events[0].Data), `"model":"client-model"`) {
		t.Errorf("created: %s", events[0].Data)
	}
	// Without usage the final Response says null.
	if !strings.Contains(string(events[len(events)-1].Data), `"usage":null`) {
		t.Errorf("completed without usage: %s", events[len(events)-1].Data)
	}

	// Fail before any chunk: created, in_progress, error, failed.
	w = respWriter{}
	enc = ResponsesInbound.NewStreamEncoder(&w, "m")
	if err := enc.Fail(&Error{Status: 502, Type: "upstream_error", Message: "boom", Kind: KindBadResponse}); err != nil {
		t.Fatal(err)
	}
	events = respParseEvents(t, w.writes)
	respCheckStream(t, events)
	if got := respSSETypes(events); !reflect.DeepEqual(got, []string{"response.created", "response.in_progress", "error", "response.failed"}) {
		t.Errorf("early fail: %v", got)
	}
	if !strings.Contains(string(events[2].Data), `"code":"upstream_error"`) ||
		!strings.Contains(string(events[3].Data), `"error":{"code":"server_error","message":"boom"}`) {
		t.Errorf("early fail: %s / %s", events[2].Data, events[3].Data)
	}

	// Nil error, nil chunk: no panic.
	w = respWriter{}
	enc = ResponsesInbound.NewStreamEncoder(&w, "m")
	if err := enc.WriteChunk(nil); err != nil {
		t.Fatal(err)
	}
	if err := enc.Fail(nil); err != nil {
		t.Fatal(err)
	}
	respCheckStream(t, respParseEvents(t, w.writes))

	// A write error is returned.
	for failAt := 1; failAt <= 6; failAt++ {
		w = respWriter{failAt: failAt}
		enc = ResponsesInbound.NewStreamEncoder(&w, "m")
		err := enc.WriteChunk(chunk("hi", ""))
		if err == nil {
			err = enc.WriteChunk(chunk(" there", "stop"))
		}
		if err == nil {
			err = enc.Close(nil)
		}
		if err == nil || err.Error() != "client went away" {
			t.Errorf("write %d failing: err = %v", failAt, err)
		}
	}
}

// TestResponsesStreamToolCallShapes covers upstreams that send tool calls
// without an index, reuse index 0 for every call, or interleave calls.
func TestResponsesStreamToolCallShapes(t *testing.T) {
	tc := func(index *int, id, name, args string) *Chunk {
		return &Chunk{ID: "chatcmpl-t", Created: 1, Model: "m", Choices: []ChunkChoice{{Delta: Delta{
			ToolCalls: []ToolCall{{Index: index, ID: id, Type: "function", Function: FunctionCall{Name: name, Arguments: args}}}}}}}
	}
	zero, one := 0, 1
	final := func(chunks ...*Chunk) []map[string]any {
		var w respWriter
		enc := ResponsesInbound.NewStreamEncoder(&w, "m")
		for _, c := range chunks {
			if err := enc.WriteChunk(c); err != nil {
				t.Fatal(err)
			}
		}
		if err := enc.Close(nil); err != nil {
			t.Fatal(err)
		}
		events := respParseEvents(t, w.writes)
		respCheckStream(t, events)
		var r struct {
			Response struct {
				Output []map[string]any `json:"output"`
			} `json:"response"`
		}
		if err := json.Unmarshal(events[len(events)-1].Data, &r); err != nil {
			t.Fatal(err)
		}
		return r.Response.Output
	}
	calls := func(out []map[string]any) string {
		var s []string
		for _, it := range out {
			s = append(s, fmt.Sprintf("%v:%v(%v)", it["call_id"], it["name"], it["arguments"]))
		}
		return strings.Join(s, " ")
	}

	// No index: each chunk's first call continues the first call.
	out := final(tc(nil, "call_a", "f", `{"a":`), tc(nil, "", "", `1}`))
	if got := calls(out); got != `call_a:f({"a":1})` {
		t.Errorf("no index: %s", got)
	}
	// Index 0 for every call, told apart by id.
	out = final(tc(&zero, "call_a", "f", `{}`), tc(&zero, "call_b", "g", `{"b":2}`))
	if got := calls(out); got != `call_a:f({}) call_b:g({"b":2})` {
		t.Errorf("reused index: %s", got)
	}
	// Interleaved: every piece is in the events and the final Response
	// (respCheckStream checks they agree).
	out = final(tc(&zero, "call_a", "f", `{"a":`), tc(&one, "call_b", "g", `{}`), tc(&zero, "", "", `1}`))
	if got := calls(out); got != `call_a:f({"a":1}) call_b:g({})` {
		t.Errorf("interleaved: %s", got)
	}
	// Choices other than 0 are ignored.
	c := tc(&zero, "call_a", "f", `{}`)
	c.Choices[0].Index = 1
	out = final(c)
	if len(out) != 1 || out[0]["type"] != "message" {
		t.Errorf("choice 1: %v", out)
	}
}

// TestResponsesStreamItemSwitches covers text after a tool call (a new
// message item) and a refusal after text (a second content part).
func TestResponsesStreamItemSwitches(t *testing.T) {
	text := func(s string) *Chunk {
		return &Chunk{ID: "chatcmpl-s", Created: 1, Model: "m", Choices: []ChunkChoice{{Delta: Delta{Content: &s}}}}
	}
	refusal := func(s string) *Chunk {
		return &Chunk{ID: "chatcmpl-s", Created: 1, Model: "m", Choices: []ChunkChoice{{Delta: Delta{Refusal: &s}}}}
	}
	zero := 0
	call := &Chunk{ID: "chatcmpl-s", Created: 1, Model: "m", Choices: []ChunkChoice{{Delta: Delta{
		ToolCalls: []ToolCall{{Index: &zero, ID: "call_1", Function: FunctionCall{Name: "f", Arguments: "{}"}}}}}}}
	var w respWriter
	enc := ResponsesInbound.NewStreamEncoder(&w, "m")
	for _, c := range []*Chunk{text("a"), call, text("b"), refusal("no"), text("c")} {
		if err := enc.WriteChunk(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(&Usage{PromptTokens: 1, CompletionTokens: 2}); err != nil {
		t.Fatal(err)
	}
	events := respParseEvents(t, w.writes)
	respCheckStream(t, events)
	var final struct {
		Response json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(events[len(events)-1].Data, &final); err != nil {
		t.Fatal(err)
	}
	want := `{"output":[` +
		`{"content":[{"annotations":[],"logprobs":[],"text":"a","type":"output_text"}],"id":"msg_s","role":"assistant","status":"completed","type":"message"},` +
		`{"arguments":"{}","call_id":"call_1","id":"fc_s_0","name":"f","status":"completed","type":"function_call"},` +
		`{"content":[{"annotations":[],"logprobs":[],"text":"b","type":"output_text"},{"refusal":"no","type":"refusal"},` +
		`{"annotations":[],"logprobs":[],"text":"c","type":"output_text"}],"id":"msg_s_1","role":"assistant","status":"completed","type":"message"}],` +
		`"usage":{"input_tokens":1,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":3}}`
	var r struct {
		Output json.RawMessage `json:"output"`
		Usage  json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal(final.Response, &r); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(r)
	if respNormalize(t, got) != respNormalize(t, []byte(want)) {
		t.Errorf("final output\n%s\nwant\n%s", respNormalize(t, got), respNormalize(t, []byte(want)))
	}
}

func TestResponsesFailedCode(t *testing.T) {
	for _, tc := range []struct {
		err  *Error
		want string
	}{
		{&Error{Kind: KindRateLimited}, "rate_limit_exceeded"},
		{&Error{Kind: KindQuotaExhausted}, "rate_limit_exceeded"},
		{&Error{Status: http.StatusTooManyRequests}, "rate_limit_exceeded"},
		{&Error{Kind: KindContextOverflow}, "invalid_prompt"},
		{&Error{Kind: KindInvalidRequest}, "invalid_prompt"},
		{&Error{Kind: KindOverloaded, Status: 529}, "server_error"},
		{&Error{Kind: KindTimeout}, "server_error"},
	} {
		if got := respFailedCode(tc.err); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.err, got, tc.want)
		}
	}
}

// TestResponsesEchoTextFormat covers response_format values a request
// cannot produce but a caller-built ChatRequest may hold.
func TestResponsesEchoTextFormat(t *testing.T) {
	for rf, want := range map[string]string{
		`{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"},"strict":true}}`: `{"type":"json_schema","name":"n","schema":{"type":"object"},"strict":true}`,
		`{"type":"json_object"}`: `{"type":"json_object"}`,
		`{"type":"json_schema"}`: `{"type":"text"}`,
		`{"type":"text"}`:        `{"type":"text"}`,
		`"json"`:                 `{"type":"text"}`,
	} {
		e := newResponsesEcho(&ChatRequest{ResponseFormat: json.RawMessage(rf)})
		if string(e.textFormat) != want {
			t.Errorf("%s: %s, want %s", rf, e.textFormat, want)
		}
	}
}

// TestResponsesInboundForEcho checks the echoed parameters.
func TestResponsesInboundForEcho(t *testing.T) {
	req := respDecode(t, []byte(`{"model":"m","input":"hi","temperature":0.3,"top_p":0.5,"max_output_tokens":64,
		"parallel_tool_calls":false,"tool_choice":{"type":"function","name":"f"},"user":"u",
		"tools":[{"type":"function","name":"f","description":"d","parameters":{"type":"object"},"strict":false}],
		"text":{"format":{"type":"json_object"}},"reasoning":{"effort":"high"},"metadata":{"k":"v"}}`))
	got, err := ResponsesInboundFor(req).EncodeResponse(&ChatResponse{ID: "chatcmpl-e", Created: 5, Model: "m",
		Choices: []Choice{{Message: Message{Role: "assistant", Content: TextContent("{}")}, FinishReason: "stop"}}})
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(got, &r); err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]string{
		"temperature":         `0.3`,
		"top_p":               `0.5`,
		"max_output_tokens":   `64`,
		"parallel_tool_calls": `false`,
		"tool_choice":         `{"name":"f","type":"function"}`,
		"tools":               `[{"description":"d","name":"f","parameters":{"type":"object"},"strict":false,"type":"function"}]`,
		"text":                `{"format":{"type":"json_object"}}`,
		"reasoning":           `{"effort":"high","summary":null}`,
		"metadata":            `{"k":"v"}`,
		"user":                `"u"`,
		"store":               `false`,
	} {
		b, _ := json.Marshal(r[field])
		if string(b) != want {
			t.Errorf("%s = %s, want %s", field, b, want)
		}
	}
	// The plain inbound reports the API's defaults.
	got, err = ResponsesInbound.EncodeResponse(&ChatResponse{ID: "x", Created: 5, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"temperature":1`, `"top_p":1`, `"tool_choice":"auto"`, `"tools":[]`, `"parallel_tool_calls":true`,
		`"text":{"format":{"type":"text"}}`, `"metadata":{}`, `"max_output_tokens":null`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("defaults: %s lacks %s", got, want)
		}
	}
}

// respSeeds returns the golden request bodies, to seed the fuzzer.
func respSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, in := range respInputs(t, "decode") {
		seeds = append(seeds, respRead(t, in))
	}
	var cases []respRefuseCase
	if err := json.Unmarshal(respRead(t, filepath.Join(respTestdata, "refuse.json")), &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		seeds = append(seeds, c.Request)
	}
	for _, in := range respInputs(t, "encode") {
		var input respEncodeInput
		if err := json.Unmarshal(respRead(t, in), &input); err == nil && len(input.Request) > 0 {
			seeds = append(seeds, input.Request)
		}
	}
	return seeds
}

// FuzzResponsesRequest decodes arbitrary bodies: every body is either
// refused with a 400 the client can read, or becomes a request that
// encodes, and whose echo encodes a Response.
func FuzzResponsesRequest(f *testing.F) {
	for _, s := range respSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ResponsesInbound.DecodeRequest(body)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Kind != KindInvalidRequest || e.Message == "" {
				t.Fatalf("err = %#v", err)
			}
			if !json.Valid(ResponsesInbound.EncodeError(e)) {
				t.Fatal("error body is not JSON")
			}
			return
		}
		if req.Model == "" || len(req.Messages) == 0 {
			t.Fatalf("accepted a request without model or messages: %+v", req)
		}
		if _, err := json.Marshal(req); err != nil {
			t.Fatalf("canonical request does not marshal: %v", err)
		}
		out, err := ResponsesInboundFor(req).EncodeResponse(&ChatResponse{ID: "chatcmpl-f", Created: 1, Model: req.Model,
			Choices: []Choice{{Message: Message{Role: "assistant", Content: TextContent("ok")}, FinishReason: "stop"}}})
		if err != nil {
			t.Fatal(err)
		}
		respCheckResponseShape(t, out)
	})
}

// FuzzResponsesStream streams arbitrary chunk sequences (a JSON array of
// chunks) and checks the stream invariants.
func FuzzResponsesStream(f *testing.F) {
	for _, in := range respInputs(f, "stream") {
		var input struct {
			Chunks json.RawMessage `json:"chunks"`
		}
		if err := json.Unmarshal(respRead(f, in), &input); err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(input.Chunks), false)
		f.Add([]byte(input.Chunks), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, fail bool) {
		var chunks []*Chunk
		if json.Unmarshal(body, &chunks) != nil {
			return
		}
		var w respWriter
		enc := ResponsesInbound.NewStreamEncoder(&w, "m")
		for _, c := range chunks {
			if err := enc.WriteChunk(c); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		if fail {
			err = enc.Fail(&Error{Status: 500, Message: "upstream broke", Kind: KindOverloaded})
		} else {
			err = enc.Close(nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		respCheckStream(t, respParseEvents(t, w.writes))
	})
}
