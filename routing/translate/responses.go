package translate

// The OpenAI Responses API (POST /v1/responses) as an inbound format.
//
// Tollgate is a stateless gateway: it keeps no conversations and no
// responses, so the client sends the whole conversation in "input" on every
// request. The rules for what is carried, dropped and refused:
//
// Carried: model; instructions (as a leading system message); input as a
// string (one user message) or as items: messages (roles user, system,
// developer, assistant; content a string or input_text, input_image (URL or
// data URL), input_file (inline file_data), input_audio, output_text and
// refusal parts), function_call items (consecutive ones, and one that
// follows an assistant message, become one assistant message with
// tool_calls) and function_call_output items (tool messages); function
// tools; tool_choice (auto, none, required, a named function, or
// allowed_tools over function tools, which narrows the tool list);
// max_output_tokens (as max_completion_tokens); temperature; top_p;
// parallel_tool_calls; user (or, without it, safety_identifier); metadata;
// text.format (json_object, json_schema); reasoning.effort; stream (always
// with usage, which the final event reports).
//
// Dropped, as they only tune presentation, caching or hosted features the
// gateway does not offer: reasoning input items (their content is the
// upstream's own and cannot be replayed to another model), store (accepted,
// but nothing is ever stored: responses always say "store": false),
// text.verbosity, reasoning.summary, prompt_cache_key,
// prompt_cache_retention, service_tier, truncation, max_tool_calls,
// stream_options, include values other than message.output_text.logprobs,
// and unknown fields. A function tool without "strict" is sent without it,
// so the upstream uses its own default (the Responses API would normalise
// the schema to strict mode; chat upstreams stay non-strict).
//
// Refused with a 400 naming the field: previous_response_id, conversation,
// prompt and item_reference items (they need stored state), background:
// true, built-in tools (web_search, file_search, code_interpreter,
// computer_use_preview, image_generation, mcp, ...) and tool_choice naming
// one, input items produced by built-in tools, file_id references and
// file_url parts (no file store), images or files in assistant, system or
// tool content, top_logprobs and include: message.output_text.logprobs
// (the gateway cannot return log probabilities).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ResponsesInbound is the OpenAI Responses API as an inbound format. Its
// Response objects report the API's defaults for the request parameters
// they echo (temperature, tools, tool_choice, ...); ResponsesInboundFor
// echoes a decoded request's own.
var ResponsesInbound Inbound = responsesInbound{echo: newResponsesEcho(nil)}

// ResponsesInboundFor returns the Responses inbound format whose Response
// objects echo req's parameters (temperature, top_p, max_output_tokens,
// parallel_tool_calls, tool_choice, tools, text.format, reasoning.effort,
// metadata, user), as the Responses API does. req is the request
// ResponsesInbound.DecodeRequest returned; it is read once, here.
func ResponsesInboundFor(req *ChatRequest) Inbound {
	return responsesInbound{echo: newResponsesEcho(req)}
}

type responsesInbound struct {
	echo responsesEcho
}

// respStateless is the reason given when refusing the conversation-state
// fields (previous_response_id, conversation, item_reference, a missing input).
const respStateless = "this gateway is stateless: send the whole conversation in input"

// ---------------------------------------------------------------------------
// Request decoding

// responsesRequest is the part of a create-response request the gateway
// reads. Polymorphic fields stay raw and are decoded by hand.
type responsesRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       json.RawMessage   `json:"instructions"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	MaxOutputTokens    *int64            `json:"max_output_tokens"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	User               *string           `json:"user"`
	SafetyIdentifier   *string           `json:"safety_identifier"`
	Metadata           json.RawMessage   `json:"metadata"`
	Text               *responsesText    `json:"text"`
	Reasoning          *responsesReason  `json:"reasoning"`
	Stream             *bool             `json:"stream"`
	Store              *bool             `json:"store"`
	Background         *bool             `json:"background"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Conversation       json.RawMessage   `json:"conversation"`
	Prompt             json.RawMessage   `json:"prompt"`
	Include            []string          `json:"include"`
	TopLogprobs        *int64            `json:"top_logprobs"`
}

type responsesText struct {
	Format json.RawMessage `json:"format"`
}

type responsesReason struct {
	Effort *string `json:"effort"`
}

// responsesItem is one input item; which fields matter depends on Type.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	Arguments *string         `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// responsesPart is one content part of a message or of a function call's
// output.
type responsesPart struct {
	Type       string          `json:"type"`
	Text       string          `json:"text"`
	ImageURL   json.RawMessage `json:"image_url"`
	Detail     string          `json:"detail"`
	FileID     *string         `json:"file_id"`
	FileData   string          `json:"file_data"`
	FileURL    *string         `json:"file_url"`
	Filename   string          `json:"filename"`
	Refusal    string          `json:"refusal"`
	InputAudio json.RawMessage `json:"input_audio"`
}

