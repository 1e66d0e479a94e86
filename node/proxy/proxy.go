// Package proxy is Tollgate's data plane: it authenticates a request against
// the published control state, picks a deployment of the requested model,
// forwards the request upstream and streams the answer back, reading the
// token usage on the way. It reads the control state through an immutable
// snapshot and takes no lock that Raft holds.
package proxy

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/node/budget"
	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/ratelimit"
	"github.com/tollgate/tollgate/routing"
	"github.com/tollgate/tollgate/routing/translate"
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
	// UsageRejected is set when the upstream reported usage that cannot
	// be true (a negative count, or more than MaxUsageTokens): the tokens
	// are recorded as zero and the cost is the request's reservation (or
	// the same bound without one), not what the counts would price at.
	UsageRejected bool
	// BudgetNanos is what counts against the request's budgets: its cost,
	// or its whole reservation when an answer began but its usage never
	// arrived (the client went away mid-stream, the stream broke, the
	// upstream reports none), since the provider bills what it produced.
	BudgetNanos int64
	// Reservation is what the request held of its budgets; nil without.
	Reservation *budget.Reservation
	// RateLimited names the limit that refused the request ("rpm", "tpm",
	// "parallel"), empty when none did.
	RateLimited string

	tickets [2]*ratelimit.Ticket // the key/team ticket and the deployment's

	bodyLen int // bytes of the request body
	// deadline is when the request's time (RequestTimeout) is up, zero
	// without; deadlineBinds: it bounds the current attempt.
	deadline      time.Time
	deadlineBinds bool
	dep           *raftstore.Deployment // the deployment that answered
	committed     bool
	// span is the request's server span, nil without a tracer; tw notes
	// what the answer says, nil unless the span records (see tracing.go).
	span trace.Span
	tw   *traceWriter
	// spanEnded: endSpan ran (or is running); a second caller, in any
	// goroutine, leaves the span alone.
	spanEnded uint32 // atomic (a plain field: a Record is copied by value)
}

// fallbacksAfter names the routes to try after rt failed with last: its
// context fallbacks after a context overflow, none after a cooling route
// whose fallbacks were tried first, else its fallbacks.
func fallbacksAfter(rt, deferred *raftstore.Route, last *failure) []string {
	switch {
	case last != nil && last.kind == translate.KindContextOverflow:
		return rt.ContextFallbacks
	case rt == deferred:
		return nil
	}
	return rt.Fallbacks
}

// Recorder receives every finished request, before the last byte of the
// answer is sent. Record may block briefly (the ledger waits for its write,
// never for an fsync) and must not keep rec after it returns.
type Recorder interface {
	Record(rec *Record)
}

