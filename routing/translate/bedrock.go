package translate

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// Bedrock is the Amazon Bedrock Converse adapter (provider kind
// "bedrock"). It calls POST {base}/model/{modelId}/converse, or
// /converse-stream for streams (answered in the binary event-stream
// framing, see eventstream.go).
//
// Target.Options["region"] is required. Target.BaseURL defaults to
// BedrockBaseURL(region); a custom one (a mock, a VPC endpoint) is used
// as given. Target.Credential is either "ACCESS_KEY_ID:SECRET_ACCESS_KEY"
// or "ACCESS_KEY_ID:SECRET_ACCESS_KEY:SESSION_TOKEN", signed with SigV4
// (service "bedrock"), or a Bedrock API key (no ':'), sent as a bearer
// token without SigV4.
//
// Request translation (canonical -> Converse):
//   - system and developer messages become the top-level system blocks,
//     in order, wherever they appear in the conversation;
//   - user content becomes text and image blocks. Images must be base64
//     data: URLs (png, jpeg, gif, webp): Converse takes image bytes, not
//     URLs, so http(s) image URLs are refused, as are input_audio and
//     file parts;
//   - assistant tool_calls become toolUse blocks, tool messages become
//     toolResult blocks in a user message ({json} when the result is a
//     JSON object, {text} otherwise); consecutive messages of the same
//     Converse role are merged, since Converse requires alternation;
//     empty text is omitted, and a message left empty is dropped;
//   - tools become toolConfig.tools; tool_choice auto/required/function
//     become {auto}/{any}/{tool}, and no tool_choice sends no toolChoice
//     (the model's default, auto). Converse has no "none": tool_choice
//     "none" drops the tools. Because Converse refuses toolUse/toolResult
//     blocks without a toolConfig, when no tools are sent the tool calls
//     and results of the history are written as text blocks
//     ("[Tool call NAME (ID) with arguments ARGS]" and
//     "[Tool result for ID]\n...") so that the model still sees them;
//   - max_completion_tokens/max_tokens, temperature, top_p and stop go to
//     inferenceConfig; top_k goes to additionalModelRequestFields.top_k;
//   - refused (400 naming the field): n > 1, logprobs, response_format
//     json_schema and json_object (Converse has no JSON mode);
//   - dropped: seed, presence_penalty, frequency_penalty, user,
//     metadata, parallel_tool_calls, reasoning_effort, function
//     "strict", stream_options, message names.
//
// Response translation: text blocks are joined into the message content,
// toolUse blocks become tool_calls, reasoningContent is dropped (the
// canonical form has no field for it). Bedrock returns no completion id,
// so one is generated ("chatcmpl-br-..."). Usage: prompt_tokens is
// inputTokens + cacheReadInputTokens + cacheWriteInputTokens, cached
// tokens are cacheReadInputTokens.
var Bedrock Provider = bedrockProvider{}

const bedrockName = "bedrock"

// bedrockNow is the clock used for SigV4 dates and response timestamps;
// tests replace it.
var bedrockNow = time.Now

// BedrockBaseURL returns the Bedrock runtime endpoint of region.
func BedrockBaseURL(region string) string {
	return "https://bedrock-runtime." + region + ".amazonaws.com"
}

type bedrockProvider struct{}

// ---- wire types ----

type brRequest struct {
	Messages                     []brMessage        `json:"messages"`
	System                       []brSystemBlock    `json:"system,omitempty"`
	InferenceConfig              *brInferenceConfig `json:"inferenceConfig,omitempty"`
	ToolConfig                   *brToolConfig      `json:"toolConfig,omitempty"`
	AdditionalModelRequestFields map[string]any     `json:"additionalModelRequestFields,omitempty"`
}

type brMessage struct {
	Role    string    `json:"role"`
	Content []brBlock `json:"content"`
}

type brBlock struct {
	Text       *string       `json:"text,omitempty"`
	Image      *brImage      `json:"image,omitempty"`
	ToolUse    *brToolUse    `json:"toolUse,omitempty"`
	ToolResult *brToolResult `json:"toolResult,omitempty"`
	CachePoint *brCachePoint `json:"cachePoint,omitempty"`
}

