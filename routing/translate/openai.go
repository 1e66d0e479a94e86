package translate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// OpenAIChat is the OpenAI chat completions wire format as a provider: the
// canonical request is the wire request. It serves OpenAI, Azure OpenAI
// and every OpenAI-compatible server when the client spoke another format
// (requests in the OpenAI format itself take the proxy's pass-through
// path, which never decodes them).
var OpenAIChat Provider = openAIProvider{}

// OpenAIInbound is the OpenAI chat completions format as an inbound API,
// used when a chat request goes to a provider of another format.
var OpenAIInbound Inbound = openAIInbound{}

type openAIProvider struct{}

// OpenAIURL returns the chat completions (or other endpoint's) URL of an
// OpenAI-wire deployment: BaseURL+path, or for Azure OpenAI the deployment
// URL with its api-version.
func OpenAIURL(t *Target, path string) string {
	if t.Provider == "azure-openai" {
		v := t.Options["api_version"]
		if v == "" {
			v = "2024-10-21"
		}
		return t.BaseURL + "/openai/deployments/" + url.PathEscape(t.UpstreamModel) + path + "?api-version=" + url.QueryEscape(v)
	}
	return t.BaseURL + path
}

// SetOpenAIAuth sets the credential header of an OpenAI-wire deployment:
// api-key for Azure OpenAI, a bearer token for the others.
func SetOpenAIAuth(h http.Header, t *Target) {
	if t.Credential == "" {
		return
	}
	if t.Provider == "azure-openai" {
		h["Api-Key"] = []string{t.Credential}
		return
	}
	h["Authorization"] = []string{"Bearer " + t.Credential}
}

