package translate

// The Anthropic Messages API as an upstream: canonical (OpenAI chat)
// requests are encoded as POST {BaseURL}/messages, and Messages responses,
// SSE streams and error bodies are decoded back into the canonical form.
//
// What the adapter cannot carry, following the package rule (fields that
// only tune sampling or presentation are dropped, fields whose loss would
// change the meaning of the answer are refused):
//
//   - Refused with a 400 (Unsupported): n > 1, logprobs: true,
//     response_format of type json_schema, input_audio and file content
//     parts, tools of a type other than "function".
//   - Dropped: seed, presence_penalty, frequency_penalty, logit_bias,
//     metadata (OpenAI's stored-completion tags), message names, image
//     "detail", a function's "strict" flag, stream_options (Anthropic always
//     reports usage), reasoning_effort (extended thinking would need its
//     thinking blocks sent back on every later tool-use turn, which the
//     canonical form cannot carry), and response_format json_object (OpenAI
//     requires the prompt itself to ask for JSON, so the model is already
//     told; Anthropic has no JSON mode to switch on).
//   - Adjusted: temperature is clamped to Anthropic's range [0, 1]; when
//     both temperature and top_p are set only temperature is sent (current
//     Claude models refuse the pair); system and developer messages are
//     hoisted, in order, into the top-level "system"; consecutive messages
//     of the same role are merged (Anthropic requires alternation), with
//     tool results placed first in a merged user turn as Anthropic requires;
//     messages left with no content are skipped; tool-call ids are reduced
//     to the characters Anthropic accepts ([A-Za-z0-9_-]), consistently for
//     tool_use and tool_result so they still pair up.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// AnthropicVersion is the anthropic-version header the adapter sends.
const AnthropicVersion = "2023-06-01"

// AnthropicDefaultMaxTokens is the max_tokens sent when the client set no
// output limit: Anthropic requires one.
const AnthropicDefaultMaxTokens = 4096

// anthropicName names the provider in refusals and errors.
const anthropicName = "Anthropic"

// anthropicMaxEvent bounds one SSE event (and one line) of an Anthropic
// stream, so that a broken upstream cannot make the decoder buffer without
// end.
const anthropicMaxEvent = 32 << 20

// anthropicNow is the clock for "created"; tests replace it.
var anthropicNow = time.Now

// Anthropic is the provider adapter for the Anthropic Messages API
// (deployment kind "anthropic").
var Anthropic Provider = anthropicProvider{}

type anthropicProvider struct{}

// ---- Wire types shared by both directions ----

// anthropicTextBlock is a text content block.
type anthropicTextBlock struct {
	Type         string          `json:"type"` // "text"
	Text         string          `json:"text"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// anthropicImageBlock is an image content block.
type anthropicImageBlock struct {
	Type         string               `json:"type"` // "image"
	Source       anthropicImageSource `json:"source"`
	CacheControl json.RawMessage      `json:"cache_control,omitempty"`
}

// anthropicImageSource is an image's base64 data or URL (or, from clients,
// a Files API id, which the gateway refuses).
type anthropicImageSource struct {
	Type      string `json:"type"` // base64, url, file
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
	FileID    string `json:"file_id,omitempty"`
}

// anthropicToolUseBlock is a tool call the assistant made.
type anthropicToolUseBlock struct {
	Type         string          `json:"type"` // "tool_use"
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// anthropicToolResultBlock answers a tool_use in a user turn. Content is a
// string or a list of text and image blocks.
type anthropicToolResultBlock struct {
	Type         string          `json:"type"` // "tool_result"
	ToolUseID    string          `json:"tool_use_id"`
	Content      any             `json:"content,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// anthropicBlockIn is any content block, as read from a client's request
// (strictly) or an upstream answer (leniently, see anthropicBlock).
type anthropicBlockIn struct {
	Type      string                `json:"type"`
	Text      string                `json:"text"`
	Source    *anthropicImageSource `json:"source"`
	ID        string                `json:"id"`
	Name      string                `json:"name"`
	Input     json.RawMessage       `json:"input"`
	ToolUseID string                `json:"tool_use_id"`
	Content   json.RawMessage       `json:"content"`
	IsError   bool                  `json:"is_error"`
	// CacheControl is a client's prompt-cache breakpoint.
	CacheControl json.RawMessage `json:"cache_control"`
}

// anthropicUsage is a Message's usage.
type anthropicUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// anthropicMessageIn is a Messages response (also message_start's message).
type anthropicMessageIn struct {
	ID         string             `json:"id"`
	Type       string             `json:"type"`
	Role       string             `json:"role"`
	Model      string             `json:"model"`
	Content    []json.RawMessage  `json:"content"`
	StopReason string             `json:"stop_reason"`
	Usage      *anthropicUsage    `json:"usage"`
	Error      *anthropicErrorObj `json:"error"`
}

// anthropicErrorObj is the "error" object of an Anthropic error body or
// error event.
type anthropicErrorObj struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Details *struct {
		ErrorCode string `json:"error_code"`
	} `json:"details,omitempty"`
}

// anthropicErrorBody is an Anthropic error body.
type anthropicErrorBody struct {
	Type  string             `json:"type"` // "error"
	Error *anthropicErrorObj `json:"error"`
}

