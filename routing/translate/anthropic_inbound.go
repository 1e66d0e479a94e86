package translate

// The Anthropic Messages API as an inbound format: clients speaking
// POST /v1/messages (and /v1/messages/count_tokens) are decoded into the
// canonical form, and canonical answers, streams and errors are written
// back exactly as Anthropic writes them.
//
// What the decoder cannot carry:
//
//   - Refused with a 400: server tools (a tool "type" other than "custom",
//     e.g. web_search_*, computer_*, bash_*, text_editor_*), mcp_servers,
//     document, search_result and other content blocks without a canonical
//     form, images given by Files API id, a missing max_tokens (Anthropic
//     requires it), roles other than user, assistant and system.
//   - Carried in place: a {"role":"system"} message inside "messages" (the
//     beta mid-conversation-system-2026-04-07; Claude Code sends one at
//     messages[1]) becomes a canonical system message where it stands. The
//     upstream adapters keep its meaning as their formats allow: OpenAI
//     chat takes system messages anywhere, so it stays in place; Gemini
//     (systemInstruction), Bedrock (the system blocks) and Anthropic (the
//     top-level system, for requests that were translated) have no system
//     turn, so its text joins the system prompt after what came before it.
//     An Anthropic request to an Anthropic deployment is passed through
//     untouched and never comes here.
//   - Dropped: "thinking" (the canonical form has no thinking budget, and
//     the thinking blocks Anthropic returns could not be sent back on a
//     later turn), thinking and redacted_thinking blocks in the history,
//     tool_result "is_error" (OpenAI's tool messages
//     have no error flag; the result's text, which describes the error, is
//     kept), service_tier, container, context_management, the other
//     settings of output_config (effort, ...), and every other unknown
//     field: beta fields that only tune behaviour are dropped, not refused.
//   - Carried: cache_control breakpoints, on system blocks, content blocks,
//     tool results and tools, so that a request translated to Bedrock (as
//     cachePoint blocks) or to Anthropic is still prompt-cached. One on an
//     assistant block moves to the end of that turn (the canonical form
//     joins an assistant turn's text), which keeps the cached prefix a
//     prefix.
//   - Mapped: output_config.format (or the beta output_format) of type
//     json_schema becomes response_format json_schema; stream requests ask
//     for usage (stream_options.include_usage) so that message_delta can
//     report it.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// AnthropicInbound is the inbound format of clients speaking the Anthropic
// Messages API.
var AnthropicInbound Inbound = anthropicInbound{}

type anthropicInbound struct{}

// anthropicRequestIn is a client's Messages (or count_tokens) request.
type anthropicRequestIn struct {
	Model         *string                `json:"model"`
	Messages      *[]anthropicTurnIn     `json:"messages"`
	System        json.RawMessage        `json:"system"`
	MaxTokens     *int64                 `json:"max_tokens"`
	Temperature   *float64               `json:"temperature"`
	TopP          *float64               `json:"top_p"`
	TopK          *int64                 `json:"top_k"`
	StopSequences []string               `json:"stop_sequences"`
	Stream        bool                   `json:"stream"`
	Tools         []anthropicToolIn      `json:"tools"`
	ToolChoice    *anthropicToolChoice   `json:"tool_choice"`
	Metadata      *anthropicMetadata     `json:"metadata"`
	OutputFormat  json.RawMessage        `json:"output_format"`
	OutputConfig  *anthropicOutputConfig `json:"output_config"`
	MCPServers    json.RawMessage        `json:"mcp_servers"`
}

// anthropicOutputConfig is output_config; only its format is carried.
type anthropicOutputConfig struct {
	Format json.RawMessage `json:"format"`
}

