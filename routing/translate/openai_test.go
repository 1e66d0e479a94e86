package translate

import (
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
