package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/node/budget"
	"github.com/tollgate/tollgate/ratelimit"
	"github.com/tollgate/tollgate/routing"
	"github.com/tollgate/tollgate/routing/translate"
)

// OpenAI's error types, as its API returns them.
const (
	typeInvalidRequest = "invalid_request_error"
	typeAuthentication = "authentication_error"
	typePermission     = "permission_error"
	typeNotFound       = "not_found_error"
	typeUpstream       = "upstream_error"
	typeTimeout        = "timeout_error"
	typeServer         = "server_error"
)

type apiError struct {
	status int
	typ    string
	code   string
	param  string
	msg    string
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// toError converts e for a translator.
func (e apiError) toError(kind translate.ErrorKind) *translate.Error {
	return &translate.Error{Status: e.status, Type: e.typ, Code: e.code, Param: e.param, Message: e.msg, Kind: kind}
}

// writeErrorIn answers with e in the error shape of the endpoint's API:
// Anthropic's for /v1/messages, OpenAI's for the others.
func writeErrorIn(w http.ResponseWriter, ep routing.Endpoint, e *translate.Error) {
	var b []byte
	if ep == routing.EndpointMessages {
		b = translate.AnthropicInbound.EncodeError(e)
	} else if ep == routing.EndpointGemini {
		b = translate.GeminiInbound.EncodeError(e)
	} else {
		b = translate.EncodeOpenAIError(e)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(e.Status)
	_, _ = w.Write(b)
}

// writeError answers with an error in OpenAI's JSON shape.
func writeError(w http.ResponseWriter, e apiError) {
	d := errorDetail{Message: e.msg, Type: e.typ}
	if e.param != "" {
		d.Param = &e.param
	}
	if e.code != "" {
		d.Code = &e.code
	}
	b, _ := json.Marshal(errorBody{d})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(e.status)
	_, _ = w.Write(b)
}

var (
	errNoKey = apiError{http.StatusUnauthorized, typeInvalidRequest, "missing_api_key", "",
		"You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY' (or 'x-api-key')."}
	errBadKey = apiError{http.StatusUnauthorized, typeInvalidRequest, "invalid_api_key", "",
		"Incorrect API key provided."}
	errRevokedKey = apiError{http.StatusUnauthorized, typeInvalidRequest, "invalid_api_key", "",
		"This API key has been revoked."}
	errExpiredKey = apiError{http.StatusUnauthorized, typeInvalidRequest, "key_expired", "",
		"This API key has expired."}
	errMalformed = apiError{http.StatusBadRequest, typeInvalidRequest, "invalid_json", "",
		"We could not parse the JSON body of your request. The body must be a JSON object."}
	errNoModel = apiError{http.StatusBadRequest, typeInvalidRequest, "missing_model", "model",
		"You must provide a model parameter."}
	// errBadUpstreamURL does not echo the URL or the parser's error (which
	// quotes it): a base URL may name internal hosts, and one written
	// before the admin API refused user info in it may hold a password.
	errBadUpstreamURL = apiError{http.StatusBadGateway, typeUpstream, "bad_upstream_url", "",
		"The deployment's base URL is not a valid URL; an operator must correct it ('tollctl model list' shows it)."}
)

func errTooLarge(limit int64) apiError {
	return apiError{http.StatusRequestEntityTooLarge, typeInvalidRequest, "request_too_large", "",
		"The request body exceeds the limit of " + strconv.FormatInt(limit, 10) + " bytes."}
}

func errModelNotAllowed(model string) apiError {
	return apiError{http.StatusForbidden, typePermission, "model_not_allowed", "model",
		"This API key is not allowed to use the model '" + model + "'."}
}

func errModelNotFound(model string) apiError {
	return apiError{http.StatusNotFound, typeInvalidRequest, "model_not_found", "model",
		"The model '" + model + "' does not exist or has no route on this gateway."}
}

func errMethod(allow string) apiError {
	return apiError{http.StatusMethodNotAllowed, typeInvalidRequest, "method_not_allowed", "",
		"Use " + allow + " for this endpoint."}
}

func errUnknownPath(path string) apiError {
	return apiError{http.StatusNotFound, typeInvalidRequest, "unknown_url", "",
		"Unknown request URL: " + path + "."}
}

func errUnpriced(model string) apiError {
	return apiError{http.StatusForbidden, typePermission, "model_unpriced", "model",
		"The price of the model '" + model + "' is unknown, and this key's budget does not allow unpriced models. An operator can set a price on the deployment or allow unpriced models on the budget."}
}

// errBudgetExceeded refuses a request its budget cannot cover: one that is
// spent, or one whose reservation (its largest possible cost) is more
// than what is left.
func errBudgetExceeded(e *budget.Exceeded, reserve int64) apiError {
	spent, limit := max(e.SpentNanos, 0), max(e.Budget.LimitNanos, 0)
	var msg string
	if left := limit - spent; left > 0 {
		msg = "The budget of " + budgetName(e.Budget.ID) + " cannot cover this request: it would reserve " + usd(reserve) +
			" (its largest possible cost), and " + usd(left) + " of " + usd(limit) + " (" + e.Budget.Period + ") is left"
	} else {
		msg = "The budget of " + budgetName(e.Budget.ID) + " is exhausted: spent " + usd(spent) +
			" of " + usd(limit) + " (" + e.Budget.Period + ")"
	}
	if e.ResetAt > 0 {
		msg += "; it resets at " + time.Unix(e.ResetAt, 0).UTC().Format(time.RFC3339)
	}
	return apiError{http.StatusTooManyRequests, "insufficient_quota", "budget_exceeded", "", msg + "."}
}

func budgetName(id string) string {
	kind, ref, _ := strings.Cut(id, ":")
	return kind + " '" + ref + "'"
}

// usd formats nano-dollars as dollars with four decimals. Spend is never
// negative: a negative amount (an overflow upstream of here) prints as $0.
func usd(nanos int64) string {
	nanos = max(nanos, 0)
	tenths := nanos / 100_000 // units of $0.0001, rounded half up
	if nanos%100_000 >= 50_000 {
		tenths++
	}
	return "$" + strconv.FormatInt(tenths/10_000, 10) + "." + fmt.Sprintf("%04d", tenths%10_000)
}

func errRateLimited(r *ratelimit.Refusal) apiError {
	what := map[string]string{"rpm": "requests per minute", "tpm": "tokens per minute", "parallel": "requests in flight"}[r.Reason]
	typ := "requests"
	if r.Reason == "tpm" {
		typ = "tokens"
	}
	return apiError{http.StatusTooManyRequests, typ, "rate_limit_exceeded", "",
		"Rate limit reached for " + budgetName(r.Bucket) + ": " + strconv.FormatInt(r.Limit, 10) + " " + what +
			". Retry after " + r.RetryAfter.String() + "."}
}

func errDeploymentsBusy(model string, r *ratelimit.Refusal) apiError {
	return apiError{http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "",
		"Every deployment of the model '" + model + "' is at its rate limit (" + r.Reason + "). Retry after " + r.RetryAfter.String() + "."}
}