// anthropicTurnIn is one message of a client's request.
type anthropicTurnIn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anthropicToolIn is a tool definition of a client's request.
type anthropicToolIn struct {
	Type         string          `json:"type"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	Strict       *bool           `json:"strict"`
	CacheControl json.RawMessage `json:"cache_control"`
}

// anthropicInvalid is a 400 whose message starts with the offending path,
// as Anthropic's own validation messages do.
func anthropicInvalid(path, format string, args ...any) *Error {
	return Invalid(path, "%s: %s", path, fmt.Sprintf(format, args...))
}

// DecodeRequest reads a Messages request.
func (anthropicInbound) DecodeRequest(body []byte) (*ChatRequest, error) {
	return anthropicDecodeRequest(body, true)
}

// anthropicDecodeRequest decodes a Messages request; count_tokens requests
// have no max_tokens, hence needMaxTokens.
func anthropicDecodeRequest(body []byte, needMaxTokens bool) (*ChatRequest, error) {
	var in anthropicRequestIn
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, Invalid("", "The request body is not a valid Messages request: %v", err)
	}
	if in.Model == nil || *in.Model == "" {
		return nil, anthropicInvalid("model", "Field required")
	}
	if in.Messages == nil {
		return nil, anthropicInvalid("messages", "Field required")
	}
	out := &ChatRequest{Model: *in.Model, Temperature: in.Temperature, TopP: in.TopP, TopK: in.TopK, Stream: in.Stream}
	if needMaxTokens {
		switch {
		case in.MaxTokens == nil:
			return nil, anthropicInvalid("max_tokens", "Field required")
		case *in.MaxTokens < 1:
			return nil, anthropicInvalid("max_tokens", "Input should be greater than or equal to 1")
		}
		out.MaxTokens = in.MaxTokens
	}
	if in.Stream {
		out.StreamOptions = &StreamOptions{IncludeUsage: true}
	}
	if len(in.StopSequences) > 0 {
		out.Stop = in.StopSequences
	}
	if in.Metadata != nil {
		out.User = in.Metadata.UserID
	}
	if m := bytes.TrimSpace(in.MCPServers); len(m) > 0 && string(m) != "null" && string(m) != "[]" {
		return nil, anthropicInvalid("mcp_servers", "MCP servers are not supported by this gateway")
	}

	format := in.OutputFormat
	if in.OutputConfig != nil && len(in.OutputConfig.Format) > 0 {
		format = in.OutputConfig.Format
	}
	rf, err := anthropicDecodeOutputFormat(format)
	if err != nil {
		return nil, err
	}
	out.ResponseFormat = rf

	system, err := anthropicDecodeSystem(in.System)
	if err != nil {
		return nil, err
	}
	if system != nil {
		out.Messages = append(out.Messages, *system)
	}
	for i, t := range *in.Messages {
		msgs, err := anthropicDecodeTurn(i, t)
		if err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, msgs...)
	}

	if out.Tools, err = anthropicDecodeTools(in.Tools); err != nil {
		return nil, err
	}
	if in.ToolChoice != nil {
		if out.ToolChoice, out.ParallelToolCalls, err = anthropicDecodeToolChoice(in.ToolChoice); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// anthropicDecodeTools reads client tools as function tools; server tools
// are refused.
func anthropicDecodeTools(tools []anthropicToolIn) ([]Tool, error) {
	var out []Tool
	for i, t := range tools {
		path := fmt.Sprintf("tools.%d", i)
		if t.Type != "" && t.Type != "custom" {
			return nil, anthropicInvalid(path+".type", "The server tool '%s' is not supported by this gateway; only client tools (custom) are", t.Type)
		}
		if t.Name == "" {
			return nil, anthropicInvalid(path+".name", "Field required")
		}
		schema := bytes.TrimSpace(t.InputSchema)
		if len(schema) == 0 || string(schema) == "null" {
			return nil, anthropicInvalid(path+".input_schema", "Field required")
		}
		out = append(out, Tool{Type: "function", Function: FunctionDecl{
			Name: t.Name, Description: t.Description, Parameters: schema, Strict: t.Strict},
			CacheControl: cacheControlOf(t.CacheControl)})
	}
	return out, nil
}

// anthropicDecodeToolChoice reads tool_choice, and from its
// disable_parallel_tool_use the parallel_tool_calls setting (nil when
// parallel calls stay allowed).
func anthropicDecodeToolChoice(tc *anthropicToolChoice) (*ToolChoice, *bool, error) {
	var out *ToolChoice
	switch tc.Type {
	case "auto":
		out = &ToolChoice{Mode: "auto"}
	case "any":
		out = &ToolChoice{Mode: "required"}
	case "none":
		out = &ToolChoice{Mode: "none"}
	case "tool":
		if tc.Name == "" {
			return nil, nil, anthropicInvalid("tool_choice.name", "Field required")
		}
		out = &ToolChoice{Mode: "function", Function: tc.Name}
	default:
		return nil, nil, anthropicInvalid("tool_choice.type", "Input should be 'auto', 'any', 'tool' or 'none'")
	}
	if tc.DisableParallelToolUse {
		f := false
		return out, &f, nil
	}
	return out, nil, nil
}

// anthropicDecodeOutputFormat maps a json_schema output format onto
// OpenAI's response_format.
func anthropicDecodeOutputFormat(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var f struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, anthropicInvalid("output_config.format", "%v", err)
	}
	if f.Type != "json_schema" || len(f.Schema) == 0 {
		return nil, anthropicInvalid("output_config.format", "Only a json_schema format with a schema is supported")
	}
	rf, err := json.Marshal(map[string]any{"type": "json_schema",
		"json_schema": map[string]any{"name": "response", "schema": f.Schema, "strict": true}})
	if err != nil {
		return nil, anthropicInvalid("output_config.format.schema", "%v", err)
	}
	return rf, nil
}

// anthropicDecodeSystem turns "system" (a string or text blocks) into a
// system message, or nil when there is none.
func anthropicDecodeSystem(raw json.RawMessage) (*Message, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, anthropicInvalid("system", "%v", err)
		}
		if s == "" {
			return nil, nil
		}
		return &Message{Role: "system", Content: TextContent(s)}, nil
	}
	var blocks []anthropicBlockIn
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, anthropicInvalid("system", "Input should be a string or a list of text blocks")
	}
	var parts []Part
	for j, b := range blocks {
		if b.Type != "text" {
			return nil, anthropicInvalid(fmt.Sprintf("system.%d.type", j), "Input should be 'text'")
		}
		parts = append(parts, Part{Type: "text", Text: b.Text, CacheControl: cacheControlOf(b.CacheControl)})
	}
	if len(parts) == 0 {
		return nil, nil
	}
	return &Message{Role: "system", Content: PartsContent(parts...)}, nil
}

// anthropicDecodeSystemTurn turns a system message inside "messages" (the
// beta mid-conversation-system: a string or text blocks) into a canonical
// system message at the same place; each upstream adapter then carries it
// as its format allows (see the file comment). An empty one is dropped.
func anthropicDecodeSystemTurn(path string, content json.RawMessage) ([]Message, error) {
	raw := bytes.TrimSpace(content)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, anthropicInvalid(path+".content", "Field required")
	}
	if raw[0] != '"' && raw[0] != '[' {
		return nil, anthropicInvalid(path+".content", "Input should be a string or a list of text blocks")
	}
	m, err := anthropicDecodeSystem(raw)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			// anthropicDecodeSystem names "system": name this message.
			e.Param = path + ".content" + strings.TrimPrefix(e.Param, "system")
			e.Message = path + ".content" + strings.TrimPrefix(e.Message, "system")
		}
		return nil, err
	}
	if m == nil {
		return nil, nil
	}
	return []Message{*m}, nil
}

// anthropicDecodeTurn turns one client message into canonical messages: a
// user turn's tool_result blocks become tool messages, followed by a user
// message with the rest of its content.
func anthropicDecodeTurn(i int, t anthropicTurnIn) ([]Message, error) {
	path := fmt.Sprintf("messages.%d", i)
	if t.Role == "system" {
		return anthropicDecodeSystemTurn(path, t.Content)
	}
	if t.Role != "user" && t.Role != "assistant" {
		return nil, anthropicInvalid(path+".role", "Input should be 'user', 'assistant' or 'system'")
	}
	raw := bytes.TrimSpace(t.Content)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil, anthropicInvalid(path+".content", "Field required")
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, anthropicInvalid(path+".content", "%v", err)
		}
		return []Message{{Role: t.Role, Content: TextContent(s)}}, nil
	case raw[0] != '[':
		return nil, anthropicInvalid(path+".content", "Input should be a string or a list of content blocks")
	}
	var blocks []anthropicBlockIn
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, anthropicInvalid(path+".content", "%v", err)
	}
	if t.Role == "assistant" {
		return anthropicDecodeAssistant(path, blocks)
	}

	var tools []Message
	var parts []Part
	for j, b := range blocks {
		bpath := fmt.Sprintf("%s.content.%d", path, j)
		switch b.Type {
		case "tool_result":
			if b.ToolUseID == "" {
				return nil, anthropicInvalid(bpath+".tool_use_id", "Field required")
			}
			content, err := anthropicDecodeToolResult(bpath, b.Content)
			if err != nil {
				return nil, err
			}
			tools = append(tools, Message{Role: "tool", ToolCallID: b.ToolUseID, Content: content, CacheControl: cacheControlOf(b.CacheControl)})
		case "tool_use":
			return nil, anthropicInvalid(bpath+".type", "tool_use blocks may only appear in assistant messages")
		case "thinking", "redacted_thinking":
			// dropped, see the file comment
		default:
			p, err := anthropicDecodePart(bpath, b)
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		}
	}
	out := tools
	if len(parts) > 0 || len(tools) == 0 {
		out = append(out, Message{Role: "user", Content: PartsContent(parts...)})
	}
	return out, nil
}

// anthropicDecodeAssistant turns an assistant turn's blocks into one
// assistant message: the text blocks joined, the tool_use blocks as tool
// calls.
func anthropicDecodeAssistant(path string, blocks []anthropicBlockIn) ([]Message, error) {
	var text strings.Builder
	var calls []ToolCall
	var cc json.RawMessage
	for j, b := range blocks {
		bpath := fmt.Sprintf("%s.content.%d", path, j)
		if c := cacheControlOf(b.CacheControl); c != nil && b.Type != "thinking" && b.Type != "redacted_thinking" {
			cc = c
		}
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			if b.ID == "" {
				return nil, anthropicInvalid(bpath+".id", "Field required")
			}
			if b.Name == "" {
				return nil, anthropicInvalid(bpath+".name", "Field required")
			}
			in := bytes.TrimSpace(b.Input)
			if len(in) > 0 && in[0] != '{' && string(in) != "null" {
				return nil, anthropicInvalid(bpath+".input", "Input should be an object")
			}
			calls = append(calls, ToolCall{ID: b.ID, Type: "function",
				Function: FunctionCall{Name: b.Name, Arguments: anthropicCompactInput(in)}})
		case "thinking", "redacted_thinking":
			// dropped, see the file comment
		default:
			return nil, anthropicInvalid(bpath+".type", "The block type '%s' is not supported in assistant messages by this gateway", b.Type)
		}
	}
	m := Message{Role: "assistant", ToolCalls: calls, CacheControl: cc}
	if text.Len() == 0 && len(calls) > 0 {
		m.Content = Content{Null: true}
	} else {
		m.Content = TextContent(text.String())
	}
	return []Message{m}, nil
}

// anthropicDecodePart turns a text or image block into a content part.
func anthropicDecodePart(path string, b anthropicBlockIn) (Part, error) {
	p, err := anthropicDecodePartOnly(path, b)
	p.CacheControl = cacheControlOf(b.CacheControl)
	return p, err
}

func anthropicDecodePartOnly(path string, b anthropicBlockIn) (Part, error) {
	switch b.Type {
	case "text":
		return Part{Type: "text", Text: b.Text}, nil
	case "image":
		if b.Source == nil {
			return Part{}, anthropicInvalid(path+".source", "Field required")
		}
		switch b.Source.Type {
		case "base64":
			if b.Source.MediaType == "" || b.Source.Data == "" {
				return Part{}, anthropicInvalid(path+".source", "media_type and data are required for base64 images")
			}
			return Part{Type: "image_url", ImageURL: &ImageURL{URL: "data:" + b.Source.MediaType + ";base64," + b.Source.Data}}, nil
		case "url":
			if b.Source.URL == "" {
				return Part{}, anthropicInvalid(path+".source.url", "Field required")
			}
			return Part{Type: "image_url", ImageURL: &ImageURL{URL: b.Source.URL}}, nil
		default:
			return Part{}, anthropicInvalid(path+".source.type", "The image source type '%s' is not supported by this gateway; use base64 or url", b.Source.Type)
		}
	default:
		return Part{}, anthropicInvalid(path+".type", "The block type '%s' is not supported by this gateway", b.Type)
	}
}

// anthropicDecodeToolResult reads a tool_result's content: a string, text
// and image blocks, or nothing.
func anthropicDecodeToolResult(path string, raw json.RawMessage) (Content, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return TextContent(""), nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return Content{}, anthropicInvalid(path+".content", "%v", err)
		}
		return TextContent(s), nil
	}
	var blocks []anthropicBlockIn
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return Content{}, anthropicInvalid(path+".content", "Input should be a string or a list of content blocks")
	}
	parts := make([]Part, 0, len(blocks))
	for j, b := range blocks {
		p, err := anthropicDecodePart(fmt.Sprintf("%s.content.%d", path, j), b)
		if err != nil {
			return Content{}, err
		}
		parts = append(parts, p)
	}
	return PartsContent(parts...), nil
}

// ---- Response ----

// anthropicResponseOut is a Messages response as Anthropic writes it.
type anthropicResponseOut struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []any          `json:"content"`
	StopReason   string         `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        anthropicUsage `json:"usage"`
}

