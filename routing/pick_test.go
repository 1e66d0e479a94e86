package routing_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
)

func deps(specs ...spec) []*raftstore.Deployment {
	out := make([]*raftstore.Deployment, len(specs))
	for i, s := range specs {
		out[i] = &raftstore.Deployment{ID: s.id, Weight: s.weight, Priority: s.priority}
	}
	return out
}

type spec = struct {
	id       string
	weight   uint32
	priority uint32
}

func ids(ds []*raftstore.Deployment) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func TestOrderSingleDeployment(t *testing.T) {
	r := &raftstore.Route{Name: "m", Deployments: deps(spec{"only", 5, 3})}
	got := routing.Order(nil, r, func(uint64) uint64 {
		t.Fatal("rnd called for a single deployment")
		return 0
	})
	if !slices.Equal(ids(got), []string{"only"}) {
		t.Fatalf("Order = %v", ids(got))
	}
}

func TestOrderEmptyRoute(t *testing.T) {
	if got := routing.Order(nil, &raftstore.Route{Name: "m"}, rand.Uint64N); len(got) != 0 {
		t.Fatalf("Order of an empty route = %v", ids(got))
	}
}

func TestOrderPriorityGroupsFirst(t *testing.T) {
	r := &raftstore.Route{Name: "m", Deployments: deps(
		spec{"p2-a", 100, 2}, spec{"p0-a", 1, 0}, spec{"p1-a", 1000, 1},
		spec{"p0-b", 1, 0}, spec{"p2-b", 1, 2}, spec{"p1-b", 1, 1},
	)}
	before := slices.Clone(r.Deployments)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		got := routing.Order(nil, r, rng.Uint64N)
		if len(got) != 6 {
			t.Fatalf("Order returned %d deployments", len(got))
		}
		for i, d := range got {
			if want := uint32(i / 2); d.Priority != want {
				t.Fatalf("Order = %v: position %d has priority %d, want %d", ids(got), i, d.Priority, want)
			}
		}
		if s := slices.Sorted(slices.Values(ids(got))); !slices.Equal(s, []string{"p0-a", "p0-b", "p1-a", "p1-b", "p2-a", "p2-b"}) {
			t.Fatalf("Order = %v is not a permutation", ids(got))
		}
	}
	// The route belongs to an immutable published State.
	if !slices.Equal(r.Deployments, before) {
		t.Fatalf("Order modified the route's deployments: %v", ids(r.Deployments))
	}
}

func TestOrderAppendsToDst(t *testing.T) {
	prefix := &raftstore.Deployment{ID: "prefix"}
	r := &raftstore.Route{Name: "m", Deployments: deps(spec{"b", 1, 1}, spec{"a", 1, 0})}
	got := routing.Order([]*raftstore.Deployment{prefix}, r, rand.Uint64N)
	if !slices.Equal(ids(got), []string{"prefix", "a", "b"}) {
		t.Fatalf("Order = %v", ids(got))
	}
}

func TestOrderWeights(t *testing.T) {
	r := &raftstore.Route{Name: "m", Deployments: deps(
		spec{"w1", 1, 0}, spec{"w3", 3, 0}, spec{"w6", 6, 0}, spec{"backup", 50, 1},
	)}
	const draws = 20000
	rng := rand.New(rand.NewPCG(42, 7))
	first := map[string]int{}
	second := map[string]int{}
	buf := make([]*raftstore.Deployment, 0, 8)
	for range draws {
		got := routing.Order(buf[:0], r, rng.Uint64N)
		if got[3].ID != "backup" {
			t.Fatalf("Order = %v: backup must be last", ids(got))
		}
		first[got[0].ID]++
		second[got[1].ID]++
	}
	// P(first) is proportional to weight; P(second = j) is the sum over
	// first = i of w_i/10 * w_j/(10-w_i).
	wantFirst := map[string]float64{"w1": .1, "w3": .3, "w6": .6}
	wantSecond := map[string]float64{
		"w1": .3*1/7 + .6*1/4,
		"w3": .1*3/9 + .6*3/4,
		"w6": .1*6/9 + .3*6/7,
	}
	for id, p := range wantFirst {
		if got := float64(first[id]) / draws; math.Abs(got-p) > 0.015 {
			t.Errorf("%s first in %.3f of draws, want %.3f", id, got, p)
		}
	}
	for id, p := range wantSecond {
		if got := float64(second[id]) / draws; math.Abs(got-p) > 0.015 {
			t.Errorf("%s second in %.3f of draws, want %.3f", id, got, p)
		}
	}
}

func TestOrderEqualWeightsUniform(t *testing.T) {
	r := &raftstore.Route{Name: "m", Deployments: deps(spec{"a", 1, 0}, spec{"b", 1, 0})}
	rng := rand.New(rand.NewPCG(3, 4))
	n := 0
	const draws = 20000
	for range draws {
		if routing.Order(nil, r, rng.Uint64N)[0].ID == "a" {
			n++
		}
	}
	if got := float64(n) / draws; math.Abs(got-0.5) > 0.015 {
		t.Errorf("a first in %.3f of draws, want 0.5", got)
	}
}

func BenchmarkOrder(b *testing.B) {
	r := &raftstore.Route{Name: "m", Deployments: deps(spec{"a", 1, 0}, spec{"b", 3, 0}, spec{"c", 1, 1})}
	var buf [8]*raftstore.Deployment
	b.ReportAllocs()
	for b.Loop() {
		routing.Order(buf[:0], r, rand.Uint64N)
	}
}
