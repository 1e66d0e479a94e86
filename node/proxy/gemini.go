package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/routing"
	"github.com/tollgate/tollgate/routing/translate"
)

// Google's Gemini API as a client format: POST
// /v1beta/models/{model}:generateContent, :streamGenerateContent?alt=sse and
// :countTokens, :embedContent and :batchEmbedContents (also under
// /v1/models/), with the key as x-goog-api-key or
// the key query parameter (or, as on the other paths, a bearer token or
// x-api-key). The model of the URL is a route name like any other, so a
// Gemini client reaches deployments of every provider kind through the
// canonical form (see translate.GeminiInbound).

// geminiPrefixes are the path prefixes of the Gemini API's model methods.
var geminiPrefixes = [...]string{"/v1beta/models/", "/v1/models/"}

// serveGemini serves a Gemini API path; it returns false for any other
// path.
func (h *Handler) serveGemini(w http.ResponseWriter, r *http.Request) bool {
	var rest string
	for _, p := range geminiPrefixes {
		if s, ok := strings.CutPrefix(r.URL.Path, p); ok {
			rest = s
			break
		}
	}
	i := strings.LastIndexByte(rest, ':')
	if i <= 0 {
		return false
	}
	model, method := rest[:i], rest[i+1:]
	geminiKey(r)
	fail := func(e apiError) { writeErrorIn(w, routing.EndpointGemini, e.toError(translate.KindOther)) }
	switch method {
	case "generateContent", "streamGenerateContent":
	case "countTokens":
		h.geminiCountTokens(w, r, model)
		return true
	case "embedContent", "batchEmbedContents":
		h.geminiEmbed(w, r, model, method == "batchEmbedContents")
		return true
	default:
		fail(errUnknownPath(r.URL.Path))
		return true
	}
	stream := method == "streamGenerateContent"
	if stream && r.URL.Query().Get("alt") != "sse" {
		fail(apiError{http.StatusBadRequest, typeInvalidRequest, "unsupported_stream_format", "",
			"streamGenerateContent is served as server-sent events only: add alt=sse to the URL."})
		return true
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(errMethod(http.MethodPost))
		return true
	}
	// The model and stream of the URL go into the body, where the proxy
	// and the Gemini decoder read them.
	body, err := readBody(r, h.cfg.MaxBodyBytes, nil)
	if err != nil {
		if errors.Is(err, errBodyTooLarge) {
			fail(errTooLarge(h.cfg.MaxBodyBytes))
		} else {
			fail(apiError{http.StatusBadRequest, typeInvalidRequest, "body_read_failed", "", "Could not read the request body: " + err.Error()})
		}
		return true
	}
	body, ok := geminiBody(body, model, stream)
	if !ok {
		fail(errMalformed)
		return true
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	h.proxy(w, r, routing.EndpointGemini)
	return true
}

// geminiKey moves a key sent as x-goog-api-key or ?key= to x-api-key,
// where authenticate looks, and takes ?key= out of the URL so that it is
// not logged.
func geminiKey(r *http.Request) {
	q := r.URL.Query()
	k := r.Header.Get("X-Goog-Api-Key")
	if k == "" {
		k = q.Get("key")
	}
	if q.Has("key") {
		q.Del("key")
		r.URL.RawQuery = q.Encode()
	}
	if k != "" && r.Header.Get("Authorization") == "" && r.Header.Get("X-Api-Key") == "" {
		r.Header.Set("X-Api-Key", k)
	}
}

// geminiBody returns a Gemini request body (a JSON object) with the
// members "model" and "stream" first, and generationConfig.maxOutputTokens
// also as "max_tokens", where budgets and rate limits read the output
// limit (the Gemini decoder reads generationConfig).
func geminiBody(body []byte, model string, stream bool) ([]byte, bool) {
	body = bytes.TrimSpace(body)
	if len(body) < 2 || body[0] != '{' {
		return nil, false
	}
	m, err := json.Marshal(strings.TrimPrefix(model, "models/"))
	if err != nil {
		return nil, false
	}
	var gc struct {
		GenerationConfig struct {
			MaxOutputTokens json.RawMessage `json:"maxOutputTokens"`
		} `json:"generationConfig"`
	}
	if json.Unmarshal(body, &gc) != nil {
		return nil, false
	}
	out := make([]byte, 0, len(body)+len(m)+64)
	out = append(out, `{"model":`...)
	out = append(out, m...)
	out = append(out, `,"stream":`...)
	out = strconv.AppendBool(out, stream)
	if limit := bytes.TrimSpace(gc.GenerationConfig.MaxOutputTokens); len(limit) > 0 && string(limit) != "null" {
		out = append(out, `,"max_tokens":`...)
		out = append(out, limit...)
	}
	rest := bytes.TrimSpace(body[1:])
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...), true
}

// geminiCountTokens answers countTokens with the gateway's estimate; it
// needs a key that may use the model, and sends nothing upstream.
func (h *Handler) geminiCountTokens(w http.ResponseWriter, r *http.Request, model string) {
	fail := func(e apiError) { writeErrorIn(w, routing.EndpointGemini, e.toError(translate.KindOther)) }
	st, key := countingCaller(w, r, h.cfg.State, fail)
	if key == nil {
		return
	}
	model = strings.TrimPrefix(model, "models/")
	if !countingModelAllowed(st, key, model, fail) {
		return
	}
	body, err := readBody(r, h.cfg.MaxBodyBytes, nil)
	if err != nil {
		fail(errTooLarge(h.cfg.MaxBodyBytes))
		return
	}
	n, err := translate.GeminiCountTokens(body)
	if err != nil {
		writeErrorIn(w, routing.EndpointGemini, asError(err))
		return
	}
	out := translate.GeminiCountTokensResponse(n)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
}

// geminiEmbed serves embedContent and batchEmbedContents as an OpenAI
// embeddings request through the shared pipeline, and writes its answer
// (or error) back in the Gemini API's shape.
func (h *Handler) geminiEmbed(w http.ResponseWriter, r *http.Request, model string, batch bool) {
	fail := func(e *translate.Error) { writeErrorIn(w, routing.EndpointGemini, e) }
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(errMethod(http.MethodPost).toError(translate.KindOther))
		return
	}
	body, err := readBody(r, h.cfg.MaxBodyBytes, nil)
	if err != nil {
		fail(errTooLarge(h.cfg.MaxBodyBytes).toError(translate.KindOther))
		return
	}
	oa, err := translate.GeminiEmbedRequest(body, model, batch)
	if err != nil {
		fail(asError(err))
		return
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(oa)), int64(len(oa))
	cw := &capturedWriter{header: w.Header(), status: http.StatusOK}
	h.proxy(cw, r, routing.EndpointEmbeddings)
	out := cw.body.Bytes()
	if cw.status >= 300 {
		fail(translate.ParseOpenAIError(cw.status, out))
		return
	}
	if out, err = translate.GeminiEmbedResponse(out, batch); err != nil {
		fail(asError(err))
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(cw.status)
	_, _ = w.Write(out)
}

// capturedWriter keeps an answer to rewrite it; headers go to the real
// writer's map.
type capturedWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (c *capturedWriter) Header() http.Header { return c.header }

func (c *capturedWriter) WriteHeader(status int) { c.status = status }

func (c *capturedWriter) Write(p []byte) (int, error) { return c.body.Write(p) }