// responsesTool is one entry of "tools".
type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// DecodeRequest reads a create-response request into the canonical form.
func (responsesInbound) DecodeRequest(body []byte) (*ChatRequest, error) {
	var in responsesRequest
	if err := respUnmarshal(body, "", &in); err != nil {
		return nil, err
	}
	if err := respRefuseStateful(&in); err != nil {
		return nil, err
	}
	if in.Model == "" {
		return nil, Invalid("model", "'model' is required.")
	}
	out := &ChatRequest{
		Model:               in.Model,
		MaxCompletionTokens: in.MaxOutputTokens,
		Temperature:         in.Temperature,
		TopP:                in.TopP,
		ParallelToolCalls:   in.ParallelToolCalls,
	}
	if in.Stream != nil && *in.Stream {
		out.Stream = true
		out.StreamOptions = &StreamOptions{IncludeUsage: true}
	}
	switch {
	case in.User != nil && *in.User != "":
		out.User = *in.User
	case in.SafetyIdentifier != nil:
		out.User = *in.SafetyIdentifier
	}
	if !respIsNull(in.Metadata) {
		if !respIsObject(in.Metadata) {
			return nil, Invalid("metadata", "'metadata' must be an object of string values.")
		}
		out.Metadata = in.Metadata
	}
	if in.Reasoning != nil && in.Reasoning.Effort != nil {
		out.ReasoningEffort = *in.Reasoning.Effort
	}
	if in.Text != nil {
		rf, err := respDecodeTextFormat(in.Text.Format)
		if err != nil {
			return nil, err
		}
		out.ResponseFormat = rf
	}
	if in.TopLogprobs != nil && *in.TopLogprobs > 0 {
		return nil, Invalid("top_logprobs", "'top_logprobs' is not supported by this gateway: it cannot return log probabilities.")
	}
	for i, inc := range in.Include {
		if inc == "message.output_text.logprobs" {
			return nil, Invalid(fmt.Sprintf("include[%d]", i), "'include' value 'message.output_text.logprobs' is not supported by this gateway: it cannot return log probabilities.")
		}
	}

	if !respIsNull(in.Instructions) {
		var s string
		if err := respUnmarshal(in.Instructions, "instructions", &s); err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, Message{Role: "system", Content: TextContent(s)})
	}
	msgs, err := respDecodeInput(in.Input)
	if err != nil {
		return nil, err
	}
	out.Messages = append(out.Messages, msgs...)

	if err := respDecodeTools(in.Tools, out); err != nil {
		return nil, err
	}
	if !respIsNull(in.ToolChoice) {
		tc, narrowed, err := respDecodeToolChoice(in.ToolChoice, out.Tools)
		if err != nil {
			return nil, err
		}
		out.ToolChoice, out.Tools = tc, narrowed
	}
	return out, nil
}

// respRefuseStateful refuses the fields that need state the gateway does not
// keep.
func respRefuseStateful(in *responsesRequest) error {
	if in.PreviousResponseID != nil && *in.PreviousResponseID != "" {
		return Invalid("previous_response_id", "'previous_response_id' is not supported: %s.", respStateless)
	}
	if !respIsNull(in.Conversation) {
		return Invalid("conversation", "'conversation' is not supported: %s.", respStateless)
	}
	if !respIsNull(in.Prompt) {
		return Invalid("prompt", "'prompt' (a stored prompt template) is not supported: this gateway is stateless: send the prompt's text in instructions and input.")
	}
	if in.Background != nil && *in.Background {
		return Invalid("background", "'background': true is not supported: this gateway is stateless and answers every request in its own HTTP response.")
	}
	return nil
}

