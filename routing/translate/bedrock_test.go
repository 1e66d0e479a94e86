package translate

// The fixtures in testdata/bedrock follow the Converse API reference and
// the Bedrock user guide's tool-use walkthrough ("Call a tool with the
// Converse API": the top_song tool, toolUseId
// tooluse_kZJMlvQmRJ6eAyJE5GIl7Q, the WZPZ station). *.in.json is the
// input, *.want.json the full expected document; both are compared after
// normalising key order.

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

var bedrockTestTime = time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC) // 1717200000

// fixBedrockClock pins bedrockNow for the test.
func fixBedrockClock(t *testing.T) {
	t.Helper()
	old := bedrockNow
	bedrockNow = func() time.Time { return bedrockTestTime }
	t.Cleanup(func() { bedrockNow = old })
}

func readBedrockFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "bedrock", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// brNormJSON re-encodes a JSON document with sorted keys and indentation.
func brNormJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func brAssertJSONEqual(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if g, w := brNormJSON(t, got), brNormJSON(t, want); g != w {
		t.Errorf("%s differs\n--- got\n%s\n--- want\n%s", what, g, w)
	}
}

func bedrockTarget() *Target {
	return &Target{
		Provider:      "bedrock",
		UpstreamModel: "anthropic.claude-3-5-sonnet-20240620-v1:0",
		Credential:    sigV4SuiteAccessKey + ":" + sigV4SuiteSecretKey,
		Options:       map[string]string{"region": "us-west-2"},
	}
}

func TestBedrockRequestGolden(t *testing.T) {
	fixBedrockClock(t)
	for _, name := range []string{"tool_definition", "tool_result", "full", "parallel_tools", "tool_choice_none"} {
		t.Run(name, func(t *testing.T) {
			var req ChatRequest
			if err := json.Unmarshal(readBedrockFixture(t, "request_"+name+".in.json"), &req); err != nil {
				t.Fatal(err)
			}
			for _, stream := range []bool{false, true} {
				req.Stream = stream
				hr, err := Bedrock.NewRequest(&req, bedrockTarget(), stream)
				if err != nil {
					t.Fatalf("stream=%v: %v", stream, err)
				}
				body, err := io.ReadAll(hr.Body)
				if err != nil {
					t.Fatal(err)
				}
				brAssertJSONEqual(t, "Converse body", body, readBedrockFixture(t, "request_"+name+".want.json"))
				if hr.ContentLength != int64(len(body)) {
					t.Errorf("ContentLength %d, body %d bytes", hr.ContentLength, len(body))
				}
			}
		})
	}
}

