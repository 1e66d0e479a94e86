package translate

// Anthropic answers: a Messages response as a canonical ChatResponse.

import (
	"bytes"
	"encoding/json"
	"strings"
)

// ParseResponse decodes a Messages response.
func (anthropicProvider) ParseResponse(body []byte, model string) (*ChatResponse, error) {
	var msg anthropicMessageIn
	if err := json.Unmarshal(body, &msg); err != nil {
		return nil, BadResponse(anthropicName, "the response is not a Messages object: %v", err)
	}
	if msg.Type == "error" && msg.Error != nil {
		return nil, anthropicClassify(anthropicStatusOfType(msg.Error.Type), msg.Error)
	}
	if msg.Type != "message" && msg.Content == nil {
		return nil, BadResponse(anthropicName, "the response is not a Messages object (type %q)", msg.Type)
	}

	var text strings.Builder
	var calls []ToolCall
	for i, raw := range msg.Content {
		b, err := anthropicBlock(raw)
		if err != nil {
			return nil, BadResponse(anthropicName, "content block %d: %v", i, err)
		}
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			calls = append(calls, ToolCall{ID: b.ID, Type: "function",
				Function: FunctionCall{Name: b.Name, Arguments: anthropicCompactInput(b.Input)}})
		}
		// thinking, redacted_thinking and server-tool blocks have no
		// canonical form and are dropped.
	}
	out := Message{Role: "assistant", ToolCalls: calls}
	if text.Len() == 0 && len(calls) > 0 {
		out.Content = Content{Null: true}
	} else {
		out.Content = TextContent(text.String())
	}
	resp := &ChatResponse{
		ID:      msg.ID,
		Object:  "chat.completion",
		Created: anthropicNow().Unix(),
		Model:   model,
		Choices: []Choice{{Index: 0, Message: out, FinishReason: anthropicFinishReason(msg.StopReason)}},
	}
	if msg.Usage != nil {
		resp.Usage = anthropicCanonicalUsage(*msg.Usage)
	}
	return resp, nil
}

// anthropicBlock decodes a content block of an upstream answer leniently:
// only text and tool_use blocks are read beyond their type, so that block
// types Anthropic adds later, whatever their fields, are skipped rather
// than failing the whole answer.
func anthropicBlock(raw json.RawMessage) (anthropicBlockIn, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return anthropicBlockIn{}, err
	}
	switch head.Type {
	case "text":
		var b struct {
			Text string `json:"text"`
		}
		err := json.Unmarshal(raw, &b)
		return anthropicBlockIn{Type: head.Type, Text: b.Text}, err
	case "tool_use":
		var b struct {
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}
		err := json.Unmarshal(raw, &b)
		return anthropicBlockIn{Type: head.Type, ID: b.ID, Name: b.Name, Input: b.Input}, err
	default:
		return anthropicBlockIn{Type: head.Type}, nil
	}
}

// anthropicCompactInput renders a tool_use input as compact JSON
// arguments; a missing input is {}.
func anthropicCompactInput(in json.RawMessage) string {
	in = bytes.TrimSpace(in)
	if len(in) == 0 || string(in) == "null" {
		return "{}"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, in); err != nil {
		return string(in) // cannot happen: the input came out of a JSON decoder
	}
	return buf.String()
}

// anthropicFinishReason maps a stop_reason onto a finish reason.
func anthropicFinishReason(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return FinishLength
	case "tool_use":
		return FinishToolCalls
	case "refusal":
		return FinishContentFilter
	default: // end_turn, stop_sequence, pause_turn, or none
		return FinishStop
	}
}