// respDecodeTextFormat turns text.format into a chat response_format (nil for
// plain text).
func respDecodeTextFormat(raw json.RawMessage) (json.RawMessage, error) {
	if respIsNull(raw) {
		return nil, nil
	}
	var f struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	}
	if err := respUnmarshal(raw, "text.format", &f); err != nil {
		return nil, err
	}
	switch f.Type {
	case "text":
		return nil, nil
	case "json_object":
		return json.RawMessage(`{"type":"json_object"}`), nil
	case "json_schema":
		if respIsNull(f.Schema) {
			return nil, Invalid("text.format.schema", "'text.format.schema' is required when 'text.format.type' is 'json_schema'.")
		}
		type jsonSchema struct {
			Name        string          `json:"name"`
			Description string          `json:"description,omitempty"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict,omitempty"`
		}
		b, err := respMarshal(struct {
			Type       string     `json:"type"`
			JSONSchema jsonSchema `json:"json_schema"`
		}{"json_schema", jsonSchema{f.Name, f.Description, f.Schema, f.Strict}})
		if err != nil {
			return nil, Invalid("text.format.schema", "'text.format.schema' is not valid JSON.")
		}
		return b, nil
	default:
		return nil, Invalid("text.format.type", "Invalid value for 'text.format.type': %q. Supported values are: 'text', 'json_object' and 'json_schema'.", f.Type)
	}
}

// respDecodeInput reads "input": a string or an array of items.
func respDecodeInput(raw json.RawMessage) ([]Message, error) {
	if respIsNull(raw) {
		return nil, Invalid("input", "'input' is required: %s.", respStateless)
	}
	if raw[0] == '"' {
		var s string
		if err := respUnmarshal(raw, "input", &s); err != nil {
			return nil, err
		}
		return []Message{{Role: "user", Content: TextContent(s)}}, nil
	}
	if raw[0] != '[' {
		return nil, respNotStringOrArray("input")
	}
	var items []json.RawMessage
	if err := respUnmarshal(raw, "input", &items); err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, Invalid("input", "'input' must not be empty: %s.", respStateless)
	}
	var msgs []Message
	for i, rawItem := range items {
		param := fmt.Sprintf("input[%d]", i)
		var it responsesItem
		if err := respUnmarshal(rawItem, param, &it); err != nil {
			return nil, err
		}
		switch it.Type {
		case "message", "":
			if it.Type == "" && it.Role == "" {
				return nil, Invalid(param, "Input item %d has neither 'type' nor 'role'.", i)
			}
			m, err := respDecodeMessage(&it, param)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, m)
		case "function_call":
			call, err := respDecodeCall(&it, param)
			if err != nil {
				return nil, err
			}
			// Calls the model made in one turn are one assistant message
			// in the chat format, together with the text that came before
			// them.
			if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
				msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, call)
			} else {
				msgs = append(msgs, Message{Role: "assistant", Content: Content{Null: true}, ToolCalls: []ToolCall{call}})
			}
		case "function_call_output":
			m, err := respDecodeCallOutput(&it, param)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, m)
		case "reasoning":
			// Dropped: reasoning belongs to the model that produced it.
		case "item_reference":
			return nil, Invalid(param+".type", "Input items of type 'item_reference' are not supported: %s.", respStateless)
		default:
			return nil, Invalid(param+".type", "Input items of type %q are not supported by this gateway: it offers function tools only. Supported types are 'message', 'function_call', 'function_call_output' and 'reasoning'.", it.Type)
		}
	}
	return msgs, nil
}

