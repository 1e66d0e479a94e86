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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/node/budget"
	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/ratelimit"
	"github.com/tollgate/tollgate/routing"
)

// StateSource yields the current control state; it must not block.
type StateSource interface {
	State() *raftstore.State
}

// Record describes one finished request, for metrics and the ledger.
type Record struct {
	RequestID  string
	KeyID      string
	TeamID     string
	Provider   string
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
	// FirstByte is the time from arrival to the first byte of the answer.
	FirstByte time.Duration
	// CostNanos is the cost in nano-dollars; Unpriced is set (and the cost
	// zero) when the deployment's price is unknown.
	CostNanos int64
	Unpriced  bool
	// Reservation is what the request held of its budgets; nil without.
	Reservation *budget.Reservation
	// RateLimited names the limit that refused the request ("rpm", "tpm",
	// "parallel"), empty when none did.
	RateLimited string

	tickets [2]*ratelimit.Ticket // the key/team ticket and the deployment's

	dep       *raftstore.Deployment // the deployment that answered
	committed bool
}

// Recorder receives every finished request, before the last byte of the
// answer is sent. Record may block briefly (the ledger waits for its write,
// never for an fsync) and must not keep rec after it returns.
type Recorder interface {
	Record(rec *Record)
}

// Pricing prices tokens served by a deployment.
type Pricing interface {
	// Cost returns the cost in nano-dollars of the tokens at d's price,
	// and false when d's price is unknown.
	Cost(d *raftstore.Deployment, prompt, completion, cached int64) (int64, bool)
}

// RateLimiter admits requests against cluster-wide rate limits (see
// package ratelimit).
type RateLimiter interface {
	Admit(checks []ratelimit.Check, estTokens int64) (*ratelimit.Ticket, *ratelimit.Refusal)
	Status(c ratelimit.Check) ratelimit.Status
}

// Budgets holds budget reservations (see package budget).
type Budgets interface {
	Reserve(ctx context.Context, limits []*raftstore.Limit, estimate int64, now time.Time) (*budget.Reservation, error)
	Settle(r *budget.Reservation, cost int64)
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
	// Pricing and Budgets may be nil: then nothing is priced and no budget
	// is enforced.
	Pricing Pricing
	Budgets Budgets
	// Limiter enforces rate limits; nil: none.
	Limiter RateLimiter
	// OutputCap is the completion tokens a budget reservation assumes for
	// a request without max_tokens; default 4096.
	OutputCap int64
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
	if cfg.OutputCap <= 0 {
		cfg.OutputCap = 4096
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
		h.fail(w, rec, e)
	}
	st := h.cfg.State.State()
	key, aerr := authenticate(r, st)
	if key == nil {
		fail(aerr)
		return
	}
	rec.KeyID, rec.TeamID = key.ID, key.TeamID

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
	if limits := budgetsOf(st, key); len(limits) > 0 && h.cfg.Budgets != nil {
		estimate, priced := h.estimate(route, len(body), &req, rec.Endpoint)
		if !priced && !allowUnpriced(limits) {
			fail(errUnpriced(req.Model))
			return
		}
		res, err := h.cfg.Budgets.Reserve(r.Context(), limits, estimate, rec.Start)
		if err != nil {
			var ex *budget.Exceeded
			if errors.As(err, &ex) {
				if ex.ResetAt > 0 {
					w.Header().Set("Retry-After", strconv.FormatInt(max(ex.ResetAt-time.Now().Unix(), 1), 10))
				}
				fail(errBudgetExceeded(ex))
			} else {
				fail(apiError{http.StatusServiceUnavailable, typeServer, "budget_unavailable", "", "The budget could not be checked: " + err.Error()})
			}
			return
		}
		rec.Reservation = res
	}
	if h.cfg.Limiter != nil {
		var buf [2]ratelimit.Check
		if checks := limitChecks(buf[:0], st, key); len(checks) > 0 {
			t, refusal := h.cfg.Limiter.Admit(checks, estimateTokens(len(body), &req, h.cfg.OutputCap))
			setRateHeaders(w.Header(), h.cfg.Limiter.Status(checks[0]))
			if refusal != nil {
				rec.RateLimited = refusal.Reason
				w.Header().Set("Retry-After", strconv.FormatInt(int64(max(refusal.RetryAfter/time.Second, 1)), 10))
				fail(errRateLimited(refusal))
				return
			}
			rec.tickets[0] = t
		}
	}
	h.forward(w, r, rec, route, body, &req)
}