func (openAIProvider) NewRequest(req *ChatRequest, t *Target, stream bool) (*http.Request, error) {
	out := *req
	out.Model = t.UpstreamModel
	out.Stream = stream
	// OpenAI's reasoning models (o-series, gpt-5) refuse max_tokens; every
	// current OpenAI chat model takes max_completion_tokens. Servers that
	// only copy the API (vLLM, Ollama, ...) may know max_tokens alone.
	// Azure api-versions before 2024-09-01 refuse max_completion_tokens:
	// there the limit goes as max_tokens (a Responses client's
	// max_output_tokens arrives as max_completion_tokens).
	oldAzure := t.Provider == "azure-openai" && AzureBeforeCompletionTokens(t.Options["api_version"])
	switch {
	case oldAzure:
		if out.MaxTokens == nil && out.MaxCompletionTokens != nil {
			out.MaxTokens, out.MaxCompletionTokens = out.MaxCompletionTokens, nil
		}
	case (t.Provider == "openai" || t.Provider == "azure-openai") && out.MaxCompletionTokens == nil && out.MaxTokens != nil:
		out.MaxCompletionTokens, out.MaxTokens = out.MaxTokens, nil
	}
	out.Messages = openAIToolImages(out.Messages)
	out.Messages, out.Tools = withoutCacheControl(out.Messages, out.Tools)
	out.StreamOptions = nil
	if stream && t.Options["preset"] != "mistral" && t.Options["preset"] != "perplexity" {
		out.StreamOptions = &StreamOptions{IncludeUsage: true}
	}
	body, err := json.Marshal(&out)
	if err != nil {
		return nil, Invalid("", "the request could not be encoded: %v", err)
	}
	hr, err := http.NewRequest(http.MethodPost, OpenAIURL(t, "/chat/completions"), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header["Content-Type"] = []string{"application/json"}
	SetOpenAIAuth(hr.Header, t)
	return hr, nil
}

// AzureBeforeCompletionTokens reports whether an Azure OpenAI api-version
// predates max_completion_tokens (2024-09-01-preview): a dated version
// before 2024-09-01. The default, and versions that are not dates (the v1
// API's "preview" and "latest"), know it.
func AzureBeforeCompletionTokens(v string) bool {
	if len(v) < 10 {
		return false
	}
	if _, err := time.Parse(time.DateOnly, v[:10]); err != nil {
		return false
	}
	return v[:10] < "2024-09-01"
}

// withoutCacheControl returns msgs and tools without prompt-cache
// breakpoints, which OpenAI's format lacks (OpenAI caches prompts by
// itself). They are copied only when one has a breakpoint; the caller's
// are not modified.
func withoutCacheControl(msgs []Message, tools []Tool) ([]Message, []Tool) {
	has := false
	for i := range msgs {
		has = has || msgs[i].CacheControl != nil
		for _, p := range msgs[i].Content.Parts {
			has = has || p.CacheControl != nil
		}
	}
	for _, t := range tools {
		has = has || t.CacheControl != nil
	}
	if !has {
		return msgs, tools
	}
	outM := make([]Message, len(msgs))
	for i, m := range msgs {
		m.CacheControl = nil
		if m.Content.IsParts {
			parts := make([]Part, len(m.Content.Parts))
			for j, p := range m.Content.Parts {
				p.CacheControl = nil
				parts[j] = p
			}
			m.Content.Parts = parts
		}
		outM[i] = m
	}
	var outT []Tool
	if tools != nil {
		outT = make([]Tool, len(tools))
		for i, t := range tools {
			t.CacheControl = nil
			outT[i] = t
		}
	}
	return outM, outT
}

// openAIToolImages moves images out of tool messages, which take text
// only in OpenAI's format (an Anthropic tool_result may hold a screenshot):
// the tool message keeps its text ("[image]" when it had none), and the
// images follow, after the run of tool messages, in a user message. msgs is
// not modified.
func openAIToolImages(msgs []Message) []Message {
	has := false
	for _, m := range msgs {
		if m.Role == "tool" && m.Content.IsParts {
			for _, p := range m.Content.Parts {
				if p.Type == "image_url" {
					has = true
				}
			}
		}
	}
	if !has {
		return msgs
	}
	out := make([]Message, 0, len(msgs)+1)
	var images []Part
	flush := func() {
		if len(images) > 0 {
			parts := append([]Part{{Type: "text", Text: "The images the tools returned:"}}, images...)
			out = append(out, Message{Role: "user", Content: PartsContent(parts...)})
			images = nil
		}
	}
	for _, m := range msgs {
		if m.Role != "tool" {
			flush()
			out = append(out, m)
			continue
		}
		if m.Content.IsParts {
			var text []Part
			for _, p := range m.Content.Parts {
				if p.Type == "image_url" {
					images = append(images, p)
				} else {
					text = append(text, p)
				}
			}
			if len(text) == 0 {
				text = []Part{{Type: "text", Text: "[image]"}}
			}
			m.Content = PartsContent(text...)
		}
		out = append(out, m)
	}
	flush()
	return out
}

func (openAIProvider) ParseResponse(body []byte, model string) (*ChatResponse, error) {
	var r ChatResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, BadResponse("OpenAI-compatible", "%v", err)
	}
	if len(r.Choices) == 0 {
		return nil, BadResponse("OpenAI-compatible", "the response has no choices")
	}
	r.Model = model
	return &r, nil
}

func (openAIProvider) NewStreamDecoder(r io.Reader, model string) StreamDecoder {
	return &openAIStream{sse: NewSSEReader(r), model: model}
}

func (openAIProvider) ParseError(status int, _ http.Header, body []byte) *Error {
	return ParseOpenAIError(status, body)
}

