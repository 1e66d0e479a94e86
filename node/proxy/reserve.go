package proxy

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/node/budget"
	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/ratelimit"
	"github.com/tollgate/tollgate/routing"
	"go.opentelemetry.io/otel/attribute"
)

// reserveBudget reserves the request's estimated cost from the budgets of
// its key and team, when they have any. It returns false when the request
// was answered (refused) instead.
func (h *Handler) reserveBudget(w http.ResponseWriter, r *http.Request, rec *Record, st *raftstore.State,
	key *raftstore.Key, route *raftstore.Route, body []byte, req *routing.Request) bool {
	limits := budgetsOf(st, key)
	if len(limits) == 0 || h.cfg.Budgets == nil {
		return true
	}
	if msg := checkBudgetLimits(req, rec.Endpoint); msg != "" {
		h.fail(w, rec, apiError{http.StatusBadRequest, typeInvalidRequest, "invalid_output_limit", "", msg})
		return false
	}
	estimate, priced := h.estimate(st, route, body, req, rec.Endpoint)
	if !priced && !allowUnpriced(limits) {
		h.fail(w, rec, errUnpriced(req.Model))
		return false
	}
	res, err := h.cfg.Budgets.Reserve(r.Context(), limits, estimate, rec.Start)
	if err != nil {
		rec.traceEvent("tollgate.budget_refused", attribute.String("error", err.Error()))
		var ex *budget.Exceeded
		if errors.As(err, &ex) {
			if ex.ResetAt > 0 {
				w.Header().Set("Retry-After", strconv.FormatInt(max(ex.ResetAt-time.Now().Unix(), 1), 10))
			}
			h.fail(w, rec, errBudgetExceeded(ex, estimate))
		} else {
			h.fail(w, rec, apiError{http.StatusServiceUnavailable, typeServer, "budget_unavailable", "", "The budget could not be checked: " + err.Error()})
		}
		return false
	}
	rec.Reservation = res
	return true
}

// admitRate takes the key's (and its team's) rate-limit tickets for the
// request, or answers 429 with Retry-After and returns false.
func (h *Handler) admitRate(w http.ResponseWriter, rec *Record, st *raftstore.State, key *raftstore.Key, bodyLen int, req *routing.Request) bool {
	if h.cfg.Limiter == nil {
		return true
	}
	var buf [2]ratelimit.Check
	checks := limitChecks(buf[:0], st, key)
	if len(checks) == 0 {
		return true
	}
	t, refusal := h.cfg.Limiter.Admit(checks, estimateTokens(bodyLen, req, h.cfg.OutputCap))
	setRateHeaders(w.Header(), h.cfg.Limiter.Status(checks[0]))
	if refusal != nil {
		rec.RateLimited = refusal.Reason
		rec.traceEvent("tollgate.rate_limited", attribute.String("tollgate.rate_limited", refusal.Reason))
		w.Header().Set("Retry-After", strconv.FormatInt(int64(max(refusal.RetryAfter/time.Second, 1)), 10))
		h.fail(w, rec, errRateLimited(refusal))
		return false
	}
	rec.tickets[0] = t
	return true
}