func TestBedrockNewRequestEndpointAndAuth(t *testing.T) {
	fixBedrockClock(t)
	req := &ChatRequest{Model: "m", Messages: []Message{{Role: "user", Content: TextContent("hi")}}}

	t.Run("default endpoint, SigV4", func(t *testing.T) {
		hr, err := Bedrock.NewRequest(req, bedrockTarget(), false)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := hr.URL.String(), "https://bedrock-runtime.us-west-2.amazonaws.com/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"; got != want {
			t.Errorf("URL %s, want %s", got, want)
		}
		if hr.Method != http.MethodPost || hr.Header.Get("Content-Type") != "application/json" || hr.Header.Get("Accept") != "application/json" {
			t.Errorf("method %s headers %v", hr.Method, hr.Header)
		}
		if got := hr.Header.Get("X-Amz-Date"); got != "20240601T000000Z" {
			t.Errorf("X-Amz-Date %q", got)
		}
		auth := hr.Header.Get("Authorization")
		prefix := "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20240601/us-west-2/bedrock/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature="
		if !strings.HasPrefix(auth, prefix) {
			t.Fatalf("Authorization %q", auth)
		}
		// The signature covers the body actually sent and the
		// double-encoded model path.
		body, _ := io.ReadAll(hr.Body)
		check, _ := http.NewRequest(http.MethodPost, hr.URL.String(), bytes.NewReader(body))
		check.Header = hr.Header.Clone()
		SignV4(check, body, sigV4SuiteAccessKey, sigV4SuiteSecretKey, "", "us-west-2", "bedrock", bedrockTestTime)
		if check.Header.Get("Authorization") != auth {
			t.Errorf("signature does not match the body sent")
		}
		p := sigV4Compute(hr, "", []string{"host"}, sigV4SuiteSecretKey, "us-west-2", "bedrock", "20240601T000000Z")
		if !strings.Contains(p.canonicalRequest, "/model/anthropic.claude-3-5-sonnet-20240620-v1%253A0/converse\n") {
			t.Errorf("canonical request %q", p.canonicalRequest)
		}
		if hr.Header.Get("X-Amz-Security-Token") != "" {
			t.Error("security token without a session token")
		}
	})

	t.Run("stream, custom base URL, session token", func(t *testing.T) {
		tg := bedrockTarget()
		tg.BaseURL = "http://127.0.0.1:8000/bedrock/"
		tg.Credential = "AKID:SECRET:TOKEN/with+chars="
		hr, err := Bedrock.NewRequest(req, tg, true)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := hr.URL.String(), "http://127.0.0.1:8000/bedrock/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream"; got != want {
			t.Errorf("URL %s, want %s", got, want)
		}
		if hr.Header.Get("Accept") != "application/vnd.amazon.eventstream" {
			t.Errorf("Accept %q", hr.Header.Get("Accept"))
		}
		if hr.Header.Get("X-Amz-Security-Token") != "TOKEN/with+chars=" {
			t.Errorf("token %q", hr.Header.Get("X-Amz-Security-Token"))
		}
		if !strings.Contains(hr.Header.Get("Authorization"), "Credential=AKID/20240601/us-west-2/bedrock/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, ") {
			t.Errorf("Authorization %q", hr.Header.Get("Authorization"))
		}
	})

	t.Run("API key", func(t *testing.T) {
		tg := bedrockTarget()
		tg.Credential = "ABSKQmVkcm9ja0FQSUtleS1example"
		hr, err := Bedrock.NewRequest(req, tg, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := hr.Header.Get("Authorization"); got != "Bearer ABSKQmVkcm9ja0FQSUtleS1example" {
			t.Errorf("Authorization %q", got)
		}
		if hr.Header.Get("X-Amz-Date") != "" {
			t.Error("SigV4 headers on an API-key request")
		}
	})

	t.Run("ARN model id is one path segment", func(t *testing.T) {
		tg := bedrockTarget()
		tg.UpstreamModel = "arn:aws:bedrock:us-west-2:123456789012:inference-profile/us.anthropic.claude-3-haiku-20240307-v1:0"
		hr, err := Bedrock.NewRequest(req, tg, false)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := hr.URL.EscapedPath(), "/model/arn%3Aaws%3Abedrock%3Aus-west-2%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-3-haiku-20240307-v1%3A0/converse"; got != want {
			t.Errorf("path %s, want %s", got, want)
		}
	})

	t.Run("deployment errors", func(t *testing.T) {
		cases := map[string]func(*Target){
			"no region":          func(tg *Target) { tg.Options = nil },
			"bad region":         func(tg *Target) { tg.Options = map[string]string{"region": "us-east-1.evil.com/x"} },
			"no model":           func(tg *Target) { tg.UpstreamModel = "" },
			"no credential":      func(tg *Target) { tg.Credential = "  " },
			"empty access key":   func(tg *Target) { tg.Credential = ":s3cr3t-value" },
			"empty secret":       func(tg *Target) { tg.Credential = "AKID::s3cr3t-value" },
			"unparsable baseURL": func(tg *Target) { tg.BaseURL = "http://[::1" },
		}
		for name, mutate := range cases {
			tg := bedrockTarget()
			mutate(tg)
			hr, err := Bedrock.NewRequest(req, tg, false)
			if err == nil {
				t.Errorf("%s: got request %v, want an error", name, hr.URL)
				continue
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("%s: error quotes the credential: %v", name, err)
			}
		}
	})
}

func TestBedrockRequestRefusals(t *testing.T) {
	two, yes := int64(2), true
	user := func(parts ...Part) []Message {
		return []Message{{Role: "user", Content: PartsContent(parts...)}}
	}
	text := []Message{{Role: "user", Content: TextContent("hi")}}
	tool := []Tool{{Type: "function", Function: FunctionDecl{Name: "f"}}}
	cases := []struct {
		name  string
		req   ChatRequest
		param string
		code  string
	}{
		{"n > 1", ChatRequest{Messages: text, N: &two}, "n", "unsupported_parameter"},
		{"logprobs", ChatRequest{Messages: text, Logprobs: &yes}, "logprobs", "unsupported_parameter"},
		{"json_schema", ChatRequest{Messages: text, ResponseFormat: json.RawMessage(`{"type":"json_schema","json_schema":{"name":"x","schema":{}}}`)}, "response_format", "unsupported_parameter"},
		{"json_object", ChatRequest{Messages: text, ResponseFormat: json.RawMessage(`{"type":"json_object"}`)}, "response_format", "unsupported_parameter"},
		{"bad response_format", ChatRequest{Messages: text, ResponseFormat: json.RawMessage(`"json"`)}, "response_format", "invalid_request"},
		{"http image", ChatRequest{Messages: user(Part{Type: "image_url", ImageURL: &ImageURL{URL: "https://example.com/cat.png"}})}, "messages[0].content[0].image_url", "unsupported_parameter"},
		{"ftp image", ChatRequest{Messages: user(Part{Type: "image_url", ImageURL: &ImageURL{URL: "ftp://example.com/cat.png"}})}, "messages[0].content[0].image_url", "invalid_request"},
		{"image without url", ChatRequest{Messages: user(Part{Type: "image_url"})}, "messages[0].content[0].image_url", "invalid_request"},
		{"bmp image", ChatRequest{Messages: user(Part{Type: "image_url", ImageURL: &ImageURL{URL: "data:image/bmp;base64,Qk0="}})}, "messages[0].content[0].image_url", "unsupported_parameter"},
		{"non-base64 data URL", ChatRequest{Messages: user(Part{Type: "image_url", ImageURL: &ImageURL{URL: "data:image/png,%89PNG"}})}, "messages[0].content[0].image_url", "invalid_request"},
		{"data URL without data", ChatRequest{Messages: user(Part{Type: "image_url", ImageURL: &ImageURL{URL: "data:image/png;base64"}})}, "messages[0].content[0].image_url", "invalid_request"},
		{"invalid base64", ChatRequest{Messages: user(Part{Type: "image_url", ImageURL: &ImageURL{URL: "data:image/png;base64,!!!"}})}, "messages[0].content[0].image_url", "invalid_request"},
		{"audio", ChatRequest{Messages: user(Part{Type: "input_audio", InputAudio: json.RawMessage(`{"data":"AAA","format":"wav"}`)})}, "messages[0].content[0].input_audio", "unsupported_parameter"},
		{"file", ChatRequest{Messages: user(Part{Type: "file", File: json.RawMessage(`{"file_id":"f"}`)})}, "messages[0].content[0].file", "unsupported_parameter"},
		{"unknown part", ChatRequest{Messages: user(Part{Type: "video"})}, "messages[0].content[0].type", "invalid_request"},
		{"image in system", ChatRequest{Messages: []Message{{Role: "system", Content: PartsContent(Part{Type: "image_url", ImageURL: &ImageURL{URL: "data:image/png;base64,AA=="}})}}}, "messages[0].content[0].image_url", "unsupported_parameter"},
		{"image in assistant", ChatRequest{Messages: append(text, Message{Role: "assistant", Content: PartsContent(Part{Type: "image_url", ImageURL: &ImageURL{URL: "data:image/png;base64,AA=="}})})}, "messages[1].content[0].image_url", "unsupported_parameter"},
		{"audio in tool result", ChatRequest{Messages: append(text, Message{Role: "tool", ToolCallID: "c", Content: PartsContent(Part{Type: "input_audio"})}), Tools: tool}, "messages[1].content[0].input_audio", "unsupported_parameter"},
		{"bad tool arguments", ChatRequest{Messages: append(text, Message{Role: "assistant", ToolCalls: []ToolCall{{ID: "c", Function: FunctionCall{Name: "f", Arguments: "{oops"}}}}), Tools: tool}, "messages[1].tool_calls[0].function.arguments", "invalid_request"},
		{"tool call without id", ChatRequest{Messages: append(text, Message{Role: "assistant", ToolCalls: []ToolCall{{Function: FunctionCall{Name: "f"}}}})}, "messages[1].tool_calls[0].id", "invalid_request"},
		{"tool call without name", ChatRequest{Messages: append(text, Message{Role: "assistant", ToolCalls: []ToolCall{{ID: "c"}}})}, "messages[1].tool_calls[0].function.name", "invalid_request"},
		{"tool message without id", ChatRequest{Messages: append(text, Message{Role: "tool", Content: TextContent("r")})}, "messages[1].tool_call_id", "invalid_request"},
		{"unknown role", ChatRequest{Messages: []Message{{Role: "narrator", Content: TextContent("x")}}}, "messages[0].role", "invalid_request"},
		{"only system", ChatRequest{Messages: []Message{{Role: "system", Content: TextContent("x")}}}, "messages", "invalid_request"},
		{"no messages", ChatRequest{}, "messages", "invalid_request"},
		{"choice names unknown tool", ChatRequest{Messages: text, Tools: tool, ToolChoice: &ToolChoice{Mode: "function", Function: "g"}}, "tool_choice", "invalid_request"},
		{"required without tools", ChatRequest{Messages: text, ToolChoice: &ToolChoice{Mode: "required"}}, "tool_choice", "invalid_request"},
		{"unknown choice", ChatRequest{Messages: text, Tools: tool, ToolChoice: &ToolChoice{Mode: "sometimes"}}, "tool_choice", "invalid_request"},
		{"tool without name", ChatRequest{Messages: text, Tools: []Tool{{Type: "function"}}}, "tools[0].function.name", "invalid_request"},
		{"tool schema not JSON", ChatRequest{Messages: text, Tools: []Tool{{Type: "function", Function: FunctionDecl{Name: "f", Parameters: json.RawMessage(`{x`)}}}}, "tools[0].function.parameters", "invalid_request"},
		{"non-function tool", ChatRequest{Messages: text, Tools: []Tool{{Type: "web_search", Function: FunctionDecl{Name: "f"}}}}, "tools[0].type", "unsupported_parameter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hr, err := Bedrock.NewRequest(&tc.req, bedrockTarget(), false)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got request %v, error %v; want an *Error", hr, err)
			}
			if e.Param != tc.param || e.Code != tc.code || e.Status != http.StatusBadRequest || e.Kind != KindInvalidRequest {
				t.Errorf("got param %q code %q status %d kind %d (%s); want param %q code %q",
					e.Param, e.Code, e.Status, e.Kind, e.Message, tc.param, tc.code)
			}
		})
	}
}

