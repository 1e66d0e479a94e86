package translate

// The Gemini provider adapter: Google AI Studio (the Gemini API,
// generativelanguage.googleapis.com) and Vertex AI (aiplatform.googleapis.com)
// speak the same generateContent wire format and differ only in the URL and
// the credential, so one adapter serves both.
//
// What the request encoder does with each canonical field:
//
//   - system and developer messages, wherever they stand, become parts of
//     systemInstruction (Gemini has no system turn); their text only.
//   - user → "user", assistant → "model"; tool results become "user" turns
//     of functionResponse parts; consecutive turns of one role are merged
//     (Gemini wants the roles to alternate).
//   - images: data: URLs → inlineData, http(s) and gs:// URLs → fileData
//     with a MIME type guessed from the extension (image/jpeg when unknown);
//     detail is dropped. input_audio and file parts are refused.
//   - tools → one functionDeclarations tool; parameters are rewritten into
//     Gemini's OpenAPI 3.0 Schema subset (see geminiSchema for the rule).
//   - tool_choice → toolConfig.functionCallingConfig (none → NONE, auto →
//     AUTO, required → ANY, a named function → ANY limited to it); it is
//     dropped when there are no tools.
//   - max_tokens, temperature, top_p, top_k, stop, seed → generationConfig
//     (presence_penalty and frequency_penalty are dropped: Gemini 2.5 and
//     later answer 400 to any penalty); response_format json_object →
//     responseMimeType application/json, json_schema → the same plus
//     responseSchema.
//   - n > 1 is refused: the gateway streams and records one choice, and a
//     Gemini stream interleaves candidates. logprobs is refused.
//   - dropped, as they only tune presentation or bookkeeping or have no
//     Gemini equivalent with the same meaning on every model:
//     parallel_tool_calls, reasoning_effort (thinking budgets are
//     model-specific), user, metadata, stream_options, message names.
//
// Gemini 3 models reject a replayed functionCall part that lacks the
// thoughtSignature the model produced with it. OpenAI-format clients never
// see those signatures, so for Gemini 3 and later the encoder sets Google's
// documented placeholder (geminiSkipSignature) on every replayed call.

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// GeminiBaseURL is the default API root of Google AI Studio.
const GeminiBaseURL = "https://generativelanguage.googleapis.com/v1beta"

// GeminiVertexBaseURL returns the default Vertex AI API root for location
// (us-central1 when empty). The "global" location has no regional host.
func GeminiVertexBaseURL(location string) string {
	if location == "" {
		location = geminiDefaultVertexLocation
	}
	if location == "global" {
		return "https://aiplatform.googleapis.com/v1"
	}
	return "https://" + location + "-aiplatform.googleapis.com/v1"
}

// Gemini is the adapter for Google's Gemini models (provider kind "gemini").
// Target.Options["vertex_project"] selects Vertex AI (with
// Options["vertex_location"], default us-central1, and an OAuth access
// token as Credential); without it the target is Google AI Studio with an
// API key.
var Gemini Provider = geminiProvider{}

const (
	geminiName                  = "gemini"
	geminiDefaultVertexLocation = "us-central1"
	// geminiSkipSignature is the thoughtSignature Google documents for
	// function calls the model did not produce in this conversation (or
	// whose signature the client could not keep).
	geminiSkipSignature = "skip_thought_signature_validator"
	// geminiMaxEvent bounds one server-sent event of a stream.
	geminiMaxEvent = 32 << 20
)

type geminiProvider struct{}

// --- wire types ---

type geminiRequest struct {
	Contents          []geminiContent         `json:"contents"`
	SystemInstruction *geminiContent          `json:"systemInstruction,omitempty"`
	Tools             []geminiTool            `json:"tools,omitempty"`
	ToolConfig        *geminiToolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *geminiGenerationConfig `json:"generationConfig,omitempty"`
}

type geminiContent struct {
	Role  string       `json:"role,omitempty"`
	Parts []geminiPart `json:"parts"`
}