// ---- Request ----

// anthropicRequestOut is the Messages request the adapter sends.
type anthropicRequestOut struct {
	Model         string                `json:"model"`
	System        any                   `json:"system,omitempty"` // string or []anthropicTextBlock
	Messages      []anthropicMessageOut `json:"messages"`
	MaxTokens     int64                 `json:"max_tokens"`
	Metadata      *anthropicMetadata    `json:"metadata,omitempty"`
	StopSequences []string              `json:"stop_sequences,omitempty"`
	Stream        bool                  `json:"stream,omitempty"`
	Temperature   *float64              `json:"temperature,omitempty"`
	TopK          *int64                `json:"top_k,omitempty"`
	TopP          *float64              `json:"top_p,omitempty"`
	Tools         []anthropicTool       `json:"tools,omitempty"`
	ToolChoice    *anthropicToolChoice  `json:"tool_choice,omitempty"`
}

// anthropicMessageOut is one turn: content is a string or a list of blocks.
type anthropicMessageOut struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

// anthropicMetadata carries the end user's id.
type anthropicMetadata struct {
	UserID string `json:"user_id,omitempty"`
}

// anthropicTool is a client tool definition.
type anthropicTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// anthropicToolChoice is Anthropic's tool_choice.
type anthropicToolChoice struct {
	Type                   string `json:"type"` // auto, any, tool, none
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

// anthropicTurn is a message being built: either a plain string or blocks.
type anthropicTurn struct {
	role     string
	text     string
	isString bool
	blocks   []any
}

// asBlocks returns the turn's content as blocks.
func (t *anthropicTurn) asBlocks() []any {
	if t.isString {
		if t.text == "" {
			return nil
		}
		return []any{anthropicTextBlock{Type: "text", Text: t.text}}
	}
	return t.blocks
}

func (t *anthropicTurn) empty() bool {
	if t.isString {
		return t.text == ""
	}
	return len(t.blocks) == 0
}

// NewRequest encodes req as a Messages request.
func (anthropicProvider) NewRequest(req *ChatRequest, t *Target, stream bool) (*http.Request, error) {
	out, err := anthropicEncodeRequest(req, t.UpstreamModel, stream)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(out)
	if err != nil {
		return nil, Invalid("", "The request could not be encoded for the %s provider: %v", anthropicName, err)
	}
	hr, err := http.NewRequest(http.MethodPost, strings.TrimRight(t.BaseURL, "/")+"/messages", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("X-Api-Key", t.Credential)
	hr.Header.Set("Anthropic-Version", AnthropicVersion)
	if stream {
		hr.Header.Set("Accept", "text/event-stream")
	}
	return hr, nil
}

// anthropicEncodeRequest maps a canonical request onto a Messages request.
func anthropicEncodeRequest(req *ChatRequest, model string, stream bool) (*anthropicRequestOut, error) {
	if req.N != nil && *req.N > 1 {
		return nil, Unsupported("n", anthropicName)
	}
	if req.Logprobs != nil && *req.Logprobs {
		return nil, Unsupported("logprobs", anthropicName)
	}
	if err := anthropicCheckResponseFormat(req.ResponseFormat); err != nil {
		return nil, err
	}
	out := &anthropicRequestOut{Model: model, Stream: stream, TopK: req.TopK}

	switch {
	case req.MaxCompletionTokens != nil && *req.MaxCompletionTokens < 1:
		return nil, Invalid("max_completion_tokens", "max_completion_tokens must be at least 1.")
	case req.MaxCompletionTokens == nil && req.MaxTokens != nil && *req.MaxTokens < 1:
		return nil, Invalid("max_tokens", "max_tokens must be at least 1.")
	}
	out.MaxTokens = req.OutputLimit()
	if out.MaxTokens == 0 {
		out.MaxTokens = AnthropicDefaultMaxTokens
	}
	if req.Temperature != nil {
		t := min(max(*req.Temperature, 0), 1)
		out.Temperature = &t
	} else {
		out.TopP = req.TopP
	}
	if len(req.Stop) > 0 {
		out.StopSequences = req.Stop
	}
	if req.User != "" {
		out.Metadata = &anthropicMetadata{UserID: req.User}
	}

	system, turns, err := anthropicEncodeMessages(req.Messages)
	if err != nil {
		return nil, err
	}
	out.System = system
	out.Messages = turns

	for i, tool := range req.Tools {
		if tool.Type != "" && tool.Type != "function" {
			return nil, Unsupported(fmt.Sprintf("tools[%d].type", i), anthropicName)
		}
		if tool.Function.Name == "" {
			return nil, Invalid(fmt.Sprintf("tools[%d].function.name", i), "Missing required parameter: 'tools[%d].function.name'.", i)
		}
		schema := bytes.TrimSpace(tool.Function.Parameters)
		if len(schema) == 0 || string(schema) == "null" || string(schema) == "{}" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		out.Tools = append(out.Tools, anthropicTool{Name: tool.Function.Name, Description: tool.Function.Description, InputSchema: schema,
			CacheControl: cacheControlOf(tool.CacheControl)})
	}
	if len(out.Tools) > 0 {
		out.ToolChoice = anthropicEncodeToolChoice(req.ToolChoice, req.ParallelToolCalls)
	}
	return out, nil
}

// anthropicCheckResponseFormat refuses a json_schema response format and
// lets text and json_object through (see the file comment).
func anthropicCheckResponseFormat(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var rf struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil {
		return Invalid("response_format", "Invalid 'response_format': %v.", err)
	}
	switch rf.Type {
	case "", "text", "json_object":
		return nil
	default:
		return Unsupported("response_format", anthropicName)
	}
}

// anthropicEncodeToolChoice maps tool_choice and parallel_tool_calls; nil
// means Anthropic's default (auto, parallel calls allowed).
func anthropicEncodeToolChoice(tc *ToolChoice, parallel *bool) *anthropicToolChoice {
	disable := parallel != nil && !*parallel
	var out anthropicToolChoice
	switch {
	case tc == nil:
		if !disable {
			return nil
		}
		out.Type = "auto"
	case tc.Function != "":
		out.Type, out.Name = "tool", tc.Function
	case tc.Mode == "none":
		return &anthropicToolChoice{Type: "none"}
	case tc.Mode == "required":
		out.Type = "any"
	default:
		out.Type = "auto"
	}
	out.DisableParallelToolUse = disable
	return &out
}

// anthropicEncodeMessages splits the canonical messages into the system
// prompt and the alternating user/assistant turns.
func anthropicEncodeMessages(msgs []Message) (any, []anthropicMessageOut, error) {
	var system []anthropicTextBlock
	systemIsString := false
	var turns []anthropicTurn

	for i, m := range msgs {
		switch m.Role {
		case "system", "developer":
			blocks, isString, err := anthropicSystemBlocks(i, m)
			if err != nil {
				return nil, nil, err
			}
			if len(blocks) > 0 {
				systemIsString = len(system) == 0 && isString && blocks[0].CacheControl == nil
				system = append(system, blocks...)
			}
			continue
		case "user", "assistant", "tool":
		default:
			return nil, nil, Invalid(fmt.Sprintf("messages[%d].role", i), "Invalid value: '%s'. Supported values are: 'system', 'developer', 'user', 'assistant', and 'tool'.", m.Role)
		}
		turn, err := anthropicEncodeTurn(i, m)
		if err != nil {
			return nil, nil, err
		}
		if turn.empty() {
			continue // Anthropic refuses empty turns; an empty message says nothing
		}
		if n := len(turns); n > 0 && turns[n-1].role == turn.role {
			prev := &turns[n-1]
			prev.blocks = append(prev.asBlocks(), turn.asBlocks()...)
			prev.isString, prev.text = false, ""
			continue
		}
		turns = append(turns, turn)
	}
	if len(turns) == 0 {
		return nil, nil, Invalid("messages", "The %s provider needs at least one user or assistant message with content.", anthropicName)
	}

	out := make([]anthropicMessageOut, len(turns))
	for i, t := range turns {
		if t.isString {
			out[i] = anthropicMessageOut{Role: t.role, Content: t.text}
			continue
		}
		if t.role == "user" {
			t.blocks = anthropicToolResultsFirst(t.blocks)
		}
		out[i] = anthropicMessageOut{Role: t.role, Content: t.blocks}
	}

	var sys any
	switch {
	case len(system) == 1 && systemIsString:
		sys = system[0].Text
	case len(system) > 0:
		sys = system
	}
	return sys, out, nil
}

// anthropicToolResultsFirst moves tool_result blocks to the front of a
// user turn, keeping their order and the order of the other blocks:
// Anthropic requires a turn's tool results to come before its other
// content.
func anthropicToolResultsFirst(blocks []any) []any {
	firstOther := -1
	for i, b := range blocks {
		_, isResult := b.(anthropicToolResultBlock)
		if !isResult && firstOther < 0 {
			firstOther = i
		}
		if isResult && firstOther >= 0 {
			sorted := make([]any, 0, len(blocks))
			for _, b := range blocks {
				if _, ok := b.(anthropicToolResultBlock); ok {
					sorted = append(sorted, b)
				}
			}
			for _, b := range blocks {
				if _, ok := b.(anthropicToolResultBlock); !ok {
					sorted = append(sorted, b)
				}
			}
			return sorted
		}
	}
	return blocks
}

// anthropicSystemBlocks returns a system message's text blocks and whether
// it was a plain string.
func anthropicSystemBlocks(i int, m Message) ([]anthropicTextBlock, bool, error) {
	if !m.Content.IsParts {
		if m.Content.Text == "" {
			return nil, false, nil
		}
		return []anthropicTextBlock{{Type: "text", Text: m.Content.Text, CacheControl: cacheControlOf(m.CacheControl)}}, true, nil
	}
	var out []anthropicTextBlock
	for j, p := range m.Content.Parts {
		if p.Type != "text" {
			return nil, false, Invalid(fmt.Sprintf("messages[%d].content[%d].type", i, j), "System messages may only contain text parts; got '%s'.", p.Type)
		}
		if p.Text != "" {
			out = append(out, anthropicTextBlock{Type: "text", Text: p.Text, CacheControl: cacheControlOf(p.CacheControl)})
		}
	}
	if n := len(out); n > 0 && m.CacheControl != nil {
		out[n-1].CacheControl = cacheControlOf(m.CacheControl)
	}
	return out, false, nil
}

// anthropicEncodeTurn converts one user, assistant or tool message.
func anthropicEncodeTurn(i int, m Message) (anthropicTurn, error) {
	switch m.Role {
	case "tool":
		if m.ToolCallID == "" {
			return anthropicTurn{}, Invalid(fmt.Sprintf("messages[%d].tool_call_id", i), "Missing required parameter: 'messages[%d].tool_call_id'.", i)
		}
		res := anthropicToolResultBlock{Type: "tool_result", ToolUseID: anthropicToolID(m.ToolCallID)}
		if m.Content.IsParts {
			blocks, err := anthropicEncodeParts(i, m.Content.Parts, true)
			if err != nil {
				return anthropicTurn{}, err
			}
			if len(blocks) > 0 {
				res.Content = blocks
			}
		} else if m.Content.Text != "" {
			res.Content = m.Content.Text
		}
		res.CacheControl = cacheControlOf(m.CacheControl)
		return anthropicTurn{role: "user", blocks: []any{res}}, nil

	case "assistant":
		turn := anthropicTurn{role: "assistant"}
		if m.Content.IsParts {
			for j, p := range m.Content.Parts {
				switch p.Type {
				case "text":
					if p.Text != "" {
						turn.blocks = append(turn.blocks, anthropicTextBlock{Type: "text", Text: p.Text, CacheControl: cacheControlOf(p.CacheControl)})
					}
				case "refusal":
					// OpenAI's refusal parts carry their text in a field the
					// canonical Part does not keep; nothing to send.
				default:
					return anthropicTurn{}, Invalid(fmt.Sprintf("messages[%d].content[%d].type", i, j), "Assistant messages may only contain text parts; got '%s'.", p.Type)
				}
			}
		} else if m.Content.Text != "" {
			turn.text, turn.isString = m.Content.Text, true
		}
		if turn.empty() && m.Refusal != "" {
			turn.text, turn.isString = m.Refusal, true
		}
		if len(m.ToolCalls) == 0 {
			return anthropicMarkLast(turn, m.CacheControl), nil
		}
		blocks := turn.asBlocks()
		for j, tc := range m.ToolCalls {
			param := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
			if tc.ID == "" {
				return anthropicTurn{}, Invalid(param+".id", "Missing required parameter: '%s.id'.", param)
			}
			if tc.Function.Name == "" {
				return anthropicTurn{}, Invalid(param+".function.name", "Missing required parameter: '%s.function.name'.", param)
			}
			// Arguments that are not a JSON object (a call cut off by
			// max_tokens, a model's broken JSON) are history the
			// conversation must be able to go on from: they are wrapped as
			// {"_raw": "..."}, as the inbound side does.
			input := anthropicInputOf(tc.Function.Arguments)
			blocks = append(blocks, anthropicToolUseBlock{Type: "tool_use", ID: anthropicToolID(tc.ID), Name: tc.Function.Name, Input: input})
		}
		return anthropicMarkLast(anthropicTurn{role: "assistant", blocks: blocks}, m.CacheControl), nil

	default: // user
		if !m.Content.IsParts {
			return anthropicMarkLast(anthropicTurn{role: "user", text: m.Content.Text, isString: true}, m.CacheControl), nil
		}
		blocks, err := anthropicEncodeParts(i, m.Content.Parts, false)
		if err != nil {
			return anthropicTurn{}, err
		}
		return anthropicMarkLast(anthropicTurn{role: "user", blocks: blocks}, m.CacheControl), nil
	}
}

// cacheControlOf returns a breakpoint to send, nil for none (absent or
// JSON null).
func cacheControlOf(cc json.RawMessage) json.RawMessage {
	if cc = bytes.TrimSpace(cc); len(cc) == 0 || string(cc) == "null" {
		return nil
	}
	return cc
}

// anthropicMarkLast puts a message's breakpoint on the last block of its
// turn (a string turn becomes a block); without one, t is returned as is.
func anthropicMarkLast(t anthropicTurn, cc json.RawMessage) anthropicTurn {
	if cc = cacheControlOf(cc); cc == nil || t.empty() {
		return t
	}
	blocks := t.asBlocks()
	t.isString, t.text = false, ""
	switch b := blocks[len(blocks)-1].(type) {
	case anthropicTextBlock:
		b.CacheControl = cc
		blocks[len(blocks)-1] = b
	case anthropicImageBlock:
		b.CacheControl = cc
		blocks[len(blocks)-1] = b
	case anthropicToolUseBlock:
		b.CacheControl = cc
		blocks[len(blocks)-1] = b
	case anthropicToolResultBlock:
		b.CacheControl = cc
		blocks[len(blocks)-1] = b
	}
	t.blocks = blocks
	return t
}

// anthropicEncodeParts converts user (or tool result) content parts to
// text and image blocks.
func anthropicEncodeParts(i int, parts []Part, inToolResult bool) ([]any, error) {
	var out []any
	for j, p := range parts {
		param := fmt.Sprintf("messages[%d].content[%d]", i, j)
		switch p.Type {
		case "text":
			if p.Text != "" {
				out = append(out, anthropicTextBlock{Type: "text", Text: p.Text, CacheControl: cacheControlOf(p.CacheControl)})
			}
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return nil, Invalid(param+".image_url", "Missing required parameter: '%s.image_url.url'.", param)
			}
			src, err := anthropicImageSourceOf(p.ImageURL.URL, param+".image_url")
			if err != nil {
				return nil, err
			}
			out = append(out, anthropicImageBlock{Type: "image", Source: src, CacheControl: cacheControlOf(p.CacheControl)})
		case "input_audio", "file":
			return nil, Unsupported(param+"."+p.Type, anthropicName)
		default:
			if inToolResult {
				return nil, Invalid(param+".type", "Tool messages may only contain text and image parts; got '%s'.", p.Type)
			}
			return nil, Invalid(param+".type", "Invalid content part type: '%s'.", p.Type)
		}
	}
	return out, nil
}

// anthropicImageSourceOf maps an image URL: a data: URL becomes base64
// data, an http(s) URL a url source.
func anthropicImageSourceOf(u, param string) (anthropicImageSource, error) {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		meta, data, found := strings.Cut(rest, ",")
		mediaType, isBase64 := strings.CutSuffix(meta, ";base64")
		if !found || !isBase64 || mediaType == "" {
			return anthropicImageSource{}, Invalid(param, "Image data URLs must have the form 'data:<media type>;base64,<data>'.")
		}
		return anthropicImageSource{Type: "base64", MediaType: mediaType, Data: data}, nil
	}
	lower := strings.ToLower(u)
	if strings.HasPrefix(lower, "https://") || strings.HasPrefix(lower, "http://") {
		return anthropicImageSource{Type: "url", URL: u}, nil
	}
	return anthropicImageSource{}, Invalid(param, "Image URLs must be http(s) URLs or base64 data URLs.")
}