func TestBedrockRequestEdgeCases(t *testing.T) {
	body := func(t *testing.T, req *ChatRequest) string {
		t.Helper()
		hr, err := Bedrock.NewRequest(req, bedrockTarget(), false)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(hr.Body)
		return brNormJSON(t, b)
	}
	// Tool history without tools is flattened to text (Converse refuses
	// toolUse blocks without a toolConfig); base64 with line breaks is
	// re-encoded; HTML characters are not escaped; a refusal stands in
	// for empty assistant content.
	req := &ChatRequest{Messages: []Message{
		{Role: "user", Content: PartsContent(
			Part{Type: "text", Text: "<b>&</b>"},
			Part{Type: "image_url", ImageURL: &ImageURL{URL: "data:image/gif;base64,R0lG\r\nODlh"}},
		)},
		{Role: "assistant", Refusal: "I can't help with that.", Content: Content{Null: true}},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Function: FunctionCall{Name: "f", Arguments: " "}}}},
		{Role: "tool", ToolCallID: "c1", Content: PartsContent(
			Part{Type: "text", Text: "{\"ok\":true}"},
			Part{Type: "image_url", ImageURL: &ImageURL{URL: "data:image/png;base64,AA=="}},
		)},
	}}
	want := `{
  "messages": [
    {"role": "user", "content": [
      {"text": "<b>&</b>"},
      {"image": {"format": "gif", "source": {"bytes": "R0lGODlh"}}}
    ]},
    {"role": "assistant", "content": [
      {"text": "I can't help with that."},
      {"text": "[Tool call f (c1) with arguments {}]"}
    ]},
    {"role": "user", "content": [
      {"text": "[Tool result for c1]\n{\"ok\":true}"},
      {"image": {"format": "png", "source": {"bytes": "AA=="}}}
    ]}
  ]
}`
	if got := body(t, req); got != brNormJSON(t, []byte(want)) {
		t.Errorf("got\n%s\nwant\n%s", got, brNormJSON(t, []byte(want)))
	}
	hr, _ := Bedrock.NewRequest(req, bedrockTarget(), false)
	raw, _ := io.ReadAll(hr.Body)
	if !bytes.Contains(raw, []byte("<b>&</b>")) {
		t.Errorf("HTML escaped in %s", raw)
	}

	// An empty tool result still answers its call (with a placeholder:
	// Converse refuses blank text); a JSON array stays
	// text (only objects become {json}).
	req = &ChatRequest{
		Messages: []Message{
			{Role: "user", Content: TextContent("go")},
			{Role: "assistant", ToolCalls: []ToolCall{{ID: "a", Function: FunctionCall{Name: "f", Arguments: "{}"}}, {ID: "b", Function: FunctionCall{Name: "f", Arguments: "{}"}}}},
			{Role: "tool", ToolCallID: "a", Content: PartsContent()},
			{Role: "tool", ToolCallID: "b", Content: TextContent("[1,2]")},
		},
		Tools:      []Tool{{Type: "function", Function: FunctionDecl{Name: "f", Parameters: json.RawMessage("null")}}},
		ToolChoice: &ToolChoice{Mode: "auto"},
	}
	want = `{
  "messages": [
    {"role": "user", "content": [{"text": "go"}]},
    {"role": "assistant", "content": [
      {"toolUse": {"toolUseId": "a", "name": "f", "input": {}}},
      {"toolUse": {"toolUseId": "b", "name": "f", "input": {}}}
    ]},
    {"role": "user", "content": [
      {"toolResult": {"toolUseId": "a", "content": [{"text": "(no output)"}]}},
      {"toolResult": {"toolUseId": "b", "content": [{"text": "[1,2]"}]}}
    ]}
  ],
  "toolConfig": {
    "tools": [{"toolSpec": {"name": "f", "inputSchema": {"json": {"type": "object", "properties": {}}}}}],
    "toolChoice": {"auto": {}}
  }
}`
	if got := body(t, req); got != brNormJSON(t, []byte(want)) {
		t.Errorf("got\n%s\nwant\n%s", got, brNormJSON(t, []byte(want)))
	}
}