// respDecodeMessage reads a message item (an EasyInputMessage, an input
// message or an assistant output message).
func respDecodeMessage(it *responsesItem, param string) (Message, error) {
	switch it.Role {
	case "user", "system", "developer", "assistant":
	case "":
		return Message{}, Invalid(param+".role", "'role' is required for a message item.")
	default:
		return Message{}, Invalid(param+".role", "Invalid value for 'role': %q. Supported values are: 'user', 'assistant', 'system' and 'developer'.", it.Role)
	}
	if respIsNull(it.Content) {
		return Message{}, Invalid(param+".content", "'content' is required for a message item.")
	}
	m := Message{Role: it.Role}
	if it.Content[0] == '"' {
		var s string
		if err := respUnmarshal(it.Content, param+".content", &s); err != nil {
			return Message{}, err
		}
		m.Content = TextContent(s)
		return m, nil
	}
	if it.Content[0] != '[' {
		return Message{}, respNotStringOrArray(param + ".content")
	}
	var raws []json.RawMessage
	if err := respUnmarshal(it.Content, param+".content", &raws); err != nil {
		return Message{}, err
	}
	if it.Role == "assistant" {
		return respDecodeAssistant(raws, param+".content")
	}
	parts := make([]Part, 0, len(raws))
	for j, rawPart := range raws {
		pp := fmt.Sprintf("%s.content[%d]", param, j)
		var p responsesPart
		if err := respUnmarshal(rawPart, pp, &p); err != nil {
			return Message{}, err
		}
		part, err := respDecodePart(&p, pp, it.Role == "user")
		if err != nil {
			return Message{}, err
		}
		parts = append(parts, part)
	}
	m.Content = PartsContent(parts...)
	return m, nil
}

// respDecodeAssistant reads the content of an assistant message (a
// previous turn's output): text, which becomes string content, and
// refusals.
func respDecodeAssistant(raws []json.RawMessage, param string) (Message, error) {
	m := Message{Role: "assistant"}
	var text strings.Builder
	hasText := false
	for j, rawPart := range raws {
		pp := fmt.Sprintf("%s[%d]", param, j)
		var p responsesPart
		if err := respUnmarshal(rawPart, pp, &p); err != nil {
			return Message{}, err
		}
		switch p.Type {
		case "output_text", "input_text", "text":
			text.WriteString(p.Text)
			hasText = true
		case "refusal":
			m.Refusal += p.Refusal
		default:
			return Message{}, Invalid(pp+".type", "Content of type %q is not supported in assistant messages: only 'output_text' and 'refusal' are.", p.Type)
		}
	}
	if hasText {
		m.Content = TextContent(text.String())
	} else {
		m.Content = Content{Null: true}
	}
	return m, nil
}

// respDecodePart reads one part of a user, system or developer message,
// or of a function call's output. media says images, files and audio are
// allowed.
func respDecodePart(p *responsesPart, param string, media bool) (Part, error) {
	switch p.Type {
	case "input_text", "output_text", "text":
		return Part{Type: "text", Text: p.Text}, nil
	case "input_image", "input_file", "input_audio":
		if !media {
			return Part{}, Invalid(param+".type", "Content of type %q is not supported here: only text is.", p.Type)
		}
	default:
		return Part{}, Invalid(param+".type", "Invalid content type %q. Supported types are 'input_text', 'input_image', 'input_file' and 'input_audio'.", p.Type)
	}
	switch p.Type {
	case "input_image":
		if p.FileID != nil && *p.FileID != "" {
			return Part{}, Invalid(param+".file_id", "'file_id' is not supported: this gateway has no file store; send the image as a URL or a data URL in 'image_url'.")
		}
		url, err := respDecodeImageURL(p.ImageURL, param+".image_url")
		if err != nil {
			return Part{}, err
		}
		return Part{Type: "image_url", ImageURL: &ImageURL{URL: url, Detail: p.Detail}}, nil
	case "input_file":
		if p.FileID != nil && *p.FileID != "" {
			return Part{}, Invalid(param+".file_id", "'file_id' is not supported: this gateway has no file store; send the file inline in 'file_data'.")
		}
		if p.FileURL != nil && *p.FileURL != "" {
			return Part{}, Invalid(param+".file_url", "'file_url' is not supported by this gateway; send the file inline in 'file_data'.")
		}
		if p.FileData == "" {
			return Part{}, Invalid(param+".file_data", "'file_data' is required for an 'input_file' part.")
		}
		file, err := respMarshal(struct {
			Filename string `json:"filename,omitempty"`
			FileData string `json:"file_data"`
		}{p.Filename, p.FileData})
		if err != nil {
			return Part{}, Invalid(param, "the file part could not be encoded.")
		}
		return Part{Type: "file", File: file}, nil
	default: // input_audio
		if !respIsObject(p.InputAudio) {
			return Part{}, Invalid(param+".input_audio", "'input_audio' must be an object with 'data' and 'format'.")
		}
		return Part{Type: "input_audio", InputAudio: p.InputAudio}, nil
	}
}

