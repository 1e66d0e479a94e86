// Package mock implements mockllm: a fast, deterministic HTTP server that
// mimics the wire formats of LLM APIs for tests, benchmarks and demos:
//
//   - OpenAI: POST /v1/chat/completions and /v1/completions (both with
//     "stream": true), POST /v1/embeddings, GET /v1/models (respond.go);
//   - Anthropic Messages: POST /v1/messages (also /messages), streamed with
//     "stream": true, and POST /v1/messages/count_tokens (anthropic.go);
//   - Gemini: POST /v1beta/models/{model}:generateContent,
//     :streamGenerateContent (SSE with ?alt=sse, else a JSON array),
//     :embedContent and :batchEmbedContents (also under /v1/models/), and
//     the Vertex AI paths POST /v1/projects/{p}/locations/{l}/publishers/google/models/{model}:generateContent,
//     :streamGenerateContent and :predict (also under /v1beta1/) (gemini.go);
//   - Bedrock: POST /model/{modelId}/converse and /model/{modelId}/converse-stream,
//     the stream in the binary application/vnd.amazon.eventstream framing
//     (bedrock.go).
//
// Chat answers in every format follow the same rules (answer.go): tools in
// the request are answered with a call to the first tool, tool results and
// images are acknowledged at the start of the answer text.
//
// Faults and knobs are chosen per request, either with X-Mock-* request
// headers or with URL-query-style directives appended to the request's model
// name ("gpt-x?status=500&latency=300ms"); see params.set for the names.
// Where the model is a URL path segment (Gemini, Vertex, Bedrock) the
// directives ride in it URL-escaped: models/gem%3Fstatus%3D500:generateContent.
// Injected errors are written in the format's own error shape.
package mock

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options are the server-wide defaults; every field can be overridden per request.
type Options struct {
	Latency       time.Duration // delay before the response headers
	Chunks        int           // stream chunks per response; <= 0 means 10
	Interval      time.Duration // gap between stream chunks
	ContentSize   int           // content bytes of a non-stream completion; <= 0 means 1000
	EmbeddingDims int           // embedding vector length; <= 0 means 8
}

// Stats is a snapshot of the server's counters.
type Stats struct {
	Requests    int64 `json:"requests"`      // API requests received (all but /mock/*)
	InFlight    int64 `json:"in_flight"`     // API requests being handled now
	MaxInFlight int64 `json:"max_in_flight"` // high-water mark of InFlight
	Cancelled   int64 `json:"cancelled"`     // client left (or ctx ended) before the response was finished
	Completed   int64 `json:"completed"`     // full responses written, errors included
	Errors      int64 `json:"errors"`        // responses with status >= 400 (a subset of Completed)
	Resets      int64 `json:"resets"`        // connections reset by a reset fault
	// ByPath counts API requests per route: the URL path for fixed paths
	// ("/v1/messages") and unknown ones, the path pattern for routes with
	// parameters ("/v1beta/models/{model}:generateContent",
	// "/model/{modelId}/converse-stream").
	ByPath map[string]int64 `json:"by_path"`
	// ByFormat counts requests to known routes per wire format: "openai",
	// "anthropic", "gemini", "vertex", "bedrock" and "azure".
	ByFormat map[string]int64 `json:"by_format"`
	// LastAuthorization is the credential of the last request, as sent: the
	// Authorization header, or Anthropic's x-api-key, or Gemini's
	// x-goog-api-key header or key query parameter.
	LastAuthorization string `json:"last_authorization"`
	// LastAuthHeader names where LastAuthorization came from:
	// "authorization", "x-api-key", "api-key" (Azure), "x-goog-api-key" or
	// "key" (query); ""
	// when the request carried no credential.
	LastAuthHeader string `json:"last_auth_header"`
	LastBody       []byte `json:"last_body"` // JSON-encoded as a string, not base64
	// LastTraceparent is the W3C traceparent header of the last request
	// that carried one.
	LastTraceparent string `json:"last_traceparent,omitempty"`
}

// MarshalJSON encodes LastBody as a plain string so /mock/stats is readable.
func (st Stats) MarshalJSON() ([]byte, error) {
	type plain Stats
	return json.Marshal(struct {
		plain
		LastBody string `json:"last_body"`
	}{plain(st), string(st.LastBody)})
}

