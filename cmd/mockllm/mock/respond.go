package mock

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/fnv"
	"math"
	"net/http"
	"strconv"
	"time"
)

// request is the union of the request fields the OpenAI endpoints look at.
type request struct {
	Model    string `json:"model"`
	Messages []struct {
		Content textLen `json:"content"`
	} `json:"messages"`
	Prompt        textLen `json:"prompt"`
	Stream        bool    `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools          present         `json:"tools"` // decoded by openAITurn when present
	Input          json.RawMessage `json:"input"`
	Dimensions     int             `json:"dimensions"`
	EncodingFormat string          `json:"encoding_format"`
}

// present records whether a JSON field is there and not null, without
// decoding or copying it.
type present bool

func (p *present) UnmarshalJSON(b []byte) error {
	*p = len(b) > 0 && b[0] != 'n'
	return nil
}

// serveOpenAI serves the OpenAI routes, and in format azure Azure
// OpenAI's (key in api-key, a deployment path's deployment as the model
// when the body names none).
func (s *Server) serveOpenAI(w http.ResponseWriter, r *http.Request, o op, f format, deployment string) {
	var req request
	var body []byte
	auth, source := r.Header.Get("Authorization"), "authorization"
	if f == azure {
		if k := r.Header.Get("Api-Key"); k != "" || auth == "" {
			auth, source = k, "api-key"
		}
		if msg := azureQueryError(r, deployment); msg != "" {
			s.record(auth, source, nil)
			s.writeError(w, http.StatusNotFound, msg, "404")
			return
		}
	}
	if o != opModels {
		buf := getBuf()
		defer putBuf(buf)
		var ok bool
		if body, ok = s.readRecorded(w, r, buf, openAI, auth, source); !ok {
			return
		}
		if err := json.Unmarshal(body, &req); err != nil {
			s.writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request: "+err.Error(), "")
			return
		}
		if req.Model == "" {
			req.Model = deployment
		}
		if req.Model == "" {
			s.writeError(w, http.StatusBadRequest, "you must provide a model parameter", "")
			return
		}
	} else {
		s.record(auth, "authorization", nil)
	}

	p := s.params()
	var err error
	if req.Model, err = p.directives(r.Header, req.Model); err != nil {
		s.writeError(w, http.StatusBadRequest, err.Error(), "invalid_mock_directive")
		return
	}
	if s.inject(w, r.Context(), &p, openAI) {
		return
	}

	switch o {
	case opChat:
		if len(req.Messages) == 0 {
			s.writeError(w, http.StatusBadRequest, "'messages' is a required property", "")
			return
		}
		// Only requests that may hold tools, tool results or images are
		// decoded further; the plain chat path stays as cheap as it was.
		var rp *reply
		if bool(req.Tools) || mayHaveExtras(body) {
			t, err := openAITurn(body)
			if err != nil {
				s.writeError(w, http.StatusBadRequest, err.Error(), "")
				return
			}
			if t.images > 0 || t.hasResult || len(t.tools) > 0 {
				plan := t.plan(&p, req.Stream)
				rp = &plan
			}
		}
		s.completion(w, r, &req, &p, &chatKind, rp)
	case opCompletions:
		s.completion(w, r, &req, &p, &textKind, nil)
	case opEmbeddings:
		s.embeddings(w, &req, &p)
	case opResponses:
		s.responses(w, r, body, req.Model, &p)
	case opModels:
		s.finish(s.writeBody(w, http.StatusOK, modelsBody, p.fault == faultMidStream))
	}
}

// kind is what differs between chat and legacy text completions.
type kind struct {
	idPrefix, object, chunkObject string
	chat                          bool
}

var (
	chatKind = kind{"chatcmpl-mock-", "chat.completion", "chat.completion.chunk", true}
	textKind = kind{"cmpl-mock-", "text_completion", "text_completion", false}
)

type usage struct{ prompt, completion int }

// tokens approximates a token count as ceil(chars/4).
func tokens(chars int) int { return (chars + 3) / 4 }

// completion answers a chat or legacy completion; rp, when not nil, is the
// planned answer of a chat request with tools, tool results or images.
func (s *Server) completion(w http.ResponseWriter, r *http.Request, req *request, p *params, k *kind, rp *reply) {
	chars := int(req.Prompt)
	for _, m := range req.Messages {
		chars += int(m.Content)
	}
	u := usage{prompt: max(1, tokens(chars)) + p.cacheWrite}

	buf := getBuf()
	defer putBuf(buf)
	b := append((*buf)[:0], `{"id":"`...)
	b = append(b, k.idPrefix...)
	b = strconv.AppendInt(b, s.seq.Add(1), 10)
	b = append(b, `","object":"`...)
	if req.Stream {
		b = append(b, k.chunkObject...)
	} else {
		b = append(b, k.object...)
	}
	b = append(b, `","created":`...)
	b = strconv.AppendInt(b, time.Now().Unix(), 10)
	b = append(b, `,"model":`...)
	b = appendString(b, req.Model)
	b = append(b, `,"choices":[`...)
	if req.Stream {
		*buf = b
		if rp != nil && rp.tool != nil {
			s.finish(s.streamToolCall(w, r.Context(), b, req.StreamOptions.IncludeUsage, p, u, rp))
			return
		}
		prefix := ""
		if rp != nil {
			prefix = rp.prefix
		}
		s.finish(s.stream(w, r.Context(), k, b, req.StreamOptions.IncludeUsage, p, u, prefix))
		return
	}

	text := content(p.size)
	u.completion = tokens(len(text))
	finish := `"stop"}],"usage":`
	switch {
	case !k.chat:
		b = append(b, `{"text":"`...)
		b = append(b, text...)
		b = append(b, `","index":0,`...)
	case rp == nil:
		b = append(b, `{"index":0,"message":{"role":"assistant","content":"`...)
		b = append(b, text...)
		b = append(b, `","refusal":null},`...)
	default:
		b = append(b, `{"index":0,"message":{"role":"assistant","content":`...)
		if rp.tool != nil && rp.prefix == "" {
			b = append(b, "null"...)
		} else {
			b = appendString(b, rp.text)
		}
		if rp.tool != nil {
			b = append(b, `,"tool_calls":[{"id":"call_mock_1","type":"function","function":{"name":`...)
			b = appendString(b, rp.tool.name)
			b = append(b, `,"arguments":`...)
			b = appendString(b, string(rp.args))
			b = append(b, "}}]"...)
			finish = `"tool_calls"}],"usage":`
		}
		b = append(b, `,"refusal":null},`...)
		u.completion = rp.output
	}
	b = append(b, `"logprobs":null,"finish_reason":`...)
	b = append(b, finish...)
	b = append(appendUsage(b, u), '}')
	*buf = b
	s.finish(s.writeBody(w, http.StatusOK, b, p.fault == faultMidStream))
}

// stream writes p.chunks server-sent events; head is the JSON object up to
// and including `"choices":[`; prefix starts the first chunk's content.
func (s *Server) stream(w http.ResponseWriter, ctx context.Context, k *kind, head []byte, includeUsage bool, p *params, u usage, prefix string) error {
	h := w.Header()
	h["Content-Type"] = sseType
	h["Cache-Control"] = noCache
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)

	buf := getBuf()
	defer putBuf(buf)
	b := append(append((*buf)[:0], "data: "...), head...)
	n0 := len(b)
	defer func() { *buf = b }()

	last := p.chunks
	if p.fault == faultMidStream {
		last = p.chunks / 2
	}
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for i := range last {
		if i > 0 && p.interval > 0 && !sleep(ctx, &t, p.interval) {
			return ctx.Err()
		}
		b = appendChunk(b[:n0], k, i, i == p.chunks-1, includeUsage, prefix)
		if err := writeFlush(w, rc, b); err != nil {
			return err
		}
	}
	if p.fault == faultMidStream {
		s.reset(w)
		return errReset
	}
	if includeUsage {
		u.completion = p.chunks
		b = appendUsage(append(b[:n0], `],"usage":`...), u)
		b = append(b, "}\n\n"...)
	} else {
		b = b[:0]
	}
	return writeFlush(w, rc, append(b, "data: [DONE]\n\n"...))
}