func TestBedrockResponseGolden(t *testing.T) {
	fixBedrockClock(t)
	for _, name := range []string{"tool_use", "text_cached", "text_and_tools_max_tokens"} {
		t.Run(name, func(t *testing.T) {
			resp, err := Bedrock.ParseResponse(readBedrockFixture(t, "response_"+name+".in.json"), "top-song")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(resp.ID, "chatcmpl-br-") || len(resp.ID) < len("chatcmpl-br-")+16 {
				t.Errorf("id %q", resp.ID)
			}
			resp.ID = "<id>"
			got, err := json.Marshal(resp)
			if err != nil {
				t.Fatal(err)
			}
			brAssertJSONEqual(t, "chat completion", got, readBedrockFixture(t, "response_"+name+".want.json"))
		})
	}

	a, _ := Bedrock.ParseResponse(readBedrockFixture(t, "response_tool_use.in.json"), "m")
	b, _ := Bedrock.ParseResponse(readBedrockFixture(t, "response_tool_use.in.json"), "m")
	if a.ID == b.ID {
		t.Errorf("two responses share the id %q", a.ID)
	}
}

func TestBedrockFinishReasons(t *testing.T) {
	cases := map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
		"guardrail_intervened": "content_filter", "content_filtered": "content_filter",
		"model_context_window_exceeded": "length", "malformed_model_output": "stop", "": "stop", "something_new": "stop",
	}
	for stop, want := range cases {
		body := `{"output":{"message":{"role":"assistant","content":[{"text":"x"}]}},"stopReason":"` + stop + `"}`
		resp, err := Bedrock.ParseResponse([]byte(body), "m")
		if err != nil {
			t.Fatalf("%s: %v", stop, err)
		}
		if got := resp.Choices[0].FinishReason; got != want {
			t.Errorf("stopReason %q -> %q, want %q", stop, got, want)
		}
	}
}

func TestBedrockResponseMalformed(t *testing.T) {
	cases := map[string]string{
		"empty":               ``,
		"not JSON":            `<html>502</html>`,
		"null":                `null`,
		"array":               `[1]`,
		"no output":           `{"stopReason":"end_turn"}`,
		"no message":          `{"output":{}}`,
		"content not array":   `{"output":{"message":{"content":{"text":"x"}}}}`,
		"text not string":     `{"output":{"message":{"content":[{"text":5}]}}}`,
		"toolUse without id":  `{"output":{"message":{"content":[{"toolUse":{"name":"f","input":{}}}]}}}`,
		"usage not numbers":   `{"output":{"message":{"content":[]}},"usage":{"inputTokens":"many"}}`,
		"truncated":           `{"output":{"message":{"content":[{"text":"x"`,
		"stopReason a number": `{"output":{"message":{"content":[]}},"stopReason":3}`,
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			resp, err := Bedrock.ParseResponse([]byte(body), "m")
			var e *Error
			if !errors.As(err, &e) || e.Kind != KindBadResponse || e.Status != http.StatusBadGateway {
				t.Fatalf("got %+v, %v; want a BadResponse", resp, err)
			}
		})
	}
}