// anthropicArgsObject turns a tool call's JSON arguments into an input
// object: empty arguments are {}, anything that is not a JSON object fails.
func anthropicArgsObject(args string) (json.RawMessage, bool) {
	trimmed := strings.TrimSpace(args)
	if trimmed == "" {
		return json.RawMessage(`{}`), true
	}
	if trimmed[0] != '{' {
		return nil, false
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(trimmed)); err != nil {
		return nil, false
	}
	return buf.Bytes(), true
}

// anthropicToolID keeps the characters Anthropic allows in tool_use ids
// ([A-Za-z0-9_-]) and replaces the others with '_'.
func anthropicToolID(id string) string {
	ok := true
	for i := 0; i < len(id); i++ {
		if !anthropicIDByte(id[i]) {
			ok = false
			break
		}
	}
	if ok {
		return id
	}
	b := []byte(id)
	for i := range b {
		if !anthropicIDByte(b[i]) {
			b[i] = '_'
		}
	}
	return string(b)
}

func anthropicIDByte(c byte) bool {
	return c == '_' || c == '-' || ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

// ---- Response ----

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

// anthropicCanonicalUsage converts Anthropic's usage: input_tokens counts
// only the uncached part of the prompt, so the prompt is its sum with the
// cache reads and writes.
func anthropicCanonicalUsage(u anthropicUsage) *Usage {
	prompt := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
	return &Usage{
		PromptTokens:        prompt,
		CompletionTokens:    u.OutputTokens,
		TotalTokens:         prompt + u.OutputTokens,
		PromptTokensDetails: &TokenDetails{CachedTokens: u.CacheReadInputTokens},
		CacheCreationTokens: u.CacheCreationInputTokens,
	}
}

// ---- Errors ----

// ParseError classifies an Anthropic error answer.
func (anthropicProvider) ParseError(status int, _ http.Header, body []byte) *Error {
	var eb anthropicErrorBody
	if err := json.Unmarshal(body, &eb); err != nil || eb.Error == nil || (eb.Error.Type == "" && eb.Error.Message == "") {
		snippet := strings.ToValidUTF8(string(bytes.TrimSpace(body)), "\uFFFD")
		if len(snippet) > 200 {
			snippet = strings.ToValidUTF8(snippet[:200], "") + "…"
		}
		msg := "The " + anthropicName + " upstream answered " + strconv.Itoa(status)
		if snippet != "" {
			msg += ": " + snippet
		} else if t := http.StatusText(status); t != "" {
			msg += " " + t
		}
		return anthropicClassify(status, &anthropicErrorObj{Message: msg})
	}
	return anthropicClassify(status, eb.Error)
}

// AnthropicEventError classifies the data of an Anthropic stream "error"
// event ({"type":"error","error":{"type":...,"message":...}}) as the stream
// decoder does: an event has no HTTP status, so the status is the one
// Anthropic documents for the error type (overloaded_error 529,
// rate_limit_error 429, invalid_request_error 400, ...). Data that is not
// an error event is a BadResponse.
func AnthropicEventError(data []byte) *Error {
	var eb anthropicErrorBody
	if err := json.Unmarshal(data, &eb); err != nil || eb.Error == nil {
		return BadResponse(anthropicName, "an error event without an error")
	}
	return anthropicClassify(anthropicStatusOfType(eb.Error.Type), eb.Error)
}

// anthropicStatusOfType is the HTTP status Anthropic documents for an
// error type; error events in a stream carry only the type.
func anthropicStatusOfType(t string) int {
	switch t {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "billing_error":
		return http.StatusPaymentRequired
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "timeout_error":
		return http.StatusGatewayTimeout
	case "overloaded_error":
		return 529
	default: // api_error and types added later
		return http.StatusInternalServerError
	}
}

// anthropicQuotaMessages are phrases of Anthropic's messages for an account
// out of credit or past a spend limit.
var anthropicQuotaMessages = []string{
	"credit balance", "billing", "usage limits", "spend limit", "purchase credits",
}

// anthropicContextMessages are phrases of Anthropic's messages for a prompt
// longer than the model's context window.
var anthropicContextMessages = []string{
	"prompt is too long", "exceeds context", "exceed context", "context limit",
	"context window", "context length", "too many input tokens", "too many tokens",
}

// anthropicClassify turns an Anthropic error into an *Error: the kind
// drives retries and fallbacks, the status, type and code are what an
// OpenAI-speaking client sees. The status is the upstream's, except that a
// refused credential (401/403) is the gateway's fault: 502.
func anthropicClassify(status int, e *anthropicErrorObj) *Error {
	msg := e.Message
	if msg == "" {
		msg = "The " + anthropicName + " upstream answered " + strconv.Itoa(status) + " (" + e.Type + ")."
	}
	lower := strings.ToLower(msg)
	detail := ""
	if e.Details != nil {
		detail = e.Details.ErrorCode
	}
	out := &Error{Status: status, Message: msg}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden ||
		e.Type == "authentication_error" || e.Type == "permission_error":
		out.Status, out.Type, out.Code, out.Kind = http.StatusBadGateway, "upstream_error", "upstream_auth_error", KindAuth
		out.Message = "The " + anthropicName + " upstream refused the gateway's credential: " + msg
	case status == http.StatusPaymentRequired || e.Type == "billing_error" || detail == "enforced_spend_limit_reached" ||
		(status >= 400 && status < 500 && anthropicContainsAny(lower, anthropicQuotaMessages)):
		out.Type, out.Code, out.Kind = "insufficient_quota", "insufficient_quota", KindQuotaExhausted
	case status == http.StatusTooManyRequests || e.Type == "rate_limit_error":
		out.Type, out.Code, out.Kind = "rate_limit_error", "rate_limit_exceeded", KindRateLimited
	case status >= 500 || e.Type == "overloaded_error" || e.Type == "api_error" || e.Type == "timeout_error":
		out.Type, out.Kind = "server_error", KindOverloaded
	case (status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge) && anthropicContainsAny(lower, anthropicContextMessages):
		out.Type, out.Code, out.Kind = "invalid_request_error", "context_length_exceeded", KindContextOverflow
	case status == http.StatusNotFound || e.Type == "not_found_error":
		out.Type, out.Code, out.Param, out.Kind = "invalid_request_error", "model_not_found", "model", KindNotFound
	case status >= 400:
		out.Type, out.Kind = "invalid_request_error", KindInvalidRequest
	default: // an error with a 1xx-3xx status: nothing the client can act on
		out.Status, out.Type, out.Code, out.Kind = http.StatusBadGateway, "upstream_error", "upstream_error", KindOther
	}
	if out.Status < 400 {
		out.Status = http.StatusBadGateway
	}
	return out
}

func anthropicContainsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// ---- Stream ----

// NewStreamDecoder reads a Messages SSE stream.
func (anthropicProvider) NewStreamDecoder(r io.Reader, model string) StreamDecoder {
	return &anthropicStreamDecoder{
		sse:     newAnthropicSSE(r),
		model:   model,
		created: anthropicNow().Unix(),
		blocks:  map[int]anthropicBlockState{},
	}
}

// anthropicBlockState is what the decoder knows of an open content block.
type anthropicBlockState struct {
	kind     string // text, tool_use, or "" for blocks without a canonical form
	toolCall int    // the block's index among the message's tool_use blocks
	hasArgs  bool   // a tool_use block got some of its input
}

// anthropicStreamDecoder turns Anthropic stream events into chunks.
type anthropicStreamDecoder struct {
	sse     *anthropicSSE
	model   string
	created int64

	id       string
	queue    []*Chunk
	err      error // sticky: returned once the queue is drained
	done     bool  // message_stop was read
	roleSent bool

	blocks    map[int]anthropicBlockState
	toolCalls int

	usage    anthropicUsage
	hasUsage bool
	finished bool // a finish_reason chunk was queued
}

// anthropicEvent is any stream event's data.
type anthropicEvent struct {
	Type         string              `json:"type"`
	Message      *anthropicMessageIn `json:"message"`
	Index        int                 `json:"index"`
	ContentBlock json.RawMessage     `json:"content_block"`
	Delta        json.RawMessage     `json:"delta"` // read according to the event and delta type
	Usage        *struct {
		InputTokens              *int64 `json:"input_tokens"`
		OutputTokens             *int64 `json:"output_tokens"`
		CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	} `json:"usage"`
}

