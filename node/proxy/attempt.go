package proxy

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
	"github.com/tollgate/tollgate/routing/translate"
)

// kindUnsupported marks a deployment that cannot serve this endpoint: the
// next one may, and none is put in cooldown for it.
const kindUnsupported = translate.KindNotFound

// openAIFormat reports whether an endpoint speaks OpenAI's wire format
// with clients (and passes through to OpenAI-wire upstreams).
func openAIFormat(ep routing.Endpoint) bool {
	return ep == routing.EndpointChat || ep == routing.EndpointCompletions || ep == routing.EndpointEmbeddings
}

// outputCapField names the member that limits an OpenAI-format request's
// output tokens, for a request under a budget that set none: the
// reservation assumed OutputCap, so the upstream must not write more.
// Embeddings have no output.
func outputCapField(ep routing.Endpoint, d *raftstore.Deployment) string {
	switch {
	case ep == routing.EndpointEmbeddings:
		return ""
	case ep == routing.EndpointChat && d.Provider == routing.ProviderOpenAI:
		return "max_completion_tokens" // reasoning models refuse max_tokens
	case ep == routing.EndpointChat && d.Provider == routing.ProviderAzureOpenAI:
		if translate.AzureBeforeCompletionTokens(d.Options["api_version"]) {
			return "max_tokens" // the field is unknown there: 400
		}
		return "max_completion_tokens"
	}
	return "max_tokens"
}

// upstreamModel is the model name sent to d: its upstream model, or for
// "*" the name the client asked for.
func upstreamModel(d *raftstore.Deployment, requested string) string {
	if d.UpstreamModel == "*" || d.UpstreamModel == "" {
		return requested
	}
	return d.UpstreamModel
}

// attempt sends an OpenAI-format request to an OpenAI-wire deployment,
// passing the body through with only the model renamed.
func (h *Handler) attempt(w http.ResponseWriter, r *http.Request, rec *Record, d *raftstore.Deployment, x *exchange) *failure {
	ctx, timeout := h.deadline(r, rec, d)
	defer ctx.end()
	timer, timedOut := ctx.timer, &ctx.timedOut

	req := &x.req
	out := getBuf()
	includeUsage := rec.Endpoint != routing.EndpointEmbeddings
	if p, ok := routing.PresetOf(d.Options); ok && p.NoStreamOptions {
		includeUsage = false
	}
	capField := ""
	if rec.Reservation != nil && outputLimit(req, rec.Endpoint) == 0 {
		capField = outputCapField(rec.Endpoint, d)
	}
	out.b = routing.RewriteRequestCapped(out.b[:0], x.body, req, upstreamModel(d, req.Model), includeUsage, capField, h.cfg.OutputCap)
	ureq, err := newUpstreamRequest(ctx, d, rec.Endpoint, out)
	if err != nil { // newUpstreamRequest returned out to the pool
		return failureOf(errBadUpstreamURL, translate.KindAuth)
	}
	sent := time.Now()
	resp, err := h.transport.RoundTrip(ureq)
	if err != nil {
		return h.transportFailure(r, rec, d, err, timedOut.Load(), timeout)
	}
	defer resp.Body.Close()
	rec.UpstreamLatency = time.Since(sent)
	if isEventStream(resp.Header.Get("Content-Type")) && resp.StatusCode < 300 {
		return h.stream(w, r, rec, resp, req, d, attemptClock{timer, timedOut}, chatEnd)
	}
	return h.buffered(w, r, rec, resp, d, timedOut, timeout)
}

// transportFailure turns an upstream call's error into a failure, or nil
// when the client went away.
func (h *Handler) transportFailure(r *http.Request, rec *Record, d *raftstore.Deployment, err error, timedOut bool, timeout time.Duration) *failure {
	switch {
	case r.Context().Err() != nil:
		rec.Status = statusClientClosed
		return nil
	case timedOut:
		return h.timeoutFailure(rec, d, timeout, "did not answer")
	default:
		f := failureOf(apiError{http.StatusBadGateway, typeUpstream, "upstream_unreachable", "",
			"The upstream deployment '" + d.ID + "' failed: " + upstreamErrText(err)}, translate.KindOverloaded)
		f.cools, f.retry = true, true
		return f
	}
}

// started stops an attempt's timer once the first event arrived. It
// returns false when the timer fired first: the attempt's context is
// cancelled, so the attempt failed on time although a read succeeded.
func started(timer *time.Timer, timedOut *atomic.Bool) bool {
	return timer.Stop() || !timedOut.Load()
}

// retryable marks f as a failure of the deployment (it cools down) that
// another attempt, also on the same deployment, may get past.
func retryable(f *failure) *failure {
	f.cools, f.retry = true, true
	return f
}

