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
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
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
