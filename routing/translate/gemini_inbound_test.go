package translate

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestGeminiInboundDecode(t *testing.T) {
	body := []byte(`{"model":"models/gem-route","stream":true,
		"systemInstruction":{"parts":[{"text":"Be brief."}]},
		"contents":[
			{"role":"user","parts":[{"text":"Weather?"},{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}}]},
			{"role":"model","parts":[{"thought":true,"text":"hmm"},{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}},{"functionCall":{"name":"get_weather","args":{"city":"Rome"}}}]},
			{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"t":21}}},{"functionResponse":{"name":"get_weather","response":{"t":25}}}]}],
		"tools":[{"functionDeclarations":[{"name":"get_weather","description":"d","parameters":{"type":"OBJECT","properties":{"city":{"type":"STRING","enum":["Paris","Rome"]}},"required":["city"]}}]}],
		"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["get_weather"]}},
		"generationConfig":{"maxOutputTokens":100,"temperature":0.5,"topK":3,"stopSequences":["X"],"thinkingConfig":{"thinkingBudget":0},
			"responseMimeType":"application/json","responseSchema":{"type":"OBJECT"}},
		"safetySettings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}]}`)
	req, err := GeminiInbound.DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	if req.Model != "gem-route" || !req.Stream || req.StreamOptions == nil || !req.StreamOptions.IncludeUsage {
		t.Errorf("model %q stream %v", req.Model, req.Stream)
	}
	var roles []string
	for _, m := range req.Messages {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,tool,tool" {
		t.Fatalf("roles %s", got)
	}
	a := req.Messages[2]
	if len(a.ToolCalls) != 2 || a.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` || !a.Content.Null {
		t.Errorf("assistant %+v", a)
	}
	if req.Messages[3].ToolCallID != a.ToolCalls[0].ID || req.Messages[4].ToolCallID != a.ToolCalls[1].ID || a.ToolCalls[0].ID == a.ToolCalls[1].ID {
		t.Errorf("tool results do not answer the calls in order: %q %q for %q %q", req.Messages[3].ToolCallID, req.Messages[4].ToolCallID, a.ToolCalls[0].ID, a.ToolCalls[1].ID)
	}
	if p := req.Messages[1].Content.Parts[1]; p.Type != "image_url" || p.ImageURL.URL != "data:image/png;base64,iVBORw0KGgo=" {
		t.Errorf("image %+v", p)
	}
	if s := string(req.Tools[0].Function.Parameters); !strings.Contains(s, `"type":"object"`) || !strings.Contains(s, `"type":"string"`) || !strings.Contains(s, `"Paris"`) {
		t.Errorf("parameters %s", s)
	}
	if req.ToolChoice == nil || req.ToolChoice.Function != "get_weather" {
		t.Errorf("tool choice %+v", req.ToolChoice)
	}
	if *req.MaxTokens != 100 || *req.Temperature != 0.5 || *req.TopK != 3 || req.Stop[0] != "X" || !bytes.Contains(req.ResponseFormat, []byte("json_schema")) {
		t.Errorf("generation %+v", req)
	}

	for _, c := range []struct{ name, body, param string }{
		{"built-in tool", `{"model":"m","contents":[{"role":"user","parts":[{"text":"x"}]}],"tools":[{"googleSearch":{}}]}`, "tools[0].googleSearch"},
		{"pdf", `{"model":"m","contents":[{"role":"user","parts":[{"inlineData":{"mimeType":"application/pdf","data":"JVBE"}}]}]}`, "contents[0].parts[0].inlineData.mimeType"},
		{"candidates", `{"model":"m","contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"candidateCount":2}}`, "generationConfig.candidateCount"},
		{"role", `{"model":"m","contents":[{"role":"system","parts":[{"text":"x"}]}]}`, "contents[0].role"},
		{"no contents", `{"model":"m"}`, "contents"},
	} {
		_, err := GeminiInbound.DecodeRequest([]byte(c.body))
		e, ok := err.(*Error)
		if !ok || e.Param != c.param || e.Status != 400 {
			t.Errorf("%s: err %v, want a 400 naming %s", c.name, err, c.param)
		}
	}
}

