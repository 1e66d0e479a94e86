package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP gateway against real MCP software: the reference server
// @modelcontextprotocol/server-everything (over Streamable HTTP, and over
// stdio spawned by the node), the official TypeScript client
// @modelcontextprotocol/sdk and the official Go SDK client, all through a
// tollgate process configured with tollctl.

// everythingJS returns the path of server-everything's entry point, or
// skips the test when the npm packages are not installed.
func everythingJS(t *testing.T) (node, script string) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join(agentsDir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Skipf("the MCP packages are not installed (run: npm install --prefix e2e/%s): %v", agentsDir, err)
	}
	if node, err = exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	return node, script
}

// startEverything starts server-everything over Streamable HTTP and
// returns its endpoint, with the node binary and its script.
func startEverything(t *testing.T) (url, node, script string) {
	node, script = everythingJS(t)
	addr := freePort(t)
	_, port, _ := strings.Cut(addr, ":")
	startProc(t, "server-everything", []string{"PORT=" + port}, node, script, "streamableHttp")
	waitFor(t, 30*time.Second, "server-everything listening", func() bool {
		resp, err := client.Get("http://" + addr + "/mcp")
		if err == nil {
			_ = resp.Body.Close()
		}
		return err == nil
	})
	return "http://" + addr + "/mcp", node, script
}

// startMCPNode starts server-everything and a node with it configured as
// "everything" and its stdio form as "evstdio", and waits until the node
// is connected to both.
func startMCPNode(t *testing.T) *gateway {
	url, node, script := startEverything(t)
	g := startGateway(t, t.TempDir(), "t", "--no-seed")
	g.ctl(t, "mcp", "add", "everything", "--url", url, "--header", "X-Upstream-Secret=never-shown-1234")
	g.ctl(t, "mcp", "add", "evstdio", "--stdio", node+" "+script+" stdio", "--tool-timeout", "30s")
	waitMCPConnected(t, g, "everything", "evstdio")
	return g
}

func waitMCPConnected(t *testing.T, g *gateway, names ...string) {
	t.Helper()
	for _, name := range names {
		waitFor(t, 60*time.Second, name+" connected on "+g.http, func() bool {
			var got struct {
				Status struct{ State string } `json:"status"`
			}
			_ = json.Unmarshal([]byte(g.ctl(t, "mcp", "get", name, "-o", "json")), &got)
			return got.Status.State == "connected"
		})
	}
}

