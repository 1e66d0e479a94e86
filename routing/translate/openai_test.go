package translate

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func openAIBody(t *testing.T, req *ChatRequest, target *Target) map[string]any {
	t.Helper()
	hr, err := OpenAIChat.NewRequest(req, target, false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(hr.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// OpenAI's reasoning models refuse max_tokens: OpenAI and Azure get
// max_completion_tokens; OpenAI-compatible servers keep max_tokens.
func TestOpenAIMaxCompletionTokens(t *testing.T) {
	n := int64(32000)
	req := &ChatRequest{Messages: []Message{{Role: "user", Content: TextContent("hi")}}, MaxTokens: &n}
	for provider, want := range map[string]string{"openai": "max_completion_tokens", "azure-openai": "max_completion_tokens",
		"openai-compatible": "max_tokens"} {
		m := openAIBody(t, req, &Target{Provider: provider, BaseURL: "http://x/v1", UpstreamModel: "gpt-5"})
		if m[want] != float64(32000) || len(m) != 3 {
			t.Errorf("%s: %v, want %s", provider, m, want)
		}
	}
	if req.MaxTokens == nil || req.MaxCompletionTokens != nil {
		t.Error("the caller's request was modified")
	}
	// Azure api-versions before 2024-09-01 refuse max_completion_tokens.
	for v, want := range map[string]string{"2024-06-01": "max_tokens", "2024-08-01-preview": "max_tokens",
		"2024-09-01-preview": "max_completion_tokens", "2024-10-21": "max_completion_tokens", "preview": "max_completion_tokens"} {
		m := openAIBody(t, req, &Target{Provider: "azure-openai", BaseURL: "http://x", UpstreamModel: "gpt-4o",
			Options: map[string]string{"api_version": v}})
		if m[want] != float64(32000) || len(m) != 3 {
			t.Errorf("azure %s: %v, want %s", v, m, want)
		}
	}
	// A Responses client's max_output_tokens arrives as max_completion_tokens:
	// an old api-version gets it as max_tokens.
	resp := &ChatRequest{Messages: req.Messages, MaxCompletionTokens: &n}
	m := openAIBody(t, resp, &Target{Provider: "azure-openai", BaseURL: "http://x", UpstreamModel: "gpt-4o",
		Options: map[string]string{"api_version": "2024-06-01"}})
	if m["max_tokens"] != float64(32000) || len(m) != 3 {
		t.Errorf("azure 2024-06-01, max_completion_tokens from the client: %v, want max_tokens", m)
	}
	if resp.MaxTokens != nil || resp.MaxCompletionTokens == nil {
		t.Error("the caller's request was modified")
	}
}

// Images in tool results (an Anthropic tool_result with a screenshot)
// move to a user message after the tool messages; OpenAI's tool messages
// take text only.
func TestOpenAIToolImages(t *testing.T) {
	img := Part{Type: "image_url", ImageURL: &ImageURL{URL: "data:image/png;base64,AAAA"}}
	req := &ChatRequest{Messages: []Message{
		{Role: "user", Content: TextContent("look")},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "a", Type: "function", Function: FunctionCall{Name: "read", Arguments: "{}"}},
			{ID: "b", Type: "function", Function: FunctionCall{Name: "read", Arguments: "{}"}}}},
		{Role: "tool", ToolCallID: "a", Content: PartsContent(img)},
		{Role: "tool", ToolCallID: "b", Content: PartsContent(Part{Type: "text", Text: "done"}, img)},
		{Role: "user", Content: TextContent("and?")},
	}}
	m := openAIBody(t, req, &Target{Provider: "openai", BaseURL: "http://x/v1", UpstreamModel: "gpt-4o"})
	b, _ := json.Marshal(m["messages"])
	got := string(b)
	for _, want := range []string{
		`{"content":[{"text":"[image]","type":"text"}],"role":"tool","tool_call_id":"a"}`,
		`{"content":[{"text":"done","type":"text"}],"role":"tool","tool_call_id":"b"}`,
		`{"content":[{"text":"The images the tools returned:","type":"text"},{"image_url":{"url":"data:image/png;base64,AAAA"},"type":"image_url"},{"image_url":{"url":"data:image/png;base64,AAAA"},"type":"image_url"}],"role":"user"}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("messages lack %s:\n%s", want, got)
		}
	}
	if i, j := strings.Index(got, `"tool_call_id":"b"`), strings.Index(got, "The images the tools returned"); j < i {
		t.Error("the images come before the tool messages")
	}
	if len(req.Messages[2].Content.Parts) != 1 || req.Messages[2].Content.Parts[0].Type != "image_url" {
		t.Error("the caller's messages were modified")
	}
}

// An Anthropic client's max_tokens reaches an OpenAI upstream as
// max_completion_tokens: o-series and gpt-5 models refuse max_tokens.
func TestOpenAIRequestFromAnAnthropicClientSendsMaxCompletionTokens(t *testing.T) {
	req, err := AnthropicInbound.DecodeRequest([]byte(`{"model":"gpt-5","max_tokens":32000,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	hr, err := OpenAIChat.NewRequest(req, &Target{Provider: "openai", BaseURL: "https://api.openai.com/v1", UpstreamModel: "gpt-5"}, false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(hr.Body)
	t.Logf("upstream body: %s", b)
	if bytes.Contains(b, []byte(`"max_tokens"`)) {
		t.Errorf("sends max_tokens (rejected by o-series / gpt-5: use max_completion_tokens)")
	}
}

// An image in an Anthropic tool_result does not become an image_url part
// of a role=tool message, which OpenAI refuses (only text parts there).
func TestOpenAIRequestKeepsImagesOutOfToolMessages(t *testing.T) {
	in := `{"model":"gpt-4o","max_tokens":100,"messages":[
	 {"role":"user","content":"look at shot.png"},
	 {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"shot.png"}}]},
	 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]}]}`
	req, err := AnthropicInbound.DecodeRequest([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	hr, err := OpenAIChat.NewRequest(req, &Target{Provider: "openai", BaseURL: "x", UpstreamModel: "gpt-4o"}, false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(hr.Body)
	t.Logf("%s", b)
	if bytes.Contains(b, []byte(`"role":"tool","content":[{"type":"image_url"`)) {
		t.Errorf("image_url part inside a role=tool message; OpenAI accepts only text parts there")
	}
}

// A 429 "too many tokens" (a Cerebras-style tokens-per-minute limit) is a
// rate limit, not a context overflow.
func TestOpenAIErrorA429TooManyTokensIsARateLimit(t *testing.T) {
	body := []byte(`{"message":"Tokens per minute limit exceeded - too many tokens processed.","type":"too_many_tokens_error","param":"quota","code":"token_quota_exceeded"}`)
	e := ParseOpenAIError(429, body)
	t.Logf("kind=%d code=%q status=%d", e.Kind, e.Code, e.Status)
	if e.Kind != KindRateLimited {
		t.Errorf("429 TPM limit: kind=%d (want KindRateLimited=%d); ContextOverflow=%d", e.Kind, KindRateLimited, KindContextOverflow)
	}
}
