package proxy

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
)

func testRoute(strategy string, deps ...*raftstore.Deployment) *raftstore.Route {
	for _, d := range deps {
		d.Key = "r/" + d.ID
		if d.Weight == 0 {
			d.Weight = 1
		}
	}
	return &raftstore.Route{Name: "r", Strategy: strategy, Deployments: deps}
}

// Weighted routing over 10,000 requests lands within ±5% (relative) of
// each deployment's share.
func TestWeightedConverges(t *testing.T) {
	h := New(Config{State: nil})
	rng := rand.New(rand.NewPCG(1, 2)) // fixed: the test checks the algorithm, not luck
	h.rnd = rng.Uint64N
	r := testRoute("", &raftstore.Deployment{ID: "a", Weight: 1}, &raftstore.Deployment{ID: "b", Weight: 3},
		&raftstore.Deployment{ID: "c", Weight: 6})
	const n = 10_000
	counts := map[string]int{}
	for range n {
		var buf [8]*raftstore.Deployment
		ds, _ := h.order(buf[:0], r, time.Now().UnixNano())
		counts[ds[0].ID]++
	}
	for id, w := range map[string]float64{"a": 0.1, "b": 0.3, "c": 0.6} {
		got := float64(counts[id]) / n
		if math.Abs(got-w)/w > 0.05 {
			t.Errorf("deployment %s served %.3f of requests, want %.3f ±5%%", id, got, w)
		}
	}
}

// Priorities come first; within one, least-inflight prefers the idle
// deployment and latency the fast one; cost the cheap one.
func TestStrategies(t *testing.T) {
	h := New(Config{})
	slow, fast := &raftstore.Deployment{ID: "slow"}, &raftstore.Deployment{ID: "fast"}
	backup := &raftstore.Deployment{ID: "backup", Priority: 1}
	r := testRoute("least-inflight", slow, fast, backup)
	h.health.of(slow).inFlight.Store(5)
	h.health.of(fast).inFlight.Store(1)
	for range 100 {
		got, _ := h.order(nil, r, time.Now().UnixNano())
		if got[0] != fast || got[1] != slow || got[2] != backup {
			t.Fatalf("least-inflight order %s %s %s", got[0].ID, got[1].ID, got[2].ID)
		}
	}
	r.Strategy = "latency"
	h.health.succeeded(slow, 300*time.Millisecond, true)
	h.health.succeeded(fast, 20*time.Millisecond, true)
	for range 100 {
		if got, _ := h.order(nil, r, time.Now().UnixNano()); got[0] != fast {
			t.Fatalf("latency order starts with %s", got[0].ID)
		}
	}
	// EWMA: one slow answer does not make the fast deployment slow.
	h.health.succeeded(fast, 400*time.Millisecond, true)
	if e := time.Duration(h.health.of(fast).ewma.Load()); e >= 300*time.Millisecond || e <= 20*time.Millisecond {
		t.Errorf("EWMA after one slow answer = %v", e)
	}
}

// A failed deployment cools down (it goes last), one request probes it
// after the cooldown, and a success makes it healthy again; each further
// failure doubles the cooldown.
func TestCooldownAndProbe(t *testing.T) {
	h := New(Config{Cooldown: time.Second, MaxCooldown: 4 * time.Second})
	a, b := &raftstore.Deployment{ID: "a"}, &raftstore.Deployment{ID: "b"}
	r := testRoute("", a, b)
	now := time.Now().UnixNano()
	h.health.failed(a, now, 0)
	for range 50 {
		if got, healthy := h.order(nil, r, now+int64(500*time.Millisecond)); got[0] != b || got[1] != a || healthy != 1 {
			t.Fatalf("while cooling: order %s %s", got[0].ID, got[1].ID)
		}
	}
	// After the cooldown exactly one request probes a (it goes first);
	// the others keep skipping it during the probe window.
	after := now + int64(1100*time.Millisecond)
	probes := 0
	for range 200 {
		if got, _ := h.order(nil, r, after); got[0] == a {
			probes++
		}
	}
	if probes != 1 {
		t.Fatalf("a came first %d times of 200 after its cooldown; want exactly one probe", probes)
	}
	// The probe failed: the cooldown doubles (2s).
	h.health.failed(a, after, 0)
	if c := h.health.of(a).coolUntil.Load() - after; c != int64(2*time.Second) {
		t.Errorf("second cooldown %v, want 2s", time.Duration(c))
	}
	// A Retry-After longer than the cooldown wins, capped at the maximum.
	h.health.failed(a, after, time.Minute)
	if c := h.health.of(a).coolUntil.Load() - after; c != int64(4*time.Second) {
		t.Errorf("cooldown with Retry-After %v, want the 4s maximum", time.Duration(c))
	}
	// A success clears it.
	h.health.succeeded(a, time.Millisecond, false)
	if c, _ := h.health.cooling(a, after); c {
		t.Error("a still cooling after a success")
	}
}

func TestBackoffBounds(t *testing.T) {
	for n := 1; n < 20; n++ {
		for range 100 {
			d := backoff(100*time.Millisecond, n)
			base := min(100*time.Millisecond<<min(n-1, 8), 2*time.Second)
			if d < base/2 || d > base*3/2 {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", n, d, base/2, base*3/2)
			}
		}
	}
}

// Requests that fail together (one outage) escalate the cooldown once.
func TestConcurrentFailuresEscalateOnce(t *testing.T) {
	h := New(Config{Cooldown: time.Second, MaxCooldown: time.Minute})
	d := &raftstore.Deployment{ID: "a", Key: "r/a"}
	now := time.Now().UnixNano()
	for range 10 {
		h.health.failed(d, now, 0)
	}
	if cd := time.Duration(h.health.of(d).coolUntil.Load() - now); cd != time.Second {
		t.Errorf("cooldown after 10 simultaneous failures: %v, want 1s", cd)
	}
}

// tierPricing: deployment "tiered" costs 1 a token, 100 a token once the
// prompt passes 200,000 tokens (a long-context tier); "flat" costs 2.
type tierPricing struct{}

func (tierPricing) Cost(d *raftstore.Deployment, u routing.Usage) (int64, bool) {
	n := u.PromptTokens + u.CompletionTokens
	if d.ID == "flat" {
		return 2 * n, true
	}
	if u.PromptTokens > 200_000 {
		return 100 * n, true
	}
	return n, true
}

func (p tierPricing) MaxCost(d *raftstore.Deployment, prompt, completion int64) (int64, bool) {
	return p.Cost(d, routing.Usage{PromptTokens: prompt, CompletionTokens: completion})
}

// The cost strategy ranks deployments by what a short call costs, not by
// long-context rates that few requests pay.
func TestCostStrategyRanksByShortCalls(t *testing.T) {
	h := New(Config{Pricing: tierPricing{}})
	tiered, flat := &raftstore.Deployment{ID: "tiered"}, &raftstore.Deployment{ID: "flat"}
	r := testRoute("cost", flat, tiered)
	for range 20 {
		if got, _ := h.order(nil, r, time.Now().UnixNano()); got[0] != tiered {
			t.Fatalf("cost order starts with %s; want tiered, the cheaper below its tier", got[0].ID)
		}
	}
}