// runMCPClient runs testdata/agents/mcp.mjs with the official TypeScript
// client and returns what it printed.
func runMCPClient(t *testing.T, g *gateway, key string, calls ...string) map[string]any {
	t.Helper()
	script, _ := filepath.Abs(filepath.Join(agentsDir, "mcp.mjs"))
	env := agentEnv(t.TempDir(), "MCP_URL=http://"+g.http+"/mcp", "MCP_KEY="+key, "CALLS="+strings.Join(calls, ","))
	out, errOut, err := runAgent(t, filepath.Dir(script), env, "node", script)
	if err != nil {
		t.Fatalf("node mcp.mjs: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("mcp.mjs printed %q (%v); stderr: %s", out, err, errOut)
	}
	return res
}

// mcpLogs returns the key's ledger records of tool calls, newest first.
func mcpLogs(t *testing.T, g *gateway, keyID string) []map[string]any {
	t.Helper()
	var res struct {
		Records []map[string]any `json:"records"`
	}
	if err := json.Unmarshal([]byte(g.ctl(t, "spend", "logs", "--key", keyID, "-o", "json")), &res); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, r := range res.Records {
		if r["endpoint"] == "mcp" {
			out = append(out, r)
		}
	}
	return out
}

func TestMCPWithTypeScriptClient(t *testing.T) {
	g := startMCPNode(t)
	if out := g.ctl(t, "mcp", "list"); strings.Contains(out, "never-shown") || !strings.Contains(out, "headers X-Upstream-Secret") {
		t.Fatalf("mcp list shows a header value, or not its name:\n%s", out)
	}
	id, key := g.createKey(t, "--name", "agent")
	g.ctl(t, "mcp", "tools", "--key", id, "everything__*", "evstdio__echo")
	res := runMCPClient(t, g, key, "list", "echo", "sum", "stdio", "progress", "cancel")
	tools, _ := res["tools"].([]any)
	names := make([]string, len(tools))
	for i, n := range tools {
		names[i], _ = n.(string)
	}
	for _, want := range []string{"everything__echo", "everything__get-sum", "everything__trigger-long-running-operation", "evstdio__echo"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}
	if slices.Contains(names, "evstdio__get-sum") {
		t.Errorf("tools/list shows a tool outside the allow-list: %v", names)
	}
	if res["echo"] != "Echo: hello" || !strings.Contains(res["sum"].(string), "5") || res["stdio"] != "Echo: via stdio" {
		t.Errorf("tool results: %v", res)
	}
	if p, _ := res["progress"].([]any); len(p) != 3 || !strings.Contains(res["long"].(string), "completed") {
		t.Errorf("progress %v, result %v", res["progress"], res["long"])
	}
	if c, _ := res["cancel"].(string); !strings.HasPrefix(c, "aborted") {
		t.Errorf("cancelled call: %v", res["cancel"])
	}
	t.Logf("TypeScript client, protocol %v: %v", res["protocol"], res)

	outcomes := map[string]int{}
	var logs []map[string]any
	waitFor(t, 20*time.Second, "the calls in the ledger", func() bool {
		logs = mcpLogs(t, g, id)
		clear(outcomes)
		for _, r := range logs {
			outcomes[r["mcp_tool"].(string)+":"+r["outcome"].(string)]++
		}
		return outcomes["trigger-long-running-operation:cancelled"] == 1
	})
	for _, want := range []string{"echo:ok", "get-sum:ok", "trigger-long-running-operation:ok", "trigger-long-running-operation:cancelled"} {
		if outcomes[want] == 0 {
			t.Errorf("no ledger record %s: %v", want, outcomes)
		}
	}
	for _, r := range logs {
		if r["model"] == "mcp:evstdio__echo" && (r["mcp_server"] != "evstdio" || r["key_id"] != id) {
			t.Errorf("stdio record %v", r)
		}
	}
	if out := g.ctl(t, "spend", "logs", "--key", id); !strings.Contains(out, "mcp:everything__get-sum") {
		t.Errorf("spend logs table lacks the tool call:\n%s", out)
	}
}

func TestMCPKeyWithoutToolRefused(t *testing.T) {
	g := startMCPNode(t)
	id, key := g.createKey(t, "--name", "narrow")
	g.ctl(t, "mcp", "tools", "--key", id, "everything__echo")
	res := runMCPClient(t, g, key, "list", "echo", "refused")
	if tools, _ := res["tools"].([]any); len(tools) != 1 || tools[0] != "everything__echo" {
		t.Errorf("tools/list: %v", res["tools"])
	}
	if r, _ := res["refused"].(string); !strings.HasPrefix(r, "-32602") {
		t.Errorf("call outside the allow-list: %v", res["refused"])
	}
	waitFor(t, 20*time.Second, "the refusal in the ledger", func() bool {
		for _, r := range mcpLogs(t, g, id) {
			if r["outcome"] == "refused" && r["mcp_tool"] == "get-sum" && r["status"] == float64(403) {
				return true
			}
		}
		return false
	})
	// Without a key: 401 that points at the protected-resource metadata.
	resp, err := client.Post("http://"+g.http+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "/.well-known/oauth-protected-resource/mcp") {
		t.Errorf("no key: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}

// The Go SDK's client speaks the sessionless protocol (2026-07-28) to the
// node; the key's rate limit holds for tool calls.
func TestMCPWithGoClientAndRateLimit(t *testing.T) {
	g := startMCPNode(t)
	id, key := g.createKey(t, "--name", "limited", "--rpm", "3")
	g.ctl(t, "mcp", "tools", "--key", id, "*")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := goMCPClient(t, ctx, "http://"+g.http+"/mcp", key)
	t.Logf("Go client protocol %s", cs.InitializeResult().ProtocolVersion)
	lt, err := cs.ListTools(ctx, nil)
	if err != nil || len(lt.Tools) < 10 {
		t.Fatalf("list tools: %v, %v", lt, err)
	}
	var refused error
	for i := range 4 {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "everything__get-sum", Arguments: map[string]any{"a": i, "b": 1}})
		if i < 3 && (err != nil || res.IsError) {
			t.Fatalf("call %d: %v %v", i, res, err)
		}
		refused = err
	}
	if refused == nil || !strings.Contains(refused.Error(), "Rate limit") {
		t.Fatalf("fourth call within a minute at --rpm 3: %v", refused)
	}
	waitFor(t, 20*time.Second, "the rate-limited call in the ledger", func() bool {
		for _, r := range mcpLogs(t, g, id) {
			if r["outcome"] == "rate_limited" && r["status"] == float64(429) {
				return true
			}
		}
		return false
	})
}

// server-everything's resources through the node with the Go client: a
// key allowed "everything__resource:*" sees them under
// tollgate://everything/, reads one, is refused another server's, and the
// reads are in the ledger.
func TestMCPResourcesWithGoClient(t *testing.T) {
	g := startMCPNode(t)
	id, key := g.createKey(t, "--name", "resources")
	g.ctl(t, "mcp", "tools", "--key", id, "everything__resource:*")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := goMCPClient(t, ctx, "http://"+g.http+"/mcp", key)
	lr, err := cs.ListResources(ctx, nil)
	if err != nil || len(lr.Resources) == 0 {
		t.Fatalf("list resources: %v, %v", lr, err)
	}
	for _, r := range lr.Resources {
		if !strings.HasPrefix(r.URI, "tollgate://everything/") {
			t.Fatalf("resource %q outside tollgate://everything/", r.URI)
		}
	}
	if lt, err := cs.ListTools(ctx, nil); err != nil || len(lt.Tools) != 0 {
		t.Fatalf("tools of a key allowed resources only: %v %v", lt, err)
	}
	uri := lr.Resources[0].URI
	got, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
	if err != nil || len(got.Contents) == 0 || got.Contents[0].URI != uri {
		t.Fatalf("read %s: %v %v", uri, got, err)
	}
	other := "tollgate://evstdio/" + strings.TrimPrefix(uri, "tollgate://everything/")
	if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: other}); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Fatalf("read %s: %v, want refused", other, err)
	}
	waitFor(t, 20*time.Second, "both reads in the ledger", func() bool {
		outcomes := map[any]bool{}
		for _, r := range mcpLogs(t, g, id) {
			if strings.HasPrefix(fmt.Sprint(r["model"]), "mcp-resource:") {
				outcomes[r["outcome"]] = true
			}
		}
		return outcomes["ok"] && outcomes["refused"]
	})
}

