package proxy_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/routing"
)

// responsesBody is a Responses request with fields a translation to chat
// would drop (store, include, reasoning.summary, prompt_cache_key).
func responsesBody(model string, stream bool) string {
	s := "false"
	if stream {
		s = "true"
	}
	return `{"model":"` + model + `","stream":` + s + `,"store":false,"include":["reasoning.encrypted_content"],` +
		`"reasoning":{"summary":"auto"},"prompt_cache_key":"pk-1","input":[{"role":"user","content":[{"type":"input_text","text":"Hi"}]}]}`
}

// /v1/responses passes through untouched (but for the model's name) to
// deployments that speak the Responses API — openai, azure-openai (on
// /openai/v1/responses, key in api-key), openai-compatible with
// responses=on — and is translated to chat for an openai-compatible one
// without it. Usage reaches the record, from the answer and from a
// stream's response.completed.
func TestResponsesPassThrough(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{Chunks: 3})
	setCredential(t, "cred-oai", "sk-upstream")
	setCredential(t, "cred-az", "az-key")
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{MaxAttempts: 1})
	cases := []struct {
		name     string
		dep      *pb.Deployment
		path     string // the mock's route that must serve it
		auth     string // where the mock saw the key
		verbatim bool
	}{
		{"openai", &pb.Deployment{Id: uniq("oai"), Provider: routing.ProviderOpenAI, BaseUrl: url + "/v1", UpstreamModel: "gpt-up", Credential: "cred-oai"},
			"/v1/responses", "authorization", true},
		{"azure-openai", &pb.Deployment{Id: uniq("az"), Provider: routing.ProviderAzureOpenAI, BaseUrl: url, UpstreamModel: "gpt-up", Credential: "cred-az"},
			"/openai/v1/responses", "api-key", true},
		{"openai-compatible with responses=on", &pb.Deployment{Id: uniq("vllm"), Provider: routing.ProviderOpenAICompatible, BaseUrl: url + "/v1",
			UpstreamModel: "gpt-up", Options: map[string]string{"responses": "on"}}, "/v1/responses", "", true},
		{"openai-compatible", &pb.Deployment{Id: uniq("compat"), Provider: routing.ProviderOpenAICompatible, BaseUrl: url + "/v1",
			UpstreamModel: "gpt-up"}, "/v1/chat/completions", "", false},
		{"openai with responses=off", &pb.Deployment{Id: uniq("oai-off"), Provider: routing.ProviderOpenAI, BaseUrl: url + "/v1", UpstreamModel: "gpt-up",
			Credential: "cred-oai", Options: map[string]string{"responses": "off"}}, "/v1/chat/completions", "authorization", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			route := newRoute(t, "resp", c.dep)
			before := ms.Stats().ByPath[c.path]
			r := g.post(t, "/v1/responses", secret, responsesBody(route, false))
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			st := ms.Stats()
			if st.ByPath[c.path] != before+1 {
				t.Fatalf("the mock's %s was not called: %v", c.path, st.ByPath)
			}
			if c.auth != "" && st.LastAuthHeader != c.auth {
				t.Errorf("key sent in %q, want %q", st.LastAuthHeader, c.auth)
			}
			want := strings.Replace(responsesBody(route, false), route, "gpt-up", 1)
			if got := string(st.LastBody); c.verbatim && got != want {
				t.Errorf("upstream body\n%s\nwant\n%s", got, want)
			}
			var resp struct {
				Object, Status string
				Usage          struct {
					InputTokens  int64 `json:"input_tokens"`
					OutputTokens int64 `json:"output_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(r.body, &resp); err != nil || resp.Object != "response" || resp.Status != "completed" {
				t.Fatalf("answer %s (%v)", r.body, err)
			}
			rec := g.rec.of(t, r)
			if !rec.Usage.Present || rec.Usage.CompletionTokens == 0 || rec.Usage.CompletionTokens != resp.Usage.OutputTokens {
				t.Errorf("recorded usage %+v, answer's %+v", rec.Usage, resp.Usage)
			}

			// Streamed: the events go through as the upstream wrote them,
			// and the usage of response.completed is recorded.
			resp2, sse := g.openStream(t, context.Background(), "/v1/responses", secret, responsesBody(route, true))
			if resp2.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(resp2.Body)
				t.Fatalf("stream status %d: %s", resp2.StatusCode, b)
			}
			events, err := sse.all()
			if err != nil {
				t.Fatal(err)
			}
			var types []string
			for i, e := range events {
				// "event: TYPE" comes first, as "<non-data line ...>".
				e = e[strings.LastIndexByte(e, '\n')+1:]
				events[i] = e
				var ev struct{ Type string }
				_ = json.Unmarshal([]byte(e), &ev)
				types = append(types, ev.Type)
			}
			if len(types) == 0 || types[0] != "response.created" || types[len(types)-1] != "response.completed" {
				t.Errorf("event types %v", types)
			}
			if c.verbatim && !strings.Contains(events[0], `"usage":null`) {
				t.Errorf("response.created was changed: %s", events[0])
			}
			rec = g.rec.wait(t, resp2.Header.Get("X-Request-Id"))
			if !rec.Usage.Present || rec.Usage.CompletionTokens != 3 {
				t.Errorf("recorded stream usage %+v, want 3 output tokens", rec.Usage)
			}
		})
	}
}

// A pass-through Responses request under a budget that sets no output
// limit goes with max_output_tokens, the limit its reservation assumed.
func TestResponsesPassThroughOutputCapped(t *testing.T) {
	const outputCap = 555
	ms, url := startMock(t, mock.Options{})
	gw := startGateway(t, proxy.Config{Budgets: &fakeBudgets{}, Pricing: linearPricing{}, OutputCap: outputCap})
	route := newRoute(t, "resp-cap", &pb.Deployment{Id: "d", Provider: routing.ProviderOpenAI, BaseUrl: url + "/v1", UpstreamModel: "up"})
	r := gw.post(t, "/v1/responses", newBudgetKey(t), `{"model":"`+route+`","input":"Hi"}`)
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var got map[string]any
	if err := json.Unmarshal(ms.Stats().LastBody, &got); err != nil {
		t.Fatal(err)
	}
	if got["max_output_tokens"] != float64(outputCap) {
		t.Errorf("upstream body %v, want max_output_tokens %d", got, outputCap)
	}
}

// The option responses is on or off, and only for the kinds that speak
// OpenAI's wire format.
func TestResponsesOptionValidated(t *testing.T) {
	for _, c := range []struct {
		provider, value string
		ok              bool
	}{
		{routing.ProviderOpenAICompatible, "on", true},
		{routing.ProviderOpenAI, "off", true},
		{routing.ProviderAzureOpenAI, "on", true},
		{routing.ProviderOpenAICompatible, "yes", false},
		{routing.ProviderAnthropic, "on", false},
		{routing.ProviderGemini, "on", false},
	} {
		d := &pb.Deployment{Id: "d", Provider: c.provider, BaseUrl: "http://127.0.0.1:1/v1", UpstreamModel: "m",
			Options: map[string]string{"responses": c.value}}
		if err := routing.NormalizeDeployment(d); (err == nil) != c.ok {
			t.Errorf("%s responses=%s: err %v, want ok %v", c.provider, c.value, err, c.ok)
		}
	}
}
