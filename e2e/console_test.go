package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/oauth2-proxy/mockoidc"
)

// consoleNode is a gateway with its console address.
type consoleNode struct {
	*gateway
	console string
}

// startConsoleTrio forms three nodes with --bootstrap-expect, each serving
// the console on its own loopback port, and returns them with the
// leader's id.
func startConsoleTrio(t *testing.T, token string, extra ...string) ([]consoleNode, string) {
	t.Helper()
	nodes := make([]consoleNode, 3)
	gossip := make([]string, 3)
	for i := range nodes {
		nodes[i] = consoleNode{newGateway(t, fmt.Sprintf("n%d", i+1), t.TempDir(), token), freePort(t)}
		gossip[i] = nodes[i].gossip
	}
	for _, n := range nodes {
		n.args = append([]string{"--bootstrap-expect", "3", "--join", strings.Join(gossip, ","), "--dead-node-grace", "1m",
			"--drain-delay", "0s", "--console-addr", n.console}, extra...)
		n.launch(t)
	}
	for _, n := range nodes {
		waitHTTP(t, "http://"+n.http+"/readyz", 200)
		waitHTTP(t, "http://"+n.console+"/api/config", 200)
	}
	return nodes, waitHealthy(t, nodes[0].gateway)
}

// createUser makes an admin user through tollctl and returns its token.
func (g *gateway) createUser(t *testing.T, name, role string) string {
	t.Helper()
	var u struct{ Token string }
	out := g.ctl(t, "user", "create", name, "--role", role, "-o", "json")
	if err := json.Unmarshal([]byte(out), &u); err != nil || u.Token == "" {
		t.Fatalf("user create -o json gave %q (%v)", out, err)
	}
	return u.Token
}

const chatBody = `{"model":"gpt-test","messages":[{"role":"user","content":"hello from the console test"}]}`

// TestConsoleDrivesAThreeNodeCluster signs in to the console of a follower
// with a local user's token, creates a team and a key in the UI, reads the
// key's secret from the dialog once, sends traffic with it to every node,
// finds that traffic in the overview, the spend chart and the request log,
// revokes the key in the UI, and finds both writes in the audit log; it
// saves a screenshot of every page on the way.
func TestConsoleDrivesAThreeNodeCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("three nodes and a browser")
	}
	chromiumPath(t)
	const boot = "console-bootstrap-token"
	mock := mockLLM(t)
	idp := startMockOIDC(t)
	nodes, leader := startConsoleTrio(t, boot, "--oidc-issuer", idp.Issuer(), "--oidc-client-id", idp.Config().ClientID,
		"--oidc-role-map", "console-admins=admin,console-operators=operator")
	var follower consoleNode
	for _, n := range nodes {
		if n.id != leader {
			follower = n
			break
		}
	}
	follower.ctl(t, "model", "add", "gpt-test", "--provider", "openai-compatible", "--base-url", mock,
		"--upstream-model", "mock-model", "--input-price", "2", "--output-price", "8")
	aliceToken := follower.createUser(t, "alice", "admin")
	for _, name := range []string{"billing-service", "search-api", "notebook"} {
		follower.createKey(t, "--name", name, "--budget", "20", "--period", "month", "--rpm", "120")
	}

	b := newBrowser(t, "http://"+follower.console)
	b.do(chromedp.Navigate(b.base + "/"))
	b.waitJS(`!!document.querySelector("#login-token")`, "the login page")
	b.shot("login")
	b.login(aliceToken)
	if got := b.text("#header-user") + " " + b.text("#header-role") + " " + b.text("#header-node"); !strings.Contains(got, "alice") ||
		!strings.Contains(got, "admin") || !strings.Contains(got, follower.id) {
		t.Fatalf("header shows %q, want alice, admin and node %s", got, follower.id)
	}

	teamID := createTeamInUI(t, b, follower.gateway)
	keyID, secret := createKeyInUI(t, b, follower.gateway, teamID)

	// Traffic with the secret read from the dialog, through every node, and
	// one request the upstream side refuses (an unknown model).
	const ok = 6
	for i := range ok {
		n := nodes[i%3]
		if code, body := post(t, "http://"+n.http+"/v1/chat/completions", secret, chatBody); code != 200 {
			t.Fatalf("chat through %s with the console's secret: %d %s", n.id, code, body)
		}
	}
	if code, _ := post(t, "http://"+nodes[0].http+"/v1/chat/completions", secret, strings.Replace(chatBody, "gpt-test", "no-such-model", 1)); code < 400 {
		t.Fatalf("an unknown model answered %d", code)
	}

	checkOverview(t, b)
	checkSpend(t, b)
	checkRequests(t, b, keyID, ok)
	revokeKeyInUI(t, b, keyID)
	if code, _ := post(t, "http://"+nodes[2].http+"/v1/chat/completions", secret, chatBody); code != http.StatusUnauthorized {
		t.Fatalf("the key revoked in the console still answers %d, want 401", code)
	}
	checkAudit(t, b)
	b.open("models")
	b.waitText("#main", "gpt-test")
	b.shot("models")
	b.open("users")
	b.waitText("#users", "alice")
	b.shot("users")
	b.click("#sign-out")
	b.waitJS(`!!document.querySelector("#login-token")`, "the login page after sign-out")
	checkViewer(t, b, follower.createUser(t, "victor", "viewer"))
	b.checkNoPageErrors()
	checkSSO(t, newBrowser(t, "http://"+nodes[2].console), idp)
}