// Pricing prices tokens served by a deployment.
type Pricing interface {
	// Cost returns the cost in nano-dollars of usage u at d's price, and
	// false when d's price is unknown.
	Cost(d *raftstore.Deployment, u routing.Usage) (int64, bool)
	// MaxCost is Cost at the dearest price d has at any time (time-of-day
	// and dated prices), for budget reservations of requests that may end
	// after the price changed.
	MaxCost(d *raftstore.Deployment, prompt, completion int64) (int64, bool)
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
	// Ready reports whether State is current (the node has caught up with
	// the cluster). Until it is, every API request gets 503 with
	// Retry-After: a stale state must not answer that a key is invalid,
	// revoked or not allowed. Nil: always ready.
	Ready func() bool
	// MaxBodyBytes limits request bodies; default 8 MiB.
	MaxBodyBytes int64
	// BodyReadTimeout bounds reading a request's whole body; a client that
	// sends it slower gets 408. Default 30s.
	BodyReadTimeout time.Duration
	// UpstreamTimeout bounds a non-streaming upstream call and the wait for
	// a stream's response headers, unless the deployment sets its own;
	// default 10 minutes.
	UpstreamTimeout time.Duration
	// RequestTimeout bounds a request until its answer begins, over all
	// its attempts and backoffs (a stream that started is not cut); zero:
	// no bound beyond the attempts'.
	RequestTimeout time.Duration
	// Transport carries upstream requests; default NewTransport(), with
	// SetHTTP2(UpstreamHTTP2).
	Transport http.RoundTripper
	// UpstreamHTTP2 sends HTTPS upstreams through net/http, which speaks
	// HTTP/2 to servers that offer it, instead of the HTTP/1.1 client.
	UpstreamHTTP2 bool
	Recorders     []Recorder
	// Pricing and Budgets may be nil: then nothing is priced and no budget
	// is enforced.
	Pricing Pricing
	Budgets Budgets
	// Limiter enforces rate limits; nil: none.
	Limiter RateLimiter
	// OutputCap is the output limit a request under a budget that sets
	// none is sent upstream with; its budget reservation assumes it. It is
	// also the completion tokens a budget reservation assumes for
	// a request without max_tokens; default 4096.
	OutputCap int64
	// MaxAttempts bounds the attempts of one request on one route (every
	// deployment is tried at least once); default 3. A route may set its
	// own.
	MaxAttempts uint32
	// RetryBackoff is the base of the jittered backoff before a deployment
	// is tried again; default 100ms.
	RetryBackoff time.Duration
	// Cooldown is how long a failing deployment is skipped (doubling with
	// each further failure, up to MaxCooldown); defaults 5s and 5m.
	Cooldown, MaxCooldown time.Duration
	Logger                *slog.Logger
	// Tracer, when set, traces every request (see tracing.go); nil: no
	// tracing work at all. TraceContent puts the prompt and the answer,
	// truncated, on the request's span.
	Tracer       trace.Tracer
	TraceContent bool
}

// Handler serves the OpenAI-compatible API.
type Handler struct {
	cfg       Config
	transport http.RoundTripper
	log       *slog.Logger
	// credErrLogged: the credential errors already logged, once each.
	credErrLogged sync.Map
	idPrefix      string
	idSeq         atomic.Uint64
	health        healthTable
	rnd           func(n uint64) uint64 // uniform in [0, n): weighted choice
}

// New returns a Handler.
func New(cfg Config) *Handler {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 8 << 20
	}
	if cfg.UpstreamTimeout <= 0 {
		cfg.UpstreamTimeout = 10 * time.Minute
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = 30 * time.Second
	}
	if cfg.OutputCap <= 0 {
		cfg.OutputCap = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 3
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 100 * time.Millisecond
	}
	if cfg.Cooldown <= 0 {
		cfg.Cooldown = 5 * time.Second
	}
	if cfg.MaxCooldown < cfg.Cooldown {
		cfg.MaxCooldown = max(5*time.Minute, cfg.Cooldown)
	}
	h := &Handler{cfg: cfg, transport: cfg.Transport, log: cfg.Logger, rnd: rand.Uint64N}
	h.health.Cooldown, h.health.MaxCooldown = cfg.Cooldown, cfg.MaxCooldown
	if h.transport == nil {
		tr := NewTransport()
		tr.SetHTTP2(cfg.UpstreamHTTP2)
		h.transport = tr
	}
	if cfg.Tracer != nil {
		h.transport = traceTransport{h.transport}
	}
	h.idPrefix = "req_" + randomHex(6) + "_"
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Ready != nil && !h.cfg.Ready() {
		h.notReady(w, r)
		return
	}
	switch r.URL.Path {
	case "/v1/chat/completions", "/chat/completions":
		h.proxy(w, r, routing.EndpointChat)
	case "/v1/completions", "/completions":
		h.proxy(w, r, routing.EndpointCompletions)
	case "/v1/embeddings", "/embeddings":
		h.proxy(w, r, routing.EndpointEmbeddings)
	case "/v1/messages", "/messages":
		h.proxy(w, r, routing.EndpointMessages)
	case "/v1/responses", "/responses":
		h.proxy(w, r, routing.EndpointResponses)
	case "/v1/messages/count_tokens", "/messages/count_tokens":
		h.countTokens(w, r)
	case "/v1/models", "/models":
		h.models(w, r)
	default:
		if !h.serveGemini(w, r) {
			writeError(w, errUnknownPath(r.URL.Path))
		}
	}
}