// Next returns the next chunk, io.EOF after message_stop, an *Error for an
// error event, and a BadResponse for a malformed or truncated stream.
func (d *anthropicStreamDecoder) Next() (*Chunk, error) {
	for {
		if len(d.queue) > 0 {
			c := d.queue[0]
			d.queue[0] = nil
			d.queue = d.queue[1:]
			return c, nil
		}
		if d.err != nil {
			return nil, d.err
		}
		if d.done {
			return nil, io.EOF
		}
		name, data, err := d.sse.next()
		switch {
		case err == io.EOF:
			if d.finished {
				// The stream stopped after message_delta without
				// message_stop: the answer is complete, report it.
				d.stop()
				continue
			}
			d.err = BadResponse(anthropicName, "the stream ended before the message was complete")
		case err != nil:
			var te *Error
			if errors.As(err, &te) {
				d.err = te
			} else {
				d.err = err
			}
		default:
			if herr := d.handle(name, data); herr != nil {
				d.err = herr
			}
		}
	}
}

// handle processes one event, queueing the chunks it yields.
func (d *anthropicStreamDecoder) handle(name string, data []byte) error {
	var ev anthropicEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return BadResponse(anthropicName, "a stream event is not JSON: %v", err)
	}
	typ := ev.Type
	if typ == "" {
		typ = name
	}
	switch typ {
	case "message_start":
		if ev.Message != nil {
			d.id = ev.Message.ID
			if ev.Message.Usage != nil {
				d.usage, d.hasUsage = *ev.Message.Usage, true
			}
		}
		if !d.roleSent {
			empty := ""
			d.push(Delta{Content: &empty}, nil)
		}
	case "content_block_start":
		if anthropicAbsent(ev.ContentBlock) {
			return BadResponse(anthropicName, "content_block_start without a content_block")
		}
		block, err := anthropicBlock(ev.ContentBlock)
		if err != nil {
			return BadResponse(anthropicName, "content_block_start: %v", err)
		}
		switch block.Type {
		case "text":
			d.blocks[ev.Index] = anthropicBlockState{kind: "text"}
			if t := block.Text; t != "" {
				d.push(Delta{Content: &t}, nil)
			}
		case "tool_use":
			idx := d.toolCalls
			d.toolCalls++
			args := ""
			if in := bytes.TrimSpace(block.Input); len(in) > 0 && !anthropicEmptyObject(in) {
				args = anthropicCompactInput(in) // an upstream that sends the whole input up front
			}
			d.blocks[ev.Index] = anthropicBlockState{kind: "tool_use", toolCall: idx, hasArgs: args != ""}
			d.push(Delta{ToolCalls: []ToolCall{{Index: &idx, ID: block.ID, Type: "function",
				Function: FunctionCall{Name: block.Name, Arguments: args}}}}, nil)
		default: // thinking, server tools: no canonical form
			d.blocks[ev.Index] = anthropicBlockState{}
		}
	case "content_block_delta":
		if anthropicAbsent(ev.Delta) {
			return BadResponse(anthropicName, "content_block_delta without a delta")
		}
		var delta struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(ev.Delta, &delta); err != nil {
			return BadResponse(anthropicName, "content_block_delta: %v", err)
		}
		switch delta.Type {
		case "text_delta":
			var td struct {
				Text string `json:"text"`
			}
			if err := json.Unmarshal(ev.Delta, &td); err != nil {
				return BadResponse(anthropicName, "text_delta: %v", err)
			}
			if td.Text != "" {
				d.push(Delta{Content: &td.Text}, nil)
			}
		case "input_json_delta":
			var jd struct {
				PartialJSON string `json:"partial_json"`
			}
			if err := json.Unmarshal(ev.Delta, &jd); err != nil {
				return BadResponse(anthropicName, "input_json_delta: %v", err)
			}
			b, ok := d.blocks[ev.Index]
			if ok && b.kind == "tool_use" && jd.PartialJSON != "" {
				idx := b.toolCall
				b.hasArgs = true
				d.blocks[ev.Index] = b
				d.push(Delta{ToolCalls: []ToolCall{{Index: &idx, Function: FunctionCall{Arguments: jd.PartialJSON}}}}, nil)
			}
		}
		// thinking_delta, signature_delta, citations_delta: dropped.
	case "content_block_stop":
		// A tool called with no arguments streams no input at all: its
		// arguments are "{}", as in a whole answer, never "".
		if b, ok := d.blocks[ev.Index]; ok && b.kind == "tool_use" && !b.hasArgs {
			idx := b.toolCall
			b.hasArgs = true
			d.blocks[ev.Index] = b
			d.push(Delta{ToolCalls: []ToolCall{{Index: &idx, Function: FunctionCall{Arguments: "{}"}}}}, nil)
		}
	case "message_delta":
		if ev.Usage != nil {
			u := ev.Usage
			d.hasUsage = true
			anthropicSet(&d.usage.OutputTokens, u.OutputTokens)
			anthropicSet(&d.usage.InputTokens, u.InputTokens)
			anthropicSet(&d.usage.CacheCreationInputTokens, u.CacheCreationInputTokens)
			anthropicSet(&d.usage.CacheReadInputTokens, u.CacheReadInputTokens)
		}
		var md struct {
			StopReason *string `json:"stop_reason"`
		}
		if !anthropicAbsent(ev.Delta) {
			if err := json.Unmarshal(ev.Delta, &md); err != nil {
				return BadResponse(anthropicName, "message_delta: %v", err)
			}
		}
		if md.StopReason != nil && !d.finished {
			reason := anthropicFinishReason(*md.StopReason)
			d.push(Delta{}, &reason)
			d.finished = true
		}
	case "message_stop":
		d.stop()
	case "error":
		return AnthropicEventError(data)
	}
	// ping and event types added later are ignored, as Anthropic asks.
	return nil
}