// geminiPart is one part of a content. Exactly one data field is set.
type geminiPart struct {
	Text             *string                 `json:"text,omitempty"`
	Thought          bool                    `json:"thought,omitempty"`
	InlineData       *geminiBlob             `json:"inlineData,omitempty"`
	FileData         *geminiFileData         `json:"fileData,omitempty"`
	FunctionCall     *geminiFunctionCall     `json:"functionCall,omitempty"`
	FunctionResponse *geminiFunctionResponse `json:"functionResponse,omitempty"`
	ThoughtSignature string                  `json:"thoughtSignature,omitempty"`
}

type geminiBlob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type geminiFileData struct {
	MimeType string `json:"mimeType"`
	FileURI  string `json:"fileUri"`
}

type geminiFunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type geminiFunctionResponse struct {
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type geminiTool struct {
	FunctionDeclarations []geminiFunctionDecl `json:"functionDeclarations"`
}

type geminiFunctionDecl struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters,omitempty"`
}

type geminiToolConfig struct {
	FunctionCallingConfig geminiFunctionCallingConfig `json:"functionCallingConfig"`
}

type geminiFunctionCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type geminiGenerationConfig struct {
	StopSequences    []string       `json:"stopSequences,omitempty"`
	ResponseMimeType string         `json:"responseMimeType,omitempty"`
	ResponseSchema   map[string]any `json:"responseSchema,omitempty"`
	CandidateCount   *int64         `json:"candidateCount,omitempty"`
	MaxOutputTokens  *int64         `json:"maxOutputTokens,omitempty"`
	Temperature      *float64       `json:"temperature,omitempty"`
	TopP             *float64       `json:"topP,omitempty"`
	TopK             *int64         `json:"topK,omitempty"`
	Seed             *int64         `json:"seed,omitempty"`
	PresencePenalty  *float64       `json:"presencePenalty,omitempty"`
	FrequencyPenalty *float64       `json:"frequencyPenalty,omitempty"`
}

func (g *geminiGenerationConfig) empty() bool {
	return len(g.StopSequences) == 0 && g.ResponseMimeType == "" && g.ResponseSchema == nil &&
		g.CandidateCount == nil && g.MaxOutputTokens == nil && g.Temperature == nil && g.TopP == nil &&
		g.TopK == nil && g.Seed == nil && g.PresencePenalty == nil && g.FrequencyPenalty == nil
}

// geminiResponse is a GenerateContentResponse, or one event of a stream
// (which may instead carry an error).
type geminiResponse struct {
	Candidates     []geminiCandidate     `json:"candidates"`
	PromptFeedback *geminiPromptFeedback `json:"promptFeedback"`
	UsageMetadata  *geminiUsage          `json:"usageMetadata"`
	ResponseID     string                `json:"responseId"`
	CreateTime     string                `json:"createTime"`
	Error          *geminiErrorBody      `json:"error"`
}

type geminiCandidate struct {
	Content      *geminiContent `json:"content"`
	FinishReason string         `json:"finishReason"`
}

type geminiPromptFeedback struct {
	BlockReason string `json:"blockReason"`
}

type geminiUsage struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount"`
	TotalTokenCount         int64 `json:"totalTokenCount"`
}

// geminiErrorBody is google.rpc.Status as the REST APIs write it.
type geminiErrorBody struct {
	Code    int                 `json:"code"`
	Message string              `json:"message"`
	Status  string              `json:"status"`
	Details []geminiErrorDetail `json:"details"`
}

type geminiErrorDetail struct {
	Type       string `json:"@type"`
	Reason     string `json:"reason"`
	Violations []struct {
		QuotaMetric string `json:"quotaMetric"`
		QuotaID     string `json:"quotaId"`
	} `json:"violations"`
}

// --- endpoint ---

