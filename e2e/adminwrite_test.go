package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startTrio forms three nodes with --bootstrap-expect (no load balancer)
// and a dead-node grace long enough that a node stopped for a few seconds
// stays a member; it returns the nodes and the leader's id.
func startTrio(t *testing.T, token string, extra ...string) ([]*gateway, string) {
	t.Helper()
	nodes := make([]*gateway, 3)
	for i := range nodes {
		nodes[i] = newGateway(t, fmt.Sprintf("n%d", i+1), t.TempDir(), token)
	}
	join := strings.Join([]string{nodes[0].gossip, nodes[1].gossip, nodes[2].gossip}, ",")
	for _, g := range nodes {
		g.args = append([]string{"--bootstrap-expect", "3", "--join", join, "--dead-node-grace", "1m", "--drain-delay", "0s"}, extra...)
		g.launch(t)
	}
	for _, g := range nodes {
		waitHTTP(t, "http://"+g.http+"/readyz", 200)
	}
	return nodes, waitHealthy(t, nodes[0])
}

// waitHealthy waits until g names a leader and three healthy voters, and
// returns the leader's id.
func waitHealthy(t *testing.T, g *gateway) string {
	t.Helper()
	var leader string
	waitFor(t, 20*time.Second, "one leader and three healthy voters", func() bool {
		s, ok := g.status()
		leader = s.Leader
		return ok && s.Leader != "" && strings.Join(s.voters(), ",") == "n1,n2,n3"
	})
	return leader
}

func byID(nodes []*gateway, id string) *gateway {
	for _, g := range nodes {
		if g.id == id {
			return g
		}
	}
	return nil
}

// keysNamed lists the keys through g and counts those called name.
func keysNamed(t *testing.T, g *gateway, name string) int {
	t.Helper()
	var keys []struct{ Name string }
	if err := json.Unmarshal([]byte(g.ctl(t, "key", "list", "-o", "json")), &keys); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range keys {
		if k.Name == name {
			n++
		}
	}
	return n
}

// TestAdminWritesFollowTheLeader: a write started while the leader is
// frozen (SIGSTOP) completes on the next leader within 5 s and creates one
// key; a write to a node left in a minority fails within 2 s with "no
// leader".
func TestAdminWritesFollowTheLeader(t *testing.T) {
	nodes, leaderID := startTrio(t, "tga-adminwrite")
	leader := byID(nodes, leaderID)
	var follower *gateway
	for _, g := range nodes {
		if g != leader {
			follower = g
			break
		}
	}
	stopped := map[*gateway]bool{}
	t.Cleanup(func() {
		for g := range stopped {
			_ = g.cmd.Process.Signal(syscall.SIGCONT)
		}
	})

	leader.rlSignal(t, syscall.SIGSTOP)
	stopped[leader] = true
	start := time.Now()
	out, errOut, code := follower.ctlCode("--timeout", "8s", "key", "create", "--name", "frozen-leader", "-o", "json")
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("key create with the leader frozen: exit %d after %v\n%s%s", code, took, out, errOut)
	}
	t.Logf("key create with the leader frozen took %v", took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("key create with the leader frozen took %v, want <= 5s", took)
	}
	leader.rlSignal(t, syscall.SIGCONT)
	delete(stopped, leader)
	if n := keysNamed(t, follower, "frozen-leader"); n != 1 {
		t.Errorf("%d keys named frozen-leader, want 1", n)
	}

	// Minority: the two other nodes stop; the follower is alone.
	waitHealthy(t, follower)
	for _, g := range nodes {
		if g != follower {
			g.rlSignal(t, syscall.SIGSTOP)
			stopped[g] = true
		}
	}
	waitFor(t, 15*time.Second, "the lone node to know no leader", func() bool {
		s, ok := follower.status()
		return ok && s.Leader == ""
	})
	start = time.Now()
	out, errOut, code = follower.ctlCode("--timeout", "15s", "key", "create", "--name", "minority")
	took = time.Since(start)
	t.Logf("key create in a minority: exit %d after %v: %s", code, took.Round(time.Millisecond), strings.TrimSpace(errOut))
	if code == 0 || !strings.Contains(errOut, "no leader") {
		t.Errorf("key create in a minority: exit %d, stdout %q stderr %q; want a failure saying no leader", code, out, errOut)
	}
	if took > 2*time.Second {
		t.Errorf("key create in a minority took %v to fail, want <= 2s", took)
	}
}
