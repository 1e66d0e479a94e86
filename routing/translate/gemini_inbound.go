package translate

// Google's Gemini API (generateContent, streamGenerateContent) as an
// inbound format, so that Gemini CLI and the @google/genai SDK can use the
// gateway with a base-URL switch, on routes of any provider kind.
//
// The model and whether to stream come from the URL
// (/v1beta/models/{model}:generateContent or :streamGenerateContent); the
// proxy passes them in the body as the members "model" and "stream",
// which the Gemini API does not have.
//
// What the decoder does with each field:
//
//   - contents: role "user" → user, "model" → assistant; text parts;
//     inlineData and fileData images (image/* MIME types) as image parts;
//     functionCall parts (model turns) as tool calls, with the part's id or
//     a generated one; functionResponse parts (user turns) as tool messages
//     answering the call of that id, else the oldest unanswered call of
//     that name; thought parts and thoughtSignatures are dropped (they
//     belong to the model that wrote them).
//   - systemInstruction → a leading system message (its text parts).
//   - tools: functionDeclarations → function tools (parameters, in
//     Gemini's OpenAPI subset with upper-case type names, become JSON
//     Schema; parametersJsonSchema is taken as it is). Refused with a 400:
//     googleSearch, codeExecution, urlContext and the other built-in tools
//     (the answer would lack what they add), non-image inline data and
//     files, candidateCount > 1.
//   - toolConfig.functionCallingConfig: NONE → none, AUTO → auto, ANY →
//     required (one allowed function: that function; several: required
//     over those).
//   - generationConfig: maxOutputTokens, temperature, topP, topK,
//     stopSequences, seed, presencePenalty, frequencyPenalty are carried;
//     responseMimeType application/json → json_object, with
//     responseSchema or responseJsonSchema → json_schema; thinkingConfig,
//     responseModalities and the other settings are dropped.
//   - safetySettings, cachedContent and labels are dropped.
//
// Answers are GenerateContentResponses (text and functionCall parts, the
// finish reason, usageMetadata); streams are server-sent events of them
// (alt=sse), a functionCall part whole in the event after its arguments
// are complete; errors are google.rpc.Status bodies.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// GeminiInbound is the Gemini API as an inbound format.
var GeminiInbound Inbound = geminiInbound{}

type geminiInbound struct{}

// geminiRequestIn is a client's generateContent request, with the members
// the proxy adds from the URL.
type geminiRequestIn struct {
	Model             string                       `json:"model"`
	Stream            bool                         `json:"stream"`
	Contents          []geminiContentIn            `json:"contents"`
	SystemInstruction *geminiContentIn             `json:"systemInstruction"`
	Tools             []map[string]json.RawMessage `json:"tools"`
	ToolConfig        *geminiToolConfig            `json:"toolConfig"`
	GenerationConfig  *geminiGenConfigIn           `json:"generationConfig"`
}

type geminiContentIn struct {
	Role  string         `json:"role"`
	Parts []geminiPartIn `json:"parts"`
}

type geminiPartIn struct {
	Text             *string               `json:"text"`
	Thought          bool                  `json:"thought"`
	InlineData       *geminiBlob           `json:"inlineData"`
	FileData         *geminiFileData       `json:"fileData"`
	FunctionCall     *geminiFunctionCall   `json:"functionCall"`
	FunctionResponse *geminiFunctionRespIn `json:"functionResponse"`
}

type geminiFunctionRespIn struct {
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type geminiDeclIn struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description"`
	Parameters           json.RawMessage `json:"parameters"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
}

type geminiGenConfigIn struct {
	StopSequences      []string        `json:"stopSequences"`
	ResponseMimeType   string          `json:"responseMimeType"`
	ResponseSchema     json.RawMessage `json:"responseSchema"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
	CandidateCount     *int64          `json:"candidateCount"`
	MaxOutputTokens    *int64          `json:"maxOutputTokens"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"topP"`
	TopK               *int64          `json:"topK"`
	Seed               *int64          `json:"seed"`
	PresencePenalty    *float64        `json:"presencePenalty"`
	FrequencyPenalty   *float64        `json:"frequencyPenalty"`
}

// geminiInvalid is a 400 naming the field, as Google's messages do.
func geminiInvalid(param, format string, args ...any) *Error {
	return Invalid(param, "Invalid value at '%s': %s", param, fmt.Sprintf(format, args...))
}