// geminiEndpoint returns the URL of method ("generateContent", ...) of
// model on t and whether t is a Vertex AI target.
func geminiEndpoint(t *Target, model, method string) (string, bool, error) {
	if model == "" {
		return "", false, Invalid("model", "no upstream model is configured for the gemini deployment")
	}
	project := t.Options["vertex_project"]
	if project == "" {
		base := strings.TrimRight(t.BaseURL, "/")
		if base == "" {
			base = GeminiBaseURL
		}
		// AI Studio names models "models/<id>" (and tuned models
		// "tunedModels/<id>"); a bare id gets the "models/" prefix.
		name := model
		if !strings.HasPrefix(name, "models/") && !strings.HasPrefix(name, "tunedModels/") {
			name = "models/" + name
		}
		prefix, id, _ := strings.Cut(name, "/")
		return base + "/" + prefix + "/" + url.PathEscape(id) + ":" + method, false, nil
	}
	location := t.Options["vertex_location"]
	if location == "" {
		location = geminiDefaultVertexLocation
	}
	if !geminiLocationRE.MatchString(location) {
		return "", true, fmt.Errorf("gemini: vertex_location %q is not a Google Cloud location", location)
	}
	base := strings.TrimRight(t.BaseURL, "/")
	if base == "" {
		base = GeminiVertexBaseURL(location)
	}
	id := strings.TrimPrefix(strings.TrimPrefix(model, "publishers/google/"), "models/")
	return base + "/projects/" + url.PathEscape(project) + "/locations/" + url.PathEscape(location) +
		"/publishers/google/models/" + url.PathEscape(id) + ":" + method, true, nil
}

var geminiLocationRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// geminiAuthorize sets the credential header of t on r.
func geminiAuthorize(r *http.Request, t *Target, vertex bool) {
	if t.Credential == "" {
		return
	}
	if vertex {
		r.Header.Set("Authorization", "Bearer "+t.Credential)
	} else {
		r.Header.Set("x-goog-api-key", t.Credential)
	}
}

// geminiModel is the upstream model of t, else the requested one.
func geminiModel(t *Target, requested string) string {
	if t.UpstreamModel != "" {
		return t.UpstreamModel
	}
	return requested
}

