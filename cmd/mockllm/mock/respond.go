package mock

import (
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

// request is the union of the request fields the endpoints look at.
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
	Input          json.RawMessage `json:"input"`
	Dimensions     int             `json:"dimensions"`
	EncodingFormat string          `json:"encoding_format"`
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

func (s *Server) completion(w http.ResponseWriter, r *http.Request, req *request, p *params, k *kind) {
	chars := int(req.Prompt)
	for _, m := range req.Messages {
		chars += int(m.Content)
	}
	u := usage{prompt: max(1, tokens(chars))}

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
		s.finish(s.stream(w, r.Context(), k, b, req.StreamOptions.IncludeUsage, p, u))
		return
	}

	text := content(p.size)
	u.completion = tokens(len(text))
	if k.chat {
		b = append(b, `{"index":0,"message":{"role":"assistant","content":"`...)
		b = append(b, text...)
		b = append(b, `","refusal":null},`...)
	} else {
		b = append(b, `{"text":"`...)
		b = append(b, text...)
		b = append(b, `","index":0,`...)
	}
	b = append(b, `"logprobs":null,"finish_reason":"stop"}],"usage":`...)
	b = append(appendUsage(b, u), '}')
	*buf = b
	s.finish(s.writeBody(w, http.StatusOK, b, p.fault == faultMidStream))
}

// stream writes p.chunks server-sent events; head is the JSON object up to
// and including `"choices":[`.
func (s *Server) stream(w http.ResponseWriter, ctx context.Context, k *kind, head []byte, includeUsage bool, p *params, u usage) error {
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
		b = appendChunk(b[:n0], k, i, i == p.chunks-1, includeUsage)
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

func appendChunk(b []byte, k *kind, i int, final, includeUsage bool) []byte {
	tok := streamTokens[i%len(streamTokens)]
	switch {
	case !k.chat:
		b = append(b, `{"text":"`...)
		b = append(b, tok...)
		b = append(b, `","index":0,`...)
	case i == 0:
		b = append(b, `{"index":0,"delta":{"role":"assistant","content":"`...)
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