// EncodeResponse writes a canonical answer as a Messages response.
func (anthropicInbound) EncodeResponse(resp *ChatResponse) ([]byte, error) {
	if resp == nil {
		return nil, errors.New("translate: no response to encode")
	}
	out := anthropicResponseOut{ID: anthropicMessageID(resp.ID), Type: "message", Role: "assistant",
		Model: resp.Model, Content: []any{}, StopReason: "end_turn", Usage: anthropicUsageOf(resp.Usage)}
	if len(resp.Choices) > 0 {
		ch := resp.Choices[0]
		text := ch.Message.Content.String()
		if text == "" {
			text = ch.Message.Refusal
		}
		if text != "" {
			out.Content = append(out.Content, anthropicTextBlock{Type: "text", Text: text})
		}
		for _, tc := range ch.Message.ToolCalls {
			id := tc.ID
			if id == "" {
				id = anthropicNewID("toolu_")
			}
			out.Content = append(out.Content, anthropicToolUseBlock{Type: "tool_use", ID: id,
				Name: tc.Function.Name, Input: anthropicInputOf(tc.Function.Arguments)})
		}
		out.StopReason = anthropicStopReason(ch.FinishReason)
	}
	return json.Marshal(out)
}

// anthropicInputOf turns tool-call arguments into a tool_use input. The
// input must be a JSON object; arguments that are not one (a model can
// emit broken JSON) are wrapped as {"_raw": "<arguments>"} so that the
// client still gets a well-formed message and can see what was produced.
func anthropicInputOf(args string) json.RawMessage {
	if in, ok := anthropicArgsObject(args); ok {
		return in
	}
	b, _ := json.Marshal(map[string]string{"_raw": args})
	return b
}

