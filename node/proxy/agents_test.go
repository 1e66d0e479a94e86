package proxy_test

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/routing"
)

// codexBody is Codex CLI 0.171.0's default first request (recorded, texts
// shortened), for model.
func codexBody(t *testing.T, model string) string {
	t.Helper()
	b, err := os.ReadFile("../../routing/translate/testdata/responses/codex_0.171.0.json")
	if err != nil {
		t.Fatal(err)
	}
	var req map[string]any
	if err := json.Unmarshal(b, &req); err != nil {
		t.Fatal(err)
	}
	req["model"] = model
	req["stream"] = false
	out, _ := json.Marshal(req)
	return string(out)
}

// Codex's default request (a namespace tool, web_search) is served on every
// translated route: the namespace's functions go upstream flattened and
// come back under their own names, web_search is left out and named in a
// header.
func TestResponsesCodexRequestOnTranslatedRoutes(t *testing.T) {
	t.Parallel()
	_, url := startMock(t, mock.Options{})
	setCredential(t, "cred-a", "sk-ant")
	setCredential(t, "cred-g", "g-key")
	setCredential(t, "cred-b", "AKIDEXAMPLE:wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{MaxAttempts: 1})
	deps := providerDeps(url)
	deps[routing.ProviderOpenAICompatible] = &pb.Deployment{Id: uniq("compat"), Provider: routing.ProviderOpenAICompatible,
		BaseUrl: url + "/v1", UpstreamModel: "m"}
	for kind, d := range deps {
		t.Run(kind, func(t *testing.T) {
			route := newRoute(t, kind, d)
			r := g.post(t, "/v1/responses", secret, codexBody(t, route))
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if h := r.header.Get("X-Tollgate-Dropped-Tools"); h != "web_search" {
				t.Errorf("X-Tollgate-Dropped-Tools = %q, want web_search", h)
			}
			var resp struct {
				Output []struct{ Type, Name, Namespace string }
			}
			if err := json.Unmarshal(r.body, &resp); err != nil {
				t.Fatal(err)
			}
			if n := len(resp.Output); n == 0 || resp.Output[n-1].Type != "function_call" || resp.Output[n-1].Name != "exec_command" {
				t.Errorf("output = %+v, want a call of exec_command (the mock calls the first tool)", resp.Output)
			}

			// A call of a namespace's function comes back under its name.
			body := strings.Replace(codexBody(t, route), `"tool_choice":"auto"`,
				`"tool_choice":{"type":"function","namespace":"multi_agent_v1","name":"spawn_agent"}`, 1)
			r = g.post(t, "/v1/responses", secret, body)
			if err := json.Unmarshal(r.body, &resp); err != nil || r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if n := len(resp.Output); n == 0 || resp.Output[n-1].Name != "spawn_agent" || resp.Output[n-1].Namespace != "multi_agent_v1" {
				t.Errorf("output = %+v, want spawn_agent in namespace multi_agent_v1", resp.Output)
			}
		})
	}
}
