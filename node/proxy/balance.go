package proxy

import (
	"time"

	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
)

// The routing decisions live in package routing (balance.go, health.go);
// the handler keeps each node's health table and executes them.

type healthTable = routing.HealthTable

// order appends the deployments of r to dst in the order to try them (see
// routing.HealthTable.Order), and returns how many are not cooling down.
func (h *Handler) order(dst []*raftstore.Deployment, r *raftstore.Route, now int64) ([]*raftstore.Deployment, int) {
	var cost func(*raftstore.Deployment) int64
	if h.cfg.Pricing != nil {
		cost = h.shortCallCost
	}
	return h.health.Order(dst, r, now, h.rnd, cost)
}

// shortCallCost ranks d for the cost strategy: the cost of a short call,
// below every long-context tier, so that deployments rank by the rates
// most requests pay.
func (h *Handler) shortCallCost(d *raftstore.Deployment) int64 {
	c, ok := h.cfg.Pricing.Cost(d, routing.Usage{PromptTokens: 1000, CompletionTokens: 1000})
	if !ok {
		return 1 << 62 // unpriced: last
	}
	return c
}

func tracks(r *raftstore.Route) bool { return routing.Tracks(r) }

func backoff(base time.Duration, n int) time.Duration { return routing.Backoff(base, n) }

func (h *Handler) attemptsOn(rt *raftstore.Route, n int) int {
	return routing.Attempts(rt, h.cfg.MaxAttempts, n)
}

func appendFallbacks(routes []*raftstore.Route, st *raftstore.State, names []string) []*raftstore.Route {
	return routing.AppendFallbacks(routes, st, names)
}
