package routing

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/tollgate/raftstore"
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

// order orders r's deployments with h at now.
func order(h *HealthTable, r *raftstore.Route, now int64) ([]*raftstore.Deployment, int) {
	return h.Order(nil, r, now, rand.Uint64N, nil)
}

// A failed deployment cools down (it goes last), one request probes it
// after the cooldown, and a success makes it healthy again; each further
// failure doubles the cooldown.
func TestCooldownAndProbe(t *testing.T) {
	h := &HealthTable{Cooldown: time.Second, MaxCooldown: 4 * time.Second}
	a, b := &raftstore.Deployment{ID: "a"}, &raftstore.Deployment{ID: "b"}
	r := testRoute("", a, b)
	now := time.Now().UnixNano()
	h.Failed(a, now, 0)
	for range 50 {
		if got, healthy := order(h, r, now+int64(500*time.Millisecond)); got[0] != b || got[1] != a || healthy != 1 {
			t.Fatalf("while cooling: order %s %s", got[0].ID, got[1].ID)
		}
	}
	// After the cooldown exactly one request probes a (it goes first);
	// the others keep skipping it during the probe window.
	after := now + int64(1100*time.Millisecond)
	probes := 0
	for range 200 {
		if got, _ := order(h, r, after); got[0] == a {
			probes++
		}
	}
	if probes != 1 {
		t.Fatalf("a came first %d times of 200 after its cooldown; want exactly one probe", probes)
	}
	// The probe failed: the cooldown doubles (2s).
	h.Failed(a, after, 0)
	if c := h.Of(a).coolUntil.Load() - after; c != int64(2*time.Second) {
		t.Errorf("second cooldown %v, want 2s", time.Duration(c))
	}
	// A Retry-After longer than the cooldown wins, capped at the maximum.
	h.Failed(a, after, time.Minute)
	if c := h.Of(a).coolUntil.Load() - after; c != int64(4*time.Second) {
		t.Errorf("cooldown with Retry-After %v, want the 4s maximum", time.Duration(c))
	}
	// A success clears it.
	h.Succeeded(a, time.Millisecond, false)
	if c, _ := h.Cooling(a, after); c {
		t.Error("a still cooling after a success")
	}
}

func TestBackoffBounds(t *testing.T) {
	for n := 1; n < 20; n++ {
		for range 100 {
			d := Backoff(100*time.Millisecond, n)
			base := min(100*time.Millisecond<<min(n-1, 8), 2*time.Second)
			if d < base/2 || d > base*3/2 {
				t.Fatalf("Backoff(%d) = %v, want within [%v, %v]", n, d, base/2, base*3/2)
			}
		}
	}
}

// Requests that fail together (one outage) escalate the cooldown once.
func TestConcurrentFailuresEscalateOnce(t *testing.T) {
	h := &HealthTable{Cooldown: time.Second, MaxCooldown: time.Minute}
	d := &raftstore.Deployment{ID: "a", Key: "r/a"}
	now := time.Now().UnixNano()
	for range 10 {
		h.Failed(d, now, 0)
	}
	if cd := time.Duration(h.Of(d).coolUntil.Load() - now); cd != time.Second {
		t.Errorf("cooldown after 10 simultaneous failures: %v, want 1s", cd)
	}
}

// Weighted routing over 10,000 requests lands within ±5% (relative) of
// each deployment's share.
func TestWeightedConverges(t *testing.T) {
	h := &HealthTable{}
	rng := rand.New(rand.NewPCG(1, 2)) // fixed: the test checks the algorithm, not luck
	r := testRoute("", &raftstore.Deployment{ID: "a", Weight: 1}, &raftstore.Deployment{ID: "b", Weight: 3},
		&raftstore.Deployment{ID: "c", Weight: 6})
	const n = 10_000
	counts := map[string]int{}
	for range n {
		var buf [8]*raftstore.Deployment
		ds, _ := h.Order(buf[:0], r, time.Now().UnixNano(), rng.Uint64N, nil)
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
	h := &HealthTable{}
	slow, fast := &raftstore.Deployment{ID: "slow"}, &raftstore.Deployment{ID: "fast"}
	backup := &raftstore.Deployment{ID: "backup", Priority: 1}
	r := testRoute("least-inflight", slow, fast, backup)
	h.Of(slow).InFlight.Store(5)
	h.Of(fast).InFlight.Store(1)
	for range 100 {
		got, _ := order(h, r, time.Now().UnixNano())
		if got[0] != fast || got[1] != slow || got[2] != backup {
			t.Fatalf("least-inflight order %s %s %s", got[0].ID, got[1].ID, got[2].ID)
		}
	}
	r.Strategy = "latency"
	h.Succeeded(slow, 300*time.Millisecond, true)
	h.Succeeded(fast, 20*time.Millisecond, true)
	for range 100 {
		if got, _ := order(h, r, time.Now().UnixNano()); got[0] != fast {
			t.Fatalf("latency order starts with %s", got[0].ID)
		}
	}
	// EWMA: one slow answer does not make the fast deployment slow.
	h.Succeeded(fast, 400*time.Millisecond, true)
	if e := time.Duration(h.Of(fast).Latency()); e >= 300*time.Millisecond || e <= 20*time.Millisecond {
		t.Errorf("EWMA after one slow answer = %v", e)
	}
}