// limitChecks appends the rate-limit buckets a key's requests count in.
func limitChecks(dst []ratelimit.Check, st *raftstore.State, key *raftstore.Key) []ratelimit.Check {
	if key.Limits != nil {
		dst = append(dst, checkOf(key.Limits))
	}
	if key.TeamID != "" {
		if t := st.Team(key.TeamID); t != nil && t.Limits != nil {
			dst = append(dst, checkOf(t.Limits))
		}
	}
	return dst
}

// checkOf turns a key's, team's or deployment's limits into a limiter check.
func checkOf(l *raftstore.RateLimits) ratelimit.Check {
	return ratelimit.Check{Bucket: l.Bucket, Limits: ratelimit.Limits{RPM: l.RPM, TPM: l.TPM, MaxParallel: l.MaxParallel}}
}

// estimateTokens guesses a request's tokens for TPM before it runs (four
// bytes a token in, max_tokens or the cap out); the real count corrects it
// afterwards.
func estimateTokens(bodyLen int, req *routing.Request, outputCap int64) int64 {
	out := req.MaxTokens
	if out <= 0 {
		out = min(outputCap, 1024)
	}
	return int64(bodyLen/4) + out
}

// setRateHeaders sets OpenAI's x-ratelimit-* headers.
func setRateHeaders(h http.Header, s ratelimit.Status) {
	if s.LimitRequests > 0 {
		h["X-Ratelimit-Limit-Requests"] = []string{strconv.FormatInt(s.LimitRequests, 10)}
		h["X-Ratelimit-Remaining-Requests"] = []string{strconv.FormatInt(max(s.RemainingRequests, 0), 10)}
		h["X-Ratelimit-Reset-Requests"] = []string{formatReset(s.ResetRequests)}
	}
	if s.LimitTokens > 0 {
		h["X-Ratelimit-Limit-Tokens"] = []string{strconv.FormatInt(s.LimitTokens, 10)}
		h["X-Ratelimit-Remaining-Tokens"] = []string{strconv.FormatInt(max(s.RemainingTokens, 0), 10)}
		h["X-Ratelimit-Reset-Tokens"] = []string{formatReset(s.ResetTokens)}
	}
}

// formatReset writes a duration the way OpenAI does ("1s", "6m0s", "120ms").
func formatReset(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	}
	return d.Round(time.Second).String()
}

// budgetsOf returns the budgets a key's requests count against.
func budgetsOf(st *raftstore.State, key *raftstore.Key) []*raftstore.Limit {
	var out []*raftstore.Limit
	if key.Budget != nil {
		out = append(out, key.Budget)
	}
	if key.TeamID != "" {
		if t := st.Team(key.TeamID); t != nil && t.Budget != nil {
			out = append(out, t.Budget)
		}
	}
	return out
}

func allowUnpriced(limits []*raftstore.Limit) bool {
	for _, l := range limits {
		if !l.AllowUnpriced {
			return false
		}
	}
	return true
}

// estimate bounds a request's cost from above: every body byte counted as
// an input token, and max_tokens (or OutputCap) output tokens, at the
// dearest deployment of the route. It reports false when a deployment's
// price is unknown.
func (h *Handler) estimate(route *raftstore.Route, bodyLen int, req *routing.Request, ep routing.Endpoint) (int64, bool) {
	if h.cfg.Pricing == nil {
		return 0, false
	}
	out := req.MaxTokens
	if out <= 0 {
		out = h.cfg.OutputCap
	}
	if ep == routing.EndpointEmbeddings {
		out = 0
	}
	var most int64
	for _, d := range route.Deployments {
		c, ok := h.cfg.Pricing.Cost(d, int64(bodyLen), out, 0)
		if !ok {
			return 0, false
		}
		most = max(most, c)
	}
	return most, true
}

