package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// promServer is a real Prometheus (Debian's package) started by a test.
type promServer struct {
	*proc
	addr string
}

// startPrometheus runs Prometheus scraping targets every second under the
// job "tollgate" (what the dashboard and the alerts select), with the rules
// of deploy/prometheus/alerts.yml evaluated every second. Their "for:"
// durations become 0s: the test checks what the expressions select, not
// how long an operator waits before being paged.
func startPrometheus(t *testing.T, targets []string) *promServer {
	t.Helper()
	path := lookPrometheus(t)
	dir := t.TempDir()
	rules, err := os.ReadFile("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	rules = regexp.MustCompile(`(?m)^(\s+for:) .*$`).ReplaceAll(rules, []byte("$1 0s"))
	if err := os.WriteFile(filepath.Join(dir, "alerts.yml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(targets))
	for i, a := range targets {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files: [alerts.yml]
scrape_configs:
  - job_name: tollgate
    static_configs:
      - targets: [%s]
`, strings.Join(quoted, ", "))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &promServer{addr: freePort(t)}
	p.proc = startProc(t, "prometheus", nil, path, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+p.addr, "--log.level=warn")
	waitHTTP(t, "http://"+p.addr+"/-/ready", 200)
	return p
}

// lookPrometheus returns the path of the prometheus binary; without it the
// test is skipped, or fails when the CI environment variable is set.
func lookPrometheus(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("prometheus")
	if err != nil {
		msg := "PROMETHEUS IS NOT INSTALLED: the dashboard and alert test needs it (apt-get install prometheus, or run .ci/run)"
		fmt.Fprintln(os.Stderr, "!!! "+msg)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

// get calls Prometheus's HTTP API and decodes the data of a successful
// answer into out.
func (p *promServer) get(path string, params url.Values, out any) error {
	resp, err := client.Get("http://" + p.addr + path + "?" + params.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("%s: %s: %s", path, resp.Status, b)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s", path, env.Error)
	}
	return json.Unmarshal(env.Data, out)
}

// query evaluates expr now and returns how many series it gave; an
// expression Prometheus refuses is an error.
func (p *promServer) query(expr string) (int, error) {
	var data struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	}
	if err := p.get("/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return 0, err
	}
	if data.ResultType == "scalar" {
		return 1, nil
	}
	return len(data.Result), nil
}

type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// firing returns the firing alerts as "name label=value …" lines (sorted
// labels other than alertname and severity).
func (p *promServer) firing() ([]string, error) {
	var data struct {
		Alerts []promAlert `json:"alerts"`
	}
	if err := p.get("/api/v1/alerts", nil, &data); err != nil {
		return nil, err
	}
	var out []string
	for _, a := range data.Alerts {
		if a.State != "firing" {
			continue
		}
		var ls []string
		for k, v := range a.Labels {
			if k != "alertname" && k != "severity" {
				ls = append(ls, k+"="+v)
			}
		}
		sort.Strings(ls)
		out = append(out, strings.TrimSpace(a.Labels["alertname"]+" "+strings.Join(ls, " ")))
	}
	sort.Strings(out)
	return out, nil
}

// waitFiring waits until an alert whose line contains every one of parts
// fires.
func (p *promServer) waitFiring(t *testing.T, timeout time.Duration, parts ...string) {
	t.Helper()
	var last []string
	deadline := time.Now().Add(timeout)
	for {
		alerts, err := p.firing()
		if err == nil {
			last = alerts
			if slices.ContainsFunc(alerts, func(a string) bool { return containsAll(a, parts) }) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no firing alert with %q within %v (err %v); firing:\n%s", parts, timeout, err, strings.Join(last, "\n"))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// dashboardExprs returns every "expr" of the Grafana dashboard, with
// Grafana's $__rate_interval replaced by a range that holds several
// one-second scrapes.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../deploy/grafana/tollgate.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if e, ok := v["expr"].(string); ok {
				exprs = append(exprs, strings.ReplaceAll(e, "$__rate_interval", "1m"))
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(dash)
	if len(exprs) < 20 {
		t.Fatalf("the dashboard has only %d queries", len(exprs))
	}
	for _, e := range exprs {
		if strings.Contains(e, "$") {
			t.Fatalf("query %q uses a variable the test does not fill in", e)
		}
	}
	return exprs
}

// background sends a mix of good, failing and failing-over requests to the
// nodes, round robin, until stopped (at most maxRequests).
type background struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startBackground(nodes []*gateway, key string) *background {
	const maxRequests = 4000
	ctx, cancel := context.WithCancel(context.Background())
	b := &background{cancel: cancel}
	// Every fifth request streams, for the time-to-first-token panels.
	models := []string{"m", "m", "broken", "flaky", "m"}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		c := &http.Client{Timeout: 5 * time.Second}
		for i := 0; i < maxRequests && ctx.Err() == nil; i++ {
			body := fmt.Sprintf(`{"model":%q,"stream":%t,"max_tokens":250,"messages":[{"role":"user","content":"hi"}]}`,
				models[i%len(models)], i%len(models) == 4)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+nodes[i%len(nodes)].http+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			if resp, err := c.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return b
}

func (b *background) stop() { b.cancel(); b.wg.Wait() }

// teamKey creates a team with a total budget in dollars and a key in it.
func teamKey(t *testing.T, g *gateway, name, budget string) (teamID, secret string) {
	t.Helper()
	var team struct{ ID string }
	out := g.ctl(t, "team", "create", "--name", name, "--budget", budget, "--period", "total", "-o", "json")
	if err := json.Unmarshal([]byte(out), &team); err != nil || team.ID == "" {
		t.Fatalf("team create: %q (%v)", out, err)
	}
	_, secret = g.createKey(t, "--name", name+"-key", "--team", team.ID)
	return team.ID, secret
}

// pricedBody costs exactly $0.001 on model m, and reserves as much
// (max_tokens 250 at $4 per million output tokens; the mock answers 250).
const pricedBody = `{"model":"m","max_tokens":250,"messages":[{"role":"user","content":"hi"}]}`

// TestPrometheusDashboardAndAlerts runs a real Prometheus against three
// nodes under traffic with successes, upstream failures, fail-overs, rate
// limit refusals and two team budgets near and at their limits: every
// query of the Grafana dashboard returns data, and the alerts fire for
// the budgets, the error rate, the failing deployment and the failing
// over, then for a killed node, then for the lost leader.
func TestPrometheusDashboardAndAlerts(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-node scenario with Prometheus takes about a minute")
	}
	lookPrometheus(t) // before the nodes start
	mock := mockLLM(t)
	// The drain delay keeps the last node serving, not ready, after SIGTERM.
	nodes, leaderID := startTrio(t, "prom-token", "--drain-delay", "20s")
	g := nodes[0]
	g.ctl(t, "model", "add", "m", "--provider", "openai-compatible", "--base-url", mock,
		"--upstream-model", "mock-model?size=1000", "--input-price", "0", "--output-price", "4")
	g.ctl(t, "model", "add", "broken", "--provider", "openai-compatible", "--base-url", mock,
		"--upstream-model", "mock-model?status=500", "--deployment", "down")
	g.ctl(t, "model", "add", "flaky", "--provider", "openai-compatible", "--base-url", mock,
		"--upstream-model", "mock-model?status=500", "--deployment", "bad")
	g.ctl(t, "model", "add", "flaky", "--provider", "openai-compatible", "--base-url", mock,
		"--upstream-model", "mock-model", "--deployment", "good")
	targets := make([]string, len(nodes))
	for i, n := range nodes {
		targets[i] = n.http
	}
	prom := startPrometheus(t, targets)

	_, key := g.createKey(t, "--name", "traffic")
	waitFor(t, 10*time.Second, "model m to answer on every node", func() bool {
		for _, n := range nodes {
			if code, _ := post(t, "http://"+n.http+"/v1/chat/completions", key, pricedBody); code != 200 {
				return false
			}
		}
		return true
	})
	bg := startBackground(nodes, key)
	defer bg.stop()

	// Rate-limit refusals: a key with one request a minute.
	_, limited := g.createKey(t, "--name", "limited", "--rpm", "1")
	refused := 0
	for range 3 {
		if code, _ := post(t, "http://"+g.http+"/v1/chat/completions", limited, pricedBody); code == 429 {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("a key with --rpm 1 was never refused in three requests")
	}
	// Team "near" spends 9 of its 10 requests' worth; team "spent" spends
	// until it is refused.
	nearID, near := teamKey(t, g, "near", "0.01")
	for i := range 9 {
		if code, b := post(t, "http://"+g.http+"/v1/chat/completions", near, pricedBody); code != 200 {
			t.Fatalf("team near, request %d: %d %s", i+1, code, b)
		}
	}
	spentID, spent := teamKey(t, g, "spent", "0.005")
	admitted := 0
	for range 20 {
		code, _ := post(t, "http://"+g.http+"/v1/chat/completions", spent, pricedBody)
		if code != 200 {
			break
		}
		admitted++
	}
	t.Logf("team spent: %d requests admitted on a budget of 5", admitted)

	checkDashboard(t, prom)

	tested := map[string]bool{}
	for _, want := range [][]string{
		{"TollgateBudgetHigh", "team=" + nearID, "team_name=near"},
		{"TollgateBudgetHigh", "team=" + spentID},
		{"TollgateBudgetExhausted", "team=" + spentID, "team_name=spent"},
		{"TollgateHighErrorRate"},
		{"TollgateDeploymentFailing", "deployment=down", "model=broken"},
		{"TollgateUpstreamFailing", "model=flaky"},
	} {
		prom.waitFiring(t, 30*time.Second, want...)
		tested[want[0]] = true
	}
	if alerts, err := prom.firing(); err == nil && slices.ContainsFunc(alerts, func(a string) bool {
		return containsAll(a, []string{"TollgateBudgetExhausted", "team=" + nearID})
	}) {
		t.Errorf("team near (90%% used) reported exhausted: %s", strings.Join(alerts, "\n"))
	}
	bg.stop()

	// A follower killed: it is down. Then the leader: the last node has
	// no leader.
	var follower *gateway
	for _, n := range nodes {
		if n.id != leaderID {
			follower = n
			break
		}
	}
	follower.kill()
	prom.waitFiring(t, 20*time.Second, "TollgateNodeDown", "instance="+follower.http)
	leader := byID(nodes, leaderID)
	leader.kill()
	prom.waitFiring(t, 20*time.Second, "TollgateNoLeader")
	// The last node drains: it still answers /metrics, /readyz says 503.
	for _, n := range nodes {
		if n != follower && n != leader {
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
			prom.waitFiring(t, 15*time.Second, "TollgateNodeNotReady", "instance="+n.http)
		}
	}
	tested["TollgateNodeDown"], tested["TollgateNoLeader"], tested["TollgateNodeNotReady"] = true, true, true
	for _, name := range alertNames(t) {
		if !tested[name] {
			t.Errorf("alert %s of deploy/prometheus/alerts.yml is never made to fire by this test", name)
		}
	}
}

// alertNames returns the names of the alerts in deploy/prometheus/alerts.yml.
func alertNames(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	var names []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
		}
	}
	return names
}

// checkDashboard waits until every query of the dashboard returns data.
func checkDashboard(t *testing.T, prom *promServer) {
	t.Helper()
	exprs := dashboardExprs(t)
	var empty []string
	deadline := time.Now().Add(45 * time.Second)
	for {
		empty = empty[:0]
		for _, e := range exprs {
			n, err := prom.query(e)
			if err != nil {
				t.Fatalf("Prometheus refuses the dashboard query %q: %v", e, err)
			}
			if n == 0 {
				empty = append(empty, e)
			}
		}
		if len(empty) == 0 {
			t.Logf("all %d dashboard queries return data", len(exprs))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d dashboard queries return no data:\n%s", len(empty), len(exprs), strings.Join(empty, "\n"))
		}
		time.Sleep(time.Second)
	}
}