// streamToolCall streams a chat answer that calls a tool: the role (and the
// prefix as content, if any), the call's id and name, its arguments in
// pieces (the content deltas), and a last chunk with finish_reason
// "tool_calls"; head is as for stream.
func (s *Server) streamToolCall(w http.ResponseWriter, ctx context.Context, head []byte, includeUsage bool, p *params, u usage, rp *reply) error {
	off := rp.pieces(p.chunks)
	st := s.startStream(w, ctx, p, sseType, rp.deltas+len(off)-1)
	defer st.end()
	buf := getBuf()
	defer putBuf(buf)
	b := append(append((*buf)[:0], "data: "...), head...)
	n0 := len(b)
	defer func() { *buf = b }()
	tail := `"logprobs":null,"finish_reason":null}]}` + "\n\n"
	if includeUsage {
		tail = `"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"
	}

	b = append(b[:n0], `{"index":0,"delta":{"role":"assistant","content":`...)
	if rp.deltas > 0 {
		if err := st.delta(); err != nil {
			return err
		}
		b = append(appendString(b, rp.prefix), "},"...)
		b = append(b, tail...)
		if err := st.send(b); err != nil {
			return err
		}
		b = append(b[:n0], `{"index":0,"delta":{`...)
	} else {
		b = append(b, "null,"...)
	}
	b = append(b, `"tool_calls":[{"index":0,"id":"call_mock_1","type":"function","function":{"name":`...)
	b = appendString(b, rp.tool.name)
	b = append(b, `,"arguments":""}}]},`...)
	b = append(b, tail...)
	if err := st.send(b); err != nil {
		return err
	}
	for i := range len(off) - 1 {
		if err := st.delta(); err != nil {
			return err
		}
		b = append(b[:n0], `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`...)
		b = appendString(b, string(rp.args[off[i]:off[i+1]]))
		b = append(b, "}}]},"...)
		b = append(b, tail...)
		if err := st.send(b); err != nil {
			return err
		}
	}
	b = append(b[:n0], `{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]`...)
	if includeUsage {
		b = append(b, `,"usage":null`...)
	}
	b = append(b, "}\n\n"...)
	if includeUsage {
		u.completion = rp.output
		b = append(b, "data: "...)
		b = append(b, head...)
		b = appendUsage(append(b, `],"usage":`...), u)
		b = append(b, "}\n\n"...)
	}
	return st.send(append(b, "data: [DONE]\n\n"...))
}

func appendChunk(b []byte, k *kind, i int, final, includeUsage bool, prefix string) []byte {
	tok := streamTokens[i%len(streamTokens)]
	switch {
	case !k.chat:
		b = append(b, `{"text":"`...)
		b = append(b, tok...)
		b = append(b, `","index":0,`...)
	case i == 0:
		b = append(b, `{"index":0,"delta":{"role":"assistant","content":"`...)
		if prefix != "" {
			b = appendEscaped(b, prefix)
		}
		b = append(b, tok...)
		b = append(b, `"},`...)
	default:
		b = append(b, `{"index":0,"delta":{"content":"`...)
		b = append(b, tok...)
		b = append(b, `"},`...)
	}
	if final {
		b = append(b, `"logprobs":null,"finish_reason":"stop"}]`...)
	} else {
		b = append(b, `"logprobs":null,"finish_reason":null}]`...)
	}
	if includeUsage {
		b = append(b, `,"usage":null`...)
	}
	return append(b, "}\n\n"...)
}

func appendUsage(b []byte, u usage) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.prompt), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.completion), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.prompt+u.completion), 10)
	return append(b, '}')
}

