package proxy

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
)

// depHealth is what this node knows of one deployment: requests in
// flight, an EWMA of its latency, and whether it is cooling down after
// failures. Each node keeps its own; none of it is replicated.
type depHealth struct {
	inFlight atomic.Int64
	ewma     atomic.Int64 // nanoseconds; 0 until the first answer
	// coolUntil is the Unix-nanosecond time until which the deployment is
	// skipped while others are healthy; fails counts consecutive
	// failures.
	coolUntil atomic.Int64
	fails     atomic.Int32
	// probing is set while one request probes the deployment after its
	// cooldown (coolUntil then holds the end of the probe window).
	probing atomic.Bool
}

// probeWindow is how long one request has to probe a deployment whose
// cooldown ended before another request may.
const probeWindow = 5 * time.Second

// healthTable holds a depHealth per deployment key. Reads are lock-free
// once a deployment has been seen.
type healthTable struct {
	m sync.Map // deployment key → *depHealth
	// Cooldown is the first cooldown after a failure; it doubles with each
	// further consecutive failure up to MaxCooldown.
	Cooldown, MaxCooldown time.Duration
}

func (t *healthTable) of(d *raftstore.Deployment) *depHealth {
	if v, ok := t.m.Load(d.Key); ok {
		return v.(*depHealth)
	}
	v, _ := t.m.LoadOrStore(d.Key, &depHealth{})
	return v.(*depHealth)
}

// peek returns the health of d if it was ever recorded, else nil (and no
// allocation).
func (t *healthTable) peek(d *raftstore.Deployment) *depHealth {
	if v, ok := t.m.Load(d.Key); ok {
		return v.(*depHealth)
	}
	return nil
}

// cooling reports whether d is in its cooldown at now, or past it while
// another request probes it; probe is set when this caller won the right
// to probe d (its cooldown just ended): it should try d first.
func (t *healthTable) cooling(d *raftstore.Deployment, now int64) (cooling, probe bool) {
	h := t.peek(d)
	if h == nil || h.fails.Load() == 0 {
		return false, false
	}
	until := h.coolUntil.Load()
	if now < until {
		return true, false
	}
	// The cooldown is over: one request probes the deployment; the others
	// keep skipping it for the probe window (or until the probe answers).
	if h.coolUntil.CompareAndSwap(until, now+int64(probeWindow)) {
		h.probing.Store(true)
		return false, true
	}
	return true, false
}

// failed records a failure of d: it cools down for Cooldown × 2^(fails-1),
// at most MaxCooldown, or for retryAfter when the upstream said so and
// that is longer.
func (t *healthTable) failed(d *raftstore.Deployment, now int64, retryAfter time.Duration) {
	h := t.of(d)
	if !h.probing.CompareAndSwap(true, false) && now < h.coolUntil.Load() {
		// Requests that were in flight together fail together: one
		// outage escalates the cooldown once, not once per request.
		if retryAfter > 0 {
			h.coolUntil.Store(max(h.coolUntil.Load(), now+int64(min(retryAfter, t.MaxCooldown))))
		}
		return
	}
	n := h.fails.Add(1)
	cd := t.Cooldown << min(n-1, 10)
	if cd > t.MaxCooldown || cd <= 0 {
		cd = t.MaxCooldown
	}
	cd = max(cd, min(retryAfter, t.MaxCooldown))
	h.coolUntil.Store(now + int64(cd))
}

// succeeded records an answer from d after latency.
func (t *healthTable) succeeded(d *raftstore.Deployment, latency time.Duration, track bool) {
	h := t.peek(d)
	if h == nil {
		if !track {
			return
		}
		h = t.of(d)
	}
	if h.fails.Load() != 0 {
		h.fails.Store(0)
		h.coolUntil.Store(0)
		h.probing.Store(false)
	}
	if track {
		old := h.ewma.Load()
		if old == 0 {
			h.ewma.Store(int64(latency))
		} else {
			h.ewma.Store(old + (int64(latency)-old)/5) // α = 0.2
		}
	}
}

