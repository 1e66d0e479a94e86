package proxy

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/ratelimit"
	"github.com/tollgate/tollgate/routing"
)

// keyAllows reports whether key may use the model asked for, which route
// serves (nil if none): by the name as asked, or for an alias by the
// route it stands for.
func keyAllows(key *raftstore.Key, asked string, route *raftstore.Route) bool {
	return key.Allows(asked) || (route != nil && !route.Wildcard && route.Name != asked && key.Allows(route.Name))
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
	return satAdd(int64(bodyLen/4), satMul(out, answers(req)))
}

// answers is how many answers a request asks for: n (or best_of) for
// each prompt.
func answers(req *routing.Request) int64 {
	return satMul(max(req.Choices, 1), max(req.Prompts, 1))
}

// maxEstimate bounds estimates, so that sums of them cannot overflow.
const maxEstimate = math.MaxInt64 / 8

func satMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > maxEstimate/b {
		return maxEstimate
	}
	return a * b
}

func satAdd(a, b int64) int64 { return min(a+b, maxEstimate) } // both at most maxEstimate

// limitFields are the output limits each endpoint's format has (indexes of
// routing.Request.Limits).
func limitFields(ep routing.Endpoint) []int {
	switch ep {
	case routing.EndpointChat:
		return chatLimitFields
	case routing.EndpointResponses:
		return responsesLimitFields
	case routing.EndpointEmbeddings:
		return nil
	}
	return maxTokensField // completions, messages
}

var (
	chatLimitFields      = []int{routing.LimitMaxTokens, routing.LimitMaxCompletionTokens}
	responsesLimitFields = []int{routing.LimitMaxOutputTokens}
	maxTokensField       = []int{routing.LimitMaxTokens}
	limitNames           = [3]string{"max_tokens", "max_completion_tokens", "max_output_tokens"}
)

// checkBudgetLimits refuses, for a request under a budget, an output limit
// its reservation could not trust: one the upstream might read otherwise
// than the gateway (a case variant, a repeat, null, a string, a fraction,
// zero or less), or one its format does not have, which the upstream
// would ignore.
func checkBudgetLimits(req *routing.Request, ep routing.Endpoint) string {
	if ep == routing.EndpointEmbeddings {
		return ""
	}
	fields := limitFields(ep)
	if req.LimitBad {
		return limitMessage(fields)
	}
	for k, v := range req.Limits {
		if v > 0 && !slices.Contains(fields, k) {
			return limitMessage(fields) + " This endpoint has no '" + limitNames[k] + "'."
		}
	}
	return ""
}

// limitMessage says which output limit fields a request under a budget
// may use.
func limitMessage(fields []int) string {
	want := make([]string, len(fields))
	for i, f := range fields {
		want[i] = "'" + limitNames[f] + "'"
	}
	return "Under a budget the output limit must be one positive whole number, in " + strings.Join(want, " or ") + "."
}

// outputLimit is the largest output limit the request sets in its format's
// fields; 0 when it sets none.
func outputLimit(req *routing.Request, ep routing.Endpoint) int64 {
	var out int64
	for _, f := range limitFields(ep) {
		out = max(out, req.Limits[f])
	}
	return out
}