func TestGeminiInboundEncode(t *testing.T) {
	resp := &ChatResponse{ID: "r1", Model: "m", Choices: []Choice{{Message: Message{Role: "assistant", Content: TextContent("Hi"),
		ToolCalls: []ToolCall{{ID: "c1", Function: FunctionCall{Name: "f", Arguments: `{"a":1}`}}}}, FinishReason: FinishToolCalls}},
		Usage: &Usage{PromptTokens: 5, CompletionTokens: 2, PromptTokensDetails: &TokenDetails{CachedTokens: 1}}}
	b, err := GeminiInbound.EncodeResponse(resp)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"candidates":[{"content":{"role":"model","parts":[{"text":"Hi"},{"functionCall":{"id":"c1","name":"f","args":{"a":1}}}]},"finishReason":"STOP","index":0}],` +
		`"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":2,"thoughtsTokenCount":0,"cachedContentTokenCount":1,"toolUsePromptTokenCount":0,"totalTokenCount":7},"modelVersion":"m","responseId":"r1"}`
	if string(b) != want {
		t.Errorf("got\n%s\nwant\n%s", b, want)
	}
	e := GeminiInbound.EncodeError(&Error{Status: 404, Message: "no such model"})
	if string(e) != `{"error":{"code":404,"message":"no such model","status":"NOT_FOUND"}}` {
		t.Errorf("error %s", e)
	}

	var w bytes.Buffer
	enc := GeminiInbound.NewStreamEncoder(&w, "m")
	i0 := 0
	hi, stop := "Hi", FinishToolCalls
	for _, c := range []*Chunk{
		{ID: "r2", Choices: []ChunkChoice{{Delta: Delta{Content: &hi}}}},
		{ID: "r2", Choices: []ChunkChoice{{Delta: Delta{ToolCalls: []ToolCall{{Index: &i0, ID: "c1", Function: FunctionCall{Name: "f", Arguments: `{"a"`}}}}}}},
		{ID: "r2", Choices: []ChunkChoice{{Delta: Delta{ToolCalls: []ToolCall{{Index: &i0, Function: FunctionCall{Arguments: `:1}`}}}}, FinishReason: &stop}}},
	} {
		if err := enc.WriteChunk(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(&Usage{PromptTokens: 3, CompletionTokens: 4}); err != nil {
		t.Fatal(err)
	}
	events := strings.Split(strings.TrimSpace(w.String()), "\r\n\r\n")
	if len(events) != 2 {
		t.Fatalf("%d events:\n%s", len(events), w.String())
	}
	var last geminiResponse
	if err := json.Unmarshal([]byte(strings.TrimPrefix(events[1], "data: ")), &last); err != nil {
		t.Fatal(err)
	}
	fc := last.Candidates[0].Content.Parts[0].FunctionCall
	if fc == nil || fc.Name != "f" || string(fc.Args) != `{"a":1}` || last.Candidates[0].FinishReason != "STOP" || last.UsageMetadata.TotalTokenCount != 7 {
		t.Errorf("last event %s", events[1])
	}
}

func TestGeminiCountTokens(t *testing.T) {
	n, err := GeminiCountTokens([]byte(`{"contents":[{"role":"user","parts":[{"text":"12345678"}]}]}`))
	if err != nil || n != 2 {
		t.Errorf("n = %d, %v; want 2", n, err)
	}
	n, err = GeminiCountTokens([]byte(`{"generateContentRequest":{"model":"models/x","contents":[{"parts":[{"text":"1234"}]}]}}`))
	if err != nil || n != 1 {
		t.Errorf("wrapped: n = %d, %v; want 1", n, err)
	}
}

func TestGeminiEmbedRequestAndResponse(t *testing.T) {
	b, err := GeminiEmbedRequest([]byte(`{"requests":[{"model":"models/e","content":{"parts":[{"text":"a"},{"text":"b"}]},"taskType":"RETRIEVAL_QUERY","outputDimensionality":4},
		{"model":"models/e","content":{"parts":[{"text":"c"}]},"outputDimensionality":4}]}`), "models/emb-route", true)
	if err != nil || string(b) != `{"model":"emb-route","input":["ab","c"],"dimensions":4}` {
		t.Errorf("batch request = %s, %v", b, err)
	}
	b, err = GeminiEmbedRequest([]byte(`{"content":{"parts":[{"text":"x"}]}}`), "emb-route", false)
	if err != nil || string(b) != `{"model":"emb-route","input":["x"]}` {
		t.Errorf("request = %s, %v", b, err)
	}
	if _, err := GeminiEmbedRequest([]byte(`{"content":{"parts":[{"inlineData":{"mimeType":"image/png","data":"AA=="}}]}}`), "m", false); err == nil {
		t.Error("an image part was accepted")
	}
	answer := []byte(`{"object":"list","data":[{"object":"embedding","index":1,"embedding":[0.5]},{"object":"embedding","index":0,"embedding":[0.25,1]}],"model":"m"}`)
	b, err = GeminiEmbedResponse(answer, true)
	if err != nil || string(b) != `{"embeddings":[{"values":[0.25,1]},{"values":[0.5]}]}` {
		t.Errorf("batch answer = %s, %v", b, err)
	}
	b, err = GeminiEmbedResponse([]byte(`{"data":[{"index":0,"embedding":[2]}]}`), false)
	if err != nil || string(b) != `{"embedding":{"values":[2]}}` {
		t.Errorf("answer = %s, %v", b, err)
	}
}