// respDecodeImageURL reads image_url: a string (URL or data URL) or, leniently,
// a chat-style {"url": ...} object.
func respDecodeImageURL(raw json.RawMessage, param string) (string, error) {
	var url string
	switch {
	case respIsNull(raw):
	case raw[0] == '"':
		if err := respUnmarshal(raw, param, &url); err != nil {
			return "", err
		}
	case raw[0] == '{':
		var obj struct {
			URL string `json:"url"`
		}
		if err := respUnmarshal(raw, param, &obj); err != nil {
			return "", err
		}
		url = obj.URL
	default:
		return "", Invalid(param, "Invalid type for '%s': expected a string (a URL or a data URL).", param)
	}
	if url == "" {
		return "", Invalid(param, "'image_url' is required for an 'input_image' part: a URL or a data URL.")
	}
	return url, nil
}

// respDecodeCall reads a function_call item (a call the model made
// in an earlier turn).
func respDecodeCall(it *responsesItem, param string) (ToolCall, error) {
	if it.CallID == "" {
		return ToolCall{}, Invalid(param+".call_id", "'call_id' is required for a 'function_call' item.")
	}
	if it.Name == "" {
		return ToolCall{}, Invalid(param+".name", "'name' is required for a 'function_call' item.")
	}
	if it.Arguments == nil {
		return ToolCall{}, Invalid(param+".arguments", "'arguments' is required for a 'function_call' item.")
	}
	name := it.Name
	if it.Namespace != "" {
		name = respFlatName(it.Namespace, name)
	}
	return ToolCall{ID: it.CallID, Type: "function", Function: FunctionCall{Name: name, Arguments: *it.Arguments}}, nil
}

// respDecodeCallOutput reads a function_call_output item into a tool
// message. The output is a string or text parts.
func respDecodeCallOutput(it *responsesItem, param string) (Message, error) {
	if it.CallID == "" {
		return Message{}, Invalid(param+".call_id", "'call_id' is required for a 'function_call_output' item.")
	}
	if respIsNull(it.Output) {
		return Message{}, Invalid(param+".output", "'output' is required for a 'function_call_output' item.")
	}
	m := Message{Role: "tool", ToolCallID: it.CallID}
	if it.Output[0] == '"' {
		var s string
		if err := respUnmarshal(it.Output, param+".output", &s); err != nil {
			return Message{}, err
		}
		m.Content = TextContent(s)
		return m, nil
	}
	if it.Output[0] != '[' {
		return Message{}, respNotStringOrArray(param + ".output")
	}
	var raws []json.RawMessage
	if err := respUnmarshal(it.Output, param+".output", &raws); err != nil {
		return Message{}, err
	}
	parts := make([]Part, 0, len(raws))
	for j, rawPart := range raws {
		pp := fmt.Sprintf("%s.output[%d]", param, j)
		var p responsesPart
		if err := respUnmarshal(rawPart, pp, &p); err != nil {
			return Message{}, err
		}
		// Chat tool messages carry text only.
		part, err := respDecodePart(&p, pp, false)
		if err != nil {
			return Message{}, err
		}
		parts = append(parts, part)
	}
	m.Content = PartsContent(parts...)
	return m, nil
}