func (s *Server) embeddings(w http.ResponseWriter, req *request, p *params) {
	inputs, err := splitInput(req.Input)
	if err != nil {
		s.writeError(w, http.StatusBadRequest, err.Error(), "")
		return
	}
	dims := s.opts.EmbeddingDims
	if req.Dimensions > 0 {
		dims = min(req.Dimensions, 4096)
	}
	vec := make([]float32, dims)
	buf := getBuf()
	defer putBuf(buf)
	b := append((*buf)[:0], `{"object":"list","data":[`...)
	total := 0
	for i, in := range inputs {
		var n textLen
		_ = json.Unmarshal(in, &n) // already valid JSON
		total += max(1, tokens(int(n)))
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		b = appendVector(b, fillVector(vec, in), req.EncodingFormat == "base64")
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = appendString(b, req.Model)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	b = append(b, "}}"...)
	*buf = b
	s.finish(s.writeBody(w, http.StatusOK, b, p.fault == faultMidStream))
}

// splitInput returns the inputs of an embeddings request: a string, an array
// of strings, an array of token ids, or an array of token-id arrays.
func splitInput(raw json.RawMessage) ([]json.RawMessage, error) {
	errInput := errors.New("'input' must be a non-empty string or array")
	if len(raw) == 0 {
		return nil, errInput
	}
	switch raw[0] {
	case '"':
		return []json.RawMessage{raw}, nil
	case '[':
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil || len(elems) == 0 {
			return nil, errInput
		}
		if c := elems[0][0]; c == '-' || c >= '0' && c <= '9' {
			return []json.RawMessage{raw}, nil // one input given as token ids
		}
		for _, e := range elems {
			if e[0] != '"' && e[0] != '[' {
				return nil, errInput
			}
		}
		return elems, nil
	}
	return nil, errInput
}

// fillVector fills v with a unit vector determined by the input's bytes.
func fillVector(v []float32, in []byte) []float32 {
	h := fnv.New64a()
	_, _ = h.Write(in)
	x := h.Sum64() | 1
	var norm float64
	for i := range v {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		f := float64(x>>11)/(1<<53)*2 - 1
		v[i] = float32(f)
		norm += f * f
	}
	if norm = math.Sqrt(norm); norm > 0 {
		for i := range v {
			v[i] = float32(float64(v[i]) / norm)
		}
	}
	return v
}

func appendVector(b []byte, v []float32, b64 bool) []byte {
	if b64 {
		raw := make([]byte, 4*len(v))
		for i, f := range v {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
		}
		return append(base64.StdEncoding.AppendEncode(append(b, '"'), raw), '"')
	}
	b = append(b, '[')
	for i, f := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(f), 'g', -1, 32)
	}
	return append(b, ']')
}