// errAnswerBroke: the upstream's answer broke off before the client got
// any of it.
func errAnswerBroke(d *raftstore.Deployment, err error) *failure {
	if errors.Is(err, errBodyTooLarge) {
		// Not the deployment's fault, and another would answer as much:
		// no cooldown, no retry.
		return failureOf(apiError{http.StatusBadGateway, typeUpstream, "response_too_large", "",
			"The answer of the upstream deployment '" + d.ID + "' is larger than the gateway relays (" +
				strconv.Itoa(maxResponseBytes>>20) + " MiB)."}, translate.KindInvalidRequest)
	}
	return retryable(failureOf(apiError{http.StatusBadGateway, typeUpstream, "upstream_failed", "",
		"The upstream deployment '" + d.ID + "' failed while answering: " + upstreamErrText(err)}, translate.KindOverloaded))
}

// errNoFirstToken: a stream stayed silent past the first-token timeout
// (or the request's deadline).
func (h *Handler) errNoFirstToken(rec *Record, d *raftstore.Deployment) *failure {
	if rec.deadlineBinds {
		return h.timeoutFailure(rec, d, 0, "sent no first token")
	}
	return retryable(failureOf(apiError{http.StatusGatewayTimeout, typeTimeout, "upstream_timeout", "",
		"The upstream deployment '" + d.ID + "' sent no first token in time."}, translate.KindTimeout))
}

// errEndedEarly: a stream ended before its first event.
func errEndedEarly(d *raftstore.Deployment, err error) *failure {
	return retryable(failureOf(apiError{http.StatusBadGateway, typeUpstream, "upstream_failed", "",
		"The upstream deployment '" + d.ID + "' ended the stream before its first event: " + upstreamErrText(err)}, translate.KindOverloaded))
}

// upstreamFailure classifies an upstream's error answer.
func upstreamFailure(e *translate.Error) *failure {
	f := &failure{kind: e.Kind, err: e}
	switch e.Kind {
	case translate.KindRateLimited, translate.KindOverloaded, translate.KindTimeout, translate.KindOther, translate.KindBadResponse:
		f.cools, f.retry = true, true
	case translate.KindQuotaExhausted, translate.KindAuth, translate.KindNotFound:
		f.cools = true
	}
	return f
}

const statusClientClosed = 499

func isEventStream(ct string) bool {
	return strings.HasPrefix(ct, "text/event-stream")
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

var errBodyTooLarge = errors.New("request body too large")

// readBodyIn reads the request body within BodyReadTimeout: a client that
// trickles its body does not hold a handler for longer. The connection's
// read deadline is lifted afterwards, as net/http reads on from it to
// notice a client that goes away.
func (h *Handler) readBodyIn(w http.ResponseWriter, r *http.Request, dst []byte) ([]byte, error) {
	rd, ok := w.(readDeadliner) // net/http's own writer: no ResponseController to allocate
	if !ok {
		rd = http.NewResponseController(w) // a wrapper may Unwrap to one
	}
	if rd.SetReadDeadline(time.Now().Add(h.cfg.BodyReadTimeout)) != nil {
		return readBody(r, h.cfg.MaxBodyBytes, dst) // the writer cannot: no deadline
	}
	body, err := readBody(r, h.cfg.MaxBodyBytes, dst)
	_ = rd.SetReadDeadline(time.Time{})
	return body, err
}

// readDeadliner is what http.ResponseController uses of a ResponseWriter
// to set its connection's read deadline.
type readDeadliner interface{ SetReadDeadline(time.Time) error }

// bodyError is the answer to a request whose body could not be read.
func (h *Handler) bodyError(w http.ResponseWriter, err error) apiError {
	var ne net.Error
	switch {
	case errors.Is(err, errBodyTooLarge):
		return errTooLarge(h.cfg.MaxBodyBytes)
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		w.Header().Set("Connection", "close") // the rest of the body is still on its way
		return apiError{http.StatusRequestTimeout, typeInvalidRequest, "request_timeout", "",
			"The request body did not arrive within " + h.cfg.BodyReadTimeout.String() + "."}
	}
	return apiError{http.StatusBadRequest, typeInvalidRequest, "body_read_failed", "",
		"Could not read the request body: " + err.Error()}
}

// readBody reads the whole request body into dst, refusing more than limit
// bytes. The client's Content-Length sizes the buffer up to claimTrust;
// past that the buffer grows with the bytes that arrive, so a claim alone
// (a large Content-Length and a stall) does not make the gateway allocate.
func readBody(r *http.Request, limit int64, dst []byte) ([]byte, error) {
	if r.ContentLength > limit {
		return dst, errBodyTooLarge
	}
	if r.ContentLength > 0 && int64(cap(dst)) < r.ContentLength {
		dst = make([]byte, 0, min(r.ContentLength, claimTrust))
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
