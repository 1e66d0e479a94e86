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
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
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

// responsesEcho holds the request parameters a Response object reports,
// already in the Responses shape.
type responsesEcho struct {
	maxOutputTokens   *int64
	parallelToolCalls bool
	reasoningEffort   *string
	temperature       float64
	topP              float64
	textFormat        json.RawMessage
	toolChoice        json.RawMessage
	tools             []respTool
	user              *string
	metadata          json.RawMessage
	// namespaces maps a flattened tool's name to its namespace and name.
	namespaces map[string]NamespacedName
}

// respTool is a function tool as a Response object reports it.
type respTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// newResponsesEcho converts req's parameters back to the Responses shape;
// with req nil (or a parameter unset) it reports the API's defaults.
func newResponsesEcho(req *ChatRequest) responsesEcho {
	e := responsesEcho{
		parallelToolCalls: true,
		temperature:       1,
		topP:              1,
		textFormat:        json.RawMessage(`{"type":"text"}`),
		toolChoice:        json.RawMessage(`"auto"`),
		tools:             []respTool{},
		metadata:          json.RawMessage(`{}`),
	}
	if req == nil {
		return e
	}
	e.namespaces = req.ToolNamespaces
	if n := req.OutputLimit(); n != 0 {
		e.maxOutputTokens = &n
	}
	if req.ParallelToolCalls != nil {
		e.parallelToolCalls = *req.ParallelToolCalls
	}
	if req.ReasoningEffort != "" {
		effort := req.ReasoningEffort
		e.reasoningEffort = &effort
	}
	if req.Temperature != nil {
		e.temperature = *req.Temperature
	}
	if req.TopP != nil {
		e.topP = *req.TopP
	}
	if f := respEchoTextFormat(req.ResponseFormat); f != nil {
		e.textFormat = f
	}
	if tc := req.ToolChoice; tc != nil {
		var b []byte
		if tc.Function != "" {
			b, _ = respMarshal(map[string]string{"type": "function", "name": tc.Function})
		} else if tc.Mode != "" {
			b, _ = respMarshal(tc.Mode)
		}
		if b != nil {
			e.toolChoice = b
		}
	}
	for _, t := range req.Tools {
		rt := respTool{Type: "function", Name: t.Function.Name, Strict: t.Function.Strict}
		if t.Function.Description != "" {
			d := t.Function.Description
			rt.Description = &d
		}
		if !respIsNull(t.Function.Parameters) && json.Valid(t.Function.Parameters) {
			rt.Parameters = t.Function.Parameters
		}
		e.tools = append(e.tools, rt)
	}
	if req.User != "" {
		u := req.User
		e.user = &u
	}
	if respIsObject(req.Metadata) && json.Valid(req.Metadata) {
		e.metadata = req.Metadata
	}
	return e
}

// respEchoTextFormat converts a chat response_format back to text.format; nil
// when there is none or it cannot be read.
func respEchoTextFormat(rf json.RawMessage) json.RawMessage {
	if respIsNull(rf) {
		return nil
	}
	var f struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name        string          `json:"name"`
			Description string          `json:"description,omitempty"`
			Schema      json.RawMessage `json:"schema,omitempty"`
			Strict      *bool           `json:"strict,omitempty"`
		} `json:"json_schema"`
	}
	if json.Unmarshal(rf, &f) != nil {
		return nil
	}
	switch f.Type {
	case "json_object":
		return json.RawMessage(`{"type":"json_object"}`)
	case "json_schema":
		if f.JSONSchema == nil {
			return nil
		}
		b, err := respMarshal(struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description,omitempty"`
			Schema      json.RawMessage `json:"schema,omitempty"`
			Strict      *bool           `json:"strict,omitempty"`
		}{"json_schema", f.JSONSchema.Name, f.JSONSchema.Description, f.JSONSchema.Schema, f.JSONSchema.Strict})
		if err != nil {
			return nil
		}
		return b
	}
	return nil
}

