package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The real coding agents, installed at pinned versions into
// testdata/agents by .ci/run (npm install --prefix e2e/testdata/agents),
// run non-interactively against a node whose routes lead to mockllm
// deployments of every upstream kind. The mock answers a request that
// offers tools with a call of the first tool, and the next request (whose
// last message is that tool's result) with text: one tool round trip.

// agentsDir holds the agents' package.json and, once installed, their
// node_modules.
const agentsDir = "testdata/agents"

// agentBin returns the path of an installed agent, or skips the test.
func agentBin(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(agentsDir, "node_modules", ".bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s is not installed (run: npm install --prefix e2e/%s): %v", name, agentsDir, err)
	}
	return p
}

// agentEnv is the environment of an agent run: a fresh home, and
// telemetry, error reporting, auto-update and other background traffic
// off through the agents' documented variables.
func agentEnv(home string, extra ...string) []string {
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=dumb",
		"DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1",
		"CODEX_HOME=" + filepath.Join(home, ".codex"), "NO_COLOR=1"}
	return append(env, extra...)
}

// runAgent runs an agent to the end, for at most 60 seconds, in dir.
func runAgent(t *testing.T, dir string, env []string, path string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.WaitDelay = 5 * time.Second
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// agentRoutes are the upstream kinds of the routes the agents use, and
// the start of the mock's paths that must see their requests; openai's
// depends on the agent's API (Responses passes through, Messages is
// translated to chat).
var agentRoutes = []struct{ kind, path string }{
	{"openai", ""},
	{"openai-compatible", "/v1/chat/completions"},
	{"anthropic", "/v1/messages"},
	{"gemini", "/v1beta/models/"},
	{"bedrock", "/model/"},
}

// startAgentsNode starts a node with a route "PREFIX-KIND" per upstream
// kind on one mock, and returns the node, the mock's API root and a key.
func startAgentsNode(t *testing.T, prefix string) (*gateway, string, string) {
	mock := mockLLM(t)
	root := strings.TrimSuffix(mock, "/v1")
	g := startGateway(t, t.TempDir(), "t", "--no-seed")
	g.ctl(t, "credential", "set", "mock", "--value", "mock-secret")
	g.ctl(t, "credential", "set", "aws", "--value", "AKID:SECRET")
	add := func(kind string, args ...string) {
		g.ctl(t, append([]string{"model", "add", prefix + "-" + kind, "--provider", kind}, args...)...)
	}
	add("openai", "--base-url", mock, "--upstream-model", "gpt-mock", "--credential", "mock")
	add("openai-compatible", "--base-url", mock, "--upstream-model", "mock-model")
	add("anthropic", "--base-url", mock, "--upstream-model", "claude-mock", "--credential", "mock")
	add("gemini", "--base-url", root+"/v1beta", "--upstream-model", "gemini-mock", "--credential", "mock")
	add("bedrock", "--base-url", root, "--option", "region=us-east-1", "--upstream-model", "anthropic.claude-mock", "--credential", "aws")
	_, secret := g.createKey(t, "--name", prefix, "--models", prefix+"-*")
	return g, mock, secret
}

// pathDelta is how many requests the mock's paths starting with prefix
// got between two snapshots.
func pathDelta(before, after map[string]int64, prefix string) int64 {
	var d int64
	for p, c := range after {
		if strings.HasPrefix(p, prefix) {
			d += c - before[p]
		}
	}
	return d
}

// Claude Code (claude -p) with its default tools, minus the Agent tool
// (the mock calls the first tool, which would be Agent, starting a
// sub-agent), on every upstream kind: its first request carries a system
// message inside messages, 23 tools, thinking and cache_control; the mock
// calls Bash, Claude Code runs it, and the next turn ends the run.
func TestAgentClaudeCode(t *testing.T) {
	claude := agentBin(t, "claude")
	g, mock, secret := startAgentsNode(t, "cc")
	for _, rt := range agentRoutes {
		if rt.path == "" {
			rt.path = "/v1/chat/completions"
		}
		t.Run(rt.kind, func(t *testing.T) {
			home, work := t.TempDir(), t.TempDir()
			before := mockPaths(t, mock)
			out, errOut, err := runAgent(t, work, agentEnv(home, "ANTHROPIC_BASE_URL=http://"+g.http, "ANTHROPIC_API_KEY="+secret),
				claude, "-p", "Check the weather.", "--model", "cc-"+rt.kind, "--output-format", "json",
				"--disallowedTools", "Agent", "--allowedTools", "Bash", "--max-turns", "4")
			if err != nil {
				t.Fatalf("claude -p: %v\nstdout: %s\nstderr: %s", err, out, errOut)
			}
			var res struct {
				IsError  bool   `json:"is_error"`
				Result   string `json:"result"`
				NumTurns int    `json:"num_turns"`
				Subtype  string `json:"subtype"`
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("claude -p output is not its JSON result: %v\n%s\nstderr: %s", err, out, errOut)
			}
			if res.IsError || res.Subtype != "success" || res.NumTurns < 2 || !strings.Contains(res.Result, "Tool result received") {
				t.Errorf("claude -p: want success after a tool round trip, got %s\nstderr: %s", out, errOut)
			}
			if n := pathDelta(before, mockPaths(t, mock), rt.path); n < 2 {
				t.Errorf("the mock's %s... got %d requests, want at least 2 (the tool call and the turn after it)", rt.path, n)
			}
		})
	}
}

// Codex CLI (codex exec) with its default configuration and a custom
// provider speaking the Responses API, on every upstream kind: its
// requests carry a namespace tool (multi_agent_v1) and web_search; the
// mock calls exec_command, Codex runs it, and the next turn ends the run.
func TestAgentCodex(t *testing.T) {
	codex := agentBin(t, "codex")
	g, mock, secret := startAgentsNode(t, "cx")
	for _, rt := range agentRoutes {
		if rt.path == "" {
			rt.path = "/v1/responses"
		}
		t.Run(rt.kind, func(t *testing.T) {
			home, work := t.TempDir(), t.TempDir()
			config := "model = \"cx-" + rt.kind + "\"\nmodel_provider = \"tollgate\"\n" +
				"check_for_update_on_startup = false\n\n[analytics]\nenabled = false\n\n" +
				"[model_providers.tollgate]\nname = \"Tollgate\"\nbase_url = \"http://" + g.http + "/v1\"\n" +
				"env_key = \"TOLLGATE_KEY\"\nwire_api = \"responses\"\n"
			if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(config), 0o600); err != nil {
				t.Fatal(err)
			}
			before := mockPaths(t, mock)
			out, errOut, err := runAgent(t, work, agentEnv(home, "TOLLGATE_KEY="+secret),
				codex, "exec", "--skip-git-repo-check", "--json", "Check the weather.")
			if err != nil {
				t.Fatalf("codex exec: %v\nstdout: %s\nstderr: %s", err, out, errOut)
			}
			var ran, answered bool
			for _, line := range strings.Split(out, "\n") {
				var ev struct {
					Type string `json:"type"`
					Item struct {
						Type string `json:"type"`
						Text string `json:"text"`
					} `json:"item"`
				}
				if json.Unmarshal([]byte(line), &ev) != nil || ev.Type != "item.completed" {
					continue
				}
				switch ev.Item.Type {
				case "command_execution":
					ran = true
				case "agent_message":
					answered = answered || strings.Contains(ev.Item.Text, "Tool result received")
				}
			}
			if !ran || !answered {
				t.Errorf("codex exec: want a command run and then the mock's answer to its result\nstdout: %s\nstderr: %s", out, errOut)
			}
			if n := pathDelta(before, mockPaths(t, mock), rt.path); n < 2 {
				t.Errorf("the mock's %s... got %d requests, want at least 2 (the tool call and the turn after it)", rt.path, n)
			}
		})
	}
}