func TestBedrockParseError(t *testing.T) {
	hdr := func(typ string) http.Header {
		h := http.Header{}
		if typ != "" {
			h.Set("x-amzn-ErrorType", typ)
		}
		return h
	}
	cases := []struct {
		name   string
		status int
		header http.Header
		body   string
		kind   ErrorKind
		code   string
		client int
	}{
		{"throttling", 429, hdr("ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"),
			`{"message":"Too many requests, please wait before trying again."}`, KindRateLimited, "rate_limit_exceeded", 429},
		{"bare 429", 429, hdr(""), `{}`, KindRateLimited, "rate_limit_exceeded", 429},
		{"quota", 400, hdr("ServiceQuotaExceededException"), `{"message":"Your request exceeded the quota."}`, KindQuotaExhausted, "insufficient_quota", 429},
		{"input too long", 400, hdr("ValidationException:http://internal.amazon.com/coral/com.amazon.coral.validate/"),
			`{"message":"Input is too long for requested model."}`, KindContextOverflow, "context_length_exceeded", 400},
		{"too many input tokens", 400, hdr("ValidationException"),
			`{"message":"Too many input tokens. Max input tokens: 8192, request input token count: 9000"}`, KindContextOverflow, "context_length_exceeded", 400},
		{"prompt too long", 400, hdr("ValidationException"),
			`{"message":"The model returned the following errors: prompt is too long: 205000 tokens > 200000 maximum"}`, KindContextOverflow, "context_length_exceeded", 400},
		{"context length", 400, hdr("ValidationException"),
			`{"message":"This model's maximum context length is 8192 tokens."}`, KindContextOverflow, "context_length_exceeded", 400},
		{"other validation", 400, hdr("ValidationException"),
			`{"message":"The model returned the following errors: temperature: range: 0..1"}`, KindInvalidRequest, "invalid_request", 400},
		{"validation via __type", 400, hdr(""),
			`{"__type":"com.amazon.coral.validate#ValidationException","Message":"Malformed input request"}`, KindInvalidRequest, "invalid_request", 400},
		{"access denied", 403, hdr("AccessDeniedException"),
			`{"message":"You don't have access to the model with the specified model ID."}`, KindAuth, "upstream_auth_failed", 502},
		{"unrecognized client", 403, hdr("UnrecognizedClientException"),
			`{"message":"The security token included in the request is invalid."}`, KindAuth, "upstream_auth_failed", 502},
		{"bare 403", 403, hdr(""), `{"Message":"Signature expired"}`, KindAuth, "upstream_auth_failed", 502},
		{"not found", 404, hdr("ResourceNotFoundException"), `{"message":"Could not resolve the foundation model from the provided model identifier."}`, KindNotFound, "model_not_found", 404},
		{"model not ready", 429, hdr("ModelNotReadyException"), `{"message":"Model is not ready."}`, KindOverloaded, "upstream_overloaded", 503},
		{"service unavailable", 503, hdr("ServiceUnavailableException"), `{"message":"Service unavailable"}`, KindOverloaded, "upstream_overloaded", 503},
		{"internal", 500, hdr("InternalServerException"), `{"message":"Internal error"}`, KindOverloaded, "upstream_overloaded", 503},
		{"bare 502 html", 502, hdr(""), `<html>Bad Gateway</html>`, KindOverloaded, "upstream_overloaded", 503},
		{"model timeout", 408, hdr("ModelTimeoutException"), `{"message":"Model has timed out in processing the request."}`, KindTimeout, "upstream_timeout", 504},
		{"model error", 424, hdr("ModelErrorException"), `{"message":"The model failed."}`, KindOther, "upstream_error", 502},
		{"unknown 4xx", 409, hdr("ConflictException"), `{"message":"conflict"}`, KindInvalidRequest, "invalid_request", 400},
		{"odd status", 302, hdr(""), ``, KindOther, "upstream_error", 502},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := Bedrock.ParseError(tc.status, tc.header, []byte(tc.body))
			if e.Kind != tc.kind || e.Code != tc.code || e.Status != tc.client {
				t.Errorf("kind %d code %q status %d (%s); want kind %d code %q status %d",
					e.Kind, e.Code, e.Status, e.Message, tc.kind, tc.code, tc.client)
			}
			if e.Message == "" || e.Type == "" {
				t.Errorf("empty message or type: %+v", e)
			}
		})
	}

	e := Bedrock.ParseError(429, hdr("ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"), []byte(`{"message":"Too many tokens"}`))
	if e.Message != "Bedrock ThrottlingException: Too many tokens" {
		t.Errorf("message %q", e.Message)
	}
	long := strings.Repeat("é", 300)
	e = Bedrock.ParseError(500, nil, []byte(long))
	if !strings.HasSuffix(e.Message, "…") || len(e.Message) > 260 || !json.Valid(brMustJSON(t, e.Message)) {
		t.Errorf("long body message %q", e.Message)
	}
}

func brMustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// bedrockStreamFixture encodes a stream_*.in.json fixture: an array of
// {"headers": {...}, "payload": <JSON>} into event-stream bytes.
func bedrockStreamFixture(b []byte) ([]byte, error) {
	var msgs []struct {
		Headers map[string]string `json:"headers"`
		Payload json.RawMessage   `json:"payload"`
	}
	if err := json.Unmarshal(b, &msgs); err != nil {
		return nil, err
	}
	var out []byte
	for _, m := range msgs {
		var hs [][2]string
		for k, v := range m.Headers {
			hs = append(hs, [2]string{k, v})
		}
		sort.Slice(hs, func(i, j int) bool { return hs[i][0] < hs[j][0] })
		var payload bytes.Buffer
		if err := json.Compact(&payload, m.Payload); err != nil {
			return nil, err
		}
		out = AppendEventStreamMessage(out, hs, payload.Bytes())
	}
	return out, nil
}

// bedrockStreamSeeds returns the encoded stream fixtures, for fuzzing.
func bedrockStreamSeeds() [][]byte {
	var seeds [][]byte
	for _, name := range []string{"stream_text.in.json", "stream_tools.in.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "bedrock", name))
		if err != nil {
			continue
		}
		if s, err := bedrockStreamFixture(b); err == nil {
			seeds = append(seeds, s)
		}
	}
	return seeds
}

// drainBedrock reads chunks until an error; it fails the test if the
// decoder does not stop.
func drainBedrock(t *testing.T, r io.Reader) ([]*Chunk, error) {
	t.Helper()
	d := Bedrock.NewStreamDecoder(r, "top-song")
	var chunks []*Chunk
	for i := 0; i < 10000; i++ {
		c, err := d.Next()
		if err != nil {
			if _, again := d.Next(); again != err {
				t.Errorf("error not sticky: %v then %v", err, again)
			}
			return chunks, err
		}
		chunks = append(chunks, c)
	}
	t.Fatal("stream decoder did not stop")
	return nil, nil
}

func brChunksJSON(t *testing.T, chunks []*Chunk) []byte {
	t.Helper()
	if len(chunks) == 0 {
		return []byte("[]")
	}
	id := chunks[0].ID
	if !strings.HasPrefix(id, "chatcmpl-br-") {
		t.Errorf("chunk id %q", id)
	}
	var cs []Chunk
	for _, c := range chunks {
		if c.ID != id {
			t.Errorf("chunk ids differ: %q, %q", c.ID, id)
		}
		cc := *c
		cc.ID = "<id>"
		cs = append(cs, cc)
	}
	return brMustJSON(t, cs)
}