// stop ends the message: a finish reason if none came, then the usage.
func (d *anthropicStreamDecoder) stop() {
	if !d.finished {
		reason := FinishStop
		d.push(Delta{}, &reason)
		d.finished = true
	}
	if d.hasUsage {
		d.queue = append(d.queue, &Chunk{ID: d.id, Object: "chat.completion.chunk", Created: d.created, Model: d.model,
			Choices: []ChunkChoice{}, Usage: anthropicCanonicalUsage(d.usage)})
	}
	d.done = true
}

// push queues a chunk; the first one carries the assistant role.
func (d *anthropicStreamDecoder) push(delta Delta, finish *string) {
	if !d.roleSent {
		delta.Role = "assistant"
		d.roleSent = true
	}
	d.queue = append(d.queue, &Chunk{ID: d.id, Object: "chat.completion.chunk", Created: d.created, Model: d.model,
		Choices: []ChunkChoice{{Index: 0, Delta: delta, FinishReason: finish}}})
}

func anthropicSet(dst *int64, v *int64) {
	if v != nil {
		*dst = *v
	}
}

// anthropicAbsent reports whether a raw field is missing or null.
func anthropicAbsent(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// anthropicEmptyObject reports whether raw is {} (with any spacing).
func anthropicEmptyObject(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return false
	}
	return len(bytes.TrimSpace(raw[1:len(raw)-1])) == 0
}