// setRateHeaders sets OpenAI's x-ratelimit-* headers. The values share one
// string and the header slices one array: two allocations, not twelve.
func setRateHeaders(h http.Header, s ratelimit.Status) {
	var buf [128]byte
	b := buf[:0]
	var ends [6]int
	n := 0
	if s.LimitRequests > 0 {
		b = strconv.AppendInt(b, s.LimitRequests, 10)
		ends[0] = len(b)
		b = strconv.AppendInt(b, max(s.RemainingRequests, 0), 10)
		ends[1] = len(b)
		b = appendReset(b, s.ResetRequests)
		ends[2] = len(b)
		n = 3
	}
	if s.LimitTokens > 0 {
		if n == 0 {
			ends[0], ends[1], ends[2] = 0, 0, 0
		}
		b = strconv.AppendInt(b, s.LimitTokens, 10)
		ends[3] = len(b)
		b = strconv.AppendInt(b, max(s.RemainingTokens, 0), 10)
		ends[4] = len(b)
		b = appendReset(b, s.ResetTokens)
		ends[5] = len(b)
		n = 6
	}
	if n == 0 {
		return
	}
	all := string(b)
	vals := new([6]string)
	start := 0
	for i := range n {
		vals[i] = all[start:ends[i]]
		start = ends[i]
	}
	if s.LimitRequests > 0 {
		h["X-Ratelimit-Limit-Requests"] = vals[0:1:1]
		h["X-Ratelimit-Remaining-Requests"] = vals[1:2:2]
		h["X-Ratelimit-Reset-Requests"] = vals[2:3:3]
	}
	if s.LimitTokens > 0 {
		h["X-Ratelimit-Limit-Tokens"] = vals[3:4:4]
		h["X-Ratelimit-Remaining-Tokens"] = vals[4:5:5]
		h["X-Ratelimit-Reset-Tokens"] = vals[5:6:6]
	}
}

// appendReset appends a duration the way OpenAI writes it ("1s", "6m0s",
// "120ms").
func appendReset(b []byte, d time.Duration) []byte {
	if d < time.Second {
		return append(strconv.AppendInt(b, d.Milliseconds(), 10), "ms"...)
	}
	d = d.Round(time.Second)
	if h := d / time.Hour; h > 0 {
		b = append(strconv.AppendInt(b, int64(h), 10), 'h')
		d -= h * time.Hour
		b = append(strconv.AppendInt(b, int64(d/time.Minute), 10), 'm')
		d -= d / time.Minute * time.Minute
	} else if m := d / time.Minute; m > 0 {
		b = append(strconv.AppendInt(b, int64(m), 10), 'm')
		d -= m * time.Minute
	}
	return append(strconv.AppendInt(b, int64(d/time.Second), 10), 's')
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

// mediaTokens is what a budget reservation assumes for each image or
// audio part, whose tokens its bytes do not bound (a URL, or a small PNG of
// a large image): a 2048-pixel image on the model dearest per image
// (gpt-4o-mini: 2,833 + 8 × 5,667 tokens), rounded up.
const mediaTokens = 50_000

// estimate bounds a request's cost from above: every body byte counted as
// an input token, mediaTokens for each image or audio part, and the output
// limit (or OutputCap, which the gateway then sends as the request's limit;
// see outputCapField) for each answer asked for, at the dearest deployment
// of the route and of every route its fallbacks can reach. It reports
// false when a deployment's price is unknown; the estimate then covers the
// priced ones.
func (h *Handler) estimate(st *raftstore.State, route *raftstore.Route, body []byte, req *routing.Request, ep routing.Endpoint) (int64, bool) {
	if h.cfg.Pricing == nil {
		return 0, false
	}
	out := outputLimit(req, ep)
	if out <= 0 {
		out = h.cfg.OutputCap
	}
	out = satMul(out, answers(req))
	if ep == routing.EndpointEmbeddings {
		out = 0
	}
	in := satAdd(int64(len(body)), satMul(mediaTokens, int64(routing.CountMedia(body))))
	var most int64
	priced := true
	var buf [8]*raftstore.Route
	routes := append(buf[:0], route)
	for i := 0; i < len(routes); i++ {
		for _, d := range routes[i].Deployments {
			c, ok := h.cfg.Pricing.MaxCost(d, in, out)
			priced = priced && ok
			most = max(most, c)
		}
		for _, names := range [][]string{routes[i].Fallbacks, routes[i].ContextFallbacks} {
			for _, name := range names {
				if fr := st.Resolve(name); fr != nil && !slices.Contains(routes, fr) {
					routes = append(routes, fr)
				}
			}
		}
	}
	return most, priced
}