// --- request ---

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
			ps, err := geminiUserParts(m.Content, i)
			if err != nil {
				return err
			}
			parts = ps
		case "assistant":
			role = "model"
			ps, err := geminiUserParts(m.Content, i)
			if err != nil {
				return err
			}
			parts = ps
			if len(parts) == 0 && m.Refusal != "" {
				parts = append(parts, geminiText(m.Refusal))
			}
			for j, tc := range m.ToolCalls {
				param := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
				if tc.Type != "" && tc.Type != "function" {
					return Invalid(param+".type", "Only function tool calls can be sent to the gemini provider.")
				}
				if tc.Function.Name == "" {
					return Invalid(param+".function.name", "A tool call needs a function name.")
				}
				args, err := geminiArgs(tc.Function.Arguments)
				if err != nil {
					return Invalid(param+".function.arguments", "The arguments of a tool call must be a JSON object: %v", err)
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
		case "tool", "function":
			role = "user"
			name := m.Name // the legacy "function" role names the function
			if m.Role == "tool" {
				var ok bool
				if name, ok = callNames[m.ToolCallID]; !ok {
					return Invalid(fmt.Sprintf("messages[%d].tool_call_id", i),
						"tool_call_id %q does not match a tool call of an earlier assistant message.", m.ToolCallID)
				}
			} else if name == "" {
				return Invalid(fmt.Sprintf("messages[%d].name", i), "A function message needs the function's name.")
			}
			resp, err := geminiToolResult(m.Content, i)
			if err != nil {
				return err
			}
			parts = []geminiPart{{FunctionResponse: &geminiFunctionResponse{Name: name, Response: resp}}}
		default:
			return Invalid(fmt.Sprintf("messages[%d].role", i), "Unknown message role %q.", m.Role)
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

// --- JSON Schema → Gemini Schema ---
//
// Gemini's Schema is a subset of OpenAPI 3.0 and the API answers 400 to any
// key outside it. geminiSchema rewrites a JSON Schema by this rule:
//
//   - kept: type, format, description, nullable, enum, items, properties,
//     required, anyOf, propertyOrdering, minItems, maxItems, minProperties,
//     maxProperties, minLength, maxLength, pattern, minimum, maximum;
//   - rewritten: local $ref (#/$defs/..., #/definitions/...) is inlined;
//     allOf is merged into one schema; oneOf becomes anyOf; const becomes a
//     one-value enum; a type list ["x", "null"] becomes type x with
//     nullable true (several non-null types become anyOf);
//   - dropped: every other key, notably additionalProperties, $schema, $id,
//     $defs, strict, examples, not, patternProperties,
//     exclusiveMinimum/Maximum, and title, default and example (declared
//     by Gemini's Schema but refused by some of its backends; they only
//     annotate); a format Gemini does not know for the type (it knows enum
//     and date-time for strings, int32/int64, float/double); an enum with
//     non-string values (Gemini enums are strings); an empty properties map
//     (Gemini refuses one: a free-form object stays {"type":"object"}, and
//     a function whose parameters have no properties is sent without
//     parameters); required names that are not properties.
//
// A recursive $ref cannot be inlined and is refused.

var geminiSchemaKeep = map[string]bool{
	"description": true, "nullable": true, "pattern": true,
	"minItems": true, "maxItems": true, "minProperties": true, "maxProperties": true,
	"minLength": true, "maxLength": true, "minimum": true, "maximum": true,
}

var geminiFormats = map[string]map[string]bool{
	"string":  {"enum": true, "date-time": true},
	"integer": {"int32": true, "int64": true},
	"number":  {"float": true, "double": true},
}

const geminiSchemaMaxDepth = 64

// geminiSchema converts a JSON Schema document; an absent schema is nil.
func geminiSchema(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, err
	}
	rootMap, ok := root.(map[string]any)
	if !ok {
		return nil, errors.New("a schema must be a JSON object")
	}
	c := geminiSchemaConv{root: rootMap}
	out, err := c.node(rootMap, 0)
	if err != nil {
		return nil, err
	}
	// Function parameters are an object: some clients leave the root's
	// type out, which Gemini refuses.
	if _, ok := out["properties"]; ok && out["type"] == nil && out["anyOf"] == nil {
		out["type"] = "object"
	}
	return out, nil
}

type geminiSchemaConv struct{ root map[string]any }

func (c *geminiSchemaConv) node(v any, depth int) (map[string]any, error) {
	if depth > geminiSchemaMaxDepth {
		return nil, errors.New("the schema nests too deeply or refers to itself")
	}
	switch s := v.(type) {
	case bool:
		// true accepts anything: an unconstrained schema.
		if s {
			return map[string]any{}, nil
		}
		return nil, errors.New("a false schema cannot be expressed")
	case map[string]any:
		return c.object(s, depth)
	default:
		return nil, errors.New("a schema must be a JSON object")
	}
}

func (c *geminiSchemaConv) object(s map[string]any, depth int) (map[string]any, error) {
	s, err := c.flatten(s, depth)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for k, v := range s {
		if geminiSchemaKeep[k] {
			out[k] = v
		}
	}
	typ, err := geminiSchemaType(s, out)
	if err != nil {
		return nil, err
	}
	if f, ok := s["format"].(string); ok && geminiFormats[typ][f] {
		out["format"] = f
	}
	if e, ok := s["enum"].([]any); ok {
		if vals, ok := geminiStrings(e); ok && len(vals) > 0 {
			out["enum"] = vals
		}
	} else if cv, ok := s["const"].(string); ok {
		out["enum"] = []string{cv}
	}
	if props, ok := s["properties"].(map[string]any); ok && len(props) > 0 {
		conv := make(map[string]any, len(props))
		for name, p := range props {
			ps, err := c.node(p, depth+1)
			if err != nil {
				return nil, fmt.Errorf("property %q: %w", name, err)
			}
			conv[name] = ps
		}
		out["properties"] = conv
		if req, ok := s["required"].([]any); ok {
			var names []string
			for _, r := range req {
				if n, ok := r.(string); ok {
					if _, defined := conv[n]; defined {
						names = append(names, n)
					}
				}
			}
			if len(names) > 0 {
				out["required"] = names
			}
		}
		if order, ok := s["propertyOrdering"].([]any); ok {
			if vals, ok := geminiStrings(order); ok {
				out["propertyOrdering"] = vals
			}
		}
	}
	if items, ok := s["items"]; ok {
		if _, tuple := items.([]any); !tuple {
			is, err := c.node(items, depth+1)
			if err != nil {
				return nil, fmt.Errorf("items: %w", err)
			}
			out["items"] = is
		}
	}
	anyOf, ok := s["anyOf"].([]any)
	if !ok {
		anyOf, _ = s["oneOf"].([]any)
	}
	if len(anyOf) > 0 {
		var alts []any
		for i, a := range anyOf {
			as, err := c.node(a, depth+1)
			if err != nil {
				return nil, fmt.Errorf("anyOf[%d]: %w", i, err)
			}
			// {"type":"null"} alternatives become nullable.
			if len(as) == 1 && as["nullable"] == true {
				out["nullable"] = true
				continue
			}
			alts = append(alts, as)
		}
		switch {
		case len(alts) == 1 && out["type"] == nil:
			for k, v := range alts[0].(map[string]any) {
				if _, set := out[k]; !set {
					out[k] = v
				}
			}
		case len(alts) > 0:
			out["anyOf"] = alts
		}
	}
	// A node of several types (anyOf from a type list) with object or
	// array keywords: Gemini allows those only on a node of that type, so
	// they move into the matching alternative.
	if alts, ok := out["anyOf"].([]any); ok && out["type"] == nil {
		for _, a := range alts {
			am, _ := a.(map[string]any)
			switch t, _ := am["type"].(string); strings.ToLower(t) {
			case "object":
				for _, k := range []string{"properties", "required", "propertyOrdering"} {
					if v, ok := out[k]; ok {
						am[k] = v
					}
				}
			case "array":
				if v, ok := out["items"]; ok {
					am["items"] = v
				}
			}
		}
		for _, k := range []string{"properties", "required", "propertyOrdering", "items"} {
			delete(out, k)
		}
	}
	return out, nil
}

// geminiSchemaType writes the Gemini form of s's type into out and returns
// the (lower-case) single type, or "" when there is none.
func geminiSchemaType(s, out map[string]any) (string, error) {
	switch t := s["type"].(type) {
	case string:
		if strings.EqualFold(t, "null") {
			out["nullable"] = true
			return "", nil
		}
		out["type"] = t
		return strings.ToLower(t), nil
	case []any:
		var types []string
		for _, x := range t {
			name, ok := x.(string)
			if !ok {
				return "", errors.New("type must be a string or a list of strings")
			}
			if strings.EqualFold(name, "null") {
				out["nullable"] = true
				continue
			}
			types = append(types, name)
		}
		switch len(types) {
		case 0:
			return "", nil
		case 1:
			out["type"] = types[0]
			return strings.ToLower(types[0]), nil
		}
		alts := make([]any, len(types))
		for i, name := range types {
			alts[i] = map[string]any{"type": name}
		}
		out["anyOf"] = alts
		return "", nil
	}
	return "", nil
}

// flatten inlines a $ref and merges allOf into s.
func (c *geminiSchemaConv) flatten(s map[string]any, depth int) (map[string]any, error) {
	for round := 0; ; round++ {
		if depth+round > geminiSchemaMaxDepth {
			return nil, errors.New("the schema nests too deeply or refers to itself")
		}
		ref, hasRef := s["$ref"].(string)
		all, hasAll := s["allOf"].([]any)
		if !hasRef && !hasAll {
			return s, nil
		}
		merged := map[string]any{}
		for k, v := range s {
			if k != "$ref" && k != "allOf" {
				merged[k] = v
			}
		}
		var parts []any
		if hasRef {
			target, err := c.resolve(ref)
			if err != nil {
				return nil, err
			}
			parts = append(parts, target)
		}
		parts = append(parts, all...)
		for _, p := range parts {
			pm, ok := p.(map[string]any)
			if !ok {
				if p == true {
					continue
				}
				return nil, errors.New("allOf entries must be schemas")
			}
			geminiMergeSchema(merged, pm)
		}
		s = merged
	}
}

// resolve finds a local reference.
func (c *geminiSchemaConv) resolve(ref string) (map[string]any, error) {
	if ref == "#" {
		return c.root, nil
	}
	ptr, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("$ref %q is not a local reference", ref)
	}
	var cur any = c.root
	for _, seg := range strings.Split(ptr, "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
		if cur, ok = m[seg]; !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("$ref %q does not name a schema", ref)
	}
	return m, nil
}