// respObject is a Response object with the fields the API reference
// documents (and openai-go's responses.Response reads), in its order.
type respObject struct {
	ID                 string          `json:"id"`
	Object             string          `json:"object"`
	CreatedAt          int64           `json:"created_at"`
	Status             string          `json:"status"`
	Background         bool            `json:"background"`
	Error              *respError      `json:"error"`
	IncompleteDetails  *respIncomplete `json:"incomplete_details"`
	Instructions       *string         `json:"instructions"`
	MaxOutputTokens    *int64          `json:"max_output_tokens"`
	MaxToolCalls       *int64          `json:"max_tool_calls"`
	Model              string          `json:"model"`
	Output             []any           `json:"output"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Reasoning          respReasoning   `json:"reasoning"`
	Store              bool            `json:"store"`
	Temperature        float64         `json:"temperature"`
	Text               respTextConfig  `json:"text"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Tools              []respTool      `json:"tools"`
	TopP               float64         `json:"top_p"`
	Truncation         string          `json:"truncation"`
	Usage              *respUsage      `json:"usage"`
	User               *string         `json:"user"`
	Metadata           json.RawMessage `json:"metadata"`
}

type respError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type respIncomplete struct {
	Reason string `json:"reason"`
}

type respReasoning struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

type respTextConfig struct {
	Format json.RawMessage `json:"format"`
}

type respUsage struct {
	InputTokens         int64             `json:"input_tokens"`
	InputTokensDetails  respInputDetails  `json:"input_tokens_details"`
	OutputTokens        int64             `json:"output_tokens"`
	OutputTokensDetails respOutputDetails `json:"output_tokens_details"`
	TotalTokens         int64             `json:"total_tokens"`
}

type respInputDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

type respOutputDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// respMessageItem is an output message.
type respMessageItem struct {
	ID      string `json:"id"`
	Type    string `json:"type"` // "message"
	Status  string `json:"status"`
	Content []any  `json:"content"`
	Role    string `json:"role"` // "assistant"
}

// respTextPart is an output_text content part.
type respTextPart struct {
	Type        string `json:"type"` // "output_text"
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
	Text        string `json:"text"`
}

// respRefusalPart is a refusal content part.
type respRefusalPart struct {
	Type    string `json:"type"` // "refusal"
	Refusal string `json:"refusal"`
}

// respCallItem is a function_call output item.
type respCallItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"` // "function_call"
	Status    string `json:"status"`
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

func newRespTextPart(text string) respTextPart {
	return respTextPart{Type: "output_text", Annotations: []any{}, Logprobs: []any{}, Text: text}
}

// newResponseObject returns a Response object with the echoed parameters
// and no output.
func (e *responsesEcho) newResponseObject(id string, createdAt int64, model, status string) *respObject {
	return &respObject{
		ID:                id,
		Object:            "response",
		CreatedAt:         createdAt,
		Status:            status,
		MaxOutputTokens:   e.maxOutputTokens,
		Model:             model,
		Output:            []any{},
		ParallelToolCalls: e.parallelToolCalls,
		Reasoning:         respReasoning{Effort: e.reasoningEffort},
		Temperature:       e.temperature,
		Text:              respTextConfig{Format: e.textFormat},
		ToolChoice:        e.toolChoice,
		Tools:             e.tools,
		TopP:              e.topP,
		Truncation:        "disabled",
		User:              e.user,
		Metadata:          e.metadata,
	}
}

// respUsageFrom converts canonical usage; nil stays nil (JSON null).
func respUsageFrom(u *Usage) *respUsage {
	if u == nil {
		return nil
	}
	total := u.TotalTokens
	if total == 0 {
		total = u.PromptTokens + u.CompletionTokens
	}
	return &respUsage{
		InputTokens:        u.PromptTokens,
		InputTokensDetails: respInputDetails{CachedTokens: u.Cached()},
		OutputTokens:       u.CompletionTokens,
		TotalTokens:        total,
	}
}

