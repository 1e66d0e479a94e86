package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// anthUpdate rewrites the Anthropic golden files from the code's output
// (review the diff before committing it).
var anthUpdate = flag.Bool("anthropic.update", false, "rewrite the Anthropic golden files")

const anthDir = "testdata/anthropic"

// anthFixedClock pins "created" so that golden documents are stable.
func anthFixedClock(t testing.TB) {
	old := anthropicNow
	anthropicNow = func() time.Time { return time.Unix(1700000000, 0) }
	t.Cleanup(func() { anthropicNow = old })
}

func anthRead(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(anthDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// anthNorm re-encodes a JSON document with sorted keys and indentation.
func anthNorm(t testing.TB, b []byte) string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// anthGolden compares got with the golden JSON file name (key order
// normalised), or rewrites the file under -anthropic.update.
func anthGolden(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join(anthDir, name)
	if *anthUpdate {
		if err := os.WriteFile(path, []byte(anthNorm(t, got)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := anthNorm(t, got), anthNorm(t, want); g != w {
		t.Errorf("%s differs\n--- got\n%s\n--- want\n%s", name, g, w)
	}
}

func anthMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// anthAsError asserts that err is an *Error.
func anthAsError(t testing.TB, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	return e
}

var anthTarget = &Target{Provider: "anthropic", BaseURL: "https://api.anthropic.com/v1",
	UpstreamModel: "claude-sonnet-4-5-20250929", Credential: "sk-ant-test"}

func TestAnthropicNewRequestGolden(t *testing.T) {
	for _, name := range []string{"request_basic", "request_tools", "request_defaults"} {
		t.Run(name, func(t *testing.T) {
			var req ChatRequest
			if err := json.Unmarshal(anthRead(t, name+".in.json"), &req); err != nil {
				t.Fatal(err)
			}
			hr, err := Anthropic.NewRequest(&req, anthTarget, req.Stream)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(hr.Body)
			if err != nil {
				t.Fatal(err)
			}
			anthGolden(t, name+".want.json", body)
		})
	}
}

func TestAnthropicNewRequestHTTP(t *testing.T) {
	req := ChatRequest{Model: "m", Messages: []Message{{Role: "user", Content: TextContent("Hi")}}, Stream: true}
	tgt := *anthTarget
	tgt.BaseURL = "https://proxy.example/anthropic/v1/"
	hr, err := Anthropic.NewRequest(&req, &tgt, true)
	if err != nil {
		t.Fatal(err)
	}
	if hr.Method != http.MethodPost || hr.URL.String() != "https://proxy.example/anthropic/v1/messages" {
		t.Errorf("got %s %s", hr.Method, hr.URL)
	}
	for k, want := range map[string]string{"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01",
		"content-type": "application/json", "accept": "text/event-stream", "authorization": ""} {
		if got := hr.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	body, _ := io.ReadAll(hr.Body)
	anthJSONEq(t, body, `{"model":"claude-sonnet-4-5-20250929","messages":[{"role":"user","content":"Hi"}],"max_tokens":4096,"stream":true}`)
	if hr.ContentLength != int64(len(body)) || hr.GetBody == nil {
		t.Errorf("content length %d for %d bytes, GetBody set: %v", hr.ContentLength, len(body), hr.GetBody != nil)
	}
}

// anthJSONEq compares two JSON documents with key order normalised.
func anthJSONEq(t testing.TB, got []byte, want string) {
	t.Helper()
	if g, w := anthNorm(t, got), anthNorm(t, []byte(want)); g != w {
		t.Errorf("got\n%s\nwant\n%s", g, w)
	}
}

// anthEncode runs the request encoder on messages and options.
func anthEncode(t testing.TB, req ChatRequest) ([]byte, error) {
	t.Helper()
	hr, err := Anthropic.NewRequest(&req, anthTarget, req.Stream)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(hr.Body)
}

func TestAnthropicNewRequestMapping(t *testing.T) {
	user := []Message{{Role: "user", Content: TextContent("Hi")}}
	tool := []Tool{{Type: "function", Function: FunctionDecl{Name: "f", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}}
	f := false
	one := int64(1)
	cases := []struct {
		name string
		req  ChatRequest
		want string
	}{
		{"tool choice none", ChatRequest{Messages: user, Tools: tool, ToolChoice: &ToolChoice{Mode: "none"}, ParallelToolCalls: &f},
			`{"model":"claude-sonnet-4-5-20250929","messages":[{"role":"user","content":"Hi"}],"max_tokens":4096,
			  "tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"none"}}`},
		{"tool choice auto", ChatRequest{Messages: user, Tools: tool, ToolChoice: &ToolChoice{Mode: "auto"}},
			`{"model":"claude-sonnet-4-5-20250929","messages":[{"role":"user","content":"Hi"}],"max_tokens":4096,
			  "tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"auto"}}`},
		{"parallel off without choice", ChatRequest{Messages: user, Tools: tool, ParallelToolCalls: &f},
			`{"model":"claude-sonnet-4-5-20250929","messages":[{"role":"user","content":"Hi"}],"max_tokens":4096,
			  "tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":true}}`},
		{"tool choice without tools is dropped", ChatRequest{Messages: user, ToolChoice: &ToolChoice{Mode: "required"}, ParallelToolCalls: &f},
			`{"model":"claude-sonnet-4-5-20250929","messages":[{"role":"user","content":"Hi"}],"max_tokens":4096}`},
		{"max_tokens 1 and top_p alone", ChatRequest{Messages: user, MaxTokens: &one, TopP: anthF(0.5)},
			`{"model":"claude-sonnet-4-5-20250929","messages":[{"role":"user","content":"Hi"}],"max_tokens":1,"top_p":0.5}`},
		{"negative temperature clamped", ChatRequest{Messages: user, Temperature: anthF(-1)},
			`{"model":"claude-sonnet-4-5-20250929","messages":[{"role":"user","content":"Hi"}],"max_tokens":4096,"temperature":0}`},
		{"tool result before text in a merged turn", ChatRequest{Messages: []Message{
			{Role: "user", Content: TextContent("Look:")},
			{Role: "assistant", ToolCalls: []ToolCall{{ID: "t1", Type: "function", Function: FunctionCall{Name: "f", Arguments: `{"a": [1, 2]}`}}}},
			{Role: "user", Content: TextContent("Here is the result.")},
			{Role: "tool", ToolCallID: "t1", Content: TextContent("")},
			{Role: "system", Content: TextContent("Late system note.")},
		}},
			`{"model":"claude-sonnet-4-5-20250929","system":"Late system note.","max_tokens":4096,"messages":[
			  {"role":"user","content":"Look:"},
			  {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{"a":[1,2]}}]},
			  {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"},{"type":"text","text":"Here is the result."}]}]}`},
		{"assistant refusal becomes text", ChatRequest{Messages: []Message{
			{Role: "user", Content: TextContent("Do the bad thing")},
			{Role: "assistant", Content: Content{Null: true}, Refusal: "I can't help with that."},
			{Role: "user", Content: PartsContent(Part{Type: "text", Text: "Fine."})},
		}},
			`{"model":"claude-sonnet-4-5-20250929","max_tokens":4096,"messages":[
			  {"role":"user","content":"Do the bad thing"},
			  {"role":"assistant","content":"I can't help with that."},
			  {"role":"user","content":[{"type":"text","text":"Fine."}]}]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, err := anthEncode(t, c.req)
			if err != nil {
				t.Fatal(err)
			}
			anthJSONEq(t, body, c.want)
		})
	}
}

func anthF(f float64) *float64 { return &f }

func TestAnthropicNewRequestRefusals(t *testing.T) {
	user := []Message{{Role: "user", Content: TextContent("Hi")}}
	two, zero := int64(2), int64(0)
	tr := true
	cases := []struct {
		name  string
		req   ChatRequest
		param string
		code  string
	}{
		{"n", ChatRequest{Messages: user, N: &two}, "n", "unsupported_parameter"},
		{"logprobs", ChatRequest{Messages: user, Logprobs: &tr}, "logprobs", "unsupported_parameter"},
		{"json_schema", ChatRequest{Messages: user, ResponseFormat: json.RawMessage(`{"type":"json_schema","json_schema":{"name":"x","schema":{}}}`)}, "response_format", "unsupported_parameter"},
		{"bad response_format", ChatRequest{Messages: user, ResponseFormat: json.RawMessage(`"json"`)}, "response_format", "invalid_request"},
		{"audio", ChatRequest{Messages: []Message{{Role: "user", Content: PartsContent(Part{Type: "input_audio", InputAudio: json.RawMessage(`{"data":"AAA","format":"wav"}`)})}}}, "messages[0].content[0].input_audio", "unsupported_parameter"},
		{"file", ChatRequest{Messages: []Message{{Role: "user", Content: PartsContent(Part{Type: "text", Text: "see"}, Part{Type: "file", File: json.RawMessage(`{"file_id":"file-1"}`)})}}}, "messages[0].content[1].file", "unsupported_parameter"},
		{"file in tool result", ChatRequest{Messages: []Message{{Role: "tool", ToolCallID: "t", Content: PartsContent(Part{Type: "file"})}}}, "messages[0].content[0].file", "unsupported_parameter"},
		{"unknown part", ChatRequest{Messages: []Message{{Role: "user", Content: PartsContent(Part{Type: "video"})}}}, "messages[0].content[0].type", "invalid_request"},
		{"image in assistant", ChatRequest{Messages: []Message{{Role: "assistant", Content: PartsContent(Part{Type: "image_url", ImageURL: &ImageURL{URL: "https://x/y.png"}})}}}, "messages[0].content[0].type", "invalid_request"},
		{"image in system", ChatRequest{Messages: []Message{{Role: "system", Content: PartsContent(Part{Type: "image_url"})}, user[0]}}, "messages[0].content[0].type", "invalid_request"},
		{"image without url", ChatRequest{Messages: []Message{{Role: "user", Content: PartsContent(Part{Type: "image_url"})}}}, "messages[0].content[0].image_url", "invalid_request"},
		{"data url without base64", ChatRequest{Messages: []Message{{Role: "user", Content: PartsContent(Part{Type: "image_url", ImageURL: &ImageURL{URL: "data:image/png,abc"}})}}}, "messages[0].content[0].image_url", "invalid_request"},
		{"ftp image", ChatRequest{Messages: []Message{{Role: "user", Content: PartsContent(Part{Type: "image_url", ImageURL: &ImageURL{URL: "ftp://x/y.png"}})}}}, "messages[0].content[0].image_url", "invalid_request"},
		{"tool call without id", ChatRequest{Messages: []Message{user[0], {Role: "assistant", ToolCalls: []ToolCall{{Function: FunctionCall{Name: "f"}}}}}}, "messages[1].tool_calls[0].id", "invalid_request"},
		{"tool call without name", ChatRequest{Messages: []Message{user[0], {Role: "assistant", ToolCalls: []ToolCall{{ID: "c1"}}}}}, "messages[1].tool_calls[0].function.name", "invalid_request"},
		{"tool message without id", ChatRequest{Messages: []Message{user[0], {Role: "tool", Content: TextContent("x")}}}, "messages[1].tool_call_id", "invalid_request"},
		{"function role", ChatRequest{Messages: []Message{{Role: "function", Content: TextContent("x")}}}, "messages[0].role", "invalid_request"},
		{"only system", ChatRequest{Messages: []Message{{Role: "system", Content: TextContent("x")}}}, "messages", "invalid_request"},
		{"no messages", ChatRequest{}, "messages", "invalid_request"},
		{"max_tokens 0", ChatRequest{Messages: user, MaxTokens: &zero}, "max_tokens", "invalid_request"},
		{"max_completion_tokens 0", ChatRequest{Messages: user, MaxCompletionTokens: &zero}, "max_completion_tokens", "invalid_request"},
		{"non-function tool", ChatRequest{Messages: user, Tools: []Tool{{Type: "custom", Function: FunctionDecl{Name: "x"}}}}, "tools[0].type", "unsupported_parameter"},
		{"nameless tool", ChatRequest{Messages: user, Tools: []Tool{{Type: "function"}}}, "tools[0].function.name", "invalid_request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := anthEncode(t, c.req)
			e := anthAsError(t, err)
			if e.Status != http.StatusBadRequest || e.Kind != KindInvalidRequest || e.Param != c.param || e.Code != c.code {
				t.Errorf("got status %d kind %d param %q code %q (%s), want 400 param %q code %q",
					e.Status, e.Kind, e.Param, e.Code, e.Message, c.param, c.code)
			}
		})
	}
}

func TestAnthropicParseResponseGolden(t *testing.T) {
	anthFixedClock(t)
	for _, name := range []string{"response_text", "response_tool_use", "response_tool_only"} {
		t.Run(name, func(t *testing.T) {
			resp, err := Anthropic.ParseResponse(anthRead(t, name+".anthropic.json"), "claude-public")
			if err != nil {
				t.Fatal(err)
			}
			anthGolden(t, name+".want.json", anthMarshal(t, resp))
		})
	}
	// CacheCreationTokens is not part of the JSON document.
	resp, err := Anthropic.ParseResponse(anthRead(t, "response_tool_use.anthropic.json"), "claude-public")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage.CacheCreationTokens != 188086 {
		t.Errorf("CacheCreationTokens = %d, want 188086", resp.Usage.CacheCreationTokens)
	}
}

func TestAnthropicParseResponseStopReasons(t *testing.T) {
	for stop, want := range map[string]string{"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
		"tool_use": "tool_calls", "refusal": "content_filter", "pause_turn": "stop",
		"model_context_window_exceeded": "length", "": "stop", "something_new": "stop"} {
		body := `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"x"}],"stop_reason":"` + stop + `"}`
		resp, err := Anthropic.ParseResponse([]byte(body), "m")
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Choices[0].FinishReason; got != want {
			t.Errorf("stop_reason %q → %q, want %q", stop, got, want)
		}
		if resp.Usage != nil {
			t.Errorf("usage %+v from a response without usage", resp.Usage)
		}
	}
}

func TestAnthropicParseResponseFailures(t *testing.T) {
	for _, body := range []string{"", "not json", "[]", "null", "{}", `{"type":"completion"}`, `{"type":"message","content":"text"}`,
		`{"type":"message","content":[{"type":"text","text":1}]}`, `{"type":"message","usage":{"input_tokens":"many"}}`} {
		_, err := Anthropic.ParseResponse([]byte(body), "m")
		e := anthAsError(t, err)
		if e.Kind != KindBadResponse || e.Status != http.StatusBadGateway {
			t.Errorf("%q: kind %d status %d, want a bad response", body, e.Kind, e.Status)
		}
	}
	// Block types added later are skipped whatever their fields look like.
	resp, err := Anthropic.ParseResponse([]byte(`{"type":"message","id":"msg_1","content":[
		{"type":"mcp_tool_result","text":{"a":1},"id":5,"source":"x","is_error":"no"},{"type":"text","text":"ok"}],
		"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":2,"server_tool_use":{"web_search_requests":1}}}`), "m")
	if err != nil || resp.Choices[0].Message.Content.String() != "ok" || resp.Usage.TotalTokens != 3 {
		t.Errorf("future block: %v %s", err, anthMarshal(t, resp))
	}
	// A 2xx carrying an error body is classified like an error answer.
	_, err = Anthropic.ParseResponse([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), "m")
	if e := anthAsError(t, err); e.Kind != KindOverloaded || e.Status != 529 {
		t.Errorf("error body: kind %d status %d", e.Kind, e.Status)
	}
}

func TestAnthropicParseError(t *testing.T) {
	body := func(typ, msg string) string {
		return `{"type":"error","error":{"type":"` + typ + `","message":"` + msg + `"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`
	}
	cases := []struct {
		name   string
		status int
		body   string
		kind   ErrorKind
		out    int
		typ    string
		code   string
	}{
		{"rate limit", 429, body("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"), KindRateLimited, 429, "rate_limit_error", "rate_limit_exceeded"},
		{"spend cap 429", 429, `{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your API usage limits: your organization has crossed its monthly API usage threshold.","details":{"error_code":"enforced_spend_limit_reached"}}}`, KindQuotaExhausted, 429, "insufficient_quota", "insufficient_quota"},
		{"credit too low", 400, body("invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."), KindQuotaExhausted, 400, "insufficient_quota", "insufficient_quota"},
		{"workspace limit", 400, body("invalid_request_error", "You have reached your specified workspace API usage limits. You will regain access on 2026-09-01 at 00:00 UTC."), KindQuotaExhausted, 400, "insufficient_quota", "insufficient_quota"},
		{"billing 402", 402, body("billing_error", "There is an issue with your payment method."), KindQuotaExhausted, 402, "insufficient_quota", "insufficient_quota"},
		{"overloaded", 529, body("overloaded_error", "Overloaded"), KindOverloaded, 529, "server_error", ""},
		{"api error", 500, body("api_error", "Internal server error"), KindOverloaded, 500, "server_error", ""},
		{"timeout", 504, body("timeout_error", "Request timed out"), KindOverloaded, 504, "server_error", ""},
		{"gateway html", 502, "<html><body>Bad Gateway</body></html>", KindOverloaded, 502, "server_error", ""},
		{"prompt too long", 400, body("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"), KindContextOverflow, 400, "invalid_request_error", "context_length_exceeded"},
		{"input plus max_tokens", 400, body("invalid_request_error", "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or `max_tokens` and try again"), KindContextOverflow, 400, "invalid_request_error", "context_length_exceeded"},
		{"bad key", 401, body("authentication_error", "invalid x-api-key"), KindAuth, 502, "upstream_error", "upstream_auth_error"},
		{"no permission", 403, body("permission_error", "Your API key does not have permission to use the specified resource."), KindAuth, 502, "upstream_error", "upstream_auth_error"},
		{"no model", 404, body("not_found_error", "model: claude-nope"), KindNotFound, 404, "invalid_request_error", "model_not_found"},
		{"too large", 413, body("request_too_large", "Request exceeds the maximum allowed number of bytes."), KindInvalidRequest, 413, "invalid_request_error", ""},
		{"bad request", 400, body("invalid_request_error", "messages: roles must alternate between \"user\" and \"assistant\""), KindInvalidRequest, 400, "invalid_request_error", ""},
		{"max_tokens too big is not overflow", 400, body("invalid_request_error", "max_tokens: 300000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-5"), KindInvalidRequest, 400, "invalid_request_error", ""},
		{"empty 429", 429, "", KindRateLimited, 429, "rate_limit_error", "rate_limit_exceeded"},
		{"plain text 400", 400, "Bad Request", KindInvalidRequest, 400, "invalid_request_error", ""},
		{"error without message", 400, `{"type":"error","error":{"type":"invalid_request_error"}}`, KindInvalidRequest, 400, "invalid_request_error", ""},
		{"odd status", 302, "", KindOther, 502, "upstream_error", "upstream_error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := Anthropic.ParseError(c.status, http.Header{}, []byte(c.body))
			if e.Kind != c.kind || e.Status != c.out || e.Type != c.typ || e.Code != c.code {
				t.Errorf("got kind %d status %d type %q code %q, want kind %d status %d type %q code %q",
					e.Kind, e.Status, e.Type, e.Code, c.kind, c.out, c.typ, c.code)
			}
			if e.Message == "" {
				t.Error("empty message")
			}
		})
	}
	e := Anthropic.ParseError(429, nil, []byte(body("rate_limit_error", "Slow down")))
	if e.Message != "Slow down" {
		t.Errorf("message %q, want the upstream's", e.Message)
	}
	e = Anthropic.ParseError(502, nil, []byte(strings.Repeat("x", 1000)))
	if !strings.HasPrefix(e.Message, "The Anthropic upstream answered 502: xxx") || len(e.Message) > 260 {
		t.Errorf("non-JSON body message %q", e.Message)
	}
	e = Anthropic.ParseError(401, nil, []byte(body("authentication_error", "invalid x-api-key")))
	if !strings.Contains(e.Message, "invalid x-api-key") || !strings.Contains(e.Message, "credential") {
		t.Errorf("auth message %q", e.Message)
	}
}

// anthDecodeAll reads a stream to its end.
func anthDecodeAll(t testing.TB, r io.Reader) ([]*Chunk, error) {
	t.Helper()
	d := Anthropic.NewStreamDecoder(r, "claude-public")
	var out []*Chunk
	for i := 0; ; i++ {
		if i > 100000 {
			t.Fatal("the decoder does not end")
		}
		c, err := d.Next()
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
}

func TestAnthropicStreamGolden(t *testing.T) {
	anthFixedClock(t)
	for _, name := range []string{"stream_text", "stream_tool_use", "stream_thinking", "stream_server_tool"} {
		t.Run(name, func(t *testing.T) {
			chunks, err := anthDecodeAll(t, bytes.NewReader(anthRead(t, name+".sse")))
			if err != io.EOF {
				t.Fatalf("ended with %v, want io.EOF", err)
			}
			anthGolden(t, name+".want.json", anthMarshal(t, chunks))
		})
	}
}

func TestAnthropicStreamUsage(t *testing.T) {
	chunks, err := anthDecodeAll(t, bytes.NewReader(anthRead(t, "stream_tool_use.sse")))
	if err != io.EOF {
		t.Fatal(err)
	}
	last := chunks[len(chunks)-1]
	u := last.Usage
	if u == nil || len(last.Choices) != 0 || last.Choices == nil {
		t.Fatalf("last chunk %+v is not a usage chunk with empty choices", last)
	}
	if u.PromptTokens != 472+1024+100 || u.Cached() != 1024 || u.CacheCreationTokens != 100 || u.CompletionTokens != 89 || u.TotalTokens != 1596+89 {
		t.Errorf("usage %+v cached %d", u, u.Cached())
	}
	// message_delta's cumulative counts replace message_start's.
	chunks, err = anthDecodeAll(t, bytes.NewReader(anthRead(t, "stream_server_tool.sse")))
	if err != io.EOF {
		t.Fatal(err)
	}
	if u := chunks[len(chunks)-1].Usage; u == nil || u.PromptTokens != 10682 || u.CompletionTokens != 510 {
		t.Errorf("usage %+v", u)
	}
}

// TestAnthropicStreamFraming feeds the same streams split one byte at a
// time, with CRLF and lone-CR line ends, with comments and a BOM, and
// checks that the chunks do not change.
func TestAnthropicStreamFraming(t *testing.T) {
	anthFixedClock(t)
	for _, name := range []string{"stream_text", "stream_tool_use"} {
		raw := anthRead(t, name+".sse")
		want, err := anthDecodeAll(t, bytes.NewReader(raw))
		if err != io.EOF {
			t.Fatal(err)
		}
		variants := map[string]io.Reader{
			"one byte":  iotest.OneByteReader(bytes.NewReader(raw)),
			"half":      iotest.HalfReader(bytes.NewReader(raw)),
			"crlf":      iotest.OneByteReader(strings.NewReader(strings.ReplaceAll(string(raw), "\n", "\r\n"))),
			"lone cr":   strings.NewReader(strings.ReplaceAll(string(raw), "\n", "\r")),
			"comments":  strings.NewReader(": hello\n\n" + strings.ReplaceAll(string(raw), "\nevent:", "\n: keep-alive\nevent:")),
			"bom":       strings.NewReader("\xEF\xBB\xBF" + string(raw)),
			"no spaces": strings.NewReader(strings.ReplaceAll(strings.ReplaceAll(string(raw), "event: ", "event:"), "data: ", "data:")),
		}
		for vname, r := range variants {
			got, err := anthDecodeAll(t, r)
			if err != io.EOF {
				t.Fatalf("%s/%s: %v", name, vname, err)
			}
			if g, w := string(anthMarshal(t, got)), string(anthMarshal(t, want)); g != w {
				t.Errorf("%s/%s: chunks differ\n got %s\nwant %s", name, vname, g, w)
			}
		}
	}
}

func TestAnthropicStreamLargeEvent(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 300<<10/16) // 300 KB of text in one event
	arg := strings.Repeat("x", 100<<10)
	stream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":3}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + big + "\"}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"f\",\"input\":{}}}\n\n" +
		// a data field split over two lines is joined with a newline, which JSON allows between tokens
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\n" +
		"data: \"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":\\\"" + arg + "\\\"}\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	chunks, err := anthDecodeAll(t, iotest.HalfReader(strings.NewReader(stream)))
	if err != io.EOF {
		t.Fatal(err)
	}
	if len(chunks) != 6 {
		t.Fatalf("%d chunks", len(chunks))
	}
	if c := chunks[1].Choices[0].Delta.Content; c == nil || *c != big {
		t.Error("the large text delta was not delivered whole")
	}
	if tc := chunks[3].Choices[0].Delta.ToolCalls; len(tc) != 1 || tc[0].Function.Arguments != `{"a":"`+arg+`"}` {
		t.Error("the large argument delta was not delivered whole")
	}
	if r := chunks[4].Choices[0].FinishReason; r == nil || *r != FinishToolCalls {
		t.Errorf("finish %v", r)
	}
}

func TestAnthropicStreamFailures(t *testing.T) {
	start := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"
	text := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
	delta := "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":7}}\n\n"

	t.Run("error event", func(t *testing.T) {
		chunks, err := anthDecodeAll(t, strings.NewReader(start+text+
			"event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n"))
		e := anthAsError(t, err)
		if e.Kind != KindOverloaded || e.Status != 529 || e.Message != "Overloaded" {
			t.Errorf("error %+v", e)
		}
		if len(chunks) != 2 {
			t.Errorf("%d chunks before the error, want 2", len(chunks))
		}
	})
	t.Run("rate limit event", func(t *testing.T) {
		_, err := anthDecodeAll(t, strings.NewReader(start+
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow down\"}}\n\n"))
		if e := anthAsError(t, err); e.Kind != KindRateLimited || e.Status != 429 {
			t.Errorf("error %+v", e)
		}
	})
	t.Run("error event types", func(t *testing.T) {
		for typ, want := range map[string]struct {
			kind   ErrorKind
			status int
		}{
			"invalid_request_error": {KindInvalidRequest, 400}, "authentication_error": {KindAuth, 502},
			"billing_error": {KindQuotaExhausted, 402}, "permission_error": {KindAuth, 502},
			"not_found_error": {KindNotFound, 404}, "request_too_large": {KindInvalidRequest, 413},
			"rate_limit_error": {KindRateLimited, 429}, "api_error": {KindOverloaded, 500},
			"timeout_error": {KindOverloaded, 504}, "overloaded_error": {KindOverloaded, 529},
			"new_error_type": {KindOverloaded, 500},
		} {
			_, err := anthDecodeAll(t, strings.NewReader(start+
				"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\""+typ+"\",\"message\":\"m\"}}\n\n"))
			if e := anthAsError(t, err); e.Kind != want.kind || e.Status != want.status {
				t.Errorf("%s: kind %d status %d, want %d %d", typ, e.Kind, e.Status, want.kind, want.status)
			}
		}
	})
	t.Run("tool_use start with its whole input", func(t *testing.T) {
		chunks, err := anthDecodeAll(t, strings.NewReader(start+
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_9\",\"name\":\"f\",\"input\":{ \"a\" : 1 }}}\n\n"+
			delta))
		if err != io.EOF {
			t.Fatal(err)
		}
		if tc := chunks[1].Choices[0].Delta.ToolCalls; len(tc) != 1 || tc[0].Function.Arguments != `{"a":1}` || *tc[0].Index != 0 {
			t.Errorf("chunk %s", anthMarshal(t, chunks[1]))
		}
	})
	t.Run("event error helper", func(t *testing.T) {
		e := AnthropicEventError([]byte(`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`))
		if e.Kind != KindContextOverflow || e.Status != 400 || e.Code != "context_length_exceeded" {
			t.Errorf("error %+v", e)
		}
		if e := AnthropicEventError([]byte("Overloaded")); e.Kind != KindBadResponse {
			t.Errorf("non-JSON event: %+v", e)
		}
	})
	t.Run("error sticks", func(t *testing.T) {
		d := Anthropic.NewStreamDecoder(strings.NewReader("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"boom\"}}\n\n"), "m")
		_, err1 := d.Next()
		_, err2 := d.Next()
		if err1 == nil || err1 != err2 {
			t.Errorf("errors %v then %v", err1, err2)
		}
	})
	for name, stream := range map[string]string{
		"truncated":             start + text,
		"empty":                 "",
		"only comments":         ": nothing\n\n",
		"not json":              start + "event: content_block_delta\ndata: {\"type\":\n\n",
		"block start w/o block": start + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0}\n\n",
		"delta w/o delta":       start + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0}\n\n",
		"error w/o error":       start + "event: error\ndata: {\"type\":\"error\"}\n\n",
		"openai stream":         "data: {\"id\":\"x\",\"choices\":[]}\n\ndata: [DONE]\n\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := anthDecodeAll(t, strings.NewReader(stream))
			if e := anthAsError(t, err); e.Kind != KindBadResponse {
				t.Errorf("kind %d (%s), want a bad response", e.Kind, e.Message)
			}
		})
	}
	t.Run("reader error", func(t *testing.T) {
		boom := errors.New("connection reset")
		_, err := anthDecodeAll(t, io.MultiReader(strings.NewReader(start), iotest.ErrReader(boom)))
		if !errors.Is(err, boom) {
			t.Errorf("got %v, want the reader's error", err)
		}
	})
	t.Run("end after message_delta", func(t *testing.T) {
		chunks, err := anthDecodeAll(t, strings.NewReader(start+text+delta))
		if err != io.EOF {
			t.Fatalf("got %v, want io.EOF", err)
		}
		last := chunks[len(chunks)-1]
		if last.Usage == nil || last.Usage.PromptTokens != 3 || last.Usage.CompletionTokens != 7 {
			t.Errorf("usage %+v", last.Usage)
		}
		if r := chunks[len(chunks)-2].Choices[0].FinishReason; r == nil || *r != FinishLength {
			t.Errorf("finish %v", r)
		}
	})
	t.Run("future block and delta types", func(t *testing.T) {
		chunks, err := anthDecodeAll(t, strings.NewReader(start+
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"hologram\",\"text\":[1],\"id\":2}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"hologram_delta\",\"text\":{},\"partial_json\":3}}\n\n"+
			"event: brand_new_event\ndata: {\"type\":\"brand_new_event\",\"delta\":7}\n\n"+
			text+delta+"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
		if err != io.EOF {
			t.Fatal(err)
		}
		if s := anthSummary(chunks); !strings.Contains(s, `"text":"Hi"`) || !strings.Contains(s, `"finish":"length"`) {
			t.Errorf("summary %s", s)
		}
	})
	t.Run("message_stop without message_delta", func(t *testing.T) {
		chunks, err := anthDecodeAll(t, strings.NewReader(text+"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
		if err != io.EOF {
			t.Fatal(err)
		}
		// No message_start: the first chunk still carries the role, and
		// the stream still finishes; there is no usage to report.
		if len(chunks) != 2 || chunks[0].Choices[0].Delta.Role != "assistant" || *chunks[1].Choices[0].FinishReason != FinishStop {
			t.Errorf("chunks %s", anthMarshal(t, chunks))
		}
	})
	t.Run("nothing read after message_stop", func(t *testing.T) {
		r := io.MultiReader(strings.NewReader(start+delta+"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"), anthHangReader{t})
		if _, err := anthDecodeAll(t, r); err != io.EOF {
			t.Fatal(err)
		}
	})
}

// anthHangReader fails the test if read: the decoder must not read past
// message_stop (an upstream may keep the connection open).
type anthHangReader struct{ t testing.TB }

func (h anthHangReader) Read([]byte) (int, error) {
	h.t.Error("read past message_stop")
	return 0, io.EOF
}

func FuzzAnthropicResponse(f *testing.F) {
	for _, name := range []string{"response_text", "response_tool_use", "response_tool_only"} {
		f.Add(anthRead(f, name+".anthropic.json"))
	}
	f.Add([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := Anthropic.ParseResponse(body, "m")
		if err != nil {
			anthAsError(t, err)
			return
		}
		if len(resp.Choices) != 1 || resp.Choices[0].Message.Role != "assistant" {
			t.Fatalf("response %+v", resp)
		}
		for _, tc := range resp.Choices[0].Message.ToolCalls {
			if !json.Valid([]byte(tc.Function.Arguments)) {
				t.Fatalf("arguments %q are not JSON", tc.Function.Arguments)
			}
		}
		if _, err := json.Marshal(resp); err != nil {
			t.Fatal(err)
		}
		_ = Anthropic.ParseError(400, nil, body)
	})
}

func FuzzAnthropicStream(f *testing.F) {
	for _, name := range []string{"stream_text", "stream_tool_use", "stream_thinking", "stream_server_tool"} {
		f.Add(anthRead(f, name+".sse"))
	}
	f.Add([]byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		d := Anthropic.NewStreamDecoder(bytes.NewReader(stream), "m")
		for i := 0; ; i++ {
			if i > len(stream)+10 {
				t.Fatal("more chunks than input bytes: the decoder does not end")
			}
			c, err := d.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				anthAsError(t, err)
				return
			}
			if c == nil {
				t.Fatal("nil chunk without an error")
			}
		}
	})
}

// FuzzAnthropicRequest encodes arbitrary canonical requests.
func FuzzAnthropicRequest(f *testing.F) {
	for _, name := range []string{"request_basic", "request_tools", "request_defaults"} {
		f.Add(anthRead(f, name+".in.json"))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req ChatRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		hr, err := Anthropic.NewRequest(&req, anthTarget, req.Stream)
		if err != nil {
			if e := anthAsError(t, err); e.Status != http.StatusBadRequest {
				t.Fatalf("refusal with status %d", e.Status)
			}
			return
		}
		out, err := io.ReadAll(hr.Body)
		if err != nil || !json.Valid(out) {
			t.Fatalf("body %q: %v", out, err)
		}
	})
}

// Tool-call arguments that are not a JSON object (cut off by max_tokens,
// or a model's broken JSON) are history: they are wrapped, not refused, so
// that the conversation can go on.
func TestAnthropicMalformedArgumentsWrapped(t *testing.T) {
	for _, args := range []string{`{"path":"a.go","content":"package ma`, `[1]`} {
		req := &ChatRequest{Messages: []Message{{Role: "user", Content: TextContent("go")},
			{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Type: "function", Function: FunctionCall{Name: "f", Arguments: args}}}},
			{Role: "tool", ToolCallID: "c1", Content: TextContent("ok")}}}
		hr, err := Anthropic.NewRequest(req, &Target{Provider: "anthropic", BaseURL: "http://x/v1", UpstreamModel: "m"}, false)
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		body, _ := io.ReadAll(hr.Body)
		want, _ := json.Marshal(map[string]string{"_raw": args})
		if !bytes.Contains(body, []byte(`"input":`+string(want))) {
			t.Errorf("%s: body %s lacks the wrapped input %s", args, body, want)
		}
	}
}

