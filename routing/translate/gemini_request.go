package translate

// The Gemini request encoder: a canonical request as a generateContent body
// (the field-by-field rule is in gemini.go's file comment).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// NewRequest encodes req as a generateContent (or streamGenerateContent
// with alt=sse) call of t's model.
func (geminiProvider) NewRequest(req *ChatRequest, t *Target, stream bool) (*http.Request, error) {
	model := geminiModel(t, req.Model)
	body, err := geminiEncodeRequest(req, model)
	if err != nil {
		return nil, err
	}
	method := "generateContent"
	if stream {
		method = "streamGenerateContent"
	}
	u, vertex, err := geminiEndpoint(t, model, method)
	if err != nil {
		return nil, err
	}
	if stream {
		u += "?alt=sse"
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("gemini: encoding the request: %w", err)
	}
	r, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("gemini: %w", err)
	}
	r.Header.Set("Content-Type", "application/json")
	if stream {
		r.Header.Set("Accept", "text/event-stream")
	} else {
		r.Header.Set("Accept", "application/json")
	}
	geminiAuthorize(r, t, vertex)
	return r, nil
}

// geminiEncodeRequest maps a canonical request onto generateContent's body.
// model is the upstream model (it decides whether replayed function calls
// need a thought signature).
func geminiEncodeRequest(req *ChatRequest, model string) (*geminiRequest, error) {
	if req.N != nil && *req.N != 1 {
		if *req.N < 1 {
			return nil, Invalid("n", "'n' must be at least 1.")
		}
		return nil, Unsupported("n", geminiName)
	}
	if req.Logprobs != nil && *req.Logprobs {
		return nil, Unsupported("logprobs", geminiName)
	}
	out := &geminiRequest{Contents: []geminiContent{}}
	if err := geminiEncodeMessages(req.Messages, model, out); err != nil {
		return nil, err
	}
	if len(out.Contents) == 0 {
		return nil, Invalid("messages", "At least one user or assistant message is required.")
	}
	if err := geminiEncodeTools(req, out); err != nil {
		return nil, err
	}
	gc, err := geminiEncodeGeneration(req)
	if err != nil {
		return nil, err
	}
	if !gc.empty() {
		out.GenerationConfig = gc
	}
	return out, nil
}

func geminiEncodeMessages(msgs []Message, model string, out *geminiRequest) error {
	signCalls := geminiNeedsSignatures(model)
	callNames := map[string]string{} // tool_call_id → function name
	var system []geminiPart
	for i, m := range msgs {
		var role string
		var parts []geminiPart
		var err error
		switch m.Role {
		case "system", "developer":
			for j, p := range geminiContentParts(m.Content) {
				if p.Type != "text" {
					return Invalid(fmt.Sprintf("messages[%d].content[%d]", i, j),
						"A %s message may only contain text for the gemini provider.", m.Role)
				}
				if p.Text != "" {
					system = append(system, geminiText(p.Text))
				}
			}
			continue
		case "user":
			role = "user"
			parts, err = geminiUserParts(m.Content, i)
		case "assistant":
			role = "model"
			parts, err = geminiAssistantParts(&m, i, signCalls, callNames)
		case "tool", "function":
			role = "user"
			parts, err = geminiToolResultParts(&m, i, callNames)
		default:
			return Invalid(fmt.Sprintf("messages[%d].role", i), "Unknown message role %q.", m.Role)
		}
		if err != nil {
			return err
		}
		if len(parts) == 0 {
			// Gemini refuses a content without parts; an empty message
			// carries nothing, so it is left out.
			continue
		}
		if n := len(out.Contents); n > 0 && out.Contents[n-1].Role == role {
			out.Contents[n-1].Parts = append(out.Contents[n-1].Parts, parts...)
			continue
		}
		out.Contents = append(out.Contents, geminiContent{Role: role, Parts: parts})
	}
	if len(system) > 0 {
		out.SystemInstruction = &geminiContent{Parts: system}
	}
	return nil
}

// geminiAssistantParts converts an assistant message: its content, then
// its tool calls as functionCall parts (signed with the placeholder when
// signCalls), noting each call's function name in callNames.
func geminiAssistantParts(m *Message, i int, signCalls bool, callNames map[string]string) ([]geminiPart, error) {
	parts, err := geminiUserParts(m.Content, i)
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 && m.Refusal != "" {
		parts = append(parts, geminiText(m.Refusal))
	}
	for j, tc := range m.ToolCalls {
		param := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
		if tc.Type != "" && tc.Type != "function" {
			return nil, Invalid(param+".type", "Only function tool calls can be sent to the gemini provider.")
		}
		if tc.Function.Name == "" {
			return nil, Invalid(param+".function.name", "A tool call needs a function name.")
		}
		args, err := geminiArgs(tc.Function.Arguments)
		if err != nil {
			return nil, Invalid(param+".function.arguments", "The arguments of a tool call must be a JSON object: %v", err)
		}
		part := geminiPart{FunctionCall: &geminiFunctionCall{Name: tc.Function.Name, Args: args}}
		if signCalls {
			part.ThoughtSignature = geminiSkipSignature
		}
		parts = append(parts, part)
		if tc.ID != "" {
			callNames[tc.ID] = tc.Function.Name
		}
	}
	return parts, nil
}