// respIncompleteReason maps a finish reason to the Response's incomplete
// reason, or "" when the response completed.
func respIncompleteReason(finish string) string {
	switch finish {
	case FinishLength:
		return "max_output_tokens"
	case FinishContentFilter:
		return "content_filter"
	}
	return ""
}

// respIDs derives the Response's id and the base of its items' ids
// from the upstream's id, so that logs correlate; an upstream without one
// gets a random id.
func respIDs(upstreamID string) (respID, base string) {
	base = upstreamID
	for _, prefix := range []string{"chatcmpl-", "chatcmpl_", "resp_", "msg_"} {
		base = strings.TrimPrefix(base, prefix)
	}
	if base == "" {
		var b [24]byte
		_, _ = rand.Read(b[:])
		base = hex.EncodeToString(b[:])
	}
	return "resp_" + base, base
}

// respMessageID and respCallID name output items; n counts the
// items of that kind before this one.
func respMessageID(base string, n int) string {
	if n == 0 {
		return "msg_" + base
	}
	return "msg_" + base + "_" + strconv.Itoa(n)
}

func respCallID(base string, n int) string {
	return "fc_" + base + "_" + strconv.Itoa(n)
}

// EncodeResponse writes a canonical answer as a Response object. Only the
// first choice is used: the Responses API has no "n".
func (in responsesInbound) EncodeResponse(resp *ChatResponse) ([]byte, error) {
	if resp == nil {
		return nil, errors.New("translate: no response to encode")
	}
	id, base := respIDs(resp.ID)
	created := resp.Created
	if created == 0 {
		created = time.Now().Unix()
	}
	obj := in.echo.newResponseObject(id, created, resp.Model, "completed")
	obj.Usage = respUsageFrom(resp.Usage)

	var choice *Choice
	for i := range resp.Choices {
		if resp.Choices[i].Index == 0 {
			choice = &resp.Choices[i]
			break
		}
	}
	if choice == nil {
		return respMarshal(obj)
	}
	if reason := respIncompleteReason(choice.FinishReason); reason != "" {
		obj.Status = "incomplete"
		obj.IncompleteDetails = &respIncomplete{Reason: reason}
	}

	msg := &choice.Message
	text := msg.Content.String()
	if text != "" || msg.Refusal != "" || len(msg.ToolCalls) == 0 {
		content := []any{}
		if text != "" || msg.Refusal == "" {
			content = append(content, newRespTextPart(text))
		}
		if msg.Refusal != "" {
			content = append(content, respRefusalPart{Type: "refusal", Refusal: msg.Refusal})
		}
		obj.Output = append(obj.Output, respMessageItem{
			ID: respMessageID(base, 0), Type: "message", Status: "completed", Content: content, Role: "assistant",
		})
	}
	for i, tc := range msg.ToolCalls {
		name, ns := in.echo.callName(tc.Function.Name)
		obj.Output = append(obj.Output, respCallItem{
			ID: respCallID(base, i), Type: "function_call", Status: "completed",
			Arguments: tc.Function.Arguments, CallID: tc.ID, Name: name, Namespace: ns,
		})
	}
	if obj.Status == "incomplete" && len(obj.Output) > 0 {
		// The item the model was writing when it stopped is cut short.
		switch it := obj.Output[len(obj.Output)-1].(type) {
		case respMessageItem:
			it.Status = "incomplete"
			obj.Output[len(obj.Output)-1] = it
		case respCallItem:
			it.Status = "incomplete"
			obj.Output[len(obj.Output)-1] = it
		}
	}
	return respMarshal(obj)
}

// EncodeError writes e as OpenAI's error body.
func (responsesInbound) EncodeError(e *Error) []byte {
	return respEncodeError(e)
}