// commit prices the finished request, settles its budget reservation and
// hands it to the recorders (the ledger among them). It runs before the
// last byte of the answer is written, so a record is never lost to a crash
// that the client saw succeed, and it runs once.
func (h *Handler) commit(rec *Record) {
	if rec.committed {
		return
	}
	rec.committed = true
	rec.Latency = time.Since(rec.Start)
	if d := rec.dep; d != nil && h.cfg.Pricing != nil && rec.Usage.Present {
		u := rec.Usage
		cost, ok := h.cfg.Pricing.Cost(d, u.PromptTokens, u.CompletionTokens, u.CachedTokens)
		rec.CostNanos, rec.Unpriced = cost, !ok
	} else if rec.dep != nil && rec.Usage.Present {
		rec.Unpriced = true
	}
	if h.cfg.Budgets != nil && rec.Reservation != nil {
		h.cfg.Budgets.Settle(rec.Reservation, rec.CostNanos)
	}
	for _, t := range rec.tickets {
		if t != nil {
			t.Done(rec.Usage.PromptTokens + rec.Usage.CompletionTokens)
		}
	}
	for _, rc := range h.cfg.Recorders {
		rc.Record(rec)
	}
}

func (h *Handler) finish(rec *Record) { h.commit(rec) }

// fail ends a request with an error of the gateway's own: recorded first,
// then written, like every answer.
func (h *Handler) fail(w http.ResponseWriter, rec *Record, e apiError) {
	rec.Status = e.status
	h.commit(rec)
	writeError(w, e)
}

// forward tries the route's deployments in order until one answers.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, rec *Record, route *raftstore.Route, body []byte, req *routing.Request) {
	var orderBuf [8]*raftstore.Deployment
	deps := routing.Order(orderBuf[:0], route, rand.Uint64N)
	for i, d := range deps {
		rec.Attempts++
		rec.Deployment, rec.Provider, rec.dep = d.ID, d.Provider, d
		if t := rec.tickets[1]; t != nil { // the previous deployment did not serve
			t.Done(0)
			rec.tickets[1] = nil
		}
		if d.Provider == routing.ProviderDemo {
			w.Header().Set("X-Tollgate-Deployment", d.ID)
			rec.FirstByte = time.Since(rec.Start)
			rec.Status = http.StatusOK
			routing.ServeDemo(w, rec.Endpoint, req.Model, body, req, func(u routing.Usage) {
				rec.Usage = u
				h.commit(rec) // before the last byte, as for real upstreams
			})
			return
		}
		if d.Limits != nil && h.cfg.Limiter != nil {
			checks := [1]ratelimit.Check{checkOf(d.Limits)}
			t, refusal := h.cfg.Limiter.Admit(checks[:], estimateTokens(len(body), req, h.cfg.OutputCap))
			if refusal != nil {
				if i < len(deps)-1 {
					continue // another deployment serves before the client sees a 429
				}
				rec.RateLimited = refusal.Reason
				w.Header().Set("Retry-After", strconv.FormatInt(int64(max(refusal.RetryAfter/time.Second, 1)), 10))
				h.fail(w, rec, errDeploymentsBusy(req.Model, refusal))
				return
			}
			rec.tickets[1] = t
		}
		if d.CredentialMissing {
			if i < len(deps)-1 {
				continue
			}
			h.fail(w, rec, apiError{http.StatusBadGateway, typeUpstream, "credential_missing", "",
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
		h.fail(w, rec, apiError{http.StatusBadGateway, typeUpstream, "bad_upstream_url", "", err.Error()})
		return false
	}
	sent := time.Now()
	resp, err := h.transport.RoundTrip(ureq)
	if err != nil {
		switch {
		case r.Context().Err() != nil:
			rec.Status = statusClientClosed
		case timedOut.Load():
			h.fail(w, rec, apiError{http.StatusGatewayTimeout, typeTimeout, "upstream_timeout", "",
				"The upstream deployment '" + d.ID + "' did not answer within " + timeout.String() + "."})
		case canRetry && isConnectError(err):
			return true
		default:
			h.fail(w, rec, apiError{http.StatusBadGateway, typeUpstream, "upstream_unreachable", "",
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