// anthropicSSE reads server-sent events: lines end in LF, CRLF or a lone
// CR (a lone CR is only seen once the next LF or the end arrives), lines
// starting with ':' are comments, "data" lines of one event are joined with
// LF, and lines of any length up to anthropicMaxEvent are accepted.
type anthropicSSE struct {
	r     *bufio.Reader
	long  []byte // a line longer than the reader's buffer, being gathered
	seg   []byte // the current LF-terminated segment
	pos   int    // how much of seg has been consumed
	eof   bool
	first bool // no line read yet (a leading BOM is dropped)

	event   string
	data    []byte
	hasData bool
	reset   bool // the last event was handed out: clear before reading on
}

func newAnthropicSSE(r io.Reader) *anthropicSSE {
	return &anthropicSSE{r: bufio.NewReaderSize(r, 8<<10), first: true}
}

// next returns the next event's name and data (valid until the next call),
// or io.EOF at the end of the stream.
func (s *anthropicSSE) next() (string, []byte, error) {
	if s.reset {
		s.event, s.data, s.hasData, s.reset = "", s.data[:0], false, false
	}
	for {
		line, err := s.readLine()
		if err == io.EOF {
			if s.hasData { // the last event lacked its blank line: take it
				s.reset = true
				return s.event, s.data, nil
			}
			return "", nil, io.EOF
		}
		if err != nil {
			return "", nil, err
		}
		if len(line) == 0 {
			if s.hasData {
				s.reset = true
				return s.event, s.data, nil
			}
			s.event = ""
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			s.event = string(value)
		case "data":
			if s.hasData {
				s.data = append(s.data, '\n')
			}
			if len(s.data)+len(value) > anthropicMaxEvent {
				return "", nil, BadResponse(anthropicName, "a stream event is larger than %d bytes", anthropicMaxEvent)
			}
			s.data = append(s.data, value...)
			s.hasData = true
		}
		// id and retry are irrelevant to a one-shot stream.
	}
}