// startMockOIDC runs a test OpenID Connect provider on loopback; the nodes
// read the client secret from the environment.
func startMockOIDC(t *testing.T) *mockoidc.MockOIDC {
	t.Helper()
	idp, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = idp.Shutdown() })
	t.Setenv("TOLLGATE_OIDC_CLIENT_SECRET", idp.Config().ClientSecret)
	return idp
}

// checkSSO signs in through the provider with a fresh browser: the user's
// group maps to operator, who may write keys but not see users.
func checkSSO(t *testing.T, b *browser, idp *mockoidc.MockOIDC) {
	t.Helper()
	idp.QueueUser(&mockoidc.MockUser{Subject: "ops-1", Email: "ops@example.com", EmailVerified: true,
		PreferredUsername: "ops", Groups: []string{"engineering", "console-operators"}})
	b.do(chromedp.Navigate(b.base + "/"))
	b.click("#login-sso")
	b.waitJS(`!!document.querySelector("#header-user")`, "the console after single sign-on")
	if user, role := b.text("#header-user"), b.text("#header-role"); user != "oidc:ops@example.com" || role != "operator" {
		t.Fatalf("after single sign-on the header shows %q %q, want oidc:ops@example.com operator", user, role)
	}
	b.open("keys")
	b.waitJS(`!!document.querySelector("#create-key") && !document.querySelector("#nav-users")`,
		"an operator's keys page: create, and no users page")
	b.checkNoPageErrors()
}

// checkViewer signs in as a viewer: every page reads, no page offers a
// write, and the Users page is not listed.
func checkViewer(t *testing.T, b *browser, token string) {
	t.Helper()
	b.login(token)
	b.open("keys")
	b.click("#f-include_revoked")
	b.waitJS(`document.querySelectorAll("#keys tbody tr").length > 0`, "the viewer's keys list, revoked included")
	for _, sel := range []string{"#create-key", `button[data-action="revoke"]`, "#nav-users"} {
		if eval[bool](b, fmt.Sprintf(`!!document.querySelector(%q)`, sel)) {
			t.Errorf("a viewer sees %s", sel)
		}
	}
	b.open("teams")
	if eval[bool](b, `!!document.querySelector("#create-team")`) {
		t.Errorf("a viewer sees the create team button")
	}
	b.click("#sign-out")
	b.waitJS(`!!document.querySelector("#login-token")`, "the login page after the viewer signed out")
}

func createTeamInUI(t *testing.T, b *browser, g *gateway) string {
	t.Helper()
	b.open("teams")
	b.click("#create-team")
	b.fill("#team-form #f-name", "web-team")
	b.fill("#team-form #f-budget", "50")
	b.click("#team-submit")
	b.waitText("#teams", "web-team")
	var teams []struct{ ID, Name string }
	if err := json.Unmarshal([]byte(g.ctl(t, "team", "list", "-o", "json")), &teams); err != nil {
		t.Fatal(err)
	}
	for _, tm := range teams {
		if tm.Name == "web-team" {
			b.shot("teams")
			return tm.ID
		}
	}
	t.Fatalf("the team created in the console is not in tollctl team list: %+v", teams)
	return ""
}