// geminiMergeSchema merges src into dst for allOf: properties and required
// are united, other keys already in dst win.
func geminiMergeSchema(dst, src map[string]any) {
	for k, v := range src {
		switch k {
		case "properties":
			sp, _ := v.(map[string]any)
			dp, _ := dst[k].(map[string]any)
			merged := make(map[string]any, len(dp)+len(sp))
			for n, p := range sp {
				merged[n] = p
			}
			for n, p := range dp {
				merged[n] = p
			}
			dst[k] = merged
		case "required":
			sr, _ := v.([]any)
			dr, _ := dst[k].([]any)
			dst[k] = append(append([]any{}, dr...), sr...)
		default:
			if _, set := dst[k]; !set {
				dst[k] = v
			}
		}
	}
}

// geminiStrings returns vs as strings when every value is one.
func geminiStrings(vs []any) ([]string, bool) {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// --- response ---
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

// --- stream ---

// NewStreamDecoder reads a streamGenerateContent?alt=sse answer.
func (geminiProvider) NewStreamDecoder(r io.Reader, model string) StreamDecoder {
	return &geminiStream{r: bufio.NewReaderSize(r, 64<<10), model: model}
}

// geminiStream decodes a streamGenerateContent?alt=sse answer. Every event
// is a whole GenerateContentResponse: text arrives in pieces, function
// calls whole. The finish reason and the usage are held back until the body
// ends, because some models repeat finishReason on every event and the last
// event carries the final token counts.
type geminiStream struct {
	r     *bufio.Reader
	model string

	id      string
	created int64
	events  int  // events decoded
	started bool // the role has been sent
	calls   int  // tool calls sent
	finish  string
	usage   *Usage

	pending []*Chunk // chunks decoded but not yet returned
	lines   [][]byte // lines read but not yet parsed
	eof     bool
	err     error // the sticky final error (io.EOF after a clean end)
}

func (s *geminiStream) Next() (*Chunk, error) {
	for len(s.pending) == 0 {
		if s.err != nil {
			return nil, s.err
		}
		data, err := s.event()
		switch {
		case err == io.EOF:
			s.finishStream()
		case err != nil:
			s.err = err
		default:
			if perr := s.decode(data); perr != nil {
				s.err = perr
			}
		}
	}
	c := s.pending[0]
	s.pending = s.pending[1:]
	return c, nil
}

// event returns the data of the next event with data, io.EOF at the end of
// the body.
func (s *geminiStream) event() ([]byte, error) {
	var data []byte
	has := false
	for {
		line, err := s.line()
		if err == io.EOF {
			if has {
				return data, nil // the body ended without a blank line
			}
			return nil, io.EOF
		}
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			if has {
				return data, nil
			}
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if string(field) != "data" {
			continue // comments, event:, id:, retry:
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if has {
			data = append(data, '\n')
		}
		if len(data)+len(value) > geminiMaxEvent {
			return nil, BadResponse(geminiName, "a stream event exceeds %d bytes", geminiMaxEvent)
		}
		data = append(data, value...)
		has = true
	}
}

// line returns the next line without its terminator (\n, \r\n or \r).
func (s *geminiStream) line() ([]byte, error) {
	for len(s.lines) == 0 {
		if s.eof {
			return nil, io.EOF
		}
		var buf []byte
		for {
			chunk, err := s.r.ReadSlice('\n')
			if len(buf)+len(chunk) > geminiMaxEvent {
				return nil, BadResponse(geminiName, "a stream line exceeds %d bytes", geminiMaxEvent)
			}
			buf = append(buf, chunk...)
			if err == bufio.ErrBufferFull {
				continue
			}
			if err == io.EOF {
				s.eof = true
				if len(buf) == 0 {
					return nil, io.EOF
				}
				break
			}
			if err != nil {
				return nil, err
			}
			break
		}
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		buf = bytes.TrimSuffix(buf, []byte("\r"))
		// A lone \r also ends a line; JSON never holds a raw one.
		s.lines = append(s.lines, bytes.Split(buf, []byte("\r"))...)
	}
	l := s.lines[0]
	s.lines = s.lines[1:]
	return l, nil
}

// decode turns one event into chunks.
func (s *geminiStream) decode(data []byte) error {
	if string(bytes.TrimSpace(data)) == "[DONE]" {
		return nil
	}
	var r geminiResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return BadResponse(geminiName, "a stream event: %v", err)
	}
	if r.Error != nil {
		return geminiClassify(r.Error.Code, r.Error)
	}
	s.events++
	if s.id == "" {
		s.id = r.ResponseID
		if s.id == "" {
			s.id = geminiNewID()
		}
		s.created = geminiCreated(r.CreateTime)
	}
	if u := r.UsageMetadata.canonical(); u != nil {
		s.usage = u
	}
	if len(r.Candidates) == 0 {
		if r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" {
			s.finish = FinishContentFilter
		}
		return nil
	}
	c := &r.Candidates[0]
	text, calls, err := geminiCandidateOutput(c, s.calls)
	if err != nil {
		return err
	}
	geminiFillCallIDs(calls, s.id, s.calls)
	if c.FinishReason != "" {
		s.finish = geminiFinish(c.FinishReason, false)
	}
	if text == "" && len(calls) == 0 && s.started {
		return nil
	}
	delta := Delta{}
	if !s.started {
		delta.Role = "assistant"
		s.started = true
	}
	if text != "" || len(calls) == 0 {
		delta.Content = &text
	}
	for i := range calls {
		idx := s.calls + i
		calls[i].Index = &idx
	}
	s.calls += len(calls)
	delta.ToolCalls = calls
	s.pending = append(s.pending, s.chunk([]ChunkChoice{{Delta: delta}}))
	return nil
}