// DecodeRequest reads a generateContent request.
func (geminiInbound) DecodeRequest(body []byte) (*ChatRequest, error) {
	var in geminiRequestIn
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, Invalid("", "Invalid JSON payload received: %v", err)
	}
	if in.Model == "" {
		return nil, geminiInvalid("model", "the model is required")
	}
	if len(in.Contents) == 0 {
		return nil, geminiInvalid("contents", "contents is not specified")
	}
	out := &ChatRequest{Model: strings.TrimPrefix(in.Model, "models/"), Stream: in.Stream}
	if in.Stream {
		out.StreamOptions = &StreamOptions{IncludeUsage: true}
	}
	if si := in.SystemInstruction; si != nil {
		var text strings.Builder
		for _, p := range si.Parts {
			if p.Text != nil {
				text.WriteString(*p.Text)
			}
		}
		if text.Len() > 0 {
			out.Messages = append(out.Messages, Message{Role: "system", Content: TextContent(text.String())})
		}
	}
	msgs, err := geminiDecodeContents(in.Contents)
	if err != nil {
		return nil, err
	}
	out.Messages = append(out.Messages, msgs...)
	if err := geminiDecodeTools(in.Tools, out); err != nil {
		return nil, err
	}
	if tc := in.ToolConfig; tc != nil {
		geminiDecodeToolConfig(&tc.FunctionCallingConfig, out)
	}
	if g := in.GenerationConfig; g != nil {
		if err := geminiDecodeGeneration(g, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// geminiCalls pairs function responses with the calls they answer.
type geminiCalls struct {
	n       int
	pending map[string][]string // name → ids of unanswered calls, oldest first
}

func (c *geminiCalls) call(fc *geminiFunctionCall) string {
	id := fc.ID
	if id == "" {
		c.n++
		id = "call_" + strconv.Itoa(c.n)
	}
	c.pending[fc.Name] = append(c.pending[fc.Name], id)
	return id
}

func (c *geminiCalls) answer(fr *geminiFunctionRespIn) string {
	q := c.pending[fr.Name]
	if fr.ID != "" {
		for i, id := range q {
			if id == fr.ID {
				c.pending[fr.Name] = append(q[:i:i], q[i+1:]...)
				break
			}
		}
		return fr.ID
	}
	if len(q) == 0 {
		c.n++
		return "call_" + strconv.Itoa(c.n)
	}
	c.pending[fr.Name] = q[1:]
	return q[0]
}

func geminiDecodeContents(contents []geminiContentIn) ([]Message, error) {
	calls := &geminiCalls{pending: map[string][]string{}}
	var out []Message
	for i, c := range contents {
		path := fmt.Sprintf("contents[%d]", i)
		switch c.Role {
		case "model":
			m := Message{Role: "assistant"}
			var text strings.Builder
			for _, p := range c.Parts {
				switch {
				case p.Thought:
				case p.FunctionCall != nil:
					args := string(bytes.TrimSpace(p.FunctionCall.Args))
					if args == "" || args == "null" {
						args = "{}"
					}
					m.ToolCalls = append(m.ToolCalls, ToolCall{ID: calls.call(p.FunctionCall), Type: "function",
						Function: FunctionCall{Name: p.FunctionCall.Name, Arguments: args}})
				case p.Text != nil:
					text.WriteString(*p.Text)
				}
			}
			m.Content = TextContent(text.String())
			if text.Len() == 0 && len(m.ToolCalls) > 0 {
				m.Content = Content{Null: true}
			}
			out = append(out, m)
		case "user", "":
			var parts []Part
			for j, p := range c.Parts {
				ppath := fmt.Sprintf("%s.parts[%d]", path, j)
				switch {
				case p.Thought:
				case p.FunctionResponse != nil:
					resp := bytes.TrimSpace(p.FunctionResponse.Response)
					if len(resp) == 0 {
						resp = []byte("{}")
					}
					out = append(out, Message{Role: "tool", ToolCallID: calls.answer(p.FunctionResponse), Content: TextContent(string(resp))})
				case p.Text != nil:
					parts = append(parts, Part{Type: "text", Text: *p.Text})
				case p.InlineData != nil:
					if !strings.HasPrefix(p.InlineData.MimeType, "image/") {
						return nil, geminiInvalid(ppath+".inlineData.mimeType", "only images can be sent through this gateway, not %q", p.InlineData.MimeType)
					}
					parts = append(parts, Part{Type: "image_url", ImageURL: &ImageURL{URL: "data:" + p.InlineData.MimeType + ";base64," + p.InlineData.Data}})
				case p.FileData != nil:
					if !strings.HasPrefix(p.FileData.MimeType, "image/") {
						return nil, geminiInvalid(ppath+".fileData.mimeType", "only image files can be sent through this gateway, not %q", p.FileData.MimeType)
					}
					parts = append(parts, Part{Type: "image_url", ImageURL: &ImageURL{URL: p.FileData.FileURI}})
				case p.FunctionCall != nil:
					return nil, geminiInvalid(ppath+".functionCall", "a functionCall part may only appear in a model turn")
				}
			}
			if len(parts) > 0 {
				out = append(out, Message{Role: "user", Content: PartsContent(parts...)})
			}
		default:
			return nil, geminiInvalid(path+".role", "role must be 'user' or 'model', not %q", c.Role)
		}
	}
	return out, nil
}

func geminiDecodeTools(tools []map[string]json.RawMessage, out *ChatRequest) error {
	for i, t := range tools {
		for kind, raw := range t {
			path := fmt.Sprintf("tools[%d].%s", i, kind)
			if kind != "functionDeclarations" {
				return geminiInvalid(path, "the built-in tool %s is not supported by this gateway; only functionDeclarations are", kind)
			}
			var decls []geminiDeclIn
			if err := json.Unmarshal(raw, &decls); err != nil {
				return geminiInvalid(path, "%v", err)
			}
			for j, d := range decls {
				if d.Name == "" {
					return geminiInvalid(fmt.Sprintf("%s[%d].name", path, j), "the function name is required")
				}
				params := d.ParametersJSONSchema
				if len(bytes.TrimSpace(params)) == 0 || string(bytes.TrimSpace(params)) == "null" {
					params = geminiSchemaToJSON(d.Parameters)
				}
				out.Tools = append(out.Tools, Tool{Type: "function", Function: FunctionDecl{Name: d.Name, Description: d.Description, Parameters: params}})
			}
		}
	}
	return nil
}

// geminiSchemaToJSON turns a Gemini (OpenAPI subset) schema into JSON
// Schema: type names in lower case. nil for none.
func geminiSchemaToJSON(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if s, ok := x["type"].(string); ok {
				x["type"] = strings.ToLower(s)
			}
			for k, c := range x {
				if k != "enum" && k != "required" {
					walk(c)
				}
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}

func geminiDecodeToolConfig(fc *geminiFunctionCallingConfig, out *ChatRequest) {
	switch strings.ToUpper(fc.Mode) {
	case "NONE":
		out.ToolChoice = &ToolChoice{Mode: "none"}
	case "ANY", "VALIDATED":
		if len(fc.AllowedFunctionNames) == 1 {
			out.ToolChoice = &ToolChoice{Mode: "function", Function: fc.AllowedFunctionNames[0]}
			return
		}
		out.ToolChoice = &ToolChoice{Mode: "required"}
		if len(fc.AllowedFunctionNames) > 1 {
			var kept []Tool
			for _, t := range out.Tools {
				for _, n := range fc.AllowedFunctionNames {
					if t.Function.Name == n {
						kept = append(kept, t)
					}
				}
			}
			out.Tools = kept
		}
	case "AUTO":
		out.ToolChoice = &ToolChoice{Mode: "auto"}
	}
}

func geminiDecodeGeneration(g *geminiGenConfigIn, out *ChatRequest) error {
	if g.CandidateCount != nil && *g.CandidateCount > 1 {
		return geminiInvalid("generationConfig.candidateCount", "only one candidate is supported by this gateway")
	}
	out.MaxTokens, out.Temperature, out.TopP, out.TopK, out.Seed = g.MaxOutputTokens, g.Temperature, g.TopP, g.TopK, g.Seed
	out.PresencePenalty, out.FrequencyPenalty = g.PresencePenalty, g.FrequencyPenalty
	if len(g.StopSequences) > 0 {
		out.Stop = g.StopSequences
	}
	if g.ResponseMimeType != "application/json" {
		return nil
	}
	schema := g.ResponseJSONSchema
	if len(bytes.TrimSpace(schema)) == 0 || string(bytes.TrimSpace(schema)) == "null" {
		schema = geminiSchemaToJSON(g.ResponseSchema)
	}
	if schema == nil {
		out.ResponseFormat = json.RawMessage(`{"type":"json_object"}`)
		return nil
	}
	rf, err := json.Marshal(map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "response", "schema": schema}})
	if err != nil {
		return geminiInvalid("generationConfig.responseSchema", "%v", err)
	}
	out.ResponseFormat = rf
	return nil
}

// --- answers ---

// geminiFinishOut is the finishReason of a canonical finish reason.
func geminiFinishOut(finish string) string {
	switch finish {
	case FinishLength:
		return "MAX_TOKENS"
	case FinishContentFilter:
		return "SAFETY"
	case "":
		return ""
	}
	return "STOP"
}

// geminiUsageOut is usageMetadata of canonical usage (nil for none).
func geminiUsageOut(u *Usage) *geminiUsage {
	if u == nil {
		return nil
	}
	return &geminiUsage{PromptTokenCount: u.PromptTokens, CandidatesTokenCount: u.CompletionTokens,
		TotalTokenCount: u.PromptTokens + u.CompletionTokens, CachedContentTokenCount: u.Cached()}
}

// geminiOutCandidate is a candidate as the gateway writes it.
type geminiOutCandidate struct {
	Content      geminiContent `json:"content"`
	FinishReason string        `json:"finishReason,omitempty"`
	Index        int           `json:"index"`
}

// geminiOut is a GenerateContentResponse as the gateway writes it.
type geminiOut struct {
	Candidates    []geminiOutCandidate `json:"candidates"`
	UsageMetadata *geminiUsage         `json:"usageMetadata,omitempty"`
	ModelVersion  string               `json:"modelVersion"`
	ResponseID    string               `json:"responseId"`
}

// geminiCallPart is a tool call as a functionCall part.
func geminiCallPart(tc *ToolCall) geminiPart {
	args := json.RawMessage(strings.TrimSpace(tc.Function.Arguments))
	if len(args) == 0 || !json.Valid(args) {
		args = json.RawMessage("{}")
	}
	return geminiPart{FunctionCall: &geminiFunctionCall{ID: tc.ID, Name: tc.Function.Name, Args: args}}
}

// EncodeResponse writes a canonical answer as a GenerateContentResponse.
func (geminiInbound) EncodeResponse(resp *ChatResponse) ([]byte, error) {
	out := geminiOut{Candidates: []geminiOutCandidate{}, UsageMetadata: geminiUsageOut(resp.Usage), ModelVersion: resp.Model, ResponseID: resp.ID}
	for i := range resp.Choices {
		c := &resp.Choices[i]
		if c.Index != 0 {
			continue
		}
		cand := geminiOutCandidate{Content: geminiContent{Role: "model", Parts: []geminiPart{}}, FinishReason: geminiFinishOut(c.FinishReason)}
		if s := c.Message.Content.String(); s != "" {
			cand.Content.Parts = append(cand.Content.Parts, geminiText(s))
		}
		for j := range c.Message.ToolCalls {
			cand.Content.Parts = append(cand.Content.Parts, geminiCallPart(&c.Message.ToolCalls[j]))
		}
		out.Candidates = append(out.Candidates, cand)
	}
	return json.Marshal(out)
}

// EncodeError writes e as google.rpc.Status.
func (geminiInbound) EncodeError(e *Error) []byte {
	status := "INTERNAL"
	switch {
	case e.Status == http.StatusBadRequest:
		status = "INVALID_ARGUMENT"
	case e.Status == http.StatusUnauthorized:
		status = "UNAUTHENTICATED"
	case e.Status == http.StatusForbidden:
		status = "PERMISSION_DENIED"
	case e.Status == http.StatusNotFound:
		status = "NOT_FOUND"
	case e.Status == http.StatusTooManyRequests:
		status = "RESOURCE_EXHAUSTED"
	case e.Status == http.StatusGatewayTimeout:
		status = "DEADLINE_EXCEEDED"
	case e.Status == http.StatusServiceUnavailable:
		status = "UNAVAILABLE"
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": e.Status, "message": e.Message, "status": status}})
	return b
}

// NewStreamEncoder writes a canonical stream as server-sent events of
// GenerateContentResponses.
func (geminiInbound) NewStreamEncoder(w io.Writer, model string) StreamEncoder {
	return &geminiStreamOut{w: w, model: model, calls: map[int]*ToolCall{}}
}

type geminiStreamOut struct {
	w      io.Writer
	model  string
	id     string
	calls  map[int]*ToolCall // by index, while their arguments arrive
	order  []int
	finish string
	done   bool
}

func (s *geminiStreamOut) write(parts []geminiPart, finish string, usage *Usage) error {
	out := geminiOut{Candidates: []geminiOutCandidate{{Content: geminiContent{Role: "model", Parts: parts}, FinishReason: finish}},
		UsageMetadata: geminiUsageOut(usage), ModelVersion: s.model, ResponseID: s.id}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = s.w.Write(append(append([]byte("data: "), b...), "\r\n\r\n"...))
	return err
}

// WriteChunk writes a text delta as an event at once; tool calls are
// gathered and written whole when the choice finishes.
func (s *geminiStreamOut) WriteChunk(c *Chunk) error {
	if s.id == "" {
		s.id = c.ID
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue
		}
		for j, tc := range ch.Delta.ToolCalls {
			key := j
			if tc.Index != nil {
				key = *tc.Index
			}
			cur := s.calls[key]
			if cur == nil {
				cur = &ToolCall{ID: tc.ID, Type: "function"}
				s.calls[key] = cur
				s.order = append(s.order, key)
			}
			if tc.Function.Name != "" {
				cur.Function.Name = tc.Function.Name
			}
			cur.Function.Arguments += tc.Function.Arguments
		}
		if d := ch.Delta.Content; d != nil && *d != "" {
			if err := s.write([]geminiPart{geminiText(*d)}, "", nil); err != nil {
				return err
			}
		}
		if ch.FinishReason != nil {
			s.finish = *ch.FinishReason
		}
	}
	return nil
}

// Close writes the gathered tool calls, the finish reason and the usage
// in a last event.
func (s *geminiStreamOut) Close(usage *Usage) error {
	if s.done {
		return nil
	}
	s.done = true
	parts := []geminiPart{}
	for _, k := range s.order {
		parts = append(parts, geminiCallPart(s.calls[k]))
	}
	finish := geminiFinishOut(s.finish)
	if finish == "" {
		finish = "STOP"
	}
	return s.write(parts, finish, usage)
}

// Fail writes an error event, as the Gemini API does mid-stream.
func (s *geminiStreamOut) Fail(e *Error) error {
	s.done = true
	_, err := s.w.Write(append(append([]byte("data: "), GeminiInbound.EncodeError(e)...), "\r\n\r\n"...))
	return err
}

// GeminiCountTokensResponse is countTokens' answer for an estimate of n
// tokens.
func GeminiCountTokensResponse(n int64) []byte {
	b, _ := json.Marshal(map[string]int64{"totalTokens": n})
	return b
}

// GeminiCountTokens estimates a countTokens (or generateContent) request's
// tokens as AnthropicCountTokens does: four bytes of text a token, and a
// fixed count per image.
func GeminiCountTokens(body []byte) (int64, error) {
	var wrapped struct {
		GenerateContentRequest json.RawMessage `json:"generateContentRequest"`
	}
	if json.Unmarshal(body, &wrapped) == nil && len(wrapped.GenerateContentRequest) > 0 {
		body = wrapped.GenerateContentRequest
	}
	var in geminiRequestIn
	if err := json.Unmarshal(body, &in); err != nil {
		return 0, Invalid("", "Invalid JSON payload received: %v", err)
	}
	in.Model = "m"
	req := &ChatRequest{}
	msgs, err := geminiDecodeContents(in.Contents)
	if err != nil {
		return 0, err
	}
	req.Messages = msgs
	if err := geminiDecodeTools(in.Tools, req); err != nil {
		return 0, err
	}
	var n, images int64
	for _, m := range req.Messages {
		for _, p := range m.Content.Parts {
			if p.Type == "image_url" {
				images++
			}
		}
		n += int64(len(m.Content.String()))
		for _, tc := range m.ToolCalls {
			n += int64(len(tc.Function.Name) + len(tc.Function.Arguments))
		}
	}
	if si := in.SystemInstruction; si != nil {
		for _, p := range si.Parts {
			if p.Text != nil {
				n += int64(len(*p.Text))
			}
		}
	}
	for _, t := range req.Tools {
		n += int64(len(t.Function.Name) + len(t.Function.Description) + len(t.Function.Parameters))
	}
	return (n+3)/4 + images*anthropicImageTokens, nil
}