// anthropicStopReason maps a finish reason onto a stop_reason.
func anthropicStopReason(finish string) string {
	switch finish {
	case FinishLength:
		return "max_tokens"
	case FinishToolCalls, "function_call":
		return "tool_use"
	case FinishContentFilter:
		return "refusal"
	default:
		return "end_turn"
	}
}

// anthropicUsageOf converts canonical usage: Anthropic's input_tokens
// excludes the cached and cache-written parts of the prompt.
func anthropicUsageOf(u *Usage) anthropicUsage {
	if u == nil {
		return anthropicUsage{}
	}
	cached := u.Cached()
	return anthropicUsage{
		InputTokens:              max(u.PromptTokens-cached-u.CacheCreationTokens, 0),
		OutputTokens:             u.CompletionTokens,
		CacheCreationInputTokens: u.CacheCreationTokens,
		CacheReadInputTokens:     cached,
	}
}

// anthropicMessageID gives an id the "msg_" prefix Anthropic's ids have.
func anthropicMessageID(id string) string {
	switch {
	case id == "":
		return anthropicNewID("msg_")
	case strings.HasPrefix(id, "msg_"):
		return id
	default:
		return "msg_" + id
	}
}

// anthropicNewID returns prefix followed by 24 random hex digits.
func anthropicNewID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// ---- Errors ----

