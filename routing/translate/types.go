// Package translate converts between the wire formats Tollgate speaks: the
// OpenAI chat format, the Anthropic Messages format, the Gemini format, the
// Bedrock Converse format and the OpenAI Responses format.
//
// Every translation goes through one canonical form, the OpenAI chat
// completion format (ChatRequest, ChatResponse, Chunk): an inbound API
// decodes its request into a ChatRequest and encodes ChatResponses and
// Chunks back into its own shape; a provider adapter encodes a ChatRequest
// into its upstream request and decodes the upstream's answer into a
// ChatResponse or a stream of Chunks.
//
// The rule for fields a provider cannot honour (see docs/providers.md, "Translation"):
// fields that only tune sampling or presentation (seed, logit_bias,
// presence_penalty, ...) are dropped; fields whose loss would change the
// meaning of the answer (n > 1, logprobs, audio input, response_format
// json_schema on a provider without it) are refused with a 400 in the
// inbound format, naming the field. Translators return *Error for refusals.
package translate

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// ChatRequest is an OpenAI chat completion request.
type ChatRequest struct {
	Model               string          `json:"model"`
	Messages            []Message       `json:"messages"`
	MaxTokens           *int64          `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	TopK                *int64          `json:"top_k,omitempty"` // not OpenAI: carried for Anthropic/Gemini
	N                   *int64          `json:"n,omitempty"`
	Stop                StringList      `json:"stop,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *StreamOptions  `json:"stream_options,omitempty"`
	Tools               []Tool          `json:"tools,omitempty"`
	ToolChoice          *ToolChoice     `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	ResponseFormat      json.RawMessage `json:"response_format,omitempty"`
	User                string          `json:"user,omitempty"`
	Seed                *int64          `json:"seed,omitempty"`
	PresencePenalty     *float64        `json:"presence_penalty,omitempty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty,omitempty"`
	Logprobs            *bool           `json:"logprobs,omitempty"`
	ReasoningEffort     string          `json:"reasoning_effort,omitempty"`
	Metadata            json.RawMessage `json:"metadata,omitempty"`

	// Set by the Responses decoder, never sent upstream:
	// ToolNamespaces maps the flattened function tools of namespace tools
	// to the client's names; DroppedTools lists the types of the hosted
	// tools left out of the request (see responses_tools.go).
	ToolNamespaces map[string]NamespacedName `json:"-"`
	DroppedTools   []string                  `json:"-"`
}

// OutputLimit returns max_completion_tokens, else max_tokens, else 0.
func (r *ChatRequest) OutputLimit() int64 {
	if r.MaxCompletionTokens != nil {
		return *r.MaxCompletionTokens
	}
	if r.MaxTokens != nil {
		return *r.MaxTokens
	}
	return 0
}

// StreamOptions is OpenAI's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage,omitempty"`
}

// StringList is a JSON string or array of strings (OpenAI's "stop").
type StringList []string

// UnmarshalJSON accepts a string or an array of strings.
func (s *StringList) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = StringList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*s = many
	return nil
}

