// Package routing turns a model name into upstream calls: it orders a
// route's deployments, knows the provider kinds, reads and rewrites the few
// request fields the gateway needs, and extracts token usage from responses.
package routing

import (
	"github.com/tollgate/tollgate/raftstore"
)

// Order appends to dst the deployments of r in the order they should be
// tried: lower priority values first; within one priority a weighted random
// order drawn from rnd (which returns a uniform value in [0, n)).
func Order(dst []*raftstore.Deployment, r *raftstore.Route, rnd func(n uint64) uint64) []*raftstore.Deployment {
	start := len(dst)
	dst = append(dst, r.Deployments...)
	ds := dst[start:]
	// Insertion sort by priority: routes have a handful of deployments.
	for i := 1; i < len(ds); i++ {
		for j := i; j > 0 && ds[j].Priority < ds[j-1].Priority; j-- {
			ds[j], ds[j-1] = ds[j-1], ds[j]
		}
	}
	// Weighted shuffle within each priority group.
	for g := 0; g < len(ds); {
		end := g + 1
		for end < len(ds) && ds[end].Priority == ds[g].Priority {
			end++
		}
		for i := g; i < end-1; i++ {
			var total uint64
			for _, d := range ds[i:end] {
				total += uint64(d.Weight)
			}
			x := rnd(total)
			for j := i; j < end; j++ {
				w := uint64(ds[j].Weight)
				if x < w {
					ds[i], ds[j] = ds[j], ds[i]
					break
				}
				x -= w
			}
		}
		g = end
	}
	return dst
}