// finishStream queues the closing chunks after the body ended.
func (s *geminiStream) finishStream() {
	s.err = io.EOF
	if s.events == 0 {
		s.err = BadResponse(geminiName, "the stream ended without any event")
		return
	}
	// As in ParseResponse: a turn that ends normally with function calls
	// ends for the tool calls.
	reason := s.finish
	if reason == "" || reason == FinishStop {
		reason = FinishStop
		if s.calls > 0 {
			reason = FinishToolCalls
		}
	}
	choice := ChunkChoice{FinishReason: &reason}
	if !s.started {
		choice.Delta.Role = "assistant"
		s.started = true
	}
	s.pending = append(s.pending, s.chunk([]ChunkChoice{choice}))
	if s.usage != nil {
		c := s.chunk([]ChunkChoice{})
		c.Usage = s.usage
		s.pending = append(s.pending, c)
	}
}

func (s *geminiStream) chunk(choices []ChunkChoice) *Chunk {
	return &Chunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model, Choices: choices}
}

// --- errors ---

// ParseError classifies a Google error answer (see geminiClassify); the
// headers carry nothing the body does not.
func (geminiProvider) ParseError(status int, _ http.Header, body []byte) *Error {
	e := geminiErrorFrom(body)
	if e == nil {
		msg := strings.TrimSpace(string(body))
		if len(msg) > 512 {
			msg = strings.ToValidUTF8(msg[:512], "") + "…"
		}
		if msg == "" {
			msg = http.StatusText(status)
		}
		e = &geminiErrorBody{Code: status, Message: msg}
	}
	return geminiClassify(status, e)
}

