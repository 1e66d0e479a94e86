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

const geminiAsk = `{"contents":[{"role":"user","parts":[{"text":"What is the weather in Paris?"}]}],` +
	`"tools":[{"functionDeclarations":[{"name":"get_weather","parameters":{"type":"OBJECT","properties":{"city":{"type":"STRING"}},"required":["city"]}}]}]}`

// geminiAnswer is the part of a GenerateContentResponse the tests read.
type geminiAnswer struct {
	Candidates []struct {
		Content struct {
			Role  string
			Parts []struct {
				Text         string
				FunctionCall *struct {
					ID, Name string
					Args     map[string]any
				}
			}
		}
		FinishReason string
	}
	UsageMetadata struct{ PromptTokenCount, CandidatesTokenCount int64 }
	Error         *struct {
		Code    int
		Status  string
		Message string
	}
}

// A client of Google's Gemini API (generateContent, streamGenerateContent
// with alt=sse, countTokens; the key as x-goog-api-key or ?key=) reaches
// deployments of every provider kind: a tool call, its result, a stream,
// and errors in Google's shape.
func TestGeminiClientEveryProvider(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{Chunks: 3})
	setCredential(t, "cred-a", "sk-ant")
	setCredential(t, "cred-g", "g-key")
	setCredential(t, "cred-b", "AKIDEXAMPLE:wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{MaxAttempts: 1})
	deps := providerDeps(url)
	deps[routing.ProviderOpenAICompatible] = &pb.Deployment{Id: uniq("compat"), Provider: routing.ProviderOpenAICompatible,
		BaseUrl: url + "/v1", UpstreamModel: "m"}
	formats := map[string]string{routing.ProviderOpenAICompatible: "openai", "anthropic": "anthropic", "gemini": "gemini", "bedrock": "bedrock", "vertex": "vertex"}
	for kind, d := range deps {
		t.Run(kind, func(t *testing.T) {
			route := newRoute(t, kind, d)
			before := ms.Stats().ByFormat[formats[kind]]
			r := g.do(t, http.MethodPost, "/v1beta/models/"+route+":generateContent", "", geminiAsk, "x-goog-api-key", secret)
			var a geminiAnswer
			if err := json.Unmarshal(r.body, &a); err != nil || r.status != http.StatusOK || len(a.Candidates) != 1 {
				t.Fatalf("status %d: %s (%v)", r.status, r.body, err)
			}
			parts := a.Candidates[0].Content.Parts
			fc := parts[len(parts)-1].FunctionCall
			if fc == nil || fc.Name != "get_weather" || fc.Args["city"] != "mock" || a.Candidates[0].Content.Role != "model" || a.UsageMetadata.PromptTokenCount == 0 {
				t.Fatalf("want a get_weather call: %s", r.body)
			}
			// The result, with the key as ?key=.
			result := `{"contents":[{"role":"user","parts":[{"text":"What is the weather in Paris?"}]},` +
				`{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"mock"}}}]},` +
				`{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"forecast":"sunny"}}}]}],` +
				strings.TrimPrefix(geminiAsk, `{"contents":[{"role":"user","parts":[{"text":"What is the weather in Paris?"}]}],`)
			r = g.do(t, http.MethodPost, "/v1beta/models/"+route+":generateContent?key="+secret, "", result)
			if err := json.Unmarshal(r.body, &a); err != nil || r.status != http.StatusOK || !strings.HasPrefix(a.Candidates[0].Content.Parts[0].Text, "Tool result received") {
				t.Fatalf("after the result: %d %s", r.status, r.body)
			}
			if got := ms.Stats().ByFormat[formats[kind]] - before; got != 2 {
				t.Errorf("the mock saw %d requests in its %s format, want 2", got, formats[kind])
			}

			// A stream of text.
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost,
				g.URL+"/v1beta/models/"+route+":streamGenerateContent?alt=sse", strings.NewReader(`{"contents":[{"parts":[{"text":"Hi"}]}]}`))
			req.Header.Set("x-goog-api-key", secret)
			resp, err := g.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var text strings.Builder
			var finish string
			for _, ev := range strings.Split(string(body), "\n") {
				data, ok := strings.CutPrefix(strings.TrimSpace(ev), "data: ")
				if !ok {
					continue
				}
				var e geminiAnswer
				if err := json.Unmarshal([]byte(data), &e); err != nil {
					t.Fatalf("event %s: %v", data, err)
				}
				for _, p := range e.Candidates[0].Content.Parts {
					text.WriteString(p.Text)
				}
				if f := e.Candidates[0].FinishReason; f != "" {
					finish = f
				}
			}
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") ||
				text.String() != "Hello from mockllm." || finish != "STOP" {
				t.Errorf("stream %d %s: text %q, finish %q\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), text.String(), finish, body)
			}
		})
	}

	route := newRoute(t, "gem-ct", deps["anthropic"])
	r := g.do(t, http.MethodPost, "/v1beta/models/"+route+":countTokens", "", `{"contents":[{"parts":[{"text":"12345678"}]}]}`, "x-goog-api-key", secret)
	if r.status != 200 || string(r.body) != `{"totalTokens":2}` {
		t.Errorf("countTokens: %d %s", r.status, r.body)
	}
	for _, c := range []struct {
		name, path, key, body string
		status                int
		want                  string
	}{
		{"bad key", "/v1beta/models/" + route + ":generateContent", "nope", geminiAsk, 401, "UNAUTHENTICATED"},
		{"unknown model", "/v1beta/models/no-such-route:generateContent", secret, geminiAsk, 404, "NOT_FOUND"},
		{"stream without alt=sse", "/v1beta/models/" + route + ":streamGenerateContent", secret, geminiAsk, 400, "INVALID_ARGUMENT"},
		{"built-in tool", "/v1/models/" + route + ":generateContent", secret, `{"contents":[{"parts":[{"text":"x"}]}],"tools":[{"googleSearch":{}}]}`, 400, "INVALID_ARGUMENT"},
		{"unknown method", "/v1beta/models/" + route + ":predictLongRunning", secret, geminiAsk, 404, "NOT_FOUND"},
	} {
		r := g.do(t, http.MethodPost, c.path, "", c.body, "x-goog-api-key", c.key)
		var a geminiAnswer
		if err := json.Unmarshal(r.body, &a); err != nil || r.status != c.status || a.Error == nil || a.Error.Status != c.want || a.Error.Code != c.status {
			t.Errorf("%s: %d %s, want %d %s", c.name, r.status, r.body, c.status, c.want)
		}
	}
}