// goMCPClient connects the Go SDK's client to url with key.
func goMCPClient(t *testing.T, ctx context.Context, url, key string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "go-e2e", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *sdk.ProgressNotificationClientRequest) {}})
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: authTransport{key: key}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// Three nodes behind HAProxy (round robin): the Go client's sessionless
// protocol lets every request go to another node, and the key's rpm holds
// across the cluster through gossip, not once per node.
func TestMCPThreeNodesBehindBalancer(t *testing.T) {
	url, _, _ := startEverything(t)
	nodes, lb, _ := startCluster3(t, "t")
	nodes[0].ctl(t, "mcp", "add", "everything", "--url", url)
	for _, g := range nodes {
		waitMCPConnected(t, g, "everything")
	}
	id, key := nodes[0].createKey(t, "--name", "cluster", "--rpm", "6")
	nodes[0].ctl(t, "mcp", "tools", "--key", id, "everything__get-sum")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := goMCPClient(t, ctx, "http://"+lb.addr+"/mcp", key)
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("protocol %s, want the sessionless 2026-07-28", v)
	}
	admitted, limited := 0, 0
	for i := range 18 {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "everything__get-sum", Arguments: map[string]any{"a": i, "b": 1}})
		switch {
		case err == nil && !res.IsError:
			admitted++
		case err != nil && strings.Contains(err.Error(), "Rate limit"):
			limited++
		default:
			t.Fatalf("call %d: %v %v", i, res, err)
		}
		time.Sleep(150 * time.Millisecond) // gossip carries each node's use every ~100 ms
	}
	t.Logf("18 calls through the balancer at --rpm 6: %d admitted, %d rate-limited", admitted, limited)
	if admitted < 5 || admitted > 8 {
		t.Errorf("%d calls admitted at --rpm 6 over three nodes, want about 6 (not 18)", admitted)
	}
	nodesSeen := map[string]bool{}
	for _, r := range mcpLogs(t, nodes[0], id) {
		nodesSeen[r["node"].(string)] = true
	}
	if len(nodesSeen) != 3 {
		t.Errorf("calls recorded on nodes %v, want all three", nodesSeen)
	}
}

type authTransport struct{ key string }

func (a authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+a.key)
	return http.DefaultTransport.RoundTrip(r)
}

// Claude Code uses a node's /mcp as an HTTP MCP server (claude mcp add
// --transport http, the key in a header) while its model traffic goes
// through the same node to the mock, which calls the first tool offered:
// with the built-in tools off, the MCP tool. The call reaches
// server-everything and lands in the ledger under the key.
func TestMCPClaudeCode(t *testing.T) {
	claude := agentBin(t, "claude")
	url, _, _ := startEverything(t)
	g, _, _ := startAgentsNode(t, "cc")
	g.ctl(t, "mcp", "add", "everything", "--url", url)
	waitMCPConnected(t, g, "everything")
	id, key := g.createKey(t, "--name", "claude-mcp", "--models", "cc-*")
	g.ctl(t, "mcp", "tools", "--key", id, "everything__echo")
	home, work := t.TempDir(), t.TempDir()
	env := agentEnv(home, "ANTHROPIC_BASE_URL=http://"+g.http, "ANTHROPIC_API_KEY="+key)
	if out, errOut, err := runAgent(t, work, env, claude, "mcp", "add", "--transport", "http", "tollgate",
		"http://"+g.http+"/mcp", "--header", "Authorization: Bearer "+key); err != nil {
		t.Fatalf("claude mcp add: %v\n%s\n%s", err, out, errOut)
	}
	out, errOut, err := runAgent(t, work, env, claude, "-p", "Echo hello through the MCP tool.", "--model", "cc-anthropic",
		"--output-format", "json", "--tools", "", "--allowedTools", "mcp__tollgate__everything__echo", "--max-turns", "3")
	if err != nil {
		t.Fatalf("claude -p: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	var res struct {
		IsError bool   `json:"is_error"`
		Result  string `json:"result"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.IsError || !strings.Contains(res.Result, "Tool result received") {
		t.Errorf("claude -p: want success after the MCP tool call, got %s (%v)\nstderr: %s", out, err, errOut)
	}
	waitFor(t, 20*time.Second, "Claude Code's tool call in the ledger", func() bool {
		for _, r := range mcpLogs(t, g, id) {
			if r["mcp_tool"] == "echo" && r["outcome"] == "ok" {
				return true
			}
		}
		return false
	})
}