func TestBedrockStreamGolden(t *testing.T) {
	fixBedrockClock(t)
	for _, name := range []string{"text", "tools"} {
		t.Run(name, func(t *testing.T) {
			stream, err := bedrockStreamFixture(readBedrockFixture(t, "stream_"+name+".in.json"))
			if err != nil {
				t.Fatal(err)
			}
			want := readBedrockFixture(t, "stream_"+name+".want.json")
			for _, mode := range []string{"whole", "one byte at a time"} {
				var r io.Reader = bytes.NewReader(stream)
				if mode != "whole" {
					r = iotest.OneByteReader(r)
				}
				chunks, err := drainBedrock(t, r)
				if err != io.EOF {
					t.Fatalf("%s: ended with %v, want io.EOF", mode, err)
				}
				brAssertJSONEqual(t, mode+" chunks", brChunksJSON(t, chunks), want)
			}
		})
	}
}

// bedrockEvent encodes one ConverseStream event.
func bedrockEvent(typ, payload string) []byte {
	return AppendEventStreamMessage(nil, [][2]string{
		{":event-type", typ}, {":content-type", "application/json"}, {":message-type", "event"},
	}, []byte(payload))
}

func TestBedrockStreamFailures(t *testing.T) {
	start := bedrockEvent("messageStart", `{"role":"assistant"}`)
	hello := bedrockEvent("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hello"}}`)
	stop := bedrockEvent("messageStop", `{"stopReason":"end_turn"}`)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	exception := func(typ, msg string) []byte {
		return AppendEventStreamMessage(nil, [][2]string{
			{":exception-type", typ}, {":content-type", "application/json"}, {":message-type", "exception"},
		}, []byte(`{"message":"`+msg+`"}`))
	}
	corrupt := cat(start, hello)
	corrupt[len(corrupt)-6] ^= 0x20

	cases := []struct {
		name   string
		stream []byte
		chunks int // chunks delivered before the error
		kind   ErrorKind
		code   string
	}{
		{"throttling mid-stream", cat(start, hello, exception("throttlingException", "Too many tokens, please wait before trying again.")), 2, KindRateLimited, "rate_limit_exceeded"},
		{"validation: too long", cat(exception("validationException", "Input is too long for requested model.")), 0, KindContextOverflow, "context_length_exceeded"},
		{"model stream error", cat(start, exception("modelStreamErrorException", "A streaming error occurred.")), 1, KindOverloaded, "upstream_overloaded"},
		{"internal server", cat(start, exception("internalServerException", "oops")), 1, KindOverloaded, "upstream_overloaded"},
		{"service unavailable", cat(exception("serviceUnavailableException", "down")), 0, KindOverloaded, "upstream_overloaded"},
		{"exception without JSON", cat(start, AppendEventStreamMessage(nil, [][2]string{{":message-type", "exception"}, {":exception-type", "throttlingException"}}, []byte("slow down"))), 1, KindRateLimited, "rate_limit_exceeded"},
		{"error message", cat(start, AppendEventStreamMessage(nil, [][2]string{{":message-type", "error"}, {":error-code", "InternalFailure"}, {":error-message", "boom"}}, nil)), 1, KindOverloaded, "upstream_overloaded"},
		{"ends before messageStop", cat(start, hello), 2, KindBadResponse, "bad_upstream_response"},
		{"empty body", nil, 0, KindBadResponse, "bad_upstream_response"},
		{"truncated frame", cat(start, hello, stop)[:len(start)+len(hello)+10], 2, KindBadResponse, "bad_upstream_response"},
		{"CRC corruption", corrupt, 1, KindBadResponse, "bad_upstream_response"},
		{"garbage", []byte("data: {\"not\":\"eventstream\"}\n\n"), 0, KindBadResponse, "bad_upstream_response"},
		{"invalid JSON payload", cat(start, bedrockEvent("contentBlockDelta", `{"delta":`)), 1, KindBadResponse, "bad_upstream_response"},
		{"tool delta without start", cat(start, bedrockEvent("contentBlockDelta", `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{}"}}}`)), 1, KindBadResponse, "bad_upstream_response"},
		{"tool delta without index", cat(start, bedrockEvent("contentBlockDelta", `{"delta":{"toolUse":{"input":"{}"}}}`)), 1, KindBadResponse, "bad_upstream_response"},
		{"tool start without id", cat(start, bedrockEvent("contentBlockStart", `{"contentBlockIndex":1,"start":{"toolUse":{"name":"f"}}}`)), 1, KindBadResponse, "bad_upstream_response"},
		{"tool start without index", cat(start, bedrockEvent("contentBlockStart", `{"start":{"toolUse":{"toolUseId":"t","name":"f"}}}`)), 1, KindBadResponse, "bad_upstream_response"},
		{"block started twice", cat(start,
			bedrockEvent("contentBlockStart", `{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"t","name":"f"}}}`),
			bedrockEvent("contentBlockStart", `{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"u","name":"f"}}}`)), 2, KindBadResponse, "bad_upstream_response"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chunks, err := drainBedrock(t, iotest.OneByteReader(bytes.NewReader(tc.stream)))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("ended with %v, want an *Error", err)
			}
			if e.Kind != tc.kind || e.Code != tc.code {
				t.Errorf("kind %d code %q (%s), want kind %d code %q", e.Kind, e.Code, e.Message, tc.kind, tc.code)
			}
			if len(chunks) != tc.chunks {
				t.Errorf("%d chunks before the error, want %d", len(chunks), tc.chunks)
			}
		})
	}

	// An I/O error of the body is passed through unchanged, so that the
	// caller can tell a cancelled request from a bad upstream.
	boom := errors.New("read: connection reset by peer")
	_, err := drainBedrock(t, io.MultiReader(bytes.NewReader(start), esErrReader{boom}))
	if err != boom {
		t.Errorf("got %v, want the read error", err)
	}
}

