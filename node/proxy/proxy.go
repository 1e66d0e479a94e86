// Package proxy is Tollgate's data plane: it authenticates a request against
// the published control state, picks a deployment of the requested model,
// forwards the request upstream and streams the answer back, reading the
// token usage on the way. It reads the control state through an immutable
// snapshot and takes no lock that Raft holds.
package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
)

// StateSource yields the current control state; it must not block.
type StateSource interface {
	State() *raftstore.State
}

// Record describes one finished request, for metrics and (later) the
// ledger.
type Record struct {
	RequestID  string
	KeyID      string
	Endpoint   routing.Endpoint
	Model      string
	Deployment string
	Status     int // 499 when the client went away first
	Stream     bool
	Usage      routing.Usage
	Attempts   int
	Start      time.Time
	Latency    time.Duration
	// UpstreamLatency is the time from sending upstream to the response
	// headers of the attempt that answered.
	UpstreamLatency time.Duration
}

// Recorder receives every finished request. Record must not block and must
// not keep rec after it returns.
type Recorder interface {
	Record(rec *Record)
}

// Config configures a Handler.
type Config struct {
	State StateSource
	// MaxBodyBytes limits request bodies; default 8 MiB.
	MaxBodyBytes int64
	// UpstreamTimeout bounds a non-streaming upstream call and the wait for
	// a stream's response headers, unless the deployment sets its own;
	// default 10 minutes.
	UpstreamTimeout time.Duration
	// Transport carries upstream requests; default NewTransport().
	Transport http.RoundTripper
	Recorders []Recorder
	Logger    *slog.Logger
}

// Handler serves the OpenAI-compatible API.
type Handler struct {
	cfg       Config
	transport http.RoundTripper
	log       *slog.Logger
	idPrefix  string
	idSeq     atomic.Uint64
}

// New returns a Handler.
func New(cfg Config) *Handler {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 8 << 20
	}
	if cfg.UpstreamTimeout <= 0 {
		cfg.UpstreamTimeout = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Handler{cfg: cfg, transport: cfg.Transport, log: cfg.Logger}
	if h.transport == nil {
		h.transport = NewTransport()
	}
	h.idPrefix = "req_" + randomHex(6) + "_"
	return h
}

// NewTransport returns the HTTP transport tuned for upstream LLM APIs: many
// idle connections per host, no transparent compression, dial timeouts.
func NewTransport() *http.Transport {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		WriteBufferSize:       16 << 10,
		ReadBufferSize:        16 << 10,
	}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/chat/completions", "/chat/completions":
		h.proxy(w, r, routing.EndpointChat)
	case "/v1/completions", "/completions":
		h.proxy(w, r, routing.EndpointCompletions)
	case "/v1/embeddings", "/embeddings":
		h.proxy(w, r, routing.EndpointEmbeddings)
	case "/v1/models", "/models":
		h.models(w, r)
	default:
		writeError(w, errUnknownPath(r.URL.Path))
	}
}

// authenticate returns the request's key, or nil and the 401 to answer.
func authenticate(r *http.Request, st *raftstore.State) (*raftstore.Key, apiError) {
	secret := bearerToken(r)
	if secret == "" {
		return nil, errNoKey
	}
	k := st.KeyByHash(raftstore.HashSecret(secret))
	switch {
	case k == nil:
		return nil, errBadKey
	case k.Revoked:
		return nil, errRevokedKey
	case k.Expired(time.Now().UnixNano()):
		return nil, errExpiredKey
	}
	return k, apiError{}
}

func bearerToken(r *http.Request) string {
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return strings.TrimSpace(r.Header.Get("X-Api-Key"))
}

func (h *Handler) nextRequestID() string {
	var b [40]byte
	buf := append(b[:0], h.idPrefix...)
	buf = appendBase36(buf, h.idSeq.Add(1))
	return string(buf)
}

func (h *Handler) proxy(w http.ResponseWriter, r *http.Request, ep routing.Endpoint) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, errMethod(http.MethodPost))
		return
	}
	rec := &Record{Start: time.Now(), Endpoint: ep, RequestID: h.nextRequestID()}
	w.Header().Set("X-Request-Id", rec.RequestID)
	defer h.finish(rec)
	fail := func(e apiError) {
		rec.Status = e.status
		writeError(w, e)
	}
	st := h.cfg.State.State()
	key, aerr := authenticate(r, st)
	if key == nil {
		fail(aerr)
		return
	}
	rec.KeyID = key.ID

	in := getBuf()
	defer putBuf(in)
	body, err := readBody(r, h.cfg.MaxBodyBytes, in.b[:0])
	in.b = body
	if err != nil {
		if errors.Is(err, errBodyTooLarge) {
			fail(errTooLarge(h.cfg.MaxBodyBytes))
		} else {
			fail(apiError{http.StatusBadRequest, typeInvalidRequest, "body_read_failed", "",
				"Could not read the request body: " + err.Error()})
		}
		return
	}
	req, err := routing.ScanRequest(body)
	switch {
	case errors.Is(err, routing.ErrMalformed):
		fail(errMalformed)
		return
	case err != nil:
		fail(apiError{http.StatusBadRequest, typeInvalidRequest, "invalid_request", "", err.Error()})
		return
	case req.Model == "":
		fail(errNoModel)
		return
	}
	rec.Stream = req.Stream
	if !key.Allows(req.Model) {
		fail(errModelNotAllowed(req.Model))
		return
	}
	route := st.Route(req.Model)
	if route == nil {
		fail(errModelNotFound(req.Model))
		return
	}
	// Only names of existing routes become the record's model, so metrics
	// labels cannot be blown up by made-up model names.
	rec.Model = route.Name
	h.forward(w, r, rec, route, body, &req)
}

