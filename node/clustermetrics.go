package node

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/node/proxy"
	"github.com/tollgate/tollgate/raftstore"
)

// clusterMetrics exports the health of this node's view of the cluster —
// readiness, Raft, gossip membership and team budgets — for dashboards and
// alerts. It reads the state when Prometheus scrapes, never on a request's
// path, and takes no lock the data plane takes: the Raft library's own
// getters, the published State, and the gossip member table.
type clusterMetrics struct {
	n *Node
	// leaderChanges counts the times this node saw the leader change to
	// another known node (watchLeader keeps it).
	leaderChanges atomic.Uint64

	ready, leader, hasLeader, term, commitIdx, appliedIdx, lastIdx *prometheus.Desc
	contact, servers, members, changes                             *prometheus.Desc
	budgetLimit, budgetSpent, budgetUsed                           *prometheus.Desc
	propose                                                        prometheus.Histogram // raftcommit.go
}

// maxBudgetSeries caps the teams whose budgets are exported, so that a
// cluster with very many teams cannot blow up a scrape; teams beyond it
// (in the state's order) are left out.
const maxBudgetSeries = 2000

func newClusterMetrics(n *Node) *clusterMetrics {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &clusterMetrics{
		n:          n,
		ready:      d("tollgate_ready", "1 while /readyz answers 200 (caught up with Raft, not draining), else 0."),
		leader:     d("tollgate_raft_leader", "1 on the node that is the Raft leader, else 0."),
		hasLeader:  d("tollgate_raft_has_leader", "1 while this node knows a Raft leader, else 0."),
		term:       d("tollgate_raft_term", "This node's current Raft term; it grows by one per election."),
		commitIdx:  d("tollgate_raft_commit_index", "The highest Raft log index this node knows to be committed."),
		appliedIdx: d("tollgate_raft_applied_index", "The highest Raft log index this node applied to its state."),
		lastIdx:    d("tollgate_raft_last_index", "The last index in this node's Raft log."),
		contact: d("tollgate_raft_last_contact_seconds",
			"Seconds since this follower last heard from the leader; 0 on the leader, -1 before any contact."),
		servers: d("tollgate_raft_servers", "Members of the Raft configuration, by suffrage (voter, nonvoter).", "suffrage"),
		members: d("tollgate_gossip_members", "Nodes this node's gossip knows, by state (alive, suspect, dead, left).", "state"),
		changes: d("tollgate_raft_leader_changes_total", "Times this node saw the Raft leader change to another node."),
		budgetLimit: d("tollgate_team_budget_limit_nanodollars",
			"A team budget's limit per period in nano-dollars (1e-9 USD).", "team", "team_name", "period"),
		budgetSpent: d("tollgate_team_budget_spent_nanodollars",
			"Spend settled in Raft against a team budget in its current period, in nano-dollars (nodes report every few seconds).",
			"team", "team_name", "period"),
		budgetUsed: d("tollgate_team_budget_used_ratio",
			"Settled spend of a team budget's current period divided by its limit (1 = exhausted).", "team", "team_name", "period"),
	}
}

// Describe implements prometheus.Collector.
func (c *clusterMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.ready, c.leader, c.hasLeader, c.term, c.commitIdx, c.appliedIdx,
		c.lastIdx, c.contact, c.servers, c.members, c.changes, c.budgetLimit, c.budgetSpent, c.budgetUsed} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *clusterMetrics) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.ready, boolValue(c.n.Ready()))
	c.collectRaft(gauge)
	ch <- prometheus.MustNewConstMetric(c.changes, prometheus.CounterValue, float64(c.leaderChanges.Load()))
	c.collectGossip(gauge)
	c.collectBudgets(gauge, time.Now())
}

func (c *clusterMetrics) collectRaft(gauge func(*prometheus.Desc, float64, ...string)) {
	st := c.n.store
	isLeader := st.IsLeader()
	_, leaderID := st.Leader()
	gauge(c.leader, boolValue(isLeader))
	gauge(c.hasLeader, boolValue(leaderID != ""))
	p := st.Progress()
	gauge(c.term, float64(p.Term))
	gauge(c.commitIdx, float64(p.CommitIndex))
	gauge(c.appliedIdx, float64(p.AppliedIndex))
	gauge(c.lastIdx, float64(p.LastIndex))
	switch {
	case isLeader:
		gauge(c.contact, 0)
	case p.LastContact.IsZero():
		gauge(c.contact, -1)
	default:
		gauge(c.contact, time.Since(p.LastContact).Seconds())
	}
	voters, nonvoters := 0, 0
	if srvs, err := st.Servers(); err == nil {
		for _, s := range srvs {
			if s.Voter {
				voters++
			} else {
				nonvoters++
			}
		}
	}
	gauge(c.servers, float64(voters), "voter")
	gauge(c.servers, float64(nonvoters), "nonvoter")
}