// notReady answers a request that came before the node caught up: 503
// with Retry-After, in the error shape of the endpoint asked for.
func (h *Handler) notReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", "1")
	e := apiError{http.StatusServiceUnavailable, typeServer, "not_ready", "",
		"This gateway node is starting and has not caught up with the cluster yet; retry in a moment (or through another node)."}
	ep := routing.EndpointChat
	if p := r.URL.Path; p == "/v1/messages" || p == "/messages" || strings.HasSuffix(p, "/count_tokens") {
		ep = routing.EndpointMessages
	}
	writeErrorIn(w, ep, e.toError(translate.KindOverloaded))
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
	if h.cfg.Tracer != nil {
		var ctx context.Context
		w, ctx = h.startSpan(w, r, rec)
		r = r.WithContext(ctx)
		defer h.endSpan(rec) // after finish
	}
	if h.cfg.RequestTimeout > 0 {
		rec.deadline = rec.Start.Add(h.cfg.RequestTimeout)
	}
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

	in := bodyBuf(r.ContentLength, h.cfg.MaxBodyBytes)
	defer putBuf(in)
	body, err := h.readBodyIn(w, r, in.b[:0])
	in.b = body
	rec.bodyLen = len(body)
	if err != nil {
		fail(h.bodyError(w, err))
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
	h.traceRequest(rec, body, &req)
	route := st.Resolve(req.Model)
	if !keyAllows(key, req.Model, route) {
		fail(errModelNotAllowed(req.Model))
		return
	}
	if route == nil {
		fail(errModelNotFound(req.Model))
		return
	}
	// Only names of existing routes become the record's model, so metrics
	// labels cannot be blown up by made-up model names.
	rec.Model = route.Name
	if !h.reserveBudget(w, r, rec, st, key, route, body, &req) {
		return
	}
	if !h.admitRate(w, rec, st, key, len(body), &req) {
		return
	}
	h.forward(w, r, rec, st, route, body, &req)
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
	switch d := rec.dep; {
	case rec.Usage.Present && !saneUsage(rec.Usage):
		h.rejectUsage(rec)
	case d != nil && h.cfg.Pricing != nil && rec.Usage.Present:
		cost, ok := h.cfg.Pricing.Cost(d, rec.Usage)
		rec.CostNanos, rec.Unpriced = max(cost, 0), !ok
	case d != nil && rec.Usage.Present:
		rec.Unpriced = true
	}
	rec.BudgetNanos = rec.CostNanos
	// A stream whose usage never came counts its whole reservation: the
	// client got (part of) an answer, and then went away (499) or the
	// stream broke (502, the only error status an answer that began gets).
	if rec.Reservation != nil && !rec.Usage.Present && rec.FirstByte > 0 &&
		(rec.Status < 400 || rec.Status == statusClientClosed || rec.Status == http.StatusBadGateway) {
		rec.BudgetNanos = max(rec.CostNanos, rec.Reservation.Amount())
	}
	if h.cfg.Budgets != nil && rec.Reservation != nil {
		h.cfg.Budgets.Settle(rec.Reservation, rec.BudgetNanos)
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

// MaxUsageTokens bounds the tokens one answer may report (prompt plus
// output): no model's context and output come near it, so a count above it
// is a broken upstream, not usage.
const MaxUsageTokens = 10_000_000

// saneUsage reports whether u's counts can be true.
func saneUsage(u routing.Usage) bool {
	for _, n := range [...]int64{u.PromptTokens, u.CompletionTokens, u.TotalTokens, u.CachedTokens, u.CacheWriteTokens} {
		if n < 0 || n > MaxUsageTokens {
			return false
		}
	}
	return u.PromptTokens+u.CompletionTokens <= MaxUsageTokens
}

// rejectUsage records a request whose upstream reported impossible usage:
// flagged and logged, its tokens zero, its cost what the request reserved
// (or, without a reservation, the same bound at the deployment's dearest
// price), never the face value of the counts.
func (h *Handler) rejectUsage(rec *Record) {
	u := rec.Usage
	h.log.Warn("upstream reported impossible usage; charged at the reservation", "request", rec.RequestID,
		"deployment", rec.Deployment, "prompt_tokens", u.PromptTokens, "completion_tokens", u.CompletionTokens,
		"cached_tokens", u.CachedTokens, "cache_write_tokens", u.CacheWriteTokens)
	rec.UsageRejected = true
	rec.Usage = routing.Usage{Present: true}
	switch {
	case rec.Reservation != nil:
		rec.CostNanos = rec.Reservation.Amount()
	case rec.dep != nil && h.cfg.Pricing != nil:
		cost, ok := h.cfg.Pricing.MaxCost(rec.dep, int64(rec.bodyLen), h.cfg.OutputCap)
		rec.CostNanos, rec.Unpriced = max(cost, 0), !ok
	default:
		rec.Unpriced = true
	}
}

// fail ends a request with an error of the gateway's own: recorded first,
// then written, like every answer.
func (h *Handler) fail(w http.ResponseWriter, rec *Record, e apiError) {
	rec.Status = e.status
	h.commit(rec)
	writeErrorIn(w, rec.Endpoint, e.toError(translate.KindOther))
}

// failure is why one attempt did not serve the request. Nothing reached
// the client yet, so another attempt may.
type failure struct {
	kind translate.ErrorKind
	err  *translate.Error // what the client sees if this failure is the last
	// raw is the upstream's own error answer (an OpenAI-wire upstream),
	// passed through as it is to OpenAI-format clients.
	raw        []byte
	rawType    string
	retryAfter string
	// cools puts the deployment in cooldown; retry allows trying the same
	// deployment again later in this request.
	cools, retry bool
	// rateLimited names the deployment limit that skipped it.
	rateLimited string
	// final ends the request: its deadline passed.
	final bool
}

// retryable reports whether another deployment (or route) may serve after
// f: every failure but a request the upstream called invalid.
func (f *failure) retryable() bool { return f.kind != translate.KindInvalidRequest }

func failureOf(e apiError, kind translate.ErrorKind) *failure {
	return &failure{kind: kind, err: e.toError(kind)}
}

// forward tries the route's deployments, by priority and strategy, with
// retries and backoff, then the route's fallbacks, until one answers. A
// failure the upstream blamed on the request ends the search at once.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, rec *Record, st *raftstore.State, route *raftstore.Route, body []byte, req *routing.Request) {
	x := &exchange{body: body, req: *req}
	var routeBuf [4]*raftstore.Route
	routes := append(routeBuf[:0], route)
	var last *failure
	var deferred *raftstore.Route // a cooling route kept for after its fallbacks
	for ri := 0; ri < len(routes); ri++ {
		rt := routes[ri]
		if ri > 0 {
			rec.traceEvent("tollgate.fallback", attribute.String("tollgate.route", rt.Name))
		}
		var orderBuf [8]*raftstore.Deployment
		deps, healthy := h.order(orderBuf[:0], rt, time.Now().UnixNano())
		if healthy == 0 && deferred == nil && len(deps) > 0 && len(rt.Fallbacks) > 0 {
			// Every deployment is cooling down: the fallbacks serve first,
			// and this route only when they fail too.
			deferred = rt
			rec.traceEvent("tollgate.route_cooling", attribute.String("tollgate.route", rt.Name))
			routes = append(appendFallbacks(routes, st, rt.Fallbacks), rt)
			continue
		}
		attempts := h.attemptsOn(rt, len(deps))
		// A deployment in cooldown is tried once at most, never retried.
		var noRetry [8]bool
		for i := healthy; i < min(len(deps), 8); i++ {
			noRetry[i] = true
		}
		for a := 0; a < attempts && len(deps) > 0; a++ {
			i := a % len(deps)
			if a >= len(deps) {
				if i == 0 {
					if !anyRetry(noRetry[:min(len(deps), 8)]) {
						break
					}
					pause := backoff(h.cfg.RetryBackoff, a/len(deps))
					rec.traceEvent("tollgate.retry", attribute.String("tollgate.route", rt.Name), attribute.Int64("tollgate.backoff_ms", pause.Milliseconds()))
					if !sleepCtx(r, rec, pause) {
						rec.Status = statusClientClosed
						return
					}
				}
				if i < 8 && noRetry[i] {
					rec.traceEvent("tollgate.skip", attribute.String("tollgate.deployment", deps[i].ID), attribute.Bool("tollgate.cooling", i >= healthy))
					continue
				}
			}
			if rec.pastDeadline() {
				h.failWith(w, rec, h.errRequestTimeout(rec, last))
				return
			}
			d := deps[i]
			f := h.tryTraced(w, r, rec, rt, d, x)
			if f == nil {
				return // served, or the client went away
			}
			last = f
			if f.cools {
				h.health.Failed(d, time.Now().UnixNano(), retryAfterOf(f.retryAfter))
			}
			if !f.retryable() || f.final {
				h.failWith(w, rec, f)
				return
			}
			// A deployment that said when to come back is not retried
			// within this request (it is cooling for that long).
			if i < 8 && (!f.retry || f.retryAfter != "") {
				noRetry[i] = true
			}
			h.log.Debug("deployment failed, trying the next", "model", rt.Name, "deployment", d.ID, "error", f.err.Message)
		}
		routes = appendFallbacks(routes, st, fallbacksAfter(rt, deferred, last))
	}
	if last == nil {
		last = failureOf(apiError{http.StatusServiceUnavailable, typeServer, "no_deployment", "",
			"The model '" + route.Name + "' has no deployment that can serve this request."}, translate.KindOther)
	}
	h.failWith(w, rec, last)
}

func anyRetry(noRetry []bool) bool {
	for _, n := range noRetry {
		if !n {
			return true
		}
	}
	return false
}

// sleepCtx waits d unless the client goes away first; it waits no longer
// than the request's deadline.
func sleepCtx(r *http.Request, rec *Record, d time.Duration) bool {
	if !rec.deadline.IsZero() {
		d = min(d, max(time.Until(rec.deadline), 0))
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

func retryAfterOf(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 0
}

// failWith answers with a failure: the upstream's own error body for an
// OpenAI-format client of an OpenAI-wire upstream, else the error in the
// client's format.
func (h *Handler) failWith(w http.ResponseWriter, rec *Record, f *failure) {
	if f.rateLimited != "" {
		rec.RateLimited = f.rateLimited
	}
	if f.retryAfter != "" {
		w.Header().Set("Retry-After", f.retryAfter)
	}
	if rec.dep != nil {
		w.Header().Set("X-Tollgate-Deployment", rec.dep.ID)
	}
	if f.raw != nil && openAIFormat(rec.Endpoint) && isJSONType(f.rawType) {
		rec.Status = f.err.Status
		h.commit(rec)
		hdr := w.Header()
		hdr["Content-Type"] = []string{f.rawType}
		hdr["Content-Length"] = []string{strconv.Itoa(len(f.raw))}
		w.WriteHeader(f.err.Status)
		_, _ = w.Write(f.raw)
		return
	}
	rec.Status = f.err.Status
	h.commit(rec)
	writeErrorIn(w, rec.Endpoint, f.err)
}

// try makes one attempt at deployment d of route rt. It returns nil when
// the request is finished (answered, or the client went away) and the
// failure otherwise, with nothing written to the client.
func (h *Handler) try(w http.ResponseWriter, r *http.Request, rec *Record, rt *raftstore.Route, d *raftstore.Deployment, x *exchange) *failure {
	rec.Attempts++
	rec.Deployment, rec.Provider, rec.dep = d.ID, d.Provider, d
	if rt.Name != rec.Model && rec.Model != "" {
		rec.Deployment = rt.Name + "/" + d.ID // served by a fallback route
	}
	if t := rec.tickets[1]; t != nil { // the previous deployment did not serve
		t.Done(0)
		rec.tickets[1] = nil
	}
	if d.Provider == routing.ProviderDemo && !openAIFormat(rec.Endpoint) {
		return h.tryTranslated(w, r, rec, rt, d, x)
	}
	if d.Provider == routing.ProviderDemo {
		w.Header().Set("X-Tollgate-Deployment", d.ID)
		rec.FirstByte = time.Since(rec.Start)
		rec.Status = http.StatusOK
		routing.ServeDemo(w, rec.Endpoint, x.req.Model, x.body, &x.req, func(u routing.Usage) {
			rec.Usage = u
			h.commit(rec) // before the last byte, as for real upstreams
		})
		return nil
	}
	if d.Limits != nil && h.cfg.Limiter != nil {
		checks := [1]ratelimit.Check{checkOf(d.Limits)}
		t, refusal := h.cfg.Limiter.Admit(checks[:], estimateTokens(len(x.body), &x.req, h.cfg.OutputCap))
		if refusal != nil {
			f := failureOf(errDeploymentsBusy(x.req.Model, refusal), translate.KindRateLimited)
			f.rateLimited = refusal.Reason
			f.retryAfter = strconv.FormatInt(int64(max(refusal.RetryAfter/time.Second, 1)), 10)
			return f
		}
		rec.tickets[1] = t
	}
	if d.CredentialError != "" {
		if _, logged := h.credErrLogged.LoadOrStore(d.Key+"\x00"+d.CredentialError, true); !logged {
			h.log.Error("deployment credential does not open on this node: give every node the same TOLLGATE_SECRETS_KEY",
				"deployment", d.Key, "err", d.CredentialError)
		}
		return failureOf(apiError{http.StatusBadGateway, typeUpstream, "credential_unreadable", "",
			"The deployment '" + d.ID + "' cannot use its credential on this gateway node; an operator must check the node's secrets key."},
			translate.KindAuth)
	}
	if d.CredentialMissing {
		return failureOf(apiError{http.StatusBadGateway, typeUpstream, "credential_missing", "",
			"The deployment '" + d.ID + "' names a credential that is not set; an operator must run 'tollctl credential set " + d.CredentialName + "'."},
			translate.KindAuth)
	}
	if tracks(rt) {
		hh := h.health.Of(d)
		hh.InFlight.Add(1)
		defer hh.InFlight.Add(-1)
	}
	var f *failure
	switch {
	case openAIFormat(rec.Endpoint) && routing.OpenAIWire(d.Provider):
		f = h.attempt(w, r, rec, d, x)
	case rec.Endpoint == routing.EndpointMessages && d.Provider == routing.ProviderAnthropic:
		f = h.attemptAnthropic(w, r, rec, d, x)
	case rec.Endpoint == routing.EndpointResponses && routing.SpeaksResponses(d.Provider, d.Options):
		f = h.attemptResponses(w, r, rec, d, x)
	case rec.Endpoint == routing.EndpointEmbeddings && d.Provider == routing.ProviderGemini:
		f = h.attemptGeminiEmbeddings(w, r, rec, d, x)
	case rec.Endpoint == routing.EndpointEmbeddings:
		f = failureOf(apiError{http.StatusBadRequest, typeInvalidRequest, "unsupported_endpoint", "",
			"Embeddings are not supported by the " + d.Provider + " provider of deployment '" + d.ID + "'."}, kindUnsupported)
	default:
		f = h.tryTranslated(w, r, rec, rt, d, x)
	}
	if f == nil && rec.Status < 400 {
		h.health.Succeeded(d, rec.UpstreamLatency, tracks(rt))
	}
	return f
}