// Message is one chat message. Content is either a plain string (Text set,
// Parts nil) or an array of parts; a message with tool calls may have
// neither.
type Message struct {
	Role       string     `json:"role"` // system, developer, user, assistant, tool
	Content    Content    `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// Refusal is set on assistant messages that refused.
	Refusal string `json:"refusal,omitempty"`
	// CacheControl is a prompt-cache breakpoint on the message as a whole
	// (Anthropic's cache_control, e.g. {"type":"ephemeral"}): the cache
	// covers the prompt up to the end of this message. Providers that
	// cache by breakpoint (Anthropic, Bedrock) get it on the message's last
	// block; the others do not see it. See also Part and Tool.
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// Content is a message's content: a string, an array of parts, or null.
type Content struct {
	Text  string
	Parts []Part
	// IsParts says the content was (or is to be written as) an array.
	IsParts bool
	// Null says the content was null or absent.
	Null bool
}

// TextContent returns string content.
func TextContent(s string) Content { return Content{Text: s} }

// PartsContent returns array content.
func PartsContent(p ...Part) Content { return Content{Parts: p, IsParts: true} }

// String returns the text of the content: the string, or the text parts
// joined with no separator.
func (c Content) String() string {
	if !c.IsParts {
		return c.Text
	}
	var s string
	for _, p := range c.Parts {
		if p.Type == "text" {
			s += p.Text
		}
	}
	return s
}

// MarshalJSON writes a string, an array or null.
func (c Content) MarshalJSON() ([]byte, error) {
	switch {
	case c.IsParts:
		if c.Parts == nil {
			return []byte("[]"), nil
		}
		return json.Marshal(c.Parts)
	case c.Null && c.Text == "":
		return []byte("null"), nil
	default:
		return json.Marshal(c.Text)
	}
}

// UnmarshalJSON reads a string, an array of parts or null.
func (c *Content) UnmarshalJSON(b []byte) error {
	*c = Content{}
	switch {
	case len(b) == 0 || string(b) == "null":
		c.Null = true
		return nil
	case b[0] == '"':
		return json.Unmarshal(b, &c.Text)
	case b[0] == '[':
		c.IsParts = true
		return json.Unmarshal(b, &c.Parts)
	default:
		return fmt.Errorf("content must be a string, an array or null")
	}
}

// Part is one content part: text or an image (input_audio and file are
// refused by translators that cannot carry them).
type Part struct {
	Type     string    `json:"type"` // text, image_url, input_audio, file
	Text     string    `json:"text,omitempty"`
	ImageURL *ImageURL `json:"image_url,omitempty"`
	// Other part kinds are kept raw so that pass-through loses nothing.
	InputAudio json.RawMessage `json:"input_audio,omitempty"`
	File       json.RawMessage `json:"file,omitempty"`
	// CacheControl is a prompt-cache breakpoint after this part (see
	// Message.CacheControl); OpenAI-format clients set it as LiteLLM's
	// convention has it.
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// ImageURL is an image by URL or as a data: URL (base64).
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// Tool is a function tool definition.
type Tool struct {
	Type     string       `json:"type"` // "function"
	Function FunctionDecl `json:"function"`
	// CacheControl is a prompt-cache breakpoint after this tool's
	// definition (see Message.CacheControl).
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// FunctionDecl describes a function the model may call.
type FunctionDecl struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"` // JSON Schema
	Strict      *bool           `json:"strict,omitempty"`
}

// ToolChoice is "none", "auto", "required" or a named function.
type ToolChoice struct {
	Mode     string // none, auto, required; "function" when Function is set
	Function string
}

// MarshalJSON writes the string form or {"type":"function",...}.
func (t ToolChoice) MarshalJSON() ([]byte, error) {
	if t.Function != "" {
		return json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": t.Function}})
	}
	return json.Marshal(t.Mode)
}

// UnmarshalJSON reads either form.
func (t *ToolChoice) UnmarshalJSON(b []byte) error {
	*t = ToolChoice{}
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &t.Mode)
	}
	var obj struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return err
	}
	t.Mode, t.Function = "function", obj.Function.Name
	return nil
}

// ToolCall is a call the assistant made. In stream chunks Index is set and
// fields arrive in pieces (Arguments concatenated across deltas).
type ToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its JSON arguments as a
// string.
type FunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// ChatResponse is an OpenAI chat completion.
type ChatResponse struct {
	ID                string   `json:"id"`
	Object            string   `json:"object"` // "chat.completion"
	Created           int64    `json:"created"`
	Model             string   `json:"model"`
	Choices           []Choice `json:"choices"`
	Usage             *Usage   `json:"usage,omitempty"`
	SystemFingerprint string   `json:"system_fingerprint,omitempty"`
}

// Choice is one completion choice.
type Choice struct {
	Index        int     `json:"index"`
	Message      Message `json:"message"`
	FinishReason string  `json:"finish_reason"` // stop, length, tool_calls, content_filter
}

// Usage is token usage in OpenAI's shape.
type Usage struct {
	PromptTokens        int64         `json:"prompt_tokens"`
	CompletionTokens    int64         `json:"completion_tokens"`
	TotalTokens         int64         `json:"total_tokens"`
	PromptTokensDetails *TokenDetails `json:"prompt_tokens_details,omitempty"`
	// CacheCreationTokens is Anthropic's cache_creation_input_tokens,
	// counted inside PromptTokens; kept so Anthropic inbound can report it.
	CacheCreationTokens int64 `json:"-"`
}

// TokenDetails carries cached_tokens.
type TokenDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// Cached returns the cached prompt tokens.
func (u *Usage) Cached() int64 {
	if u == nil || u.PromptTokensDetails == nil {
		return 0
	}
	return u.PromptTokensDetails.CachedTokens
}

// Chunk is one chat.completion.chunk of a stream.
type Chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"` // "chat.completion.chunk"
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	Usage   *Usage        `json:"usage,omitempty"`
}

// ChunkChoice is the delta of one choice.
type ChunkChoice struct {
	Index        int     `json:"index"`
	Delta        Delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

// Delta is the piece of a message a chunk carries.
type Delta struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Refusal   *string    `json:"refusal,omitempty"`
}

