package translate

// Bedrock answers: a Converse response as a canonical ChatResponse.

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"strings"
)

// ParseResponse decodes a Converse answer.
func (bedrockProvider) ParseResponse(body []byte, model string) (*ChatResponse, error) {
	var r brResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, BadResponse(bedrockName, "invalid JSON: %v", err)
	}
	if r.Output == nil || r.Output.Message == nil {
		return nil, BadResponse(bedrockName, "the answer has no output message")
	}
	msg := Message{Role: "assistant"}
	var text strings.Builder
	for i, blk := range r.Output.Message.Content {
		switch {
		case blk.Text != nil:
			text.WriteString(*blk.Text)
		case blk.ToolUse != nil:
			tu := blk.ToolUse
			if tu.ToolUseID == "" || tu.Name == "" {
				return nil, BadResponse(bedrockName, "toolUse block %d has no toolUseId or name", i)
			}
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{
				ID:       tu.ToolUseID,
				Type:     "function",
				Function: FunctionCall{Name: tu.Name, Arguments: bedrockArguments(tu.Input)},
			})
		}
	}
	if text.Len() == 0 && len(msg.ToolCalls) > 0 {
		msg.Content = Content{Null: true}
	} else {
		msg.Content = TextContent(text.String())
	}
	resp := &ChatResponse{
		ID:      bedrockNewID(),
		Object:  "chat.completion",
		Created: bedrockNow().Unix(),
		Model:   model,
		Choices: []Choice{{Index: 0, Message: msg, FinishReason: bedrockFinish(r.StopReason)}},
	}
	if r.Usage != nil {
		resp.Usage = r.Usage.canonical()
	}
	return resp, nil
}

// bedrockArguments renders a toolUse input as OpenAI's arguments string.
func bedrockArguments(in json.RawMessage) string {
	if len(in) == 0 || string(in) == "null" {
		return "{}"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, in); err != nil {
		return string(in)
	}
	return b.String()
}

func (u *brUsage) canonical() *Usage {
	prompt := u.InputTokens + u.CacheReadInputTokens + u.CacheWriteInputTokens
	out := &Usage{
		PromptTokens:        prompt,
		CompletionTokens:    u.OutputTokens,
		TotalTokens:         prompt + u.OutputTokens,
		CacheCreationTokens: u.CacheWriteInputTokens,
	}
	if u.CacheReadInputTokens > 0 {
		out.PromptTokensDetails = &TokenDetails{CachedTokens: u.CacheReadInputTokens}
	}
	return out
}

// bedrockFinish maps a Converse stopReason to a canonical finish reason.
// Unknown reasons (malformed_model_output, ...) read as "stop".
func bedrockFinish(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return FinishLength
	case "tool_use":
		return FinishToolCalls
	case "guardrail_intervened", "content_filtered":
		return FinishContentFilter
	default:
		return FinishStop
	}
}

// bedrockNewID returns a completion id; Bedrock answers without one.
func bedrockNewID() string {
	return "chatcmpl-br-" + rand.Text()
}