// A streamed tool_use with an empty input gets arguments "{}", as a whole
// answer does, never "" (also through the Responses encoder).
func TestAnthropicStreamToolWithEmptyInputHasEmptyObjectArguments(t *testing.T) {
	sse := `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"list_files","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":5}}

event: message_stop
data: {"type":"message_stop"}

`
	args := ""
	for _, c := range drain(t, Anthropic.NewStreamDecoder(strings.NewReader(sse), "m")) {
		for _, ch := range c.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				args += tc.Function.Arguments
			}
		}
	}
	if !json.Valid([]byte(args)) {
		t.Errorf("streamed arguments = %q, not JSON (non-stream ParseResponse gives \"{}\")", args)
	}
	// Through the Responses encoder (Codex):
	var buf bytes.Buffer
	enc := ResponsesInbound.NewStreamEncoder(&buf, "m")
	for _, c := range drain(t, Anthropic.NewStreamDecoder(strings.NewReader(sse), "m")) {
		if err := enc.WriteChunk(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"type":"response.function_call_arguments.done"`) ||
		!strings.Contains(buf.String(), `"arguments":"{}"`) {
		t.Errorf("the Responses stream does not end the call with arguments {}:\n%s", buf.String())
	}
}

// A history tool call whose arguments are not a JSON object (cut off by
// max_tokens) does not make every later request of the conversation fail.
func TestAnthropicRequestAcceptsHistoryWithTruncatedToolArguments(t *testing.T) {
	req := &ChatRequest{Model: "m", Messages: []Message{
		{Role: "user", Content: TextContent("write the file")},
		{Role: "assistant", Content: Content{Null: true}, ToolCalls: []ToolCall{{ID: "call_1", Type: "function", Function: FunctionCall{Name: "write", Arguments: `{"path":"a.go","content":"package ma`}}}},
		{Role: "tool", ToolCallID: "call_1", Content: TextContent("error: invalid arguments")},
		{Role: "user", Content: TextContent("try again")},
	}}
	_, err := Anthropic.NewRequest(req, &Target{BaseURL: "x", UpstreamModel: "claude"}, false)
	if err != nil {
		t.Errorf("conversation refused: %v", err)
	}
}

// drain reads a stream decoder to its end.
func drain(t *testing.T, d StreamDecoder) []*Chunk {
	t.Helper()
	var out []*Chunk
	for {
		c, err := d.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		out = append(out, c)
	}
}