// brCachePoint marks the end of a prompt prefix to cache: Converse's form
// of Anthropic's cache_control.
type brCachePoint struct {
	Type string `json:"type"` // "default"
}

var brDefaultCachePoint = &brCachePoint{Type: "default"}

type brImage struct {
	Format string        `json:"format"`
	Source brImageSource `json:"source"`
}

type brImageSource struct {
	Bytes string `json:"bytes"` // base64, as the JSON protocol carries blobs
}

type brToolUse struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type brToolResult struct {
	ToolUseID string              `json:"toolUseId"`
	Content   []brToolResultBlock `json:"content"`
}

type brToolResultBlock struct {
	Text  *string         `json:"text,omitempty"`
	JSON  json.RawMessage `json:"json,omitempty"`
	Image *brImage        `json:"image,omitempty"`
}

type brSystemBlock struct {
	Text       string        `json:"text,omitempty"`
	CachePoint *brCachePoint `json:"cachePoint,omitempty"`
}

type brInferenceConfig struct {
	MaxTokens     *int64   `json:"maxTokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"topP,omitempty"`
	StopSequences []string `json:"stopSequences,omitempty"`
}

type brToolConfig struct {
	Tools      []brTool      `json:"tools"`
	ToolChoice *brToolChoice `json:"toolChoice,omitempty"`
}

type brTool struct {
	ToolSpec   *brToolSpec   `json:"toolSpec,omitempty"`
	CachePoint *brCachePoint `json:"cachePoint,omitempty"`
}

type brToolSpec struct {
	Name        string        `json:"name"`
	Description string        `json:"description,omitempty"`
	InputSchema brInputSchema `json:"inputSchema"`
}

type brInputSchema struct {
	JSON json.RawMessage `json:"json"`
}

type brToolChoice struct {
	Auto *struct{}   `json:"auto,omitempty"`
	Any  *struct{}   `json:"any,omitempty"`
	Tool *brToolName `json:"tool,omitempty"`
}

type brToolName struct {
	Name string `json:"name"`
}

type brResponse struct {
	Output *struct {
		Message *struct {
			Role    string        `json:"role"`
			Content []brRespBlock `json:"content"`
		} `json:"message"`
	} `json:"output"`
	StopReason string   `json:"stopReason"`
	Usage      *brUsage `json:"usage"`
}