func (c *clusterMetrics) collectGossip(gauge func(*prometheus.Desc, float64, ...string)) {
	counts := map[string]int{"alive": 0, "suspect": 0, "dead": 0, "left": 0}
	states := map[string]string{}
	for id, m := range c.n.gossip.snapshot() {
		states[id] = m.state
	}
	// The member table learns of joins, leaves and deaths; a suspicion
	// only memberlist itself knows.
	for _, m := range c.n.gossip.ml.Members() {
		if m.State == memberlist.StateSuspect {
			states[m.Name] = "suspect"
		} else if _, ok := states[m.Name]; !ok {
			states[m.Name] = "alive"
		}
	}
	for _, s := range states {
		counts[s]++
	}
	for s, k := range counts {
		gauge(c.members, float64(k), s)
	}
}

// collectBudgets exports every team budget's current period from the
// replicated state: the same numbers on every node that has caught up.
func (c *clusterMetrics) collectBudgets(gauge func(*prometheus.Desc, float64, ...string), now time.Time) {
	st := c.n.store.State()
	if st == nil {
		return
	}
	k := 0
	for _, t := range st.Teams() {
		b := t.GetBudget()
		if b == nil || b.GetLimitNanos() <= 0 {
			continue
		}
		if k++; k > maxBudgetSeries {
			return
		}
		start := raftstore.PeriodStart(b.GetPeriod(), now)
		var spent int64
		if bp := st.BudgetPeriod(raftstore.TeamBudgetID(t.GetId()), start); bp != nil {
			spent = bp.GetSpentNanos()
		}
		labels := []string{t.GetId(), t.GetName(), b.GetPeriod()}
		gauge(c.budgetLimit, float64(b.GetLimitNanos()), labels...)
		gauge(c.budgetSpent, float64(spent), labels...)
		gauge(c.budgetUsed, float64(spent)/float64(b.GetLimitNanos()), labels...)
	}
}

// watchLeader counts leader changes as this node sees them, checking
// Raft's leader every interval until ctx is done.
func (c *clusterMetrics) watchLeader(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var last string
	for {
		if _, id := c.n.store.Leader(); id != "" && id != last {
			if last != "" {
				c.leaderChanges.Add(1)
			}
			last = id
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// deploymentMetrics counts answers by the deployment that gave them and
// the attempts that failed before, so that a deployment that keeps
// failing (and cooling down) shows up by name.
type deploymentMetrics struct {
	answers *prometheus.CounterVec
	retries *prometheus.CounterVec
}

func newDeploymentMetrics(reg prometheus.Registerer) *deploymentMetrics {
	m := &deploymentMetrics{
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_deployment_responses_total",
			Help: "Requests by the deployment whose attempt answered last (fallback routes as route/deployment), and status class (2xx, 4xx, 5xx).",
		}, []string{"model", "deployment", "class"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_upstream_failed_attempts_total",
			Help: "Upstream attempts that failed and were retried or fell back (each one puts its deployment in cooldown), by model.",
		}, []string{"model"}),
	}
	reg.MustRegister(m.answers, m.retries)
	return m
}

var statusClasses = [...]string{"0xx", "1xx", "2xx", "3xx", "4xx", "5xx"}

// Record implements proxy.Recorder.
func (m *deploymentMetrics) Record(rec *proxy.Record) {
	if rec.Attempts == 0 || rec.Deployment == "" {
		return // never reached an upstream (auth, limits, budgets, bad requests)
	}
	model := rec.Model
	if model == "" {
		model = "none"
	}
	class := "other"
	if i := rec.Status / 100; i >= 0 && i < len(statusClasses) {
		class = statusClasses[i]
	}
	if rec.Status == 499 {
		class = "client_gone"
	}
	m.answers.WithLabelValues(model, rec.Deployment, class).Inc()
	if rec.Attempts > 1 {
		m.retries.WithLabelValues(model).Add(float64(rec.Attempts - 1))
	}
}

// registerClusterMetrics registers the cluster-health collector and the
// per-deployment counters with reg; it returns the recorder of the latter.
func (n *Node) registerClusterMetrics(reg prometheus.Registerer) proxy.Recorder {
	n.metrics = newClusterMetrics(n)
	reg.MustRegister(n.metrics)
	n.metrics.propose = newProposeHistogram(reg)
	return newDeploymentMetrics(reg)
}
