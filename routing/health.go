package routing

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/raftstore"
)

// Each node's view of its deployments' health: cooldowns after failures,
// the probe that ends one, requests in flight and latency. Nothing of it
// is replicated; node/proxy records into it and orders by it.

// Health is what this node knows of one deployment: requests in
// flight, an EWMA of its latency, and whether it is cooling down after
// failures. Each node keeps its own; none of it is replicated.
type Health struct {
	// InFlight counts the requests in flight to it (kept for routes
	// whose strategy Tracks it).
	InFlight atomic.Int64
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

// HealthTable holds a Health per deployment key. Reads are lock-free
// once a deployment has been seen.
type HealthTable struct {
	m sync.Map // deployment key → *Health
	// Cooldown is the first cooldown after a failure; it doubles with each
	// further consecutive failure up to MaxCooldown.
	Cooldown, MaxCooldown time.Duration
}

// Of returns the health of d, recording it from now on.
func (t *HealthTable) Of(d *raftstore.Deployment) *Health {
	if v, ok := t.m.Load(d.Key); ok {
		return v.(*Health)
	}
	v, _ := t.m.LoadOrStore(d.Key, &Health{})
	return v.(*Health)
}

// Peek returns the health of d if it was ever recorded, else nil (and no
// allocation).
func (t *HealthTable) Peek(d *raftstore.Deployment) *Health {
	if v, ok := t.m.Load(d.Key); ok {
		return v.(*Health)
	}
	return nil
}

// CoolingAt reports whether the deployment is in its cooldown at now,
// without claiming a probe as HealthTable.Cooling would (for reports).
func (h *Health) CoolingAt(now int64) bool {
	return h != nil && h.fails.Load() > 0 && now < h.coolUntil.Load()
}

// Cooling reports whether d is in its cooldown at now, or past it while
// another request probes it; probe is set when this caller won the right
// to probe d (its cooldown just ended): it should try d first.
func (t *HealthTable) Cooling(d *raftstore.Deployment, now int64) (cooling, probe bool) {
	h := t.Peek(d)
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

// Failed records a failure of d: it cools down for Cooldown × 2^(fails-1),
// at most MaxCooldown, or for retryAfter when the upstream said so and
// that is longer.
func (t *HealthTable) Failed(d *raftstore.Deployment, now int64, retryAfter time.Duration) {
	h := t.Of(d)
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

// Succeeded records an answer from d after latency.
func (t *HealthTable) Succeeded(d *raftstore.Deployment, latency time.Duration, track bool) {
	h := t.Peek(d)
	if h == nil {
		if !track {
			return
		}
		h = t.Of(d)
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

// Tracks reports whether a route's strategy needs in-flight counts and
// latencies.
func Tracks(r *raftstore.Route) bool {
	return r.Strategy == "least-inflight" || r.Strategy == "latency"
}

// Latency is the moving average of d's latency (0: unknown).
func (h *Health) Latency() time.Duration { return time.Duration(h.ewma.Load()) }

// HealthReport is a Health as reports show it.
type HealthReport struct {
	Cooling   bool
	CoolUntil time.Time // zero when not cooling
	Failures  int32
	Latency   time.Duration
	InFlight  int64
}

// Report returns h as of now (for the admin API); a nil h is a deployment
// never called.
func (h *Health) Report(now time.Time) HealthReport {
	if h == nil {
		return HealthReport{}
	}
	r := HealthReport{Failures: h.fails.Load(), Latency: h.Latency(), InFlight: h.InFlight.Load()}
	if h.CoolingAt(now.UnixNano()) {
		r.Cooling, r.CoolUntil = true, time.Unix(0, h.coolUntil.Load())
	}
	return r
}
