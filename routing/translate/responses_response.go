package translate

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

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