// respEncodeError writes {"error":{"message","type","param","code"}},
// with param and code null when unset.
func respEncodeError(e *Error) []byte {
	if e == nil {
		e = &Error{Status: http.StatusInternalServerError, Message: "unknown error"}
	}
	typ := e.Type
	if typ == "" {
		typ = "api_error"
		if e.Status >= 400 && e.Status < 500 {
			typ = "invalid_request_error"
		}
	}
	b, err := respMarshal(struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}{Error: struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}{e.Message, typ, respOptString(e.Param), respOptString(e.Code)}})
	if err != nil {
		return []byte(`{"error":{"message":"internal error","type":"api_error","param":null,"code":null}}`)
	}
	return b
}

func respOptString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// respMarshal marshals without escaping <, > and & (as the OpenAI API
// writes JSON).
func respMarshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// ---------------------------------------------------------------------------
// Streaming

// NewStreamEncoder writes a canonical stream as Responses streaming events.
func (in responsesInbound) NewStreamEncoder(w io.Writer, model string) StreamEncoder {
	return &responsesStream{w: w, model: model, echo: in.echo, toolItems: map[int]*respStreamItem{}}
}

// respStreamItem is an output item being streamed.
type respStreamItem struct {
	isCall bool
	index  int // output_index
	id     string
	status string // in_progress, completed, incomplete
	// Message items: the content parts so far; the last is open while
	// partOpen.
	parts    []respStreamPart
	partOpen bool
	// Function call items.
	callID, name string
	namespace    string          // the client's namespace of the function, if any
	args         strings.Builder // the arguments written as deltas so far
	held         []string        // pieces received while not shown, in order
	shown        bool            // output_item.added written
	sealed       bool            // can get no more pieces: finish it when it comes first
	closed       bool            // finished (or failed): later pieces are dropped
}

type respStreamPart struct {
	refusal bool
	text    strings.Builder
}

// wire returns the item as the Response object and events show it.
func (it *respStreamItem) wire() any {
	if it.isCall {
		return respCallItem{ID: it.id, Type: "function_call", Status: it.status,
			Arguments: it.args.String(), CallID: it.callID, Name: it.name, Namespace: it.namespace}
	}
	content := make([]any, 0, len(it.parts))
	for i := range it.parts {
		content = append(content, it.parts[i].wire())
	}
	return respMessageItem{ID: it.id, Type: "message", Status: it.status, Content: content, Role: "assistant"}
}

func (p *respStreamPart) wire() any {
	if p.refusal {
		return respRefusalPart{Type: "refusal", Refusal: p.text.String()}
	}
	return newRespTextPart(p.text.String())
}

// responsesStream turns canonical chunks into Responses events: the
// response is created on the first chunk; text opens a message item,
// each tool call a function_call item; Close reports the whole response.
//
// Items are streamed one after the other, in output order, as the
// Responses API streams them: the events of one item (output_item.added,
// its deltas, its .done events, output_item.done) are never interleaved
// with another item's. A message item is finished when a tool call starts
// or the choice finishes.
//
// Function_call items stay open until the choice finishes, because an
// upstream may interleave the pieces of parallel tool calls (a piece for
// call 0 after call 1 started). Of the open calls, the first in output
// order is shown: its output_item.added and then a delta for each piece
// are written as the pieces arrive. The pieces of the later open calls
// are held; a call is shown (output_item.added, then one delta for each
// held piece, in the order received) when the calls before it are
// finished, and streams live from then on. So every piece becomes a
// delta of its own item, and each call's function_call_arguments.done and
// output_item.done carry all its arguments, which the final Response
// repeats. When calls arrive one after the other (the usual case) the
// events are exactly those of finishing each call when the next starts;
// only the later calls' events come later, when the choice finishes. (A
// stream that fails is the exception: its earlier calls were still open,
// so they are not done but incomplete, like the last.)
//
// Open calls are finished, in output order, when the choice finishes
// (finish_reason), at Close, and when text or a refusal arrives: a
// message item does not start while calls are open, and the calls before
// it are taken as complete (an upstream rarely sends text after tool
// calls). A call whose tool-call index is taken by a new call (an upstream
// that numbers every call 0 and tells them apart by id) can get no more
// pieces, so it is finished as soon as it is the first open call. Fail
// shows the held calls and marks every open item incomplete, finishing
// none.
type responsesStream struct {
	w     io.Writer
	model string
	echo  responsesEcho

	started   bool
	done      bool
	seq       int
	id, base  string
	createdAt int64

	items     []*respStreamItem
	msg       *respStreamItem         // the open message item, nil if none
	open      []*respStreamItem       // the open function_call items, in output order
	last      *respStreamItem         // the item that got the latest content
	toolItems map[int]*respStreamItem // canonical tool-call index -> its (latest) call
	messages  int                     // message items so far
	calls     int                     // function_call items so far
	finish    string
	usage     *Usage
}

