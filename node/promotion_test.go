package node

import (
	"testing"
	"time"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// The short form of TestFiveVotersMax, run by every go test: with at most three voters, a
// fourth node joins as a non-voter that has the state, reports its role and forwards
// writes; when a voting follower leaves and is removed after the grace, the non-voter is
// promoted. (TestFiveVotersMax, with TOLLGATE_LONG, has six nodes and a crashed voter.)
func TestNonVoterJoinsBeyondMaxVotersAndIsPromoted(t *testing.T) {
	t.Parallel()
	const grace = 500 * time.Millisecond
	small := func(c *Config) { c.DeadNodeGrace, c.maxVoters = grace, 3 }
	nodes := startCluster(t, 3, small)
	leader, _ := split(t, nodes)
	early, _ := createKey(t, leader, "early")

	// Join through the leader: it hears of the new node at once.
	cfg := baseConfig(t, "n4", testLogger(t))
	small(&cfg)
	cfg.Join = []string{leader.gossipAddr()}
	all := append(append([]*tnode(nil), nodes...), startNode(t, cfg))
	leader = waitCluster(t, all, 3, 1)
	nonvoter := checkNonVoter(t, leader, all, early.GetSecret())
	victim := votingFollower(leader, nonvoter, all)
	victim.stop(15 * time.Second) // it leaves gossip: removed after the grace, not after failure detection
	waitCluster(t, without(all, victim), 3, 0)
}

// checkNonVoter finds the one non-voter of leader's configuration among all, and checks
// that it holds the key whose secret is given, reports its role in Status, and forwards a
// write that then reaches every node.
func checkNonVoter(t *testing.T, leader *tnode, all []*tnode, secret string) *tnode {
	t.Helper()
	srvs, err := leader.n.Store().Servers()
	if err != nil {
		t.Fatal(err)
	}
	var nonvoter *tnode
	for _, s := range srvs {
		for _, tn := range all {
			if !s.Voter && tn.id == s.ID {
				nonvoter = tn
			}
		}
	}
	if nonvoter == nil {
		t.Fatalf("no non-voter in %v", srvs)
	}
	if nonvoter.n.Store().State().KeyByHash(raftstore.HashSecret(secret)) == nil {
		t.Error("the non-voter lacks the key written before it joined")
	}
	st, err := nonvoter.cluster().Status(adminCtx(t), &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m := memberByID(st, nonvoter.id); m.GetRole() != "nonvoter" || m.GetHealth() != "healthy" {
		t.Errorf("the non-voter's own Status entry = %v", m)
	}
	w, _ := createKey(t, nonvoter, "via-nonvoter")
	for _, tn := range all {
		if tn.n.Store().State().KeyByHash(raftstore.HashSecret(w.GetSecret())) == nil {
			t.Errorf("%s lacks the key written through the non-voter", tn.id)
		}
	}
	return nonvoter
}

// votingFollower returns a node of all that is neither the leader nor the non-voter.
func votingFollower(leader, nonvoter *tnode, all []*tnode) *tnode {
	for _, tn := range all {
		if tn != leader && tn != nonvoter {
			return tn
		}
	}
	return nil
}
