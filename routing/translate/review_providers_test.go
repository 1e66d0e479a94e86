package translate

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

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

// 2. Vertex's context-overflow wording is not recognised.
func TestRegressionGeminiVertexContextOverflow(t *testing.T) {
	body := []byte(`{"error":{"code":400,"message":"Unable to submit request because the input token count is 1251952 but model only supports up to 1048576. Reduce the input token count and try again. You can also use the CountTokens API to calculate prompt token count and billable characters. Learn more: https://cloud.google.com/vertex-ai/generative-ai/docs/learn/models","status":"INVALID_ARGUMENT"}}`)
	e := Gemini.ParseError(400, http.Header{}, body)
	t.Logf("kind=%d code=%q", e.Kind, e.Code)
	if e.Kind != KindContextOverflow {
		t.Errorf("Vertex overflow: kind=%d want KindContextOverflow=%d", e.Kind, KindContextOverflow)
	}
}

// 3. Gemini synthesised tool-call ids repeat across turns; replaying to Anthropic/Bedrock gives duplicate ids.
func TestRegressionGeminiToolCallIDsRepeatAcrossTurns(t *testing.T) {
	turn := []byte(`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}}]},"finishReason":"STOP"}]}`)
	r1, err := Gemini.ParseResponse(turn, "m")
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := Gemini.ParseResponse(turn, "m")
	id1, id2 := r1.Choices[0].Message.ToolCalls[0].ID, r2.Choices[0].Message.ToolCalls[0].ID
	t.Logf("turn1 id=%q turn2 id=%q", id1, id2)
	if id1 == id2 {
		t.Errorf("two different turns got the same tool_call id %q", id1)
	}
	// Same for streams.
	sse := "data: " + string(turn) + "\n\n"
	d := Gemini.NewStreamDecoder(strings.NewReader(sse), "m")
	for {
		c, err := d.Next()
		if err != nil {
			break
		}
		for _, ch := range c.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				t.Logf("stream id=%q", tc.ID)
			}
		}
	}
	// Fallback to Bedrock with that history.
	tools := []Tool{{Type: "function", Function: FunctionDecl{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}}
	msgs := []Message{
		{Role: "user", Content: TextContent("weather in Paris?")},
		r1.Choices[0].Message,
		{Role: "tool", ToolCallID: id1, Content: TextContent("sunny")},
		{Role: "assistant", Content: TextContent("Sunny.")},
		{Role: "user", Content: TextContent("and again?")},
		r2.Choices[0].Message,
		{Role: "tool", ToolCallID: id2, Content: TextContent("rain")},
	}
	br, err := bedrockEncodeRequest(&ChatRequest{Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(br.Messages)
	t.Logf("bedrock messages: %s", b)
	if strings.Count(string(b), `"toolUseId":"`+id1+`"`) != 2 || strings.Count(string(b), `"toolUseId":"`+id2+`"`) != 2 {
		t.Errorf("each tool call and its result should share one id, unique in the request: %s", b)
	}
}

// 4. Gemini: non-zero presence/frequency penalties are forwarded (2.5+/3 models answer 400 "Penalty is not enabled").
func TestRegressionGeminiPenaltiesForwarded(t *testing.T) {
	req := &ChatRequest{Model: "gemini-2.5-flash", Messages: []Message{{Role: "user", Content: TextContent("hi")}},
		PresencePenalty: f64(0.5), FrequencyPenalty: f64(0.3)}
	out, err := geminiEncodeRequest(req, "gemini-2.5-flash")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(out.GenerationConfig)
	t.Logf("generationConfig=%s", b)
	if strings.Contains(string(b), "Penalty") {
		t.Errorf("penalties sent to gemini-2.5-flash")
	}
}

// 5. Bedrock: temperature > 1 is forwarded (Converse range is 0..1).
func TestRegressionBedrockTemperatureNotClamped(t *testing.T) {
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

// 6. Bedrock: blank text blocks (empty tool result, whitespace-only assistant text).
func TestRegressionBedrockBlankText(t *testing.T) {
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

// 7. Bedrock: conversation starting with assistant, and tool ids Bedrock's pattern rejects.
func TestRegressionBedrockFirstAssistantAndIDs(t *testing.T) {
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

// 8. Gemini schema: typeless root and multi-type nodes leave properties/items on a node without type OBJECT/ARRAY.
func TestRegressionGeminiSchemaTypeless(t *testing.T) {
	s, err := geminiSchema(json.RawMessage(`{"properties":{"q":{"type":"string"},"filter":{"type":["object","string"],"properties":{"k":{"type":"string"}}}},"required":["q"]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(s)
	t.Logf("schema=%s", b)
	if s["type"] == nil {
		t.Errorf("root parameters schema has no type (Vertex: \"parameters schema should be of type OBJECT\")")
	}
	f := s["properties"].(map[string]any)["filter"].(map[string]any)
	if f["properties"] != nil && f["type"] == nil {
		t.Errorf("filter: properties on a node without type (Gemini: \"properties: only allowed for OBJECT type\")")
	}
}