type brRespBlock struct {
	Text    *string `json:"text"`
	ToolUse *struct {
		ToolUseID string          `json:"toolUseId"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	} `json:"toolUse"`
	// reasoningContent, image and other blocks are not carried.
}

type brUsage struct {
	InputTokens           int64 `json:"inputTokens"`
	OutputTokens          int64 `json:"outputTokens"`
	TotalTokens           int64 `json:"totalTokens"`
	CacheReadInputTokens  int64 `json:"cacheReadInputTokens"`
	CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
}

// ---- errors ----

// ParseError classifies a non-2xx Bedrock answer from its
// x-amzn-ErrorType header (or the body's __type) and message.
func (bedrockProvider) ParseError(status int, header http.Header, body []byte) *Error {
	var eb struct {
		Message string `json:"message"` // also matches "Message"
		Type    string `json:"__type"`
	}
	_ = json.Unmarshal(body, &eb)
	typ := bedrockErrorType(header.Get("X-Amzn-ErrorType"))
	if typ == "" {
		typ = bedrockErrorType(eb.Type)
	}
	msg := strings.TrimSpace(eb.Message)
	if msg == "" {
		msg = bedrockSnippet(body)
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return bedrockClassify(typ, status, msg)
}

// bedrockErrorType extracts the bare exception name from
// "ThrottlingException:http://internal.amazon.com/..." or
// "com.amazon.coral.validate#ValidationException".
func bedrockErrorType(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '#'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// bedrockSnippet returns up to 200 bytes of a non-JSON error body.
func bedrockSnippet(body []byte) string {
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// bedrockClassify turns an exception name (any case; "" when unknown),
// an HTTP status (0 inside a stream) and a message into an *Error.
func bedrockClassify(typ string, status int, msg string) *Error {
	label := typ
	if label == "" {
		if status > 0 {
			label = fmt.Sprintf("HTTP %d", status)
		} else {
			label = "error"
		}
	} else if c := label[0]; 'a' <= c && c <= 'z' {
		// Stream exceptions are named in lower camel case
		// (throttlingException); show them as the HTTP API does.
		label = string(c-'a'+'A') + label[1:]
	}
	text := "Bedrock " + label + ": " + msg

	var kind ErrorKind
	switch strings.ToLower(typ) {
	case "throttlingexception", "toomanyrequestsexception":
		kind = KindRateLimited
	case "servicequotaexceededexception":
		kind = KindQuotaExhausted
	case "validationexception":
		kind = KindInvalidRequest
		if bedrockContextOverflow(msg) {
			kind = KindContextOverflow
		}
	case "accessdeniedexception", "unrecognizedclientexception", "invalidsignatureexception",
		"incompletesignatureexception", "expiredtokenexception", "missingauthenticationtokenexception",
		"invalidclienttokenid", "signaturedoesnotmatch":
		kind = KindAuth
	case "resourcenotfoundexception":
		kind = KindNotFound
	case "modelnotreadyexception", "serviceunavailableexception", "internalserverexception",
		"modelstreamerrorexception", "internalfailure", "serviceunavailable":
		kind = KindOverloaded
	case "modeltimeoutexception":
		kind = KindTimeout
	case "modelerrorexception":
		kind = KindOther
	default:
		kind = bedrockKindForStatus(status, msg)
	}
	return bedrockError(kind, text)
}

func bedrockKindForStatus(status int, msg string) ErrorKind {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return KindAuth
	case status == http.StatusNotFound:
		return KindNotFound
	case status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout:
		return KindTimeout
	case status == http.StatusTooManyRequests:
		return KindRateLimited
	case status >= 500:
		return KindOverloaded
	case status >= 400:
		if bedrockContextOverflow(msg) {
			return KindContextOverflow
		}
		return KindInvalidRequest
	default:
		return KindOther
	}
}

// bedrockContextOverflow recognises the ValidationException messages
// Bedrock models give for a prompt longer than their context window.
func bedrockContextOverflow(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{
		"too long", "too many input tokens", "input tokens exceed", "context length",
		"context window", "context_length", "context limit", "maximum context",
	} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// bedrockError builds the client-facing error of a kind.
func bedrockError(kind ErrorKind, msg string) *Error {
	e := &Error{Kind: kind, Message: msg}
	switch kind {
	case KindRateLimited:
		e.Status, e.Type, e.Code = http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded"
	case KindQuotaExhausted:
		e.Status, e.Type, e.Code = http.StatusTooManyRequests, "insufficient_quota", "insufficient_quota"
	case KindContextOverflow:
		e.Status, e.Type, e.Code = http.StatusBadRequest, "invalid_request_error", "context_length_exceeded"
	case KindInvalidRequest:
		e.Status, e.Type, e.Code = http.StatusBadRequest, "invalid_request_error", "invalid_request"
	case KindAuth:
		// The gateway's credential is at fault, not the client's.
		e.Status, e.Type, e.Code = http.StatusBadGateway, "upstream_error", "upstream_auth_failed"
	case KindNotFound:
		e.Status, e.Type, e.Code = http.StatusNotFound, "invalid_request_error", "model_not_found"
	case KindOverloaded:
		e.Status, e.Type, e.Code = http.StatusServiceUnavailable, "upstream_error", "upstream_overloaded"
	case KindTimeout:
		e.Status, e.Type, e.Code = http.StatusGatewayTimeout, "timeout_error", "upstream_timeout"
	default:
		e.Status, e.Type, e.Code = http.StatusBadGateway, "upstream_error", "upstream_error"
	}
	return e
}