func (h *Handler) finish(rec *Record) {
	rec.Latency = time.Since(rec.Start)
	for _, rc := range h.cfg.Recorders {
		rc.Record(rec)
	}
}

// forward tries the route's deployments in order until one answers.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, rec *Record, route *raftstore.Route, body []byte, req *routing.Request) {
	var orderBuf [8]*raftstore.Deployment
	deps := routing.Order(orderBuf[:0], route, rand.Uint64N)
	for i, d := range deps {
		rec.Attempts++
		rec.Deployment = d.ID
		if d.Provider == routing.ProviderDemo {
			w.Header().Set("X-Tollgate-Deployment", d.ID)
			rec.Usage = routing.ServeDemo(w, rec.Endpoint, req.Model, body, req)
			rec.Status = http.StatusOK
			return
		}
		if d.CredentialMissing {
			if i < len(deps)-1 {
				continue
			}
			rec.Status = http.StatusBadGateway
			writeError(w, apiError{http.StatusBadGateway, typeUpstream, "credential_missing", "",
				"The deployment '" + d.ID + "' names a credential that is not set; an operator must run 'tollctl credential set " + d.CredentialName + "'."})
			return
		}
		retry := h.attempt(w, r, rec, d, body, req, i < len(deps)-1)
		if !retry {
			return
		}
		h.log.Debug("upstream unreachable, trying next deployment", "model", req.Model, "deployment", d.ID)
	}
}

// attempt sends the request to one deployment. It returns true when the
// upstream could not be reached and nothing was written, so the next
// deployment may be tried.
func (h *Handler) attempt(w http.ResponseWriter, r *http.Request, rec *Record, d *raftstore.Deployment,
	body []byte, req *routing.Request, canRetry bool) bool {
	timeout := h.cfg.UpstreamTimeout
	if d.TimeoutMillis > 0 {
		timeout = time.Duration(d.TimeoutMillis) * time.Millisecond
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var timedOut atomic.Bool
	timer := time.AfterFunc(timeout, func() { timedOut.Store(true); cancel() })
	defer timer.Stop()

	out := getBuf()
	out.b = routing.RewriteRequest(out.b[:0], body, req, d.UpstreamModel, rec.Endpoint != routing.EndpointEmbeddings)
	ureq, err := newUpstreamRequest(ctx, d, rec.Endpoint, out)
	if err != nil { // newUpstreamRequest returned out to the pool
		rec.Status = http.StatusBadGateway
		writeError(w, apiError{http.StatusBadGateway, typeUpstream, "bad_upstream_url", "", err.Error()})
		return false
	}
	sent := time.Now()
	resp, err := h.transport.RoundTrip(ureq)
	if err != nil {
		switch {
		case r.Context().Err() != nil:
			rec.Status = statusClientClosed
		case timedOut.Load():
			rec.Status = http.StatusGatewayTimeout
			writeError(w, apiError{http.StatusGatewayTimeout, typeTimeout, "upstream_timeout", "",
				"The upstream deployment '" + d.ID + "' did not answer within " + timeout.String() + "."})
		case canRetry && isConnectError(err):
			return true
		default:
			rec.Status = http.StatusBadGateway
			writeError(w, apiError{http.StatusBadGateway, typeUpstream, "upstream_unreachable", "",
				"The upstream deployment '" + d.ID + "' failed: " + upstreamErrText(err)})
		}
		return false
	}
	defer resp.Body.Close()
	rec.UpstreamLatency = time.Since(sent)
	w.Header().Set("X-Tollgate-Deployment", d.ID)
	if isEventStream(resp.Header.Get("Content-Type")) {
		timer.Stop() // the timeout covers the wait for the stream to start
		h.stream(w, r, rec, resp, req)
		return false
	}
	h.buffered(w, r, rec, resp, d, &timedOut, timeout)
	return false
}

const statusClientClosed = 499

func isEventStream(ct string) bool {
	return strings.HasPrefix(ct, "text/event-stream")
}

// isConnectError reports whether err happened before the request could
// reach the upstream (so another deployment may safely be tried).
func isConnectError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func upstreamErrText(err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Error()
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "connection closed before a response"
	}
	return err.Error()
}

var bufPool = sync.Pool{New: func() any { return &buffer{b: make([]byte, 0, 8<<10)} }}

type buffer struct{ b []byte }

func getBuf() *buffer { return bufPool.Get().(*buffer) }

func putBuf(b *buffer) {
	if cap(b.b) > 1<<20 {
		return // let oversized buffers go
	}
	b.b = b.b[:0]
	bufPool.Put(b)
}

var errBodyTooLarge = errors.New("request body too large")

// readBody reads the whole request body into dst, refusing more than limit
// bytes.
func readBody(r *http.Request, limit int64, dst []byte) ([]byte, error) {
	if r.ContentLength > limit {
		return dst, errBodyTooLarge
	}
	if r.ContentLength > 0 && int64(cap(dst)) < r.ContentLength {
		dst = make([]byte, 0, r.ContentLength)
	}
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Body.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if int64(len(dst)) > limit {
			return dst, errBodyTooLarge
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}