// geminiToolResultParts converts a tool (or legacy function) message into
// a functionResponse part named after the call it answers.
func geminiToolResultParts(m *Message, i int, callNames map[string]string) ([]geminiPart, error) {
	name := m.Name // the legacy "function" role names the function
	if m.Role == "tool" {
		var ok bool
		if name, ok = callNames[m.ToolCallID]; !ok {
			return nil, Invalid(fmt.Sprintf("messages[%d].tool_call_id", i),
				"tool_call_id %q does not match a tool call of an earlier assistant message.", m.ToolCallID)
		}
	} else if name == "" {
		return nil, Invalid(fmt.Sprintf("messages[%d].name", i), "A function message needs the function's name.")
	}
	resp, err := geminiToolResult(m.Content, i)
	if err != nil {
		return nil, err
	}
	return []geminiPart{{FunctionResponse: &geminiFunctionResponse{Name: name, Response: resp}}}, nil
}

// geminiNeedsSignatures says whether model (Gemini 3 or later) validates
// the thought signatures of replayed function calls.
func geminiNeedsSignatures(model string) bool {
	m := geminiVersionRE.FindStringSubmatch(model)
	if m == nil {
		return false
	}
	major, err := strconv.Atoi(m[1])
	return err == nil && major >= 3
}

var geminiVersionRE = regexp.MustCompile(`(?:^|/)gemini-(\d+)`)

func geminiText(s string) geminiPart { return geminiPart{Text: &s} }

// geminiContentParts returns c as parts (a string content is one text part).
func geminiContentParts(c Content) []Part {
	if c.IsParts {
		return c.Parts
	}
	if c.Text == "" {
		return nil
	}
	return []Part{{Type: "text", Text: c.Text}}
}

// geminiUserParts converts the content of message i (user or assistant).
func geminiUserParts(c Content, i int) ([]geminiPart, error) {
	var out []geminiPart
	for j, p := range geminiContentParts(c) {
		param := fmt.Sprintf("messages[%d].content[%d]", i, j)
		switch p.Type {
		case "text":
			if p.Text != "" {
				out = append(out, geminiText(p.Text))
			}
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return nil, Invalid(param+".image_url", "An image_url part needs a url.")
			}
			part, err := geminiImage(p.ImageURL.URL, param+".image_url.url")
			if err != nil {
				return nil, err
			}
			out = append(out, part)
		case "input_audio", "file":
			return nil, Unsupported(param+"."+p.Type, geminiName)
		case "refusal":
			// A replayed assistant refusal part; the canonical Part does
			// not carry its text (Message.Refusal does).
		default:
			return nil, Invalid(param+".type", "Unknown content part type %q.", p.Type)
		}
	}
	return out, nil
}

// geminiImage converts an image URL: a data: URL is sent inline, a web or
// Cloud Storage URL by reference.
func geminiImage(u, param string) (geminiPart, error) {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		mime, isB64 := strings.CutSuffix(meta, ";base64")
		if !ok || !isB64 || data == "" {
			return geminiPart{}, Invalid(param, "An image data URL must be base64: data:<mime type>;base64,<data>.")
		}
		if mime == "" {
			mime = "image/jpeg"
		}
		return geminiPart{InlineData: &geminiBlob{MimeType: mime, Data: data}}, nil
	}
	parsed, err := url.Parse(u)
	if err != nil || parsed.Host == "" || (parsed.Scheme != "http" && parsed.Scheme != "https" && parsed.Scheme != "gs") {
		return geminiPart{}, Invalid(param, "An image URL must be an http(s) URL, a gs:// URI or a base64 data URL.")
	}
	return geminiPart{FileData: &geminiFileData{MimeType: geminiImageMIME(parsed.Path), FileURI: u}}, nil
}

// geminiImageMIME guesses an image's MIME type from its path.
func geminiImageMIME(p string) string {
	switch strings.ToLower(path.Ext(p)) {
	case ".png":
		return "image/png"
	case ".gif":
		return "image/gif"
	case ".webp":
		return "image/webp"
	case ".heic":
		return "image/heic"
	case ".heif":
		return "image/heif"
	default:
		return "image/jpeg"
	}
}

