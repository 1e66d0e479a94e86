package node

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// scrape returns the samples of tn's /metrics as "name{labels}" → value.
func scrape(t testing.TB, tn *tnode) (map[string]float64, error) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(tn.httpURL() + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("sample %q: %w", line, err)
		}
		out[line[:i]] = v
	}
	return out, nil
}

// sample returns one sample of tn's metrics, failing when it is missing.
func sample(m map[string]float64, series string) (float64, error) {
	v, ok := m[series]
	if !ok {
		return 0, fmt.Errorf("no sample %s", series)
	}
	return v, nil
}

// Every node of a three-node cluster exports who leads, the Raft
// configuration, the gossip members, readiness and each team budget; when
// the leader dies, the survivors count the leader change, elect one new
// leader among them and see the dead member in gossip.
func TestClusterMetricsFollowLeaderAndMembers(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	leader, followers := split(t, nodes)
	ctx := adminCtx(t)
	team, err := pb.NewTeamServiceClient(leader.grpcConn()).CreateTeam(ctx, &pb.CreateTeamRequest{
		Name: "research", Budget: &pb.Budget{LimitNanos: 5e9, Period: "month"}})
	if err != nil {
		t.Fatalf("CreateTeam: %v", err)
	}
	budgetLabels := fmt.Sprintf(`{period="month",team="%s",team_name="research"}`, team.GetTeam().GetId())

	eventually(t, 10*time.Second, "every node's metrics describe the cluster", func() error {
		leaders := 0.0
		for _, tn := range nodes {
			m, err := scrape(t, tn)
			if err != nil {
				return err
			}
			for series, want := range map[string]float64{
				"tollgate_ready": 1, "tollgate_raft_has_leader": 1,
				`tollgate_raft_servers{suffrage="voter"}`: 3, `tollgate_raft_servers{suffrage="nonvoter"}`: 0,
				`tollgate_gossip_members{state="alive"}`: 3, `tollgate_gossip_members{state="dead"}`: 0,
				"tollgate_team_budget_limit_nanodollars" + budgetLabels: 5e9,
				"tollgate_team_budget_used_ratio" + budgetLabels:        0,
			} {
				if got, err := sample(m, series); err != nil || got != want {
					return fmt.Errorf("%s: %s = %v (%v), want %v", tn.id, series, got, err, want)
				}
			}
			l, err := sample(m, "tollgate_raft_leader")
			if err != nil {
				return err
			}
			leaders += l
			if applied, _ := sample(m, "tollgate_raft_applied_index"); applied < 1 {
				return fmt.Errorf("%s: applied index %v", tn.id, applied)
			}
		}
		if leaders != 1 {
			return fmt.Errorf("%v nodes say they lead, want 1", leaders)
		}
		return nil
	})

	leader.crash()
	eventually(t, 20*time.Second, "the survivors count a leader change and see the dead member", func() error {
		leaders := 0.0
		for _, tn := range followers {
			m, err := scrape(t, tn)
			if err != nil {
				return err
			}
			if c, err := sample(m, "tollgate_raft_leader_changes_total"); err != nil || c < 1 {
				return fmt.Errorf("%s: leader changes %v (%v), want at least 1", tn.id, c, err)
			}
			gone := m[`tollgate_gossip_members{state="dead"}`] + m[`tollgate_gossip_members{state="suspect"}`]
			if alive := m[`tollgate_gossip_members{state="alive"}`]; alive != 2 || gone != 1 {
				return fmt.Errorf("%s: %v alive and %v dead or suspect members, want 2 and 1", tn.id, alive, gone)
			}
			leaders += m["tollgate_raft_leader"]
		}
		if leaders != 1 {
			return fmt.Errorf("%v survivors say they lead, want 1", leaders)
		}
		return nil
	})
}

// The deployment counters name the deployment that answered, by status
// class, and count the failed attempts before it; requests that never
// reached an upstream are not counted.
func TestDeploymentMetricsCountAnswersAndFailedAttempts(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newDeploymentMetrics(reg)
	for _, rec := range []*proxy.Record{
		{Model: "gpt", Deployment: "a", Status: 200, Attempts: 1},
		{Model: "gpt", Deployment: "b", Status: 200, Attempts: 3}, // a failed twice, then b answered
		{Model: "gpt", Deployment: "a", Status: 502, Attempts: 2},
		{Model: "gpt", Deployment: "a", Status: 499, Attempts: 1},
		{Model: "gpt", Status: 401},              // refused before any attempt
		{Model: "gpt", Status: 429, Attempts: 0}, // rate-limited
		{Model: "", Deployment: "x", Status: 200, Attempts: 1},
	} {
		m.Record(rec)
	}
	got := gathered(t, reg)
	want := map[string]float64{
		"tollgate_deployment_responses_total{class=2xx,deployment=a,model=gpt}":         1,
		"tollgate_deployment_responses_total{class=2xx,deployment=b,model=gpt}":         1,
		"tollgate_deployment_responses_total{class=5xx,deployment=a,model=gpt}":         1,
		"tollgate_deployment_responses_total{class=client_gone,deployment=a,model=gpt}": 1,
		"tollgate_deployment_responses_total{class=2xx,deployment=x,model=none}":        1,
		"tollgate_upstream_failed_attempts_total{model=gpt}":                            3,
	}
	if !maps.Equal(got, want) {
		t.Errorf("counters = %v\nwant %v", got, want)
	}
}

// gathered returns reg's counters as "name{label=value,…}" → value.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = m.GetCounter().GetValue()
		}
	}
	return out
}