// event payloads; respEvHeader comes first in each.
type respEvHeader struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
}

func (h *respEvHeader) header() *respEvHeader { return h }

type respEvent interface{ header() *respEvHeader }

type respEvResponse struct {
	respEvHeader
	Response *respObject `json:"response"`
}

type respEvItem struct {
	respEvHeader
	OutputIndex int `json:"output_index"`
	Item        any `json:"item"`
}

type respEvPart struct {
	respEvHeader
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Part         any    `json:"part"`
}

type respEvTextDelta struct {
	respEvHeader
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Delta        string `json:"delta"`
	Logprobs     []any  `json:"logprobs"`
}

type respEvTextDone struct {
	respEvHeader
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Text         string `json:"text"`
	Logprobs     []any  `json:"logprobs"`
}

type respEvRefusalDelta struct {
	respEvHeader
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Delta        string `json:"delta"`
}

type respEvRefusalDone struct {
	respEvHeader
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Refusal      string `json:"refusal"`
}

type respEvArgsDelta struct {
	respEvHeader
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Delta       string `json:"delta"`
}

type respEvArgsDone struct {
	respEvHeader
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Name        string `json:"name"`
	Arguments   string `json:"arguments"`
}

type respEvError struct {
	respEvHeader
	Code    *string `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
}

// emit writes one event as "event: <type>\ndata: <json>\n\n".
func (s *responsesStream) emit(typ string, ev respEvent) error {
	h := ev.header()
	h.Type, h.SequenceNumber = typ, s.seq
	s.seq++
	data, err := respMarshal(ev)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, len(typ)+len(data)+16)
	buf = append(buf, "event: "...)
	buf = append(buf, typ...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	_, err = s.w.Write(buf)
	return err
}

// snapshot returns the Response object as it stands.
func (s *responsesStream) snapshot(status string) *respObject {
	obj := s.echo.newResponseObject(s.id, s.createdAt, s.model, status)
	for _, it := range s.items {
		obj.Output = append(obj.Output, it.wire())
	}
	return obj
}

// start emits response.created and response.in_progress once.
func (s *responsesStream) start(c *Chunk) error {
	if s.started {
		return nil
	}
	s.started = true
	upstreamID := ""
	if c != nil {
		upstreamID = c.ID
		if s.model == "" {
			s.model = c.Model
		}
		s.createdAt = c.Created
	}
	s.id, s.base = respIDs(upstreamID)
	if s.createdAt == 0 {
		s.createdAt = time.Now().Unix()
	}
	if err := s.emit("response.created", &respEvResponse{Response: s.snapshot("in_progress")}); err != nil {
		return err
	}
	return s.emit("response.in_progress", &respEvResponse{Response: s.snapshot("in_progress")})
}

// WriteChunk writes the events for one chunk.
func (s *responsesStream) WriteChunk(c *Chunk) error {
	if s.done {
		return errors.New("translate: chunk written after the Responses stream ended")
	}
	if c == nil {
		return nil
	}
	if err := s.start(c); err != nil {
		return err
	}
	if c.Usage != nil {
		s.usage = c.Usage
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // the Responses API has one answer per response
		}
		if err := s.writeDelta(&ch.Delta); err != nil {
			return err
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finish = *ch.FinishReason
			if err := s.closeOpen(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *responsesStream) writeDelta(d *Delta) error {
	if d.Content != nil && *d.Content != "" {
		if err := s.writeMessageDelta(false, *d.Content); err != nil {
			return err
		}
	}
	if d.Refusal != nil && *d.Refusal != "" {
		if err := s.writeMessageDelta(true, *d.Refusal); err != nil {
			return err
		}
	}
	for i := range d.ToolCalls {
		if err := s.writeToolCallDelta(&d.ToolCalls[i], i); err != nil {
			return err
		}
	}
	return nil
}

// writeMessageDelta adds text (or refusal text) to the open message item,
// opening the item and the content part as needed.
func (s *responsesStream) writeMessageDelta(refusal bool, delta string) error {
	// A message does not start while calls are open: they are finished
	// first (see responsesStream).
	if err := s.closeCalls(); err != nil {
		return err
	}
	if s.msg == nil {
		it := &respStreamItem{index: len(s.items), id: respMessageID(s.base, s.messages), status: "in_progress"}
		s.messages++
		s.items = append(s.items, it)
		s.msg = it
		if err := s.emit("response.output_item.added", &respEvItem{OutputIndex: it.index, Item: it.wire()}); err != nil {
			return err
		}
	}
	it := s.msg
	s.last = it
	if it.partOpen && it.parts[len(it.parts)-1].refusal != refusal {
		if err := s.closePart(it); err != nil {
			return err
		}
	}
	if !it.partOpen {
		it.parts = append(it.parts, respStreamPart{refusal: refusal})
		it.partOpen = true
		p := &it.parts[len(it.parts)-1]
		if err := s.emit("response.content_part.added", &respEvPart{ItemID: it.id, OutputIndex: it.index,
			ContentIndex: len(it.parts) - 1, Part: p.wire()}); err != nil {
			return err
		}
	}
	ci := len(it.parts) - 1
	it.parts[ci].text.WriteString(delta)
	if refusal {
		return s.emit("response.refusal.delta", &respEvRefusalDelta{ItemID: it.id, OutputIndex: it.index, ContentIndex: ci, Delta: delta})
	}
	return s.emit("response.output_text.delta", &respEvTextDelta{ItemID: it.id, OutputIndex: it.index, ContentIndex: ci, Delta: delta, Logprobs: []any{}})
}

// writeToolCallDelta adds a piece of a tool call. pos is its place in the
// chunk's tool_calls, the key when the upstream sent no index. The piece
// is written as a delta at once if its call is shown, or held until it is
// (see responsesStream).
func (s *responsesStream) writeToolCallDelta(tc *ToolCall, pos int) error {
	key := pos
	if tc.Index != nil {
		key = *tc.Index
	}
	it := s.toolItems[key]
	// An upstream that numbers every call 0 still names each new one.
	if it == nil || tc.ID != "" && it.callID != "" && tc.ID != it.callID {
		if err := s.closeMessage(); err != nil {
			return err
		}
		if it != nil {
			it.sealed = true // its key now names the new call
		}
		it = &respStreamItem{isCall: true, index: len(s.items), id: respCallID(s.base, s.calls), status: "in_progress",
			callID: tc.ID}
		it.name, it.namespace = s.echo.callName(tc.Function.Name)
		s.calls++
		s.items = append(s.items, it)
		s.toolItems[key] = it
		s.open = append(s.open, it)
	} else if it.closed {
		// A piece for a call already finished: text came between its
		// pieces, or it came after the choice finished. Its
		// output_item.done is written and cannot be taken back, so the
		// piece is dropped, from the final Response too, which stays
		// what the events said.
		return nil
	}
	s.last = it
	if it.callID == "" {
		it.callID = tc.ID
	}
	if it.name == "" {
		it.name, it.namespace = s.echo.callName(tc.Function.Name)
	}
	if a := tc.Function.Arguments; a != "" {
		if !it.shown {
			it.held = append(it.held, a)
		} else {
			it.args.WriteString(a)
			if err := s.emit("response.function_call_arguments.delta", &respEvArgsDelta{ItemID: it.id, OutputIndex: it.index, Delta: a}); err != nil {
				return err
			}
		}
	}
	return s.settle()
}

// settle shows the first open call and, while it is sealed, finishes it
// and goes on with the next.
func (s *responsesStream) settle() error {
	for len(s.open) > 0 {
		it := s.open[0]
		if err := s.showCall(it); err != nil {
			return err
		}
		if !it.sealed {
			return nil
		}
		s.open = s.open[1:]
		if err := s.closeCall(it); err != nil {
			return err
		}
	}
	return nil
}

// showCall writes a call's output_item.added, if not yet written, and a
// delta for each piece held.
func (s *responsesStream) showCall(it *respStreamItem) error {
	if !it.shown {
		it.shown = true
		if err := s.emit("response.output_item.added", &respEvItem{OutputIndex: it.index, Item: it.wire()}); err != nil {
			return err
		}
	}
	held := it.held
	it.held = nil
	for _, a := range held {
		it.args.WriteString(a)
		if err := s.emit("response.function_call_arguments.delta", &respEvArgsDelta{ItemID: it.id, OutputIndex: it.index, Delta: a}); err != nil {
			return err
		}
	}
	return nil
}

// closeCall finishes a shown call.
func (s *responsesStream) closeCall(it *respStreamItem) error {
	it.closed = true
	if err := s.emit("response.function_call_arguments.done", &respEvArgsDone{ItemID: it.id, OutputIndex: it.index,
		Name: it.name, Arguments: it.args.String()}); err != nil {
		return err
	}
	it.status = s.doneStatus(it)
	return s.emit("response.output_item.done", &respEvItem{OutputIndex: it.index, Item: it.wire()})
}

// closeCalls finishes the open calls, in output order.
func (s *responsesStream) closeCalls() error {
	for _, it := range s.open {
		it.sealed = true
	}
	return s.settle()
}

// closeMessage finishes the open message item.
func (s *responsesStream) closeMessage() error {
	it := s.msg
	if it == nil {
		return nil
	}
	if err := s.closePart(it); err != nil {
		return err
	}
	s.msg = nil
	it.closed = true
	it.status = s.doneStatus(it)
	return s.emit("response.output_item.done", &respEvItem{OutputIndex: it.index, Item: it.wire()})
}

// closeOpen finishes the open items (a message, or calls).
func (s *responsesStream) closeOpen() error {
	if err := s.closeMessage(); err != nil {
		return err
	}
	return s.closeCalls()
}

// doneStatus is the status of an item being finished: when the choice
// stopped short (length, content filter), the item the model was writing
// (the one that got the latest content) is incomplete, as the last item
// of a Response that is not streamed is; the others are completed.
func (s *responsesStream) doneStatus(it *respStreamItem) string {
	if it == s.last && respIncompleteReason(s.finish) != "" {
		return "incomplete"
	}
	return "completed"
}

// closePart finishes the open content part of a message item.
func (s *responsesStream) closePart(it *respStreamItem) error {
	if !it.partOpen {
		return nil
	}
	it.partOpen = false
	ci := len(it.parts) - 1
	p := &it.parts[ci]
	var err error
	if p.refusal {
		err = s.emit("response.refusal.done", &respEvRefusalDone{ItemID: it.id, OutputIndex: it.index, ContentIndex: ci, Refusal: p.text.String()})
	} else {
		err = s.emit("response.output_text.done", &respEvTextDone{ItemID: it.id, OutputIndex: it.index, ContentIndex: ci, Text: p.text.String(), Logprobs: []any{}})
	}
	if err != nil {
		return err
	}
	return s.emit("response.content_part.done", &respEvPart{ItemID: it.id, OutputIndex: it.index, ContentIndex: ci, Part: p.wire()})
}

// Close finishes the open items and writes response.completed, or
// response.incomplete when the answer stopped short, with the whole
// Response and its usage.
func (s *responsesStream) Close(usage *Usage) error {
	if s.done {
		return nil
	}
	if err := s.start(nil); err != nil {
		return err
	}
	if err := s.closeOpen(); err != nil {
		return err
	}
	if len(s.items) == 0 {
		// An empty answer is still one (empty) message, as in a
		// non-streamed Response.
		if err := s.writeEmptyMessage(); err != nil {
			return err
		}
	}
	s.done = true
	if usage == nil {
		usage = s.usage
	}
	typ, status := "response.completed", "completed"
	var details *respIncomplete
	if reason := respIncompleteReason(s.finish); reason != "" {
		typ, status = "response.incomplete", "incomplete"
		details = &respIncomplete{Reason: reason}
	}
	obj := s.snapshot(status)
	obj.IncompleteDetails = details
	obj.Usage = respUsageFrom(usage)
	return s.emit(typ, &respEvResponse{Response: obj})
}

// writeEmptyMessage writes the events of a message item with empty text.
func (s *responsesStream) writeEmptyMessage() error {
	it := &respStreamItem{index: len(s.items), id: respMessageID(s.base, s.messages), status: "in_progress"}
	s.messages++
	s.items = append(s.items, it)
	s.msg, s.last = it, it
	if err := s.emit("response.output_item.added", &respEvItem{OutputIndex: it.index, Item: it.wire()}); err != nil {
		return err
	}
	it.parts = append(it.parts, respStreamPart{})
	it.partOpen = true
	if err := s.emit("response.content_part.added", &respEvPart{ItemID: it.id, OutputIndex: it.index, ContentIndex: 0, Part: it.parts[0].wire()}); err != nil {
		return err
	}
	return s.closeMessage()
}

// Fail writes an "error" event and then response.failed with the
// Response as it stood: the calls held are shown first (so that the
// events add every item the Response holds), and the open items are
// marked incomplete, none finished.
func (s *responsesStream) Fail(e *Error) error {
	if s.done {
		return nil
	}
	if e == nil {
		e = &Error{Status: http.StatusInternalServerError, Message: "The stream failed."}
	}
	if err := s.start(nil); err != nil {
		return err
	}
	s.done = true
	for _, it := range s.open {
		if err := s.showCall(it); err != nil {
			return err
		}
	}
	open := s.open
	if s.msg != nil {
		open = []*respStreamItem{s.msg} // a message and calls are never open together
	}
	for _, it := range open {
		it.status = "incomplete"
		it.partOpen = false
		it.closed = true
	}
	s.msg, s.open = nil, nil
	code := e.Code
	if code == "" {
		code = e.Type
	}
	if err := s.emit("error", &respEvError{Code: respOptString(code), Message: e.Message, Param: respOptString(e.Param)}); err != nil {
		return err
	}
	obj := s.snapshot("failed")
	obj.Error = &respError{Code: respFailedCode(e), Message: e.Message}
	obj.Usage = respUsageFrom(s.usage)
	return s.emit("response.failed", &respEvResponse{Response: obj})
}

// respFailedCode maps an error to the codes the API documents for a failed
// Response's error (server_error, rate_limit_exceeded, invalid_prompt,
// ...).
func respFailedCode(e *Error) string {
	switch e.Kind {
	case KindRateLimited, KindQuotaExhausted:
		return "rate_limit_exceeded"
	case KindInvalidRequest, KindContextOverflow:
		return "invalid_prompt"
	}
	if e.Status == http.StatusTooManyRequests {
		return "rate_limit_exceeded"
	}
	return "server_error"
}