func TestBedrockStreamTolerance(t *testing.T) {
	fixBedrockClock(t)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	// No messageStart: the role still comes first. Unknown events and
	// message types are skipped; events after messageStop other than
	// metadata are ignored; metadata without usage emits nothing.
	stream := cat(
		bedrockEvent("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hi"}}`),
		bedrockEvent("someFutureEvent", `not even JSON`),
		AppendEventStreamMessage(nil, [][2]string{{":message-type", "ping"}}, nil),
		bedrockEvent("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":""}}`),
		bedrockEvent("contentBlockStop", `{}`),
		bedrockEvent("messageStop", `{"stopReason":"guardrail_intervened"}`),
		bedrockEvent("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"late"}}`),
		bedrockEvent("messageStop", `{"stopReason":"end_turn"}`),
		bedrockEvent("metadata", `{"metrics":{"latencyMs":3}}`),
	)
	chunks, err := drainBedrock(t, bytes.NewReader(stream))
	if err != io.EOF {
		t.Fatalf("ended with %v", err)
	}
	want := `[
	  {"id":"<id>","object":"chat.completion.chunk","created":1717200000,"model":"top-song","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]},
	  {"id":"<id>","object":"chat.completion.chunk","created":1717200000,"model":"top-song","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]},
	  {"id":"<id>","object":"chat.completion.chunk","created":1717200000,"model":"top-song","choices":[{"index":0,"delta":{},"finish_reason":"content_filter"}]}
	]`
	brAssertJSONEqual(t, "chunks", brChunksJSON(t, chunks), []byte(want))
}

func FuzzBedrockResponse(f *testing.F) {
	for _, name := range []string{"response_tool_use.in.json", "response_text_cached.in.json", "response_text_and_tools_max_tokens.in.json"} {
		if b, err := os.ReadFile(filepath.Join("testdata", "bedrock", name)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"output":{"message":{"content":[{"toolUse":{"toolUseId":"t","name":"n","input":"x"}}]}},"usage":{"inputTokens":-1}}`))
	f.Add([]byte(`{"message":"Too many input tokens","__type":"x#ValidationException"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := Bedrock.ParseResponse(body, "m")
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Kind != KindBadResponse {
				t.Fatalf("error %v is not a BadResponse", err)
			}
		} else {
			if len(resp.Choices) != 1 {
				t.Fatalf("%d choices", len(resp.Choices))
			}
			for _, tc := range resp.Choices[0].Message.ToolCalls {
				if !json.Valid([]byte(tc.Function.Arguments)) {
					t.Fatalf("tool arguments %q are not JSON", tc.Function.Arguments)
				}
			}
			if _, err := json.Marshal(resp); err != nil {
				t.Fatalf("response does not encode: %v", err)
			}
		}
		for _, status := range []int{400, 429, 500} {
			e := Bedrock.ParseError(status, http.Header{"X-Amzn-Errortype": {string(body[:min(len(body), 40)])}}, body)
			if e == nil || e.Status == 0 || e.Message == "" {
				t.Fatalf("ParseError gave %+v", e)
			}
		}
	})
}

// The decoders must not depend on map iteration or other hidden state:
// decoding the same stream twice gives the same chunks.
func TestBedrockStreamDeterministic(t *testing.T) {
	fixBedrockClock(t)
	stream, err := bedrockStreamFixture(readBedrockFixture(t, "stream_tools.in.json"))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := drainBedrock(t, bytes.NewReader(stream))
	b, _ := drainBedrock(t, bytes.NewReader(stream))
	if !reflect.DeepEqual(brChunksJSON(t, a), brChunksJSON(t, b)) {
		t.Error("two decodes differ")
	}
}

// FuzzBedrockStream drives the ConverseStream decoder with well-framed
// messages (random framing rarely passes the CRCs, so FuzzEventStream
// seldom reaches the event handling). The input is lines of
// "message-type \t event-or-exception-type \t payload".
func FuzzBedrockStream(f *testing.F) {
	for _, name := range []string{"stream_text.in.json", "stream_tools.in.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "bedrock", name))
		if err != nil {
			continue
		}
		var msgs []struct {
			Headers map[string]string `json:"headers"`
			Payload json.RawMessage   `json:"payload"`
		}
		if json.Unmarshal(b, &msgs) != nil {
			continue
		}
		var lines []string
		for _, m := range msgs {
			var p bytes.Buffer
			_ = json.Compact(&p, m.Payload)
			lines = append(lines, "event\t"+m.Headers[":event-type"]+"\t"+p.String())
		}
		f.Add(strings.Join(lines, "\n"))
	}
	f.Add("exception\tthrottlingException\t{\"message\":\"slow down\"}")
	f.Add("event\tcontentBlockStart\t{\"contentBlockIndex\":3,\"start\":{\"toolUse\":{\"toolUseId\":\"t\",\"name\":\"f\"}}}\nevent\tcontentBlockDelta\t{\"contentBlockIndex\":3,\"delta\":{\"toolUse\":{\"input\":\"{\"}}}")
	f.Fuzz(func(t *testing.T, script string) {
		var stream []byte
		for _, line := range strings.Split(script, "\n") {
			parts := strings.SplitN(line, "\t", 3)
			if len(parts) != 3 {
				continue
			}
			key := ":event-type"
			switch parts[0] {
			case "exception":
				key = ":exception-type"
			case "error":
				key = ":error-code"
			}
			stream = AppendEventStreamMessage(stream, [][2]string{{":message-type", parts[0]}, {key, parts[1]}}, []byte(parts[2]))
		}
		d := Bedrock.NewStreamDecoder(bytes.NewReader(stream), "m")
		roleFirst, tools := true, 0
		for i := 0; ; i++ {
			c, err := d.Next()
			if err != nil {
				if err != io.EOF {
					var e *Error
					if !errors.As(err, &e) || e.Status == 0 || e.Message == "" {
						t.Fatalf("error %v is not a classified *Error", err)
					}
				}
				break
			}
			if i > len(script)+8 {
				t.Fatal("decoder did not stop")
			}
			if _, err := json.Marshal(c); err != nil {
				t.Fatalf("chunk does not encode: %v", err)
			}
			if len(c.Choices) == 0 {
				if c.Usage == nil {
					t.Fatal("chunk with neither choices nor usage")
				}
				continue
			}
			d := c.Choices[0].Delta
			if i == 0 && d.Role != "assistant" {
				roleFirst = false
			}
			for _, tc := range d.ToolCalls {
				if tc.Index == nil || *tc.Index < 0 || *tc.Index > tools {
					t.Fatalf("tool call index %v with %d tools seen", tc.Index, tools)
				}
				if *tc.Index == tools {
					if tc.ID == "" {
						t.Fatal("a new tool call without an id")
					}
					tools++
				}
			}
		}
		if !roleFirst {
			t.Fatal("the first chunk is not the role")
		}
	})
}

