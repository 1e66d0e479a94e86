package translate

// Gemini answers: a GenerateContentResponse as a canonical ChatResponse.
//
// What the decoders keep of an answer: the first candidate only (n > 1 is
// never asked for); its text parts, concatenated, without thought parts
// (thinking summaries are not part of the answer); its function calls as
// tool calls, with Gemini's id when it sends one and "call_<index>_<name>"
// otherwise. Other output parts (inlineData, executableCode,
// codeExecutionResult) have no chat-format equivalent and are dropped, as
// are safety ratings, citations, grounding metadata and thought signatures.
// A prompt blocked before generation (promptFeedback.blockReason, no
// candidates) is an empty answer finished by content_filter.

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// ParseResponse decodes a GenerateContentResponse.
func (geminiProvider) ParseResponse(body []byte, model string) (*ChatResponse, error) {
	var r geminiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, BadResponse(geminiName, "%v", err)
	}
	if r.Error != nil {
		return nil, geminiClassify(r.Error.Code, r.Error)
	}
	resp := &ChatResponse{
		ID:      r.ResponseID,
		Object:  "chat.completion",
		Created: geminiCreated(r.CreateTime),
		Model:   model,
		Usage:   r.UsageMetadata.canonical(),
	}
	if resp.ID == "" {
		resp.ID = geminiNewID()
	}
	if len(r.Candidates) == 0 {
		if r.PromptFeedback == nil || r.PromptFeedback.BlockReason == "" {
			return nil, BadResponse(geminiName, "the answer has no candidates")
		}
		// The prompt itself was blocked.
		resp.Choices = []Choice{{Message: Message{Role: "assistant", Content: TextContent("")}, FinishReason: FinishContentFilter}}
		return resp, nil
	}
	text, calls, err := geminiCandidateOutput(&r.Candidates[0], 0)
	if err != nil {
		return nil, err
	}
	geminiFillCallIDs(calls, resp.ID, 0)
	msg := Message{Role: "assistant", Content: TextContent(text), ToolCalls: calls}
	if text == "" && len(calls) > 0 {
		msg.Content = Content{Null: true}
	}
	resp.Choices = []Choice{{Message: msg, FinishReason: geminiFinish(r.Candidates[0].FinishReason, len(calls) > 0)}}
	return resp, nil
}

// geminiCandidateOutput returns a candidate's text (thoughts left out) and
// its function calls as tool calls numbered from first.
func geminiCandidateOutput(c *geminiCandidate, first int) (string, []ToolCall, error) {
	if c.Content == nil {
		return "", nil, nil
	}
	var text strings.Builder
	var calls []ToolCall
	for _, p := range c.Content.Parts {
		switch {
		case p.Thought:
		case p.FunctionCall != nil:
			tc, err := geminiToolCall(first+len(calls), p.FunctionCall)
			if err != nil {
				return "", nil, err
			}
			calls = append(calls, tc)
		case p.Text != nil:
			text.WriteString(*p.Text)
		}
	}
	return text.String(), calls, nil
}

// geminiToolCall converts a function call. Gemini usually gives calls no
// id, so one is made of the call's position and name.
func geminiToolCall(index int, fc *geminiFunctionCall) (ToolCall, error) {
	if fc.Name == "" {
		return ToolCall{}, BadResponse(geminiName, "a function call has no name")
	}
	args := "{}"
	if raw := bytes.TrimSpace(fc.Args); len(raw) > 0 && string(raw) != "null" {
		if raw[0] != '{' {
			return ToolCall{}, BadResponse(geminiName, "the arguments of function call %q are not an object", fc.Name)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return ToolCall{}, BadResponse(geminiName, "the arguments of function call %q: %v", fc.Name, err)
		}
		args = buf.String()
	}
	id := fc.ID
	if id == "" {
		id = geminiCallIDPending // filled by the caller with geminiCallID
	}
	return ToolCall{ID: id, Type: "function", Function: FunctionCall{Name: fc.Name, Arguments: args}}, nil
}

// geminiCallIDPending marks a tool call that came without an id.
const geminiCallIDPending = "\x00"

// geminiFillCallIDs gives calls without an id one made from the answer's
// id and the call's index: unique across turns (a history replayed to
// Anthropic or Bedrock must not repeat an id), stable for one answer, and
// short (Bedrock allows 64 characters). The Gemini encoder finds names
// from the history, not from the id.
func geminiFillCallIDs(calls []ToolCall, answerID string, first int) {
	var h [8]byte
	for i := range calls {
		if calls[i].ID != geminiCallIDPending {
			continue
		}
		if h == [8]byte{} {
			sum := sha256.Sum256([]byte(answerID))
			copy(h[:], sum[:])
		}
		calls[i].ID = "call_" + hex.EncodeToString(h[:]) + "_" + strconv.Itoa(first+i)
	}
}

// geminiFinish maps a finishReason; calls says the answer has function
// calls.
func geminiFinish(reason string, calls bool) string {
	switch reason {
	case "MAX_TOKENS":
		return FinishLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
		"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "MODEL_ARMOR":
		return FinishContentFilter
	}
	if calls {
		return FinishToolCalls
	}
	return FinishStop
}

// canonical converts usage metadata: thinking tokens are billed as output,
// so they count as completion tokens.
func (u *geminiUsage) canonical() *Usage {
	if u == nil {
		return nil
	}
	out := &Usage{
		PromptTokens:     u.PromptTokenCount,
		CompletionTokens: u.CandidatesTokenCount + u.ThoughtsTokenCount,
		TotalTokens:      u.TotalTokenCount,
	}
	if out.TotalTokens == 0 {
		out.TotalTokens = out.PromptTokens + out.CompletionTokens + u.ToolUsePromptTokenCount
	}
	if u.CachedContentTokenCount > 0 {
		out.PromptTokensDetails = &TokenDetails{CachedTokens: u.CachedContentTokenCount}
	}
	return out
}

// geminiCreated is Vertex's createTime in Unix seconds, else now.
func geminiCreated(createTime string) int64 {
	if t, err := time.Parse(time.RFC3339Nano, createTime); err == nil {
		return t.Unix()
	}
	return time.Now().Unix()
}

func geminiNewID() string { return "chatcmpl-gem-" + rand.Text() }