func createKeyInUI(t *testing.T, b *browser, g *gateway, teamID string) (id, secret string) {
	t.Helper()
	b.open("keys")
	b.click("#create-key")
	b.fill("#create-key-form #f-name", "web-key")
	b.choose("#create-key-form #f-team_id", teamID)
	b.fill("#create-key-form #f-rpm", "600")
	b.click("#create-key-submit")
	b.waitJS(`(document.querySelector("#secret-value")?.value || "").length > 10`, "the secret dialog")
	secret = eval[string](b, `document.querySelector("#secret-value").value`)
	if !strings.Contains(b.text(".dialog"), "you will not see it again") {
		t.Errorf("the secret dialog does not say it is shown once: %q", b.text(".dialog"))
	}
	b.shot("key-created")
	b.click("#copy-secret")
	b.click("#secret-done")
	b.waitText("#keys", "web-key")
	b.shot("keys")
	var keys []struct {
		ID, Name string
		TeamID   string `json:"team_id"`
	}
	if err := json.Unmarshal([]byte(g.ctl(t, "key", "list", "-o", "json")), &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Name == "web-key" && k.TeamID == teamID {
			return k.ID, secret
		}
	}
	t.Fatalf("the key created in the console is not in tollctl key list with team %s: %+v", teamID, keys)
	return "", ""
}

// reloadUntil opens a page again and again until the predicate holds:
// spend rollups reach the replicated state every few seconds.
func reloadUntil(t *testing.T, b *browser, route, predicate, what string) {
	t.Helper()
	waitFor(t, 40*time.Second, what, func() bool {
		b.open(route)
		return eval[bool](b, predicate)
	})
}

func checkOverview(t *testing.T, b *browser) {
	t.Helper()
	reloadUntil(t, b, "overview", `document.querySelector("#stat-requests .stat-value")?.innerText === "7"`,
		"the overview to count the 7 requests")
	if got := b.text("#stat-errors .stat-value"); got != "1" {
		t.Errorf("overview errors = %q, want 1", got)
	}
	if got := b.text("#stat-spend-today .stat-value"); !strings.HasPrefix(got, "$0.") || got == "$0.00" {
		t.Errorf("overview spend today = %q, want a few cents", got)
	}
	if n := eval[int](b, `document.querySelectorAll("#overview-traffic rect.bar").length`); n < 1 {
		t.Errorf("the overview traffic chart has no bars")
	}
	b.waitText("#cluster-members", "leader")
	b.waitText("#budgets-near-limit", "web-team")
	b.shot("overview")
}

func checkSpend(t *testing.T, b *browser) {
	t.Helper()
	reloadUntil(t, b, "spend?range=24h&by=team", `document.querySelectorAll("#spend-chart rect.bar").length > 0`,
		"bars in the spend chart")
	b.waitText(".legend", "web-team")
	b.waitText("#spend-totals", "web-team")
	href := eval[string](b, `document.querySelector("#spend-csv").href`)
	if !strings.Contains(href, "/api/spend.csv?") || !strings.Contains(href, "by=team") {
		t.Errorf("CSV link %q", href)
	}
	csv := eval[string](b, `fetch(document.querySelector("#spend-csv").href).then(r => r.ok ? r.text() : "HTTP " + r.status)`)
	if strings.HasPrefix(csv, "HTTP ") || strings.Count(strings.TrimSpace(csv), "\n") < 1 {
		t.Errorf("CSV export: %q", csv)
	}
	b.shot("spend")
	b.open("spend?range=24h&by=model")
	b.waitText("#spend-totals", "gpt-test")
}

func checkRequests(t *testing.T, b *browser, keyID string, ok int) {
	t.Helper()
	b.open("requests?key=" + keyID)
	b.waitJS(fmt.Sprintf(`document.querySelectorAll("#requests tbody tr").length === %d`, ok+1), "every request in the log")
	if n := eval[int](b, `[...document.querySelectorAll("#requests tbody tr")].filter(r => r.innerText.includes("gpt-test")).length`); n != ok {
		t.Errorf("%d rows name gpt-test, want %d", n, ok)
	}
	b.shot("requests")
	b.open("requests?key=" + keyID + "&errors=1")
	b.waitJS(`document.querySelectorAll("#requests tbody tr").length === 1`, "the one error with errors only")
}

func revokeKeyInUI(t *testing.T, b *browser, keyID string) {
	t.Helper()
	b.open("keys")
	b.fill("#key-search", "web-key")
	sel := fmt.Sprintf(`button[data-action="revoke"][data-key=%q]`, keyID)
	b.waitJS(fmt.Sprintf(`!!document.querySelector(%q)`, sel), "the revoke button of the key")
	b.click(sel)
	b.click("#confirm-ok")
	b.waitText("#keys-table", "No key matches")
}

func checkAudit(t *testing.T, b *browser) {
	t.Helper()
	b.open("audit?user=alice")
	for _, c := range []string{"create_team", "create_key", "revoke_key"} {
		b.waitText("#audit", c)
	}
	if txt := b.text("#audit"); strings.Contains(txt, "bootstrap") {
		t.Errorf("filtered by alice, the audit log shows bootstrap's writes:\n%s", txt)
	}
	b.shot("audit")
}