// geminiErrorFrom reads {"error":{...}}, or the same wrapped in an array
// as Vertex sometimes writes it; nil when body is neither.
func geminiErrorFrom(body []byte) *geminiErrorBody {
	body = bytes.TrimSpace(body)
	var env struct {
		Error *geminiErrorBody `json:"error"`
	}
	if len(body) > 0 && body[0] == '[' {
		var list []json.RawMessage
		if json.Unmarshal(body, &list) != nil || len(list) == 0 {
			return nil
		}
		body = list[0]
	}
	if json.Unmarshal(body, &env) != nil {
		return nil
	}
	return env.Error
}

// geminiClassify turns a Google error into an *Error. status is the HTTP
// status (for stream error events, the error's code).
//
// 429 RESOURCE_EXHAUSTED is a rate limit unless it is a spent quota: a
// QuotaFailure violation of a per-day quota, a "limit: 0" quota (the model
// is not in the project's tier), or — when no violations are listed — a
// message about billing, credits or a daily quota. The message AI Studio
// sends for every quota ("You exceeded your current quota, please check
// your plan and billing details") is therefore judged by its violations
// when it has them.
func geminiClassify(status int, e *geminiErrorBody) *Error {
	if status == 0 {
		status = e.Code
	}
	msg := e.Message
	if msg == "" {
		msg = "The gemini upstream answered HTTP " + strconv.Itoa(status) + "."
	}
	lower := strings.ToLower(msg)
	out := &Error{Status: status, Type: "api_error", Code: strings.ToLower(e.Status), Message: msg, Kind: KindOther}
	if out.Code == "" {
		out.Code = "upstream_error"
	}
	reason := ""
	for _, d := range e.Details {
		if d.Reason != "" {
			reason = d.Reason
		}
	}
	switch {
	case reason == "API_KEY_INVALID" || reason == "API_KEY_EXPIRED" || strings.Contains(lower, "api key not valid") ||
		status == http.StatusUnauthorized || status == http.StatusForbidden ||
		e.Status == "UNAUTHENTICATED" || e.Status == "PERMISSION_DENIED":
		// The gateway's credential is at fault, not the client.
		out.Status, out.Type, out.Code, out.Kind = http.StatusBadGateway, "upstream_error", "upstream_auth_failed", KindAuth
		out.Message = "The gemini upstream refused the gateway's credential: " + msg
	case status == http.StatusTooManyRequests || e.Status == "RESOURCE_EXHAUSTED":
		out.Status = http.StatusTooManyRequests
		if geminiQuotaSpent(e, lower) {
			out.Type, out.Code, out.Kind = "insufficient_quota", "insufficient_quota", KindQuotaExhausted
		} else {
			out.Type, out.Code, out.Kind = "rate_limit_error", "rate_limit_exceeded", KindRateLimited
		}
	case status == http.StatusBadRequest && geminiTooLong(lower):
		out.Type, out.Code, out.Kind = "invalid_request_error", "context_length_exceeded", KindContextOverflow
	case e.Status == "FAILED_PRECONDITION":
		// The deployment cannot serve anyone (billing off, a region
		// without the API, a model not enabled for the project): not the
		// client's fault, and another deployment may serve the request.
		out.Status, out.Type, out.Kind = http.StatusBadGateway, "upstream_error", KindOther
	case status == http.StatusNotFound || e.Status == "NOT_FOUND":
		out.Status, out.Type, out.Code, out.Kind = http.StatusNotFound, "invalid_request_error", "model_not_found", KindNotFound
	case status == http.StatusGatewayTimeout || e.Status == "DEADLINE_EXCEEDED":
		out.Status, out.Code, out.Kind = http.StatusGatewayTimeout, "upstream_timeout", KindTimeout
	case status >= 500 || e.Status == "UNAVAILABLE" || e.Status == "INTERNAL":
		if status < 500 {
			out.Status = http.StatusServiceUnavailable
		}
		out.Kind = KindOverloaded
	case status >= 400:
		out.Type, out.Kind = "invalid_request_error", KindInvalidRequest
	default:
		// An error event inside a 200 stream with no usable code.
		out.Status, out.Kind = http.StatusBadGateway, KindOther
	}
	return out
}