var modelsBody = func() []byte {
	b := []byte(`{"object":"list","data":[`)
	for i, id := range []string{"mock-gpt", "gpt-4o", "gpt-4o-mini", "text-embedding-3-small"} {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":"`+id+`","object":"model","created":1700000000,"owned_by":"mockllm"}`...)
	}
	return append(b, "]}"...)
}()

// mayHaveExtras reports whether a chat request body may hold a tool result
// (a message with "tool_call_id") or an image ("image_url"). Both keys hold
// a '_', a byte rare in plain chat requests, so the check costs a few
// vectorized byte scans rather than a substring search of the whole body.
func mayHaveExtras(body []byte) bool {
	for i := 0; ; i++ {
		j := bytes.IndexByte(body[i:], '_')
		if j < 0 {
			return false
		}
		i += j
		if bytes.HasSuffix(body[:i], []byte(`"tool`)) && bytes.HasPrefix(body[i:], []byte(`_call_id"`)) ||
			bytes.HasSuffix(body[:i], []byte(`"image`)) && bytes.HasPrefix(body[i:], []byte(`_url"`)) {
			return true
		}
	}
}

// openAITurn decodes the parts of a chat request that shape its answer:
// tools, tool_choice, images (image_url content parts) and a last message
// with role "tool".
func openAITurn(body []byte) (*turn, error) {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
		ToolChoice json.RawMessage `json:"tool_choice"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	t := &turn{}
	for i, m := range req.Messages {
		text, images := openAIContent(m.Content)
		t.images += images
		if i == len(req.Messages)-1 && (m.Role == "tool" || m.Role == "function") {
			t.hasResult, t.result = true, text
		}
	}
	for _, tl := range req.Tools {
		if tl.Type == "function" || tl.Type == "" {
			t.tools = append(t.tools, tool{tl.Function.Name, tl.Function.Parameters})
		}
	}
	var choice struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	switch tc := string(req.ToolChoice); {
	case tc == `"none"`:
		t.choice = choiceNone
	case json.Unmarshal(req.ToolChoice, &choice) == nil:
		t.choice = choice.Function.Name
	}
	return t, nil
}

// openAIContent returns the text of message content (a string or an array
// of parts) and its number of image_url parts.
func openAIContent(raw json.RawMessage) (string, int) {
	if len(raw) == 0 || raw[0] != '[' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return s, 0
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var text []byte
	images := 0
	for _, p := range parts {
		switch p.Type {
		case "text":
			text = append(text, p.Text...)
		case "image_url":
			images++
		}
	}
	return string(text), images
}
