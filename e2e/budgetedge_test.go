package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestBudgetEdgeLeaderKilled: a team budget near its edge, 32 clients
// through HAProxy, and the leader killed. The survivors keep admitting from
// their leases and, while no lease can be granted, beyond them within the
// overdraft bound: no client gets a 503 (or a 401) while the budget has
// money left, and the spend stays within the budget plus the bound.
func TestBudgetEdgeLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-node budget scenario takes about 25 s")
	}
	mock := mockLLM(t)
	nodes := make([]*gateway, 3)
	for i := range nodes {
		nodes[i] = newGateway(t, fmt.Sprintf("n%d", i+1), t.TempDir(), "budget-edge-token")
	}
	join := strings.Join([]string{nodes[0].gossip, nodes[1].gossip, nodes[2].gossip}, ",")
	lb := startHAProxy(t, nodes)
	for _, g := range nodes {
		// The grace outlasts the test: the dead leader's lease stays
		// counted, so the spend seen by clients is the whole spend.
		g.args = []string{"--bootstrap-expect", "3", "--join", join, "--dead-node-grace", "5m", "--drain-delay", "0s"}
		g.launch(t)
	}
	for _, g := range nodes {
		waitHTTP(t, "http://"+g.http+"/readyz", 200)
	}
	leaderID := waitHealthy(t, nodes[0])
	leader := byID(nodes, leaderID)
	survivor := nodes[0]
	if survivor == leader {
		survivor = nodes[1]
	}
	survivor.ctl(t, "model", "add", "m", "--provider", "openai-compatible", "--base-url", mock,
		"--upstream-model", "mock-model?size=1000", "--input-price", "0", "--output-price", "4")
	_, warm := survivor.createKey(t, "--name", "warm-up")
	lbURL := "http://" + lb.addr + "/v1/chat/completions"
	waitLB(t, lbURL, warm, budgetBody)

	var team struct{ ID string }
	if err := json.Unmarshal([]byte(survivor.ctl(t, "team", "create", "--name", "edge", "--budget", "1.00", "--period", "total", "-o", "json")), &team); err != nil || team.ID == "" {
		t.Fatalf("team create: %v", err)
	}
	_, secret := survivor.createKey(t, "--name", "edge-key", "--team", team.ID)

	ld := startBudgetLoad(t, lbURL, []string{secret}, 32, budgetBody, 500*time.Millisecond)
	// Near the edge: 850 of the 1 000 requests the budget pays for.
	waitFor(t, 40*time.Second, "850 admitted requests", func() bool { return ld.ok.Load() >= 850 })
	leader.kill()
	killed := time.Now()
	t.Logf("killed the leader %s after %d admitted requests", leaderID, ld.ok.Load())
	ld.wait(t)
	t.Logf("every client refused %v after the kill", time.Since(killed).Round(time.Millisecond))
	ld.stop()
	t.Logf("load: %v", ld)

	if n := ld.failed.Load(); n > 0 {
		t.Errorf("%d answers other than 200 or 429 budget_exceeded (503s while the budget had money?): %v", n, ld)
	}
	// Every request costs $0.001 (estimated at $0.0012). The bound: each
	// of the three nodes may overdraw by max(limit/32, one reservation)
	// while no lease can be granted.
	const bound = 3 * budgetLimit / 32
	spent := ld.ok.Load() * requestCost
	t.Logf("admitted %s of a %s budget (bound %s)", dollars(spent), dollars(budgetLimit), dollars(budgetLimit+bound))
	if spent > budgetLimit+bound {
		t.Errorf("OVERDRAWN: admitted %s, more than the budget %s plus the bound %s", dollars(spent), dollars(budgetLimit), dollars(bound))
	}
	if spent < budgetLimit*8/10 {
		t.Errorf("only %s of the %s budget was spent before every client was refused", dollars(spent), dollars(budgetLimit))
	}
}