func f64(v float64) *float64 { return &v }

// Regression tests from a review of the Gemini, Bedrock and OpenAI
// translators.

// 1. ParseOpenAIError: a Cerebras-style 429 TPM limit is classified as context overflow.
func TestRegressionOpenAI429TooManyTokensIsContextOverflow(t *testing.T) {
	body := []byte(`{"message":"Tokens per minute limit exceeded - too many tokens processed.","type":"too_many_tokens_error","param":"quota","code":"token_quota_exceeded"}`)
	e := ParseOpenAIError(429, body)
	t.Logf("kind=%d code=%q status=%d", e.Kind, e.Code, e.Status)
	if e.Kind != KindRateLimited {
		t.Errorf("429 TPM limit: kind=%d (want KindRateLimited=%d); ContextOverflow=%d", e.Kind, KindRateLimited, KindContextOverflow)
	}
}

// A temperature above 1 is sent as 1: Converse's range is [0, 1].
func TestBedrockRequestClampsTemperature(t *testing.T) {
	req := &ChatRequest{Messages: []Message{{Role: "user", Content: TextContent("hi")}}, Temperature: f64(1.5)}
	out, err := bedrockEncodeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(out.InferenceConfig)
	t.Logf("inferenceConfig=%s", b)
	if *out.InferenceConfig.Temperature > 1 {
		t.Errorf("temperature %v sent; Converse rejects > 1", *out.InferenceConfig.Temperature)
	}
}

// Blank text (an empty tool result, whitespace-only assistant text) is
// never sent as a text block, which Bedrock refuses.
func TestBedrockRequestSendsNoBlankText(t *testing.T) {
	tools := []Tool{{Type: "function", Function: FunctionDecl{Name: "run", Parameters: json.RawMessage(`{"type":"object","properties":{"cmd":{"type":"string"}}}`)}}}
	msgs := []Message{
		{Role: "user", Content: TextContent("run it")},
		{Role: "assistant", Content: TextContent("\n\n"), ToolCalls: []ToolCall{{ID: "toolu_1", Type: "function", Function: FunctionCall{Name: "run", Arguments: `{"cmd":"true"}`}}}},
		{Role: "tool", ToolCallID: "toolu_1", Content: TextContent("")},
	}
	out, err := bedrockEncodeRequest(&ChatRequest{Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(out.Messages)
	t.Logf("messages=%s", b)
	if strings.Contains(string(b), `"text":""`) || strings.Contains(string(b), `"text":"\n\n"`) {
		t.Errorf("blank text block sent (Bedrock: \"The text field in the ContentBlock object ... is blank\")")
	}
}

// A conversation that starts with the assistant still starts with a user
// message, and tool-call ids are rewritten to Bedrock's
// [a-zA-Z0-9_-]{1,64}.
func TestBedrockRequestStartsWithUserAndSanitisesToolIDs(t *testing.T) {
	msgs := []Message{
		{Role: "system", Content: TextContent("be nice")},
		{Role: "assistant", Content: TextContent("Hello! How can I help?")},
		{Role: "user", Content: TextContent("hi")},
	}
	out, err := bedrockEncodeRequest(&ChatRequest{Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first role=%s", out.Messages[0].Role)
	if out.Messages[0].Role != "user" {
		t.Errorf("Converse: \"A conversation must start with a user message\"")
	}
	long := strings.Repeat("x", 60)
	tools := []Tool{{Type: "function", Function: FunctionDecl{Name: long}}, {Type: "function", Function: FunctionDecl{Name: "get_weather"}}}
	msgs = []Message{
		{Role: "user", Content: TextContent("go")},
		{Role: "assistant", ToolCalls: []ToolCall{
			{ID: "functions.get_weather:0", Type: "function", Function: FunctionCall{Name: "get_weather", Arguments: "{}"}},
			{ID: "call_1_" + long, Type: "function", Function: FunctionCall{Name: long, Arguments: "{}"}}}},
		{Role: "tool", ToolCallID: "functions.get_weather:0", Content: TextContent("ok")},
		{Role: "tool", ToolCallID: "call_1_" + long, Content: TextContent("ok")},
	}
	out, err = bedrockEncodeRequest(&ChatRequest{Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range out.Messages {
		for _, b := range m.Content {
			if b.ToolUse != nil {
				id := b.ToolUse.ToolUseID
				ok := len(id) <= 64
				for i := 0; i < len(id); i++ {
					if !anthropicIDByte(id[i]) {
						ok = false
					}
				}
				if !ok {
					t.Errorf("toolUseId %q (len %d) violates [a-zA-Z0-9_-]{1,64}", id, len(id))
				}
			}
		}
	}
}
