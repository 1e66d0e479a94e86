package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// haproxy is a real HAProxy in front of the nodes.
type haproxy struct {
	*proc
	addr string
}

// startHAProxy runs HAProxy from Debian's packages with health checks on
// /readyz. Backends that are not running yet are simply down until they
// answer.
func startHAProxy(t *testing.T, backends []*gateway) *haproxy {
	t.Helper()
	path, err := exec.LookPath("haproxy")
	if err != nil {
		msg := "HAPROXY IS NOT INSTALLED: the cluster tests need it (apt-get install haproxy, or run .ci/run)"
		fmt.Fprintln(os.Stderr, "!!! "+msg)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	h := &haproxy{addr: freePort(t)}
	var b strings.Builder
	fmt.Fprintf(&b, `global
    maxconn 4096
defaults
    mode http
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response response-timeout
frontend fe
    bind %s
    default_backend nodes
backend nodes
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter 200ms fall 2 rise 2
`, h.addr)
	for _, g := range backends {
		fmt.Fprintf(&b, "    server %s %s check\n", g.id, g.http)
	}
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	h.proc = startProc(t, "haproxy", nil, path, "-db", "-f", cfg)
	return h
}

type memberStatus struct {
	ID     string `json:"id"`
	Role   string `json:"role"`
	Health string `json:"health"`
}

type clusterStatus struct {
	Node    string         `json:"node"`
	Leader  string         `json:"leader"`
	Members []memberStatus `json:"members"`
}

// status asks g for the cluster status; ok is false if the call failed.
func (g *gateway) status() (clusterStatus, bool) {
	out, _, code := g.ctlCode("cluster", "status", "-o", "json", "--timeout", "2s")
	var s clusterStatus
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil {
		return s, false
	}
	return s, true
}

// voters returns the sorted ids of healthy voters in s.
func (s clusterStatus) voters() []string {
	var v []string
	for _, m := range s.Members {
		if m.Role == "voter" && m.Health == "healthy" {
			v = append(v, m.ID)
		}
	}
	return v
}

func (s clusterStatus) member(id string) (memberStatus, bool) {
	for _, m := range s.Members {
		if m.ID == id {
			return m, true
		}
	}
	return memberStatus{}, false
}

// TestCluster runs the cluster acceptance scenarios in sequence over real
// processes: three nodes formed with --bootstrap-expect behind HAProxy,
// steady load through HAProxy, follower and leader kill -9, removal after
// the grace period and rejoin, rolling restart with SIGTERM, a fourth node
// joining, and a snapshot restored into a fresh node.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster scenarios take about a minute")
	}
	mock := mockLLM(t)
	const token = "cluster-token"
	nodes := make([]*gateway, 4)
	for i := range nodes {
		nodes[i] = newGateway(t, fmt.Sprintf("n%d", i+1), t.TempDir(), token)
	}
	join := strings.Join([]string{nodes[0].gossip, nodes[1].gossip, nodes[2].gossip}, ",")
	for _, g := range nodes[:3] {
		g.args = []string{"--bootstrap-expect", "3", "--join", join, "--dead-node-grace", "3s", "--drain-delay", "1s"}
	}
	nodes[3].args = []string{"--join", nodes[1].gossip, "--dead-node-grace", "3s", "--drain-delay", "1s"}
	lb := startHAProxy(t, nodes)

	// 1. Start order does not matter: the third node first, the first last.
	for _, i := range []int{2, 0, 1} {
		nodes[i].launch(t)
		time.Sleep(300 * time.Millisecond)
	}
	for _, g := range nodes[:3] {
		waitHTTP(t, "http://"+g.http+"/readyz", 200)
	}
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	var st clusterStatus
	waitFor(t, 10*time.Second, "one leader and three healthy voters", func() bool {
		s, ok := n1.status()
		st = s
		return ok && s.Leader != "" && strings.Join(s.voters(), ",") == "n1,n2,n3"
	})
	for _, g := range nodes[:3] {
		if s, ok := g.status(); !ok || s.Leader != st.Leader {
			t.Fatalf("%s sees leader %q, n1 sees %q", g.id, s.Leader, st.Leader)
		}
	}
	t.Logf("formed: leader %s", st.Leader)

	n1.ctl(t, "model", "add", "gpt-test", "--provider", "openai-compatible", "--base-url", mock, "--upstream-model", "mock-model?latency=20ms&chunks=5&interval=2ms")
	keyID, secret := n1.createKey(t, "--name", "through-n1", "--models", "gpt-test")
	body := `{"model":"gpt-test","messages":[{"role":"user","content":"hi"}]}`
	for _, g := range nodes[:3] { // in force everywhere as soon as the call returned
		if code, b := post(t, "http://"+g.http+"/v1/chat/completions", secret, body); code != 200 {
			t.Fatalf("key created on n1, used on %s: %d %s", g.id, code, b)
		}
	}
	lbURL := "http://" + lb.addr + "/v1/chat/completions"
	waitFor(t, 10*time.Second, "HAProxy to see the nodes up", func() bool {
		code, _ := post(t, lbURL, secret, body)
		return code == 200
	})
	n3.ctl(t, "key", "revoke", keyID)
	for _, g := range nodes[:3] {
		if code, b := post(t, "http://"+g.http+"/v1/chat/completions", secret, body); code != 401 {
			t.Fatalf("key revoked on n3, used on %s: %d %s", g.id, code, b)
		}
	}

	_, secret = n2.createKey(t, "--name", "load", "--models", "gpt-test")
	const workers = 8
	ld := startLoad(t, lbURL, secret, workers)
	ld.progress(t, 200)

	leaderOf := func() *gateway {
		for _, g := range nodes {
			if g.id == st.Leader {
				return g
			}
		}
		t.Fatalf("leader %q is not one of the nodes", st.Leader)
		return nil
	}
	followers := func(except ...*gateway) []*gateway {
		var out []*gateway
	outer:
		for _, g := range nodes[:3] {
			if g.id == st.Leader {
				continue
			}
			for _, e := range except {
				if e == g {
					continue outer
				}
			}
			out = append(out, g)
		}
		return out
	}
	// checkKill verifies that only requests in flight at the kill failed.
	checkKill := func(what string, killedAt time.Time) {
		t.Helper()
		ld.progress(t, 300)
		fs := ld.failuresSince(killedAt.Add(-time.Second))
		for _, f := range fs {
			if f.at.Sub(killedAt) > 2*time.Second {
				t.Errorf("%s: request failed %v after the kill: %s", what, f.at.Sub(killedAt), f.err)
			}
		}
		if len(fs) > workers {
			t.Errorf("%s: %d requests failed, more than the %d that can be in flight", what, len(fs), workers)
		}
		t.Logf("%s: %d failed requests (at most %d were in flight)", what, len(fs), workers)
	}

	// 2. kill -9 a follower under load; admin writes keep working.
	victim := followers()[0]
	killedAt := time.Now()
	victim.kill()
	checkKill("kill -9 follower "+victim.id, killedAt)
	n1or := followers(victim)
	admin := leaderOf()
	if len(n1or) > 0 {
		admin = n1or[0]
	}
	admin.createKey(t, "--name", "after-follower-kill")

	// 6. After the grace period the dead follower is removed; restarted on
	// its old data dir with --join it comes back as a member.
	waitFor(t, 20*time.Second, victim.id+" removed after the grace period", func() bool {
		s, ok := admin.status()
		_, present := s.member(victim.id)
		return ok && !present
	})
	victim.args = []string{"--join", leaderOf().gossip, "--dead-node-grace", "3s", "--drain-delay", "1s"}
	victim.start(t)
	waitFor(t, 20*time.Second, victim.id+" back as a healthy voter", func() bool {
		s, ok := admin.status()
		m, present := s.member(victim.id)
		return ok && present && m.Role == "voter" && m.Health == "healthy"
	})
	t.Logf("%s removed after its grace period and rejoined", victim.id)

	// 3. kill -9 the leader under load: a new leader, admin writes again
	// within 5 seconds.
	old := leaderOf()
	killedAt = time.Now()
	old.kill()
	survivor := followers(old)[0]
	var elected time.Duration
	waitFor(t, 10*time.Second, "an admin write after the leader died", func() bool {
		_, _, code := survivor.ctlCode("key", "create", "--name", "after-leader-kill", "--timeout", "1s")
		elected = time.Since(killedAt)
		return code == 0
	})
	if elected > 5*time.Second {
		t.Errorf("admin writes resumed %v after the leader died, want within 5s", elected)
	}
	s, _ := survivor.status()
	t.Logf("leader %s killed; new leader %s; admin writes resumed after %v", old.id, s.Leader, elected.Round(time.Millisecond))
	checkKill("kill -9 leader "+old.id, killedAt)
	st = s
	old.args = []string{"--join", survivor.gossip, "--dead-node-grace", "3s", "--drain-delay", "1s"}
	old.start(t)
	waitFor(t, 20*time.Second, "three healthy voters again", func() bool {
		s, ok := survivor.status()
		st = s
		return ok && len(s.voters()) == 3
	})

	// 4. Rolling restart with SIGTERM under load: zero failed requests.
	before := time.Now()
	for _, g := range nodes[:3] {
		g.stop(t)
		g.start(t)
		waitFor(t, 20*time.Second, "three healthy voters after restarting "+g.id, func() bool {
			s, ok := g.status()
			return ok && len(s.voters()) == 3
		})
		time.Sleep(500 * time.Millisecond) // let HAProxy see it up again
	}
	ld.progress(t, 200)
	if fs := ld.failuresSince(before); len(fs) > 0 {
		t.Errorf("rolling restart: %d failed requests, first: %s", len(fs), fs[0].err)
	}
	t.Logf("rolling restart of three nodes: %d failed requests", len(ld.failuresSince(before)))

	// 5. A fourth node joins under load and serves through HAProxy.
	before = time.Now()
	n4 := nodes[3]
	n4.start(t)
	waitFor(t, 20*time.Second, "n4 a member", func() bool {
		s, ok := n4.status()
		_, present := s.member("n4")
		return ok && present
	})
	if out := n4.ctl(t, "model", "list"); !strings.Contains(out, "gpt-test") {
		t.Fatalf("n4 lacks the routes:\n%s", out)
	}
	if code, b := post(t, "http://"+n4.http+"/v1/chat/completions", secret, body); code != 200 {
		t.Fatalf("n4 does not know the key: %d %s", code, b)
	}
	ld.progress(t, 300)
	if fs := ld.failuresSince(before); len(fs) > 0 {
		t.Errorf("join of n4: %d failed requests, first: %s", len(fs), fs[0].err)
	}
	ld.stop()
	t.Logf("load: %d successful requests, %d failed in all", ld.ok.Load(), len(ld.failuresSince(time.Time{})))

	// 7. A snapshot of the cluster restores into a fresh single node.
	snap := filepath.Join(t.TempDir(), "cluster.snap")
	n2.ctl(t, "cluster", "snapshot", "save", snap)
	fresh := startGateway(t, t.TempDir(), "fresh-token", "--no-seed")
	fresh.ctl(t, "cluster", "snapshot", "restore", snap, "--yes")
	wantKeys := n2.ctl(t, "key", "list", "--all", "-o", "json")
	if got := fresh.ctl(t, "key", "list", "--all", "-o", "json"); got != wantKeys {
		t.Fatalf("restored keys differ:\n got %s\nwant %s", got, wantKeys)
	}
	if got, want := fresh.ctl(t, "model", "list", "-o", "json"), n2.ctl(t, "model", "list", "-o", "json"); got != want {
		t.Fatalf("restored routes differ:\n got %s\nwant %s", got, want)
	}
	if code, b := post(t, "http://"+fresh.http+"/v1/chat/completions", secret, body); code != 200 {
		t.Fatalf("restored node refuses the key: %d %s", code, b)
	}
}