// geminiQuotaSpent says whether a 429 is a spent quota (see geminiClassify).
func geminiQuotaSpent(e *geminiErrorBody, lowerMsg string) bool {
	if strings.Contains(lowerMsg, "limit: 0") {
		return true
	}
	violations := false
	for _, d := range e.Details {
		for _, v := range d.Violations {
			violations = true
			id := strings.ToLower(v.QuotaID + " " + v.QuotaMetric)
			if strings.Contains(id, "perday") || strings.Contains(id, "per_day") || strings.Contains(id, "daily") {
				return true
			}
		}
	}
	if violations {
		return false
	}
	for _, w := range []string{"billing", "credit", "per day", "daily"} {
		if strings.Contains(lowerMsg, w) {
			return true
		}
	}
	return false
}

// geminiTooLong recognises "The input token count (N) exceeds the maximum
// number of tokens allowed (M)." and its variants.
func geminiTooLong(lowerMsg string) bool {
	return strings.Contains(lowerMsg, "token count") && strings.Contains(lowerMsg, "exceeds the maximum") ||
		strings.Contains(lowerMsg, "input token count is") && strings.Contains(lowerMsg, "only supports up to") || // Vertex
		strings.Contains(lowerMsg, "exceeds the maximum number of tokens") ||
		strings.Contains(lowerMsg, "input context is too long")
}
