package translate

// The Anthropic Messages API as an upstream: canonical (OpenAI chat)
// requests are encoded as POST {BaseURL}/messages, and Messages responses,
// SSE streams and error bodies are decoded back into the canonical form.
//
// What the adapter cannot carry, following the package rule (fields that
// only tune sampling or presentation are dropped, fields whose loss would
// change the meaning of the answer are refused):
//
//   - Refused with a 400 (Unsupported): n > 1, logprobs: true,
//     response_format of type json_schema, input_audio and file content
//     parts, tools of a type other than "function".
//   - Dropped: seed, presence_penalty, frequency_penalty, logit_bias,
//     metadata (OpenAI's stored-completion tags), message names, image
//     "detail", a function's "strict" flag, stream_options (Anthropic always
//     reports usage), reasoning_effort (extended thinking would need its
//     thinking blocks sent back on every later tool-use turn, which the
//     canonical form cannot carry), and response_format json_object (OpenAI
//     requires the prompt itself to ask for JSON, so the model is already
//     told; Anthropic has no JSON mode to switch on).
//   - Adjusted: temperature is clamped to Anthropic's range [0, 1]; when
//     both temperature and top_p are set only temperature is sent (current
//     Claude models refuse the pair); system and developer messages are
//     hoisted, in order, into the top-level "system"; consecutive messages
//     of the same role are merged (Anthropic requires alternation), with
//     tool results placed first in a merged user turn as Anthropic requires;
//     messages left with no content are skipped; tool-call ids are reduced
//     to the characters Anthropic accepts ([A-Za-z0-9_-]), consistently for
//     tool_use and tool_result so they still pair up.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// AnthropicVersion is the anthropic-version header the adapter sends.
const AnthropicVersion = "2023-06-01"

// AnthropicDefaultMaxTokens is the max_tokens sent when the client set no
// output limit: Anthropic requires one.
const AnthropicDefaultMaxTokens = 4096

// anthropicName names the provider in refusals and errors.
const anthropicName = "Anthropic"

// anthropicMaxEvent bounds one SSE event (and one line) of an Anthropic
// stream, so that a broken upstream cannot make the decoder buffer without
// end.
const anthropicMaxEvent = 32 << 20

// anthropicNow is the clock for "created"; tests replace it.
var anthropicNow = time.Now

// Anthropic is the provider adapter for the Anthropic Messages API
// (deployment kind "anthropic").
var Anthropic Provider = anthropicProvider{}

type anthropicProvider struct{}

// ---- Wire types shared by both directions ----

// anthropicTextBlock is a text content block.
type anthropicTextBlock struct {
	Type         string          `json:"type"` // "text"
	Text         string          `json:"text"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// anthropicImageBlock is an image content block.
type anthropicImageBlock struct {
	Type         string               `json:"type"` // "image"
	Source       anthropicImageSource `json:"source"`
	CacheControl json.RawMessage      `json:"cache_control,omitempty"`
}

// anthropicImageSource is an image's base64 data or URL (or, from clients,
// a Files API id, which the gateway refuses).
type anthropicImageSource struct {
	Type      string `json:"type"` // base64, url, file
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
	FileID    string `json:"file_id,omitempty"`
}

// anthropicToolUseBlock is a tool call the assistant made.
type anthropicToolUseBlock struct {
	Type         string          `json:"type"` // "tool_use"
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// anthropicToolResultBlock answers a tool_use in a user turn. Content is a
// string or a list of text and image blocks.
type anthropicToolResultBlock struct {
	Type         string          `json:"type"` // "tool_result"
	ToolUseID    string          `json:"tool_use_id"`
	Content      any             `json:"content,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// anthropicBlockIn is any content block, as read from a client's request
// (strictly) or an upstream answer (leniently, see anthropicBlock).
type anthropicBlockIn struct {
	Type      string                `json:"type"`
	Text      string                `json:"text"`
	Source    *anthropicImageSource `json:"source"`
	ID        string                `json:"id"`
	Name      string                `json:"name"`
	Input     json.RawMessage       `json:"input"`
	ToolUseID string                `json:"tool_use_id"`
	Content   json.RawMessage       `json:"content"`
	IsError   bool                  `json:"is_error"`
	// CacheControl is a client's prompt-cache breakpoint.
	CacheControl json.RawMessage `json:"cache_control"`
}

// anthropicMessageIn is a Messages response (also message_start's message).
type anthropicMessageIn struct {
	ID         string             `json:"id"`
	Type       string             `json:"type"`
	Role       string             `json:"role"`
	Model      string             `json:"model"`
	Content    []json.RawMessage  `json:"content"`
	StopReason string             `json:"stop_reason"`
	Usage      *anthropicUsage    `json:"usage"`
	Error      *anthropicErrorObj `json:"error"`
}

// anthropicErrorObj is the "error" object of an Anthropic error body or
// error event.
type anthropicErrorObj struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Details *struct {
		ErrorCode string `json:"error_code"`
	} `json:"details,omitempty"`
}

// anthropicErrorBody is an Anthropic error body.
type anthropicErrorBody struct {
	Type  string             `json:"type"` // "error"
	Error *anthropicErrorObj `json:"error"`
}

