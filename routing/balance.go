package routing

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tollgate/tollgate/raftstore"
)

// The routing decisions of a request: the order its deployments are
// tried in, how many attempts it makes, the backoff between rounds, and
// the fallback routes. node/proxy executes them.

// Order appends the deployments of r to dst in the order to try them:
// by priority, within a priority by the route's strategy (weighted random
// drawn from rnd, least in flight, lowest latency, or lowest cost as cost
// ranks them, nil: unknown); deployments in cooldown go last (they serve only when
// every other one failed). It returns how many of the appended
// deployments are not cooling down.
func (t *HealthTable) Order(dst []*raftstore.Deployment, r *raftstore.Route, now int64, rnd func(n uint64) uint64,
	cost func(*raftstore.Deployment) int64) ([]*raftstore.Deployment, int) {
	start := len(dst)
	dst = Order(dst, r, rnd)
	ds := dst[start:]
	switch r.Strategy {
	case "least-inflight":
		sortWithinPriority(ds, func(d *raftstore.Deployment) int64 {
			if hh := t.Peek(d); hh != nil {
				return hh.InFlight.Load()
			}
			return 0
		})
	case "latency":
		sortWithinPriority(ds, func(d *raftstore.Deployment) int64 {
			if hh := t.Peek(d); hh != nil {
				return hh.ewma.Load()
			}
			return 0 // unknown: try it, to learn
		})
	case "cost":
		if cost != nil {
			sortWithinPriority(ds, cost)
		}
	}
	// Stable partition: a deployment being probed first, then the healthy
	// ones, then those cooling down.
	if len(ds) == 1 {
		if c, _ := t.Cooling(ds[0], now); c {
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
			switch c, probe := t.Cooling(d, now); {
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
func sortWithinPriority(ds []*raftstore.Deployment, key func(*raftstore.Deployment) int64) {
	for i := 1; i < len(ds); i++ {
		for j := i; j > 0 && ds[j].Priority == ds[j-1].Priority && key(ds[j]) < key(ds[j-1]); j-- {
			ds[j], ds[j-1] = ds[j-1], ds[j]
		}
	}
}

// Backoff returns the jittered wait before retry number n (1-based) of
// the same deployments: base × 2^(n-1), ±50%, at most 2 s.
func Backoff(base time.Duration, n int) time.Duration {
	d := min(base<<min(n-1, 8), 2*time.Second)
	return d/2 + time.Duration(rand.Int64N(int64(d)+1))
}

// Attempts returns how many attempts a request may make on route rt of n
// deployments: the route's bound, else def, and at least one per
// deployment.
func Attempts(rt *raftstore.Route, def uint32, n int) int {
	attempts := int(def)
	if rt.MaxAttempts > 0 {
		attempts = int(rt.MaxAttempts)
	}
	return max(attempts, n)
}

// AppendFallbacks appends the routes named, once each, to routes.
func AppendFallbacks(routes []*raftstore.Route, st *raftstore.State, names []string) []*raftstore.Route {
	for _, name := range names {
		if fr := st.Resolve(name); fr != nil && !slices.Contains(routes, fr) {
			routes = append(routes, fr)
		}
	}
	return routes
}
