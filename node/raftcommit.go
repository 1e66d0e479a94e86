package node

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// newProposeHistogram registers tollgate_raft_propose_duration_seconds:
// how long this node's own commands (spend reports, budget leases) take to
// commit in Raft and apply here, through the leader when this node
// follows. It is the Raft commit latency the data plane's bookkeeping sees.
func newProposeHistogram(reg prometheus.Registerer) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "tollgate_raft_propose_duration_seconds",
		Help:    "Time from proposing a command of this node (spend report, budget lease) to its commit and apply here, through the leader when this node follows.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	})
	reg.MustRegister(h)
	return h
}

// observePropose records a proposal that started at start.
func (c *clusterMetrics) observePropose(start time.Time) {
	if c != nil && c.propose != nil {
		c.propose.Observe(time.Since(start).Seconds())
	}
}
