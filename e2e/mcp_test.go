package e2e

import (
	"context"
	"encoding/json"
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

// startMCPNode starts server-everything over Streamable HTTP and a node
// with it configured as "everything" and its stdio form as "evstdio", and
// waits until the node is connected to both.
func startMCPNode(t *testing.T) *gateway {
	node, script := everythingJS(t)
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
	g := startGateway(t, t.TempDir(), "t", "--no-seed")
	g.ctl(t, "mcp", "add", "everything", "--url", "http://"+addr+"/mcp", "--header", "X-Upstream-Secret=never-shown-1234")
	g.ctl(t, "mcp", "add", "evstdio", "--stdio", node+" "+script+" stdio", "--tool-timeout", "30s")
	for _, name := range []string{"everything", "evstdio"} {
		waitFor(t, 60*time.Second, name+" connected", func() bool {
			var got struct {
				Status struct{ State string } `json:"status"`
			}
			_ = json.Unmarshal([]byte(g.ctl(t, "mcp", "get", name, "-o", "json")), &got)
			return got.Status.State == "connected"
		})
	}
	return g
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
	c := sdk.NewClient(&sdk.Implementation{Name: "go-e2e", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *sdk.ProgressNotificationClientRequest) {}})
	hc := &http.Client{Transport: authTransport{key: key}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: "http://" + g.http + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close() }()
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

type authTransport struct{ key string }

func (a authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+a.key)
	return http.DefaultTransport.RoundTrip(r)
}