// UnmarshalJSON is the inverse of MarshalJSON.
func (st *Stats) UnmarshalJSON(b []byte) error {
	type plain Stats
	v := struct {
		*plain
		LastBody string `json:"last_body"`
	}{plain: (*plain)(st)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	st.LastBody = []byte(v.LastBody)
	return nil
}

// injectedCodes are the OpenAI error codes of injected statuses (default null).
var injectedCodes = map[int]string{401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}

// Server is the mock LLM API; it implements http.Handler.
type Server struct {
	opts Options
	seq  atomic.Int64 // response ids; never reset

	requests, inFlight, maxInFlight      atomic.Int64
	cancelled, completed, errors, resets atomic.Int64
	byRoute                              [numRoutes]atomic.Int64

	mu         sync.Mutex // guards the fields below
	lastAuth   string
	lastSource string
	lastBody   []byte
	lastTrace  string
	otherPaths map[string]int64
}

// New returns a Server with o's defaults (zero fields take the documented defaults).
func New(o Options) *Server {
	if o.Chunks <= 0 {
		o.Chunks = 10
	}
	if o.ContentSize <= 0 {
		o.ContentSize = 1000
	}
	if o.EmbeddingDims <= 0 {
		o.EmbeddingDims = 8
	}
	content(o.ContentSize) // prebuild the content text
	return &Server{opts: o, otherPaths: map[string]int64{}}
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	st := Stats{
		Requests: s.requests.Load(), InFlight: s.inFlight.Load(), MaxInFlight: s.maxInFlight.Load(),
		Cancelled: s.cancelled.Load(), Completed: s.completed.Load(), Errors: s.errors.Load(),
		Resets: s.resets.Load(), ByPath: map[string]int64{}, ByFormat: map[string]int64{},
	}
	for i := range s.byRoute {
		if n := s.byRoute[i].Load(); n > 0 {
			st.ByPath[routes[i].key] = n
			st.ByFormat[formatNames[routes[i].format]] += n
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, n := range s.otherPaths {
		st.ByPath[p] = n
	}
	st.LastAuthorization, st.LastAuthHeader = s.lastAuth, s.lastSource
	st.LastBody = bytes.Clone(s.lastBody)
	st.LastTraceparent = s.lastTrace
	return st
}

// Reset zeroes the counters. InFlight is live state and is kept; MaxInFlight
// restarts from it.
func (s *Server) Reset() {
	for _, c := range []*atomic.Int64{&s.requests, &s.cancelled, &s.completed, &s.errors, &s.resets} {
		c.Store(0)
	}
	for i := range s.byRoute {
		s.byRoute[i].Store(0)
	}
	s.maxInFlight.Store(s.inFlight.Load())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastAuth, s.lastSource, s.lastBody, s.lastTrace = "", "", nil, ""
	clear(s.otherPaths)
}

// ServeHTTP serves the API routes and the /mock control endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/mock/stats":
		s.serveStats(w, r)
		return
	case "/mock/reset":
		if r.Method != http.MethodPost {
			http.Error(w, "use POST", http.StatusMethodNotAllowed)
			return
		}
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
		return
	}

	s.requests.Add(1)
	if tp := r.Header.Get("Traceparent"); tp != "" {
		s.mu.Lock()
		s.lastTrace = tp
		s.mu.Unlock()
	}
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for m := s.maxInFlight.Load(); n > m && !s.maxInFlight.CompareAndSwap(m, n); m = s.maxInFlight.Load() {
	}

	id, model := lookup(r.URL.Path)
	if id < 0 {
		s.mu.Lock()
		s.otherPaths[r.URL.Path]++
		s.mu.Unlock()
		s.fail(w, guessFormat(r.URL.Path), http.StatusNotFound, "Invalid URL ("+r.Method+" "+r.URL.Path+")", "")
		return
	}
	s.byRoute[id].Add(1)
	rt := &routes[id]
	if r.Method != rt.method {
		w.Header()["Allow"] = []string{rt.method}
		s.fail(w, rt.format, http.StatusMethodNotAllowed, "method not allowed; use "+rt.method, "")
		return
	}
	switch rt.format {
	case openAI:
		s.serveOpenAI(w, r, rt.op, openAI, "")
	case azure:
		s.serveOpenAI(w, r, rt.op, azure, model)
	case anthropic:
		s.serveAnthropic(w, r, rt.op)
	case gemini, vertex:
		s.serveGemini(w, r, rt, model)
	case bedrock:
		s.serveBedrock(w, r, rt.op, model)
	}
}

// params returns the server's defaults for a request's knobs.
func (s *Server) params() params {
	return params{latency: s.opts.Latency, chunks: s.opts.Chunks, interval: s.opts.Interval, size: s.opts.ContentSize}
}

// directives applies the X-Mock-* headers and then the directives after a
// '?' in model; it returns the model without them.
func (p *params) directives(h http.Header, model string) (string, error) {
	if err := p.fromHeaders(h); err != nil {
		return model, err
	}
	if m, query, ok := strings.Cut(model, "?"); ok {
		return m, p.fromQuery(query)
	}
	return model, nil
}

// finish counts a handler's outcome: errReset was counted by reset; any other
// error means the client went away.
func (s *Server) finish(err error) {
	switch err {
	case nil:
		s.completed.Add(1)
	case errReset:
	default:
		s.abort()
	}
}

// abort counts a request whose client went away (or whose server is shutting
// down) and drops the connection rather than end the response normally.
func (s *Server) abort() {
	s.cancelled.Add(1)
	panic(http.ErrAbortHandler)
}

// record remembers the last request's credential (from the header or query
// parameter named source) and body.
func (s *Server) record(auth, source string, body []byte) {
	if auth == "" {
		source = ""
	}
	s.mu.Lock()
	s.lastAuth, s.lastSource = auth, source
	s.lastBody = append(s.lastBody[:0], body...)
	s.mu.Unlock()
}

// readRecorded reads the request body into buf and records it with the
// credential; on a read error it answers in format f and returns false.
func (s *Server) readRecorded(w http.ResponseWriter, r *http.Request, buf *[]byte, f format, auth, source string) ([]byte, bool) {
	body, err := readBody(r.Body, (*buf)[:0])
	*buf = body
	s.record(auth, source, body)
	if err != nil {
		s.fail(w, f, http.StatusBadRequest, "could not read request body: "+err.Error(), "")
		return nil, false
	}
	return body, true
}

func (s *Server) serveStats(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	b, err := json.Marshal(s.Stats())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header()["Content-Type"] = jsonType
	_, _ = w.Write(b)
}