// Finish reasons of the canonical format.
const (
	FinishStop          = "stop"
	FinishLength        = "length"
	FinishToolCalls     = "tool_calls"
	FinishContentFilter = "content_filter"
)

// ErrorKind classifies an upstream error for retries and fallbacks.
type ErrorKind uint8

// Error kinds.
const (
	KindOther           ErrorKind = iota
	KindInvalidRequest            // 400: do not retry, do not fall back
	KindAuth                      // 401/403 from the upstream: the gateway's credential is wrong
	KindNotFound                  // 404: the model does not exist upstream
	KindRateLimited               // 429 (transient): retry, cool down, fall back
	KindQuotaExhausted            // the account's quota or credit is used up: fall back
	KindContextOverflow           // the prompt is too long for the model: fall back (context fallbacks)
	KindOverloaded                // 5xx / 529: retry, cool down, fall back
	KindTimeout
	KindBadResponse // the upstream's answer could not be understood: 502
)

// Error is an error to give the client in its inbound format, or one an
// upstream answered with (classified by Kind).
type Error struct {
	Status  int    // HTTP status for the client
	Type    string // OpenAI error type, e.g. invalid_request_error
	Code    string // machine-readable code, e.g. context_length_exceeded
	Param   string
	Message string
	Kind    ErrorKind
}

func (e *Error) Error() string { return e.Message }

// Invalid returns a 400 refusal of the inbound request.
func Invalid(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_request",
		Param: param, Message: fmt.Sprintf(format, args...), Kind: KindInvalidRequest}
}

// Unsupported returns a 400 refusal of a field the chosen provider cannot
// honour.
func Unsupported(param, provider string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "unsupported_parameter",
		Param: param, Message: fmt.Sprintf("'%s' is not supported by the %s provider this model is routed to.", param, provider),
		Kind: KindInvalidRequest}
}

// BadResponse returns a 502 for an upstream answer that could not be read.
func BadResponse(provider, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadGateway, Type: "upstream_error", Code: "bad_upstream_response",
		Message: "The " + provider + " upstream sent an answer the gateway could not read: " + fmt.Sprintf(format, args...),
		Kind:    KindBadResponse}
}

// Target is what a provider adapter needs of a deployment.
type Target struct {
	Provider      string
	BaseURL       string // API root without a trailing slash
	UpstreamModel string
	Credential    string // API key, bearer token, or for Bedrock "ACCESS_KEY_ID:SECRET[:SESSION_TOKEN]"
	// Options are provider-specific settings (api_version for Azure,
	// region for Bedrock, project/location for Vertex).
	Options map[string]string
}

// Provider is an upstream wire format. Implementations are stateless and
// safe for concurrent use.
type Provider interface {
	// NewRequest encodes req for t. stream says the client wants a stream
	// (req.Stream is also set). The returned request has no context; the
	// caller sets one.
	NewRequest(req *ChatRequest, t *Target, stream bool) (*http.Request, error)
	// ParseResponse decodes a successful (2xx) non-streaming answer.
	ParseResponse(body []byte, model string) (*ChatResponse, error)
	// NewStreamDecoder reads a successful streaming answer.
	NewStreamDecoder(r io.Reader, model string) StreamDecoder
	// ParseError classifies a non-2xx answer.
	ParseError(status int, header http.Header, body []byte) *Error
}

// StreamDecoder yields canonical chunks from an upstream stream.
type StreamDecoder interface {
	// Next returns the next chunk. It returns io.EOF after the stream
	// ended cleanly, and another error (an *Error for an error event the
	// upstream sent mid-stream) when it broke. Usage, when the upstream
	// reports it, arrives on a chunk's Usage (possibly with no choices).
	Next() (*Chunk, error)
}

// Inbound is a client-facing API format.
type Inbound interface {
	// DecodeRequest reads a client's request into the canonical form.
	DecodeRequest(body []byte) (*ChatRequest, error)
	// EncodeResponse writes a canonical answer in the inbound format.
	EncodeResponse(resp *ChatResponse) ([]byte, error)
	// NewStreamEncoder writes a canonical stream as the inbound format's
	// events to w (whole events per Write call; the caller flushes).
	NewStreamEncoder(w io.Writer, model string) StreamEncoder
	// EncodeError writes e as the inbound format's error body.
	EncodeError(e *Error) []byte
}

// StreamEncoder writes canonical chunks as inbound events.
type StreamEncoder interface {
	// WriteChunk writes the events for one chunk (possibly none).
	WriteChunk(c *Chunk) error
	// Close writes the end of the stream (e.g. [DONE], message_stop),
	// after every chunk; usage is the whole stream's usage if known.
	Close(usage *Usage) error
	// Fail writes an error event mid-stream, where the format has one.
	Fail(e *Error) error
}