// readLine returns the next line without its terminator.
func (s *anthropicSSE) readLine() ([]byte, error) {
	for {
		if s.pos < len(s.seg) {
			rest := s.seg[s.pos:]
			i := bytes.IndexAny(rest, "\r\n")
			if i < 0 { // the unterminated end of the stream
				s.pos = len(s.seg)
				return s.trimBOM(rest), nil
			}
			s.pos += i + 1
			if rest[i] == '\r' && i+1 < len(rest) && rest[i+1] == '\n' {
				s.pos++
			}
			return s.trimBOM(rest[:i]), nil
		}
		if s.eof {
			return nil, io.EOF
		}
		if err := s.readSegment(); err != nil {
			return nil, err
		}
	}
}

// readSegment reads up to and including the next LF (or to the end).
func (s *anthropicSSE) readSegment() error {
	s.long = s.long[:0]
	for {
		b, err := s.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if len(s.long)+len(b) > anthropicMaxEvent {
				return BadResponse(anthropicName, "a stream line is longer than %d bytes", anthropicMaxEvent)
			}
			s.long = append(s.long, b...)
			continue
		}
		if len(s.long) > 0 {
			s.long = append(s.long, b...)
			b = s.long
		}
		s.seg, s.pos = b, 0
		if err == io.EOF {
			s.eof = true
			return nil
		}
		return err
	}
}

func (s *anthropicSSE) trimBOM(line []byte) []byte {
	if s.first {
		s.first = false
		return bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
	}
	return line
}