// embedContent and batchEmbedContents from a Gemini client are served by
// Gemini and OpenAI-format deployments alike.
func TestGeminiClientEmbeddings(t *testing.T) {
	t.Parallel()
	_, url := startMock(t, mock.Options{EmbeddingDims: 5})
	setCredential(t, "cred-g", "g-key")
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{MaxAttempts: 1})
	for _, d := range []*pb.Deployment{
		{Id: uniq("gemini"), Provider: routing.ProviderGemini, BaseUrl: url + "/v1beta", UpstreamModel: "text-embedding-004", Credential: "cred-g"},
		{Id: uniq("compat"), Provider: routing.ProviderOpenAICompatible, BaseUrl: url + "/v1", UpstreamModel: "emb"},
	} {
		t.Run(d.Id, func(t *testing.T) {
			route := newRoute(t, "gemb", d)
			r := g.do(t, http.MethodPost, "/v1beta/models/"+route+":embedContent", "", `{"content":{"parts":[{"text":"hello"}]}}`, "x-goog-api-key", secret)
			var one struct {
				Embedding struct{ Values []float64 }
			}
			if err := json.Unmarshal(r.body, &one); err != nil || r.status != 200 || len(one.Embedding.Values) != 5 {
				t.Errorf("embedContent: %d %s", r.status, r.body)
			}
			r = g.do(t, http.MethodPost, "/v1beta/models/"+route+":batchEmbedContents", "",
				`{"requests":[{"model":"models/`+route+`","content":{"parts":[{"text":"a"}]}},{"model":"models/`+route+`","content":{"parts":[{"text":"b"}]}}]}`,
				"x-goog-api-key", secret)
			var many struct {
				Embeddings []struct{ Values []float64 }
			}
			if err := json.Unmarshal(r.body, &many); err != nil || r.status != 200 || len(many.Embeddings) != 2 || len(many.Embeddings[1].Values) != 5 {
				t.Errorf("batchEmbedContents: %d %s", r.status, r.body)
			}
		})
	}
	r := g.do(t, http.MethodPost, "/v1beta/models/no-such-route:embedContent", "", `{"content":{"parts":[{"text":"a"}]}}`, "x-goog-api-key", secret)
	var a geminiAnswer
	if err := json.Unmarshal(r.body, &a); err != nil || r.status != 404 || a.Error == nil || a.Error.Status != "NOT_FOUND" {
		t.Errorf("unknown model: %d %s", r.status, r.body)
	}
}

// Under a budget, a Gemini client's generationConfig.maxOutputTokens is
// the output limit the reservation counts, as max_tokens is for the other
// formats, and one that is not a whole number is refused.
func TestGeminiClientOutputLimitReserved(t *testing.T) {
	_, url := startMock(t, mock.Options{})
	fb := &fakeBudgets{}
	gw := startGateway(t, proxy.Config{Budgets: fb, Pricing: linearPricing{}, OutputCap: 1000})
	route := newRoute(t, "gem-budget", &pb.Deployment{Id: "d", Provider: routing.ProviderOpenAICompatible, BaseUrl: url + "/v1", UpstreamModel: "up"})
	key := newBudgetKey(t)
	estimate := func(genConfig string) int64 {
		t.Helper()
		body := `{"contents":[{"parts":[{"text":"Hi"}]}]` + genConfig + `}`
		r := gw.do(t, http.MethodPost, "/v1beta/models/"+route+":generateContent", "", body, "x-goog-api-key", key)
		if r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", genConfig, r.status, r.body)
		}
		fb.mu.Lock()
		defer fb.mu.Unlock()
		return fb.estimates[len(fb.estimates)-1]
	}
	// Bodies within a few bytes of each other: the output limit decides.
	none := estimate(`,"generationConfig":{"topK":1000000}`)
	small := estimate(`,"generationConfig":{"maxOutputTokens":50}`)
	large := estimate(`,"generationConfig":{"maxOutputTokens":900000}`)
	if !(small < none && none < large) {
		t.Errorf("estimates: maxOutputTokens 50 → %d, none (the cap, 1000) → %d, 900000 → %d; want increasing", small, none, large)
	}
	r := gw.do(t, http.MethodPost, "/v1beta/models/"+route+":generateContent", "",
		`{"contents":[{"parts":[{"text":"Hi"}]}],"generationConfig":{"maxOutputTokens":1.5}}`, "x-goog-api-key", key)
	var a geminiAnswer
	if err := json.Unmarshal(r.body, &a); err != nil || r.status != 400 || a.Error == nil || a.Error.Status != "INVALID_ARGUMENT" {
		t.Errorf("a fractional limit: %d %s", r.status, r.body)
	}
}