// anthropicErrorType is the Anthropic error type of an HTTP status, as
// Anthropic documents them.
func anthropicErrorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusPaymentRequired:
		return "billing_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == http.StatusGatewayTimeout:
		return "timeout_error"
	case status == 529:
		return "overloaded_error"
	case status >= 500:
		return "api_error"
	default:
		return "invalid_request_error"
	}
}

// EncodeError writes e as an Anthropic error body.
func (anthropicInbound) EncodeError(e *Error) []byte {
	return anthropicErrorJSON(e)
}

func anthropicErrorJSON(e *Error) []byte {
	if e == nil {
		e = &Error{Status: http.StatusInternalServerError, Message: "Internal error."}
	}
	b, _ := json.Marshal(anthropicErrorBody{Type: "error",
		Error: &anthropicErrorObj{Type: anthropicErrorType(e.Status), Message: e.Message}})
	return b
}

// ---- Stream ----

// anthropicImageTokens is the fixed estimate for one image.
const anthropicImageTokens = 1600

// AnthropicCountTokens estimates the input tokens of a
// /v1/messages/count_tokens request body (a Messages request without
// max_tokens). It is an estimate, not Anthropic's tokenizer: about one
// token per 4 bytes of the system prompt, the messages' text, tool calls
// and tool results, and the tool definitions (name, description and
// schema), plus a fixed 1,600 tokens per image. The answer to the client
// is AnthropicCountTokensResponse(n). Malformed requests return an *Error.
func AnthropicCountTokens(body []byte) (int64, error) {
	req, err := anthropicDecodeRequest(body, false)
	if err != nil {
		return 0, err
	}
	var bytesN, images int64
	countContent := func(c Content) {
		if !c.IsParts {
			bytesN += int64(len(c.Text))
			return
		}
		for _, p := range c.Parts {
			switch p.Type {
			case "text":
				bytesN += int64(len(p.Text))
			case "image_url":
				images++
			}
		}
	}
	for _, m := range req.Messages {
		countContent(m.Content)
		for _, tc := range m.ToolCalls {
			bytesN += int64(len(tc.Function.Name) + len(tc.Function.Arguments))
		}
	}
	for _, t := range req.Tools {
		bytesN += int64(len(t.Function.Name) + len(t.Function.Description) + len(t.Function.Parameters))
	}
	return (bytesN+3)/4 + images*anthropicImageTokens, nil
}

// AnthropicCountTokensResponse is the count_tokens answer:
// {"input_tokens": n}.
func AnthropicCountTokensResponse(n int64) []byte {
	b, _ := json.Marshal(struct {
		InputTokens int64 `json:"input_tokens"`
	}{n})
	return b
}