// tracks reports whether a route's strategy needs in-flight counts and
// latencies.
func tracks(r *raftstore.Route) bool {
	return r.Strategy == "least-inflight" || r.Strategy == "latency"
}

// order appends the deployments of r to dst in the order to try them:
// by priority, within a priority by the route's strategy; deployments in
// cooldown go last (they serve only when every other one failed). It
// returns how many of the appended deployments are not cooling down.
func (h *Handler) order(dst []*raftstore.Deployment, r *raftstore.Route, now int64) ([]*raftstore.Deployment, int) {
	start := len(dst)
	dst = routing.Order(dst, r, h.rnd)
	ds := dst[start:]
	switch r.Strategy {
	case "least-inflight":
		h.sortWithinPriority(ds, func(d *raftstore.Deployment) int64 {
			if hh := h.health.peek(d); hh != nil {
				return hh.inFlight.Load()
			}
			return 0
		})
	case "latency":
		h.sortWithinPriority(ds, func(d *raftstore.Deployment) int64 {
			if hh := h.health.peek(d); hh != nil {
				return hh.ewma.Load()
			}
			return 0 // unknown: try it, to learn
		})
	case "cost":
		h.sortWithinPriority(ds, func(d *raftstore.Deployment) int64 {
			if h.cfg.Pricing == nil {
				return 0
			}
			// A short call: below every long-context tier, so that
			// deployments rank by the rates most requests pay.
			c, ok := h.cfg.Pricing.Cost(d, routing.Usage{PromptTokens: 1000, CompletionTokens: 1000})
			if !ok {
				return 1 << 62 // unpriced: last
			}
			return c
		})
	}
	// Stable partition: a deployment being probed first, then the healthy
	// ones, then those cooling down.
	if len(ds) == 1 {
		if c, _ := h.health.cooling(ds[0], now); c {
			return dst, 0
		}
		return dst, 1
	}
	healthy := len(ds)
	if len(ds) > 1 {
		var cool [8]*raftstore.Deployment
		cooled := cool[:0]
		w := 0
		for _, d := range ds {
			switch c, probe := h.health.cooling(d, now); {
			case probe:
				copy(ds[1:w+1], ds[:w])
				ds[0] = d
				w++
			case c:
				cooled = append(cooled, d)
			default:
				ds[w] = d
				w++
			}
		}
		copy(ds[w:], cooled)
		healthy = w
	}
	return dst, healthy
}

// sortWithinPriority sorts each run of equal priority by key, ascending,
// keeping the (random) order among equal keys.
func (h *Handler) sortWithinPriority(ds []*raftstore.Deployment, key func(*raftstore.Deployment) int64) {
	for i := 1; i < len(ds); i++ {
		for j := i; j > 0 && ds[j].Priority == ds[j-1].Priority && key(ds[j]) < key(ds[j-1]); j-- {
			ds[j], ds[j-1] = ds[j-1], ds[j]
		}
	}
}

// backoff returns the jittered wait before retry number n (1-based) of
// the same deployments: base × 2^(n-1), ±50%, at most 2 s.
func backoff(base time.Duration, n int) time.Duration {
	d := min(base<<min(n-1, 8), 2*time.Second)
	return d/2 + time.Duration(rand.Int64N(int64(d)+1))
}

// attemptsOn returns how many attempts a request may make on route rt of
// n deployments: the route's bound, else the handler's, and at least one
// per deployment.
func (h *Handler) attemptsOn(rt *raftstore.Route, n int) int {
	attempts := int(h.cfg.MaxAttempts)
	if rt.MaxAttempts > 0 {
		attempts = int(rt.MaxAttempts)
	}
	return max(attempts, n)
}

// appendFallbacks appends the routes named, once each, to routes.
func appendFallbacks(routes []*raftstore.Route, st *raftstore.State, names []string) []*raftstore.Route {
	for _, name := range names {
		if fr := st.Resolve(name); fr != nil && !slices.Contains(routes, fr) {
			routes = append(routes, fr)
		}
	}
	return routes
}
