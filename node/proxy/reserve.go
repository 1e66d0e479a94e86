package proxy

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/node/budget"
	"github.com/tollgate/tollgate/raftstore"
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
