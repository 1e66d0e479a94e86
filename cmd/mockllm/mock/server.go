// Package mock implements mockllm: a fast, deterministic HTTP server that
// mimics the OpenAI API (chat completions, legacy completions, embeddings,
// models) for tests, benchmarks and demos.
//
// Faults and knobs are chosen per request, either with X-Mock-* request
// headers or with URL-query-style directives appended to the request's model
// name ("gpt-x?status=500&latency=300ms"); see params.set for the names.
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
	Requests    int64 `json:"requests"`      // /v1 requests received
	InFlight    int64 `json:"in_flight"`     // /v1 requests being handled now
	MaxInFlight int64 `json:"max_in_flight"` // high-water mark of InFlight
	Cancelled   int64 `json:"cancelled"`     // client left (or ctx ended) before the response was finished
	Completed   int64 `json:"completed"`     // full responses written, errors included
	Errors      int64 `json:"errors"`        // responses with status >= 400 (a subset of Completed)
	Resets      int64 `json:"resets"`        // connections reset by a reset fault
	// ByPath counts /v1 requests per URL path.
	ByPath            map[string]int64 `json:"by_path"`
	LastAuthorization string           `json:"last_authorization"`
	LastBody          []byte           `json:"last_body"` // JSON-encoded as a string, not base64
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

const (
	routeChat = iota
	routeCompletions
	routeEmbeddings
	routeModels
	numRoutes
)

var routePaths = [numRoutes]string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/models"}

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
	lastBody   []byte
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
		Resets: s.resets.Load(), ByPath: map[string]int64{},
	}
	for i := range s.byRoute {
		if n := s.byRoute[i].Load(); n > 0 {
			st.ByPath[routePaths[i]] = n
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, n := range s.otherPaths {
		st.ByPath[p] = n
	}
	st.LastAuthorization = s.lastAuth
	st.LastBody = bytes.Clone(s.lastBody)
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
	s.lastAuth, s.lastBody = "", nil
	clear(s.otherPaths)
}

// ServeHTTP serves the /v1 API and the /mock control endpoints.
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
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for m := s.maxInFlight.Load(); n > m && !s.maxInFlight.CompareAndSwap(m, n); m = s.maxInFlight.Load() {
	}

	route := routeOf(r.URL.Path)
	if route < 0 {
		s.mu.Lock()
		s.otherPaths[r.URL.Path]++
		s.mu.Unlock()
		s.writeError(w, http.StatusNotFound, "Invalid URL ("+r.Method+" "+r.URL.Path+")", "")
		return
	}
	s.byRoute[route].Add(1)
	method := http.MethodPost
	if route == routeModels {
		method = http.MethodGet
	}
	if r.Method != method {
		s.methodNotAllowed(w, method)
		return
	}

	var req request
	if method == http.MethodPost {
		buf := getBuf()
		defer putBuf(buf)
		body, err := readBody(r.Body, (*buf)[:0])
		*buf = body
		s.record(r.Header.Get("Authorization"), body)
		if err != nil {
			s.writeError(w, http.StatusBadRequest, "could not read request body: "+err.Error(), "")
			return
		}
		if err := json.Unmarshal(body, &req); err != nil {
			s.writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request: "+err.Error(), "")
			return
		}
		if req.Model == "" {
			s.writeError(w, http.StatusBadRequest, "you must provide a model parameter", "")
			return
		}
	} else {
		s.record(r.Header.Get("Authorization"), nil)
	}

	p := params{latency: s.opts.Latency, chunks: s.opts.Chunks, interval: s.opts.Interval, size: s.opts.ContentSize}
	err := p.fromHeaders(r.Header)
	if model, query, ok := strings.Cut(req.Model, "?"); ok && err == nil {
		req.Model = model
		err = p.fromQuery(query)
	}
	if err != nil {
		s.writeError(w, http.StatusBadRequest, err.Error(), "invalid_mock_directive")
		return
	}

	ctx := r.Context()
	if p.latency > 0 {
		var t *time.Timer
		ok := sleep(ctx, &t, p.latency)
		t.Stop()
		if !ok {
			s.abort()
		}
	}
	switch {
	case p.fault == faultReset:
		s.reset(w)
		return
	case p.fault == faultHang:
		<-ctx.Done()
		s.abort()
	case p.status != 0:
		if p.status == http.StatusTooManyRequests {
			w.Header()["Retry-After"] = []string{"1"}
		}
		s.writeError(w, p.status, "mockllm: injected "+http.StatusText(p.status), injectedCodes[p.status])
		return
	}

	switch route {
	case routeChat:
		if len(req.Messages) == 0 {
			s.writeError(w, http.StatusBadRequest, "'messages' is a required property", "")
			return
		}
		s.completion(w, r, &req, &p, &chatKind)
	case routeCompletions:
		s.completion(w, r, &req, &p, &textKind)
	case routeEmbeddings:
		s.embeddings(w, &req, &p)
	case routeModels:
		s.finish(s.writeBody(w, http.StatusOK, modelsBody, p.fault == faultMidStream))
	}
}

func routeOf(path string) int {
	for i, p := range routePaths {
		if p == path {
			return i
		}
	}
	return -1
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

func (s *Server) record(auth string, body []byte) {
	s.mu.Lock()
	s.lastAuth = auth
	s.lastBody = append(s.lastBody[:0], body...)
	s.mu.Unlock()
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

func (s *Server) methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header()["Allow"] = []string{allow}
	s.writeError(w, http.StatusMethodNotAllowed, "method not allowed; use "+allow, "")
}