// ---- Errors ----

// ParseError classifies an Anthropic error answer.
func (anthropicProvider) ParseError(status int, _ http.Header, body []byte) *Error {
	var eb anthropicErrorBody
	if err := json.Unmarshal(body, &eb); err != nil || eb.Error == nil || (eb.Error.Type == "" && eb.Error.Message == "") {
		snippet := strings.ToValidUTF8(string(bytes.TrimSpace(body)), "\uFFFD")
		if len(snippet) > 200 {
			snippet = strings.ToValidUTF8(snippet[:200], "") + "…"
		}
		msg := "The " + anthropicName + " upstream answered " + strconv.Itoa(status)
		if snippet != "" {
			msg += ": " + snippet
		} else if t := http.StatusText(status); t != "" {
			msg += " " + t
		}
		return anthropicClassify(status, &anthropicErrorObj{Message: msg})
	}
	return anthropicClassify(status, eb.Error)
}

// AnthropicEventError classifies the data of an Anthropic stream "error"
// event ({"type":"error","error":{"type":...,"message":...}}) as the stream
// decoder does: an event has no HTTP status, so the status is the one
// Anthropic documents for the error type (overloaded_error 529,
// rate_limit_error 429, invalid_request_error 400, ...). Data that is not
// an error event is a BadResponse.
func AnthropicEventError(data []byte) *Error {
	var eb anthropicErrorBody
	if err := json.Unmarshal(data, &eb); err != nil || eb.Error == nil {
		return BadResponse(anthropicName, "an error event without an error")
	}
	return anthropicClassify(anthropicStatusOfType(eb.Error.Type), eb.Error)
}

// anthropicStatusOfType is the HTTP status Anthropic documents for an
// error type; error events in a stream carry only the type.
func anthropicStatusOfType(t string) int {
	switch t {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "billing_error":
		return http.StatusPaymentRequired
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "timeout_error":
		return http.StatusGatewayTimeout
	case "overloaded_error":
		return 529
	default: // api_error and types added later
		return http.StatusInternalServerError
	}
}

// anthropicQuotaMessages are phrases of Anthropic's messages for an account
// out of credit or past a spend limit.
var anthropicQuotaMessages = []string{
	"credit balance", "billing", "usage limits", "spend limit", "purchase credits",
}

// anthropicContextMessages are phrases of Anthropic's messages for a prompt
// longer than the model's context window.
var anthropicContextMessages = []string{
	"prompt is too long", "exceeds context", "exceed context", "context limit",
	"context window", "context length", "too many input tokens", "too many tokens",
}

// anthropicClassify turns an Anthropic error into an *Error: the kind
// drives retries and fallbacks, the status, type and code are what an
// OpenAI-speaking client sees. The status is the upstream's, except that a
// refused credential (401/403) is the gateway's fault: 502.
func anthropicClassify(status int, e *anthropicErrorObj) *Error {
	msg := e.Message
	if msg == "" {
		msg = "The " + anthropicName + " upstream answered " + strconv.Itoa(status) + " (" + e.Type + ")."
	}
	lower := strings.ToLower(msg)
	detail := ""
	if e.Details != nil {
		detail = e.Details.ErrorCode
	}
	out := &Error{Status: status, Message: msg}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden ||
		e.Type == "authentication_error" || e.Type == "permission_error":
		out.Status, out.Type, out.Code, out.Kind = http.StatusBadGateway, "upstream_error", "upstream_auth_error", KindAuth
		out.Message = "The " + anthropicName + " upstream refused the gateway's credential: " + msg
	case status == http.StatusPaymentRequired || e.Type == "billing_error" || detail == "enforced_spend_limit_reached" ||
		(status >= 400 && status < 500 && anthropicContainsAny(lower, anthropicQuotaMessages)):
		out.Type, out.Code, out.Kind = "insufficient_quota", "insufficient_quota", KindQuotaExhausted
	case status == http.StatusTooManyRequests || e.Type == "rate_limit_error":
		out.Type, out.Code, out.Kind = "rate_limit_error", "rate_limit_exceeded", KindRateLimited
	case status >= 500 || e.Type == "overloaded_error" || e.Type == "api_error" || e.Type == "timeout_error":
		out.Type, out.Kind = "server_error", KindOverloaded
	case (status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge) && anthropicContainsAny(lower, anthropicContextMessages):
		out.Type, out.Code, out.Kind = "invalid_request_error", "context_length_exceeded", KindContextOverflow
	case status == http.StatusNotFound || e.Type == "not_found_error":
		out.Type, out.Code, out.Param, out.Kind = "invalid_request_error", "model_not_found", "model", KindNotFound
	case status >= 400:
		out.Type, out.Kind = "invalid_request_error", KindInvalidRequest
	default: // an error with a 1xx-3xx status: nothing the client can act on
		out.Status, out.Type, out.Code, out.Kind = http.StatusBadGateway, "upstream_error", "upstream_error", KindOther
	}
	if out.Status < 400 {
		out.Status = http.StatusBadGateway
	}
	return out
}

func anthropicContainsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
