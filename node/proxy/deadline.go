package proxy

import (
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing/translate"
)

// Two clocks bound a request before its answer begins: each attempt's
// (the deployment's timeout, else UpstreamTimeout) and the whole
// request's (RequestTimeout, over every attempt and backoff). Whichever
// is nearer arms the attempt, and a timeout says which one fired.

// attemptTimeout returns how long the next attempt at d may take, and
// notes in rec whether the request's deadline is what bounds it.
func (h *Handler) attemptTimeout(rec *Record, d *raftstore.Deployment) time.Duration {
	timeout := h.cfg.UpstreamTimeout
	if d.TimeoutMillis > 0 {
		timeout = time.Duration(d.TimeoutMillis) * time.Millisecond
	}
	rec.deadlineBinds = false
	if !rec.deadline.IsZero() {
		if left := time.Until(rec.deadline); left < timeout {
			timeout, rec.deadlineBinds = max(left, time.Millisecond), true
		}
	}
	return timeout
}

// firstTokenTimeout returns the wait for a stream's first event at d once
// its headers arrived (0: keep the attempt's timer as it is), within the
// request's deadline.
func firstTokenTimeout(rec *Record, d *raftstore.Deployment) time.Duration {
	if d.FirstTokenTimeoutMillis <= 0 {
		return 0
	}
	t := time.Duration(d.FirstTokenTimeoutMillis) * time.Millisecond
	if !rec.deadline.IsZero() {
		if left := time.Until(rec.deadline); left < t {
			t, rec.deadlineBinds = max(left, time.Millisecond), true
		} else {
			rec.deadlineBinds = false
		}
	}
	return t
}

// deadline arms an attempt's timeout: the attempt's context (see
// attemptCtx) ends when the attempt's or the request's time is up, or
// the client goes away. The caller ends it (end) when the attempt is over.
func (h *Handler) deadline(r *http.Request, rec *Record, d *raftstore.Deployment) (*attemptCtx, time.Duration) {
	timeout := h.attemptTimeout(rec, d)
	a := &attemptCtx{Context: r.Context()}
	a.timer = time.AfterFunc(timeout, a.fire)
	return a, timeout
}

// pastDeadline reports whether the request's own deadline has passed.
func (rec *Record) pastDeadline() bool {
	return !rec.deadline.IsZero() && !time.Now().Before(rec.deadline)
}

// timeoutFailure is the 504 of an attempt whose time ran out, saying which
// clock fired: the request's deadline ends the request; an attempt's
// timeout lets the next attempt try.
func (h *Handler) timeoutFailure(rec *Record, d *raftstore.Deployment, timeout time.Duration, what string) *failure {
	elapsed := time.Since(rec.Start).Round(time.Millisecond).String()
	if rec.deadlineBinds {
		f := failureOf(apiError{http.StatusGatewayTimeout, typeTimeout, "request_timeout", "",
			"The request got no answer within the gateway's request timeout of " + h.cfg.RequestTimeout.String() +
				" (" + strconv.Itoa(rec.Attempts) + " attempt(s); the last, at deployment '" + d.ID + "', " + what + ")."},
			translate.KindTimeout)
		f.cools, f.final = true, true
		return f
	}
	return retryable(failureOf(apiError{http.StatusGatewayTimeout, typeTimeout, "upstream_timeout", "",
		"The upstream deployment '" + d.ID + "' " + what + " within its per-attempt timeout of " + timeout.String() +
			" (attempt " + strconv.Itoa(rec.Attempts) + ", " + elapsed + " after the request arrived)."},
		translate.KindTimeout))
}

// errRequestTimeout: the request's deadline passed between attempts.
func (h *Handler) errRequestTimeout(rec *Record, last *failure) *failure {
	msg := "The request got no answer within the gateway's request timeout of " + h.cfg.RequestTimeout.String() +
		" (" + strconv.Itoa(rec.Attempts) + " attempt(s))"
	if last != nil {
		msg += "; the last attempt: " + last.err.Message
	} else {
		msg += "."
	}
	f := failureOf(apiError{http.StatusGatewayTimeout, typeTimeout, "request_timeout", "", msg}, translate.KindTimeout)
	f.final = true
	return f
}
