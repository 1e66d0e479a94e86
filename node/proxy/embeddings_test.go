package proxy_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/routing"
)

// encoding_format "base64" (the OpenAI Node and Python SDKs' default) is
// answered with base64 vectors on a Gemini route, and passed through as
// the client sent it to an OpenAI-format one.
func TestEmbeddingsBase64EveryRoute(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{EmbeddingDims: 6})
	setCredential(t, "cred-g", "g-key")
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{MaxAttempts: 1})
	for _, d := range []*pb.Deployment{
		{Id: uniq("gemini"), Provider: routing.ProviderGemini, BaseUrl: url + "/v1beta", UpstreamModel: "text-embedding-004", Credential: "cred-g"},
		{Id: uniq("vertex"), Provider: routing.ProviderGemini, BaseUrl: url + "/v1", UpstreamModel: "text-embedding-004", Credential: "cred-g",
			Options: map[string]string{"vertex_project": "p1", "vertex_location": "us-central1"}},
		{Id: uniq("compat"), Provider: routing.ProviderOpenAICompatible, BaseUrl: url + "/v1", UpstreamModel: "emb"},
	} {
		t.Run(d.Id, func(t *testing.T) {
			route := newRoute(t, "emb", d)
			body := `{"model":"` + route + `","input":["one","two"],"encoding_format":"base64"}`
			r := g.post(t, "/v1/embeddings", secret, body)
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			var resp struct {
				Data []struct {
					Embedding string `json:"embedding"`
				} `json:"data"`
			}
			if err := json.Unmarshal(r.body, &resp); err != nil || len(resp.Data) != 2 {
				t.Fatalf("answer %s (%v)", r.body, err)
			}
			for _, e := range resp.Data {
				raw, err := base64.StdEncoding.DecodeString(e.Embedding)
				if err != nil || len(raw) != 4*6 {
					t.Errorf("embedding %q: %d bytes (%v), want 6 float32", e.Embedding, len(raw), err)
				}
			}
			if d.Provider == routing.ProviderOpenAICompatible && !strings.Contains(string(ms.Stats().LastBody), `"encoding_format":"base64"`) {
				t.Errorf("upstream body %s, want encoding_format passed through", ms.Stats().LastBody)
			}
		})
	}
}
