package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
)

// TestSDKNode runs the official Node SDKs — openai, @anthropic-ai/sdk and
// @google/genai, pinned in testdata/agents, with their default options —
// against a node, on a route of every upstream kind: chat, Responses and
// Messages (plain, streamed, a tool round trip), Gemini's generateContent
// (plain, streamed, a tool round trip), and embeddings (the openai SDK's
// default encoding_format is base64) through both SDKs that have them.
func TestSDKNode(t *testing.T) {
	script, err := filepath.Abs(filepath.Join(agentsDir, "sdk.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(agentsDir, "node_modules", "@google", "genai")); err != nil {
		t.Skipf("the Node SDKs are not installed (run: npm install --prefix e2e/%s): %v", agentsDir, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	g, mock, secret := startAgentsNode(t, "ns")
	g.ctl(t, "model", "add", "ns-embed-gemini", "--provider", "gemini", "--base-url", mock[:len(mock)-len("/v1")]+"/v1beta",
		"--upstream-model", "text-embedding-004", "--credential", "mock")
	g.ctl(t, "model", "add", "ns-embed-openai", "--provider", "openai-compatible", "--base-url", mock, "--upstream-model", "emb")
	embed := map[string]string{"gemini": "ns-embed-gemini", "openai-compatible": "ns-embed-openai"}
	for _, rt := range agentRoutes {
		t.Run(rt.kind, func(t *testing.T) {
			env := agentEnv(t.TempDir(), "TOLLGATE_URL=http://"+g.http, "TOLLGATE_KEY="+secret, "ROUTE=ns-"+rt.kind,
				"EMBED_ROUTE="+embed[rt.kind])
			out, errOut, err := runAgent(t, filepath.Dir(script), env, node, script)
			if err != nil {
				t.Fatalf("node sdk.mjs: %v\nstdout: %s\nstderr: %s", err, out, errOut)
			}
			var res map[string]string
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("sdk.mjs printed %q (%v); stderr: %s", out, err, errOut)
			}
			names := make([]string, 0, len(res))
			for n := range res {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				if res[n] != "ok" {
					t.Errorf("%s: %s", n, res[n])
				}
			}
			want := 12 // and the two embeddings cases where there is an embeddings route
			if embed[rt.kind] != "" {
				want += 2
			}
			t.Logf("%d cases: %v", len(res), names)
			if len(res) != want {
				t.Errorf("%d cases ran, want %d: %v", len(res), want, names)
			}
		})
	}
}