// respDecodeToolChoice reads tool_choice. allowed_tools narrows tools to the
// functions it lists, so the result comes with the (possibly narrowed)
// tool list.
func respDecodeToolChoice(raw json.RawMessage, tools []Tool) (*ToolChoice, []Tool, error) {
	if raw[0] == '"' {
		var mode string
		if err := respUnmarshal(raw, "tool_choice", &mode); err != nil {
			return nil, nil, err
		}
		switch mode {
		case "auto", "none", "required":
			return &ToolChoice{Mode: mode}, tools, nil
		}
		return nil, nil, Invalid("tool_choice", "Invalid value for 'tool_choice': %q. Supported values are: 'none', 'auto' and 'required', or an object.", mode)
	}
	var obj struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		Mode      string `json:"mode"`
		Tools     []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := respUnmarshal(raw, "tool_choice", &obj); err != nil {
		return nil, nil, err
	}
	switch obj.Type {
	case "function":
		if obj.Name == "" {
			return nil, nil, Invalid("tool_choice.name", "'tool_choice.name' is required when 'tool_choice.type' is 'function'.")
		}
		if obj.Namespace != "" {
			obj.Name = respFlatName(obj.Namespace, obj.Name)
		}
		return &ToolChoice{Mode: "function", Function: obj.Name}, tools, nil
	case "allowed_tools":
		if obj.Mode != "auto" && obj.Mode != "required" {
			return nil, nil, Invalid("tool_choice.mode", "Invalid value for 'tool_choice.mode': %q. Supported values are: 'auto' and 'required'.", obj.Mode)
		}
		allowed := make(map[string]bool, len(obj.Tools))
		for i, t := range obj.Tools {
			if t.Type != "function" {
				return nil, nil, Invalid(fmt.Sprintf("tool_choice.tools[%d].type", i), "Tools of type %q are not supported by this gateway: it offers function tools only.", t.Type)
			}
			if !respHasTool(tools, t.Name) {
				return nil, nil, Invalid(fmt.Sprintf("tool_choice.tools[%d].name", i), "'tool_choice' allows the function %q, which is not in 'tools'.", t.Name)
			}
			allowed[t.Name] = true
		}
		narrowed := make([]Tool, 0, len(allowed))
		for _, t := range tools {
			if allowed[t.Function.Name] {
				narrowed = append(narrowed, t)
			}
		}
		return &ToolChoice{Mode: obj.Mode}, narrowed, nil
	case "":
		return nil, nil, Invalid("tool_choice.type", "'tool_choice.type' is required.")
	default:
		return nil, nil, Invalid("tool_choice.type", "'tool_choice' of type %q is not supported by this gateway: it offers function tools only.", obj.Type)
	}
}

func respHasTool(tools []Tool, name string) bool {
	for _, t := range tools {
		if t.Function.Name == name {
			return true
		}
	}
	return false
}

// respUnmarshal decodes raw into v, turning JSON errors into a 400 that
// names the offending field (param is the path of raw in the request).
func respUnmarshal(raw []byte, param string, v any) error {
	err := json.Unmarshal(raw, v)
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		p := param
		if typeErr.Field != "" {
			if p != "" {
				p += "."
			}
			p += typeErr.Field
		}
		where := "the request"
		if p != "" {
			where = "'" + p + "'"
		}
		return Invalid(p, "Invalid type for %s: expected %s, got a JSON %s.", where, respJSONTypeName(typeErr.Type.Kind().String()), typeErr.Value)
	}
	if param == "" {
		return Invalid("", "The request body is not valid JSON: %v.", err)
	}
	return Invalid(param, "Invalid value for '%s': %v.", param, err)
}

// respNotStringOrArray refuses a field that must be a string or an array.
func respNotStringOrArray(param string) *Error {
	return Invalid(param, "Invalid type for '%s': expected a string or an array.", param)
}

// respJSONTypeName names a Go kind the way a JSON client would understand it.
func respJSONTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	default:
		return "another type"
	}
}

// respIsNull says raw is absent or JSON null.
func respIsNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// respIsObject says raw is a JSON object.
func respIsObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// ---------------------------------------------------------------------------
// The Response object