// geminiArgs parses a tool call's arguments string into a JSON object
// (an empty string is an empty object).
func geminiArgs(s string) (json.RawMessage, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage("{}"), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &obj); err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, errors.New("null is not an object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// geminiToolResult is the functionResponse.response of tool message i: the
// content itself when it is a JSON object, else {"content": text}.
func geminiToolResult(c Content, i int) (json.RawMessage, error) {
	var text strings.Builder
	for j, p := range geminiContentParts(c) {
		if p.Type != "text" {
			return nil, Unsupported(fmt.Sprintf("messages[%d].content[%d].%s", i, j, p.Type), geminiName)
		}
		text.WriteString(p.Text)
	}
	s := strings.TrimSpace(text.String())
	if strings.HasPrefix(s, "{") && json.Valid([]byte(s)) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(s)); err == nil {
			return buf.Bytes(), nil
		}
	}
	b, err := json.Marshal(map[string]string{"content": text.String()})
	if err != nil {
		return nil, Invalid(fmt.Sprintf("messages[%d].content", i), "The tool result cannot be encoded: %v", err)
	}
	return b, nil
}

func geminiEncodeTools(req *ChatRequest, out *geminiRequest) error {
	var decls []geminiFunctionDecl
	for i, t := range req.Tools {
		if t.Type != "function" {
			return Unsupported(fmt.Sprintf("tools[%d].type", i), geminiName)
		}
		if t.Function.Name == "" {
			return Invalid(fmt.Sprintf("tools[%d].function.name", i), "A function tool needs a name.")
		}
		d := geminiFunctionDecl{Name: t.Function.Name, Description: t.Function.Description}
		params, err := geminiSchema(t.Function.Parameters)
		if err != nil {
			return Invalid(fmt.Sprintf("tools[%d].function.parameters", i), "The parameters schema cannot be sent to the gemini provider: %v", err)
		}
		// Gemini refuses an object schema without properties; a function
		// without parameters has no parameters field.
		if _, ok := params["properties"]; ok {
			d.Parameters = params
		}
		decls = append(decls, d)
	}
	if len(decls) > 0 {
		out.Tools = []geminiTool{{FunctionDeclarations: decls}}
	}
	tc := req.ToolChoice
	if tc == nil || len(decls) == 0 {
		return nil
	}
	cfg := geminiFunctionCallingConfig{}
	switch {
	case tc.Function != "":
		cfg.Mode, cfg.AllowedFunctionNames = "ANY", []string{tc.Function}
	case tc.Mode == "auto":
		cfg.Mode = "AUTO"
	case tc.Mode == "required":
		cfg.Mode = "ANY"
	case tc.Mode == "none":
		cfg.Mode = "NONE"
	default:
		return Invalid("tool_choice", "Unknown tool_choice %q.", tc.Mode)
	}
	out.ToolConfig = &geminiToolConfig{FunctionCallingConfig: cfg}
	return nil
}

func geminiEncodeGeneration(req *ChatRequest) (*geminiGenerationConfig, error) {
	gc := &geminiGenerationConfig{
		Temperature: req.Temperature,
		TopP:        req.TopP,
		TopK:        req.TopK,
		Seed:        req.Seed,
	}
	if req.N != nil {
		one := int64(1)
		gc.CandidateCount = &one
	}
	if req.MaxCompletionTokens != nil || req.MaxTokens != nil {
		limit := req.OutputLimit()
		if limit < 1 {
			return nil, Invalid("max_tokens", "'max_tokens' must be at least 1.")
		}
		gc.MaxOutputTokens = &limit
	}
	for _, s := range req.Stop {
		if s != "" {
			gc.StopSequences = append(gc.StopSequences, s)
		}
	}
	if len(req.ResponseFormat) > 0 && string(req.ResponseFormat) != "null" {
		var rf struct {
			Type       string `json:"type"`
			JSONSchema *struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		}
		if err := json.Unmarshal(req.ResponseFormat, &rf); err != nil {
			return nil, Invalid("response_format", "'response_format' must be an object with a type.")
		}
		switch rf.Type {
		case "text":
		case "json_object":
			gc.ResponseMimeType = "application/json"
		case "json_schema":
			gc.ResponseMimeType = "application/json"
			if rf.JSONSchema != nil {
				schema, err := geminiSchema(rf.JSONSchema.Schema)
				if err != nil {
					return nil, Invalid("response_format.json_schema.schema", "The schema cannot be sent to the gemini provider: %v", err)
				}
				if len(schema) > 0 && !geminiEmptyObject(schema) {
					gc.ResponseSchema = schema
				}
			}
		default:
			return nil, Invalid("response_format.type", "Unknown response_format type %q.", rf.Type)
		}
	}
	return gc, nil
}

// geminiEmptyObject says whether s is an object schema without properties,
// which Gemini refuses.
func geminiEmptyObject(s map[string]any) bool {
	_, props := s["properties"]
	t, _ := s["type"].(string)
	return !props && strings.EqualFold(t, "object")
}
