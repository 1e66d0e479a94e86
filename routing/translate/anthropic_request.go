package translate

// The Anthropic request encoder: a canonical request as a Messages request
// (what is refused, dropped and adjusted is in anthropic.go's file comment).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

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