// ParseOpenAIError classifies an OpenAI-shaped error answer.
func ParseOpenAIError(status int, body []byte) *Error {
	var eb struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Param   any    `json:"param"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	e := &Error{Status: status, Type: "upstream_error"}
	if json.Unmarshal(body, &eb) == nil && eb.Error.Message != "" {
		e.Message, e.Type = eb.Error.Message, eb.Error.Type
		if c, ok := eb.Error.Code.(string); ok {
			e.Code = c
		}
		if p, ok := eb.Error.Param.(string); ok {
			e.Param = p
		}
	} else {
		snippet := strings.TrimSpace(string(body))
		if len(snippet) > 200 {
			snippet = snippet[:200] + "…"
		}
		e.Message = "The upstream answered " + http.StatusText(status) + ": " + snippet
	}
	msg := strings.ToLower(e.Message)
	switch {
	case e.Code == "insufficient_quota" || e.Type == "insufficient_quota" || strings.Contains(msg, "exceeded your current quota"):
		e.Kind, e.Code = KindQuotaExhausted, "insufficient_quota"
	case status == http.StatusTooManyRequests:
		// Before the message guesses: a 429 "too many tokens" is a
		// tokens-per-minute limit, not a long prompt.
		e.Kind = KindRateLimited
	case e.Code == "context_length_exceeded" || ((status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge) &&
		(strings.Contains(msg, "maximum context length") || strings.Contains(msg, "context window") ||
			strings.Contains(msg, "too many tokens") || strings.Contains(msg, "context length"))):
		e.Kind, e.Code = KindContextOverflow, "context_length_exceeded"
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Kind, e.Status = KindAuth, http.StatusBadGateway
	case status == http.StatusNotFound:
		e.Kind = KindNotFound
	case status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout:
		e.Kind = KindTimeout
	case status >= 500:
		e.Kind = KindOverloaded
	case status >= 400:
		e.Kind = KindInvalidRequest
	}
	return e
}

type openAIStream struct {
	sse   *SSEReader
	model string
}

func (s *openAIStream) Next() (*Chunk, error) {
	for {
		ev, err := s.sse.Next()
		if err != nil {
			return nil, err
		}
		data := bytes.TrimSpace(ev.Data)
		if len(data) == 0 {
			continue
		}
		if string(data) == "[DONE]" {
			return nil, io.EOF
		}
		if bytes.HasPrefix(data, []byte(`{"error"`)) {
			return nil, ParseOpenAIError(http.StatusBadGateway, data)
		}
		var c Chunk
		if err := json.Unmarshal(data, &c); err != nil {
			return nil, BadResponse("OpenAI-compatible", "stream event: %v", err)
		}
		c.Model = s.model
		return &c, nil
	}
}

type openAIInbound struct{}

func (openAIInbound) DecodeRequest(body []byte) (*ChatRequest, error) {
	var r ChatRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, Invalid("", "We could not parse the JSON body of your request: %v", err)
	}
	if len(r.Messages) == 0 {
		return nil, Invalid("messages", "'messages' must be a non-empty array.")
	}
	return &r, nil
}

func (openAIInbound) EncodeResponse(resp *ChatResponse) ([]byte, error) {
	if resp.Object == "" {
		resp.Object = "chat.completion"
	}
	for i := range resp.Choices {
		if resp.Choices[i].Message.Role == "" {
			resp.Choices[i].Message.Role = "assistant"
		}
		if !resp.Choices[i].Message.Content.IsParts && resp.Choices[i].Message.Content.Text == "" && len(resp.Choices[i].Message.ToolCalls) > 0 {
			resp.Choices[i].Message.Content.Null = true
		}
	}
	return json.Marshal(resp)
}

func (openAIInbound) NewStreamEncoder(w io.Writer, model string) StreamEncoder {
	return &openAIEncoder{w: w, model: model}
}

func (openAIInbound) EncodeError(e *Error) []byte {
	return EncodeOpenAIError(e)
}

// EncodeOpenAIError writes e in OpenAI's error shape.
func EncodeOpenAIError(e *Error) []byte {
	type detail struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	d := detail{Message: e.Message, Type: e.Type}
	if d.Type == "" {
		d.Type = "upstream_error"
	}
	if e.Param != "" {
		d.Param = &e.Param
	}
	if e.Code != "" {
		d.Code = &e.Code
	}
	b, _ := json.Marshal(struct {
		Error detail `json:"error"`
	}{d})
	return b
}

// openAIEncoder writes canonical chunks as OpenAI's SSE. The usage chunk
// is written only when the client asked for it (IncludeUsage).
type openAIEncoder struct {
	w            io.Writer
	model        string
	IncludeUsage bool
	buf          []byte
}

// SetIncludeUsage makes an OpenAI stream encoder send the usage chunk (the
// client set stream_options.include_usage).
func SetIncludeUsage(enc StreamEncoder, on bool) {
	switch e := enc.(type) {
	case *openAIEncoder:
		e.IncludeUsage = on
	case *completionsEncoder:
		e.includeUsage = on
	}
}

func (e *openAIEncoder) write(v any) error { return writeDataEvent(e.w, &e.buf, v) }

// writeDataEvent writes v as one server-sent "data:" event, marshalled
// into *buf (reused across events), in one Write.
func writeDataEvent(w io.Writer, buf *[]byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	*buf = append(append(append((*buf)[:0], "data: "...), b...), "\n\n"...)
	_, err = w.Write(*buf)
	return err
}

func (e *openAIEncoder) WriteChunk(c *Chunk) error {
	c.Object, c.Model = "chat.completion.chunk", e.model
	if len(c.Choices) == 0 {
		if c.Usage == nil || !e.IncludeUsage {
			return nil
		}
		return e.write(c)
	}
	u := c.Usage
	if !e.IncludeUsage {
		c.Usage = nil
	}
	err := e.write(c)
	c.Usage = u
	return err
}

func (e *openAIEncoder) Close(*Usage) error {
	_, err := io.WriteString(e.w, "data: [DONE]\n\n")
	return err
}

func (e *openAIEncoder) Fail(err *Error) error {
	e.buf = append(append(append(e.buf[:0], "data: "...), EncodeOpenAIError(err)...), "\n\n"...)
	_, werr := e.w.Write(e.buf)
	return werr
}

// SSEEvent is one server-sent event.
type SSEEvent struct {
	Event string
	Data  []byte // data lines joined with '\n'
}

// SSEReader reads server-sent events of any size.
type SSEReader struct {
	br  *bufio.Reader
	ev  SSEEvent
	max int
}

// NewSSEReader returns a reader of the events in r. Events over 16 MiB
// are an error.
func NewSSEReader(r io.Reader) *SSEReader {
	return &SSEReader{br: bufio.NewReaderSize(r, 16<<10), max: 16 << 20}
}

// EventBuffered reports whether a whole next event (up to its blank line)
// has arrived already: a relay may then write the event it holds together
// with that one, without making either wait for the network.
func (r *SSEReader) EventBuffered() bool {
	n := r.br.Buffered()
	if n == 0 {
		return false
	}
	b, _ := r.br.Peek(n)
	hasAny := false // as Next: only an event or data field makes an event
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return false
		}
		line := bytes.TrimSuffix(b[:i], []byte{'\r'})
		b = b[i+1:]
		if len(line) == 0 {
			if hasAny {
				return true
			}
			continue
		}
		if f, _, _ := bytes.Cut(line, []byte{':'}); string(f) == "event" || string(f) == "data" {
			hasAny = true
		}
	}
}

// EventBuffered reports whether br holds a whole server-sent event beyond
// what was read from it.
func EventBuffered(br *bufio.Reader) bool {
	n := br.Buffered()
	if n == 0 {
		return false
	}
	b, _ := br.Peek(n)
	return bytes.Contains(b, lfLF) || bytes.Contains(b, lfCRLF)
}

var (
	lfLF   = []byte("\n\n")
	lfCRLF = []byte("\n\r\n")
)

// ErrEventTooLarge is returned for an event over the reader's limit.
var ErrEventTooLarge = errors.New("server-sent event too large")

// Next returns the next event with data (or an event name). The event is
// valid until the next call. It returns io.EOF at the end of the stream;
// a final event not followed by a blank line is still returned.
func (s *SSEReader) Next() (*SSEEvent, error) {
	s.ev.Event, s.ev.Data = "", s.ev.Data[:0]
	hasData, hasAny := false, false
	for {
		line, err := s.readLine()
		if err != nil {
			if err == io.EOF && hasAny {
				return &s.ev, nil
			}
			return nil, err
		}
		if len(line) == 0 {
			if hasAny {
				return &s.ev, nil
			}
			continue
		}
		if line[0] == ':' {
			continue // a comment
		}
		field, value, _ := bytes.Cut(line, []byte{':'})
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(field) {
		case "event":
			s.ev.Event, hasAny = string(value), true
		case "data":
			if hasData {
				s.ev.Data = append(s.ev.Data, '\n')
			}
			if len(s.ev.Data)+len(value) > s.max {
				return nil, ErrEventTooLarge
			}
			s.ev.Data = append(s.ev.Data, value...)
			hasData, hasAny = true, true
		}
	}
}

// readLine returns one line without its line ending; long lines are
// assembled up to the limit.
func (s *SSEReader) readLine() ([]byte, error) {
	line, err := s.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		long := append([]byte(nil), line...)
		for err == bufio.ErrBufferFull {
			if len(long) > s.max {
				return nil, ErrEventTooLarge
			}
			line, err = s.br.ReadSlice('\n')
			long = append(long, line...)
		}
		line = long
	}
	if err != nil && (err != io.EOF || len(line) == 0) {
		return nil, err
	}
	line = bytes.TrimSuffix(line, []byte{'\n'})
	line = bytes.TrimSuffix(line, []byte{'\r'})
	return line, nil
}
