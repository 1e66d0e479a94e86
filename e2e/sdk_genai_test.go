package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"
)

// genaiEmbeds are the upstream kinds whose gg- route embeds (Anthropic and
// Bedrock deployments have no embeddings), and the start of the mock's
// paths that must see the embeddings.
var genaiEmbeds = map[string]string{
	"openai":            "/v1/embeddings",
	"azure-openai":      "/openai/deployments/",
	"openai-compatible": "/v1/embeddings",
	"gemini":            "/v1beta/models/",
}

// TestSDKGoGenAI drives the gateway's Gemini API paths with Google's Go
// GenAI SDK (google.golang.org/genai, Gemini API backend, default options
// but a base URL) on a route of every upstream kind: generateContent,
// streamGenerateContent, a function-calling round trip, countTokens and,
// where the deployment embeds, embedContent. Each route's requests must
// reach the mock in its deployment's format and be recorded in the
// spend ledger. An unknown route and a wrong key come back as the SDK's
// typed APIError.
func TestSDKGoGenAI(t *testing.T) {
	g, mock, secret := startAgentsNode(t, "gg")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	timeout := 20 * time.Second
	gc, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: secret, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: "http://" + g.http, Timeout: &timeout}})
	if err != nil {
		t.Fatalf("genai.NewClient: %v", err)
	}
	for _, rt := range agentRoutes {
		t.Run(rt.kind, func(t *testing.T) {
			route := "gg-" + rt.kind
			embedPath := genaiEmbeds[rt.kind]
			before := mockPaths(t, mock)
			n := genaiGenerate(t, gc, route)
			n += genaiTools(t, gc, route)
			genaiCountTokens(t, gc, route)
			want := map[string]int64{rt.path: int64(n)}
			if embedPath != "" {
				genaiEmbed(t, gc, route)
				want[embedPath]++ // one batchEmbedContents, one upstream request
			}
			after := mockPaths(t, mock)
			for p, w := range want {
				if d := pathDelta(before, after, p); !t.Failed() && d != w {
					t.Errorf("the mock's %s... saw %d requests, want %d", p, d, w)
				}
			}
			genaiSpend(t, g, route, n, embedPath != "")
		})
	}
	t.Run("unknown-model", func(t *testing.T) {
		_, err := gc.Models.GenerateContent(sdkCtx(t), "gg-nope", genai.Text("Hello"), nil)
		var ae genai.APIError
		if !errors.As(err, &ae) || ae.Code != http.StatusNotFound || ae.Message == "" {
			t.Fatalf("generateContent on a route that does not exist: want a genai.APIError 404 with a message, got %v", err)
		}
	})
	t.Run("wrong-key", func(t *testing.T) {
		bad, err := genai.NewClient(sdkCtx(t), &genai.ClientConfig{APIKey: "tg-not-a-key", Backend: genai.BackendGeminiAPI,
			HTTPOptions: genai.HTTPOptions{BaseURL: "http://" + g.http, Timeout: &timeout}})
		if err != nil {
			t.Fatalf("genai.NewClient: %v", err)
		}
		_, err = bad.Models.GenerateContent(sdkCtx(t), "gg-gemini", genai.Text("Hello"), nil)
		var ae genai.APIError
		if !errors.As(err, &ae) || ae.Code != http.StatusUnauthorized || strings.Contains(ae.Message, "tg-not-a-key") {
			t.Fatalf("generateContent with a wrong key: want a genai.APIError 401 that does not echo the key, got %v", err)
		}
	})
}

// genaiGenerate runs generateContent plain and streamed. It returns how
// many requests reached the mock.
func genaiGenerate(t *testing.T, gc *genai.Client, model string) int {
	t.Run("generate", func(t *testing.T) {
		r, err := gc.Models.GenerateContent(sdkCtx(t), model, genai.Text("Hello there"), nil)
		if err != nil {
			t.Fatalf("generateContent: %v", err)
		}
		if r.Text() == "" || len(r.Candidates) != 1 || r.Candidates[0].FinishReason != genai.FinishReasonStop {
			t.Errorf("generateContent: text %q, response %s", r.Text(), genaiJSON(r))
		}
		if u := r.UsageMetadata; u == nil || u.PromptTokenCount <= 0 || u.CandidatesTokenCount <= 0 {
			t.Errorf("generateContent: usage %s", genaiJSON(r.UsageMetadata))
		}
	})
	t.Run("stream", func(t *testing.T) {
		var text strings.Builder
		chunks, textChunks := 0, 0
		var last *genai.GenerateContentResponse
		for r, err := range gc.Models.GenerateContentStream(sdkCtx(t), model, genai.Text("Hello there"), nil) {
			if err != nil {
				t.Fatalf("streamGenerateContent: after %d chunks: %v", chunks, err)
			}
			chunks++
			if s := r.Text(); s != "" {
				textChunks++
				text.WriteString(s)
			}
			last = r
		}
		if textChunks < 2 || text.Len() == 0 {
			t.Fatalf("streamGenerateContent: %d chunks, %d with text, text %q: want the text in several chunks", chunks, textChunks, text.String())
		}
		if len(last.Candidates) != 1 || last.Candidates[0].FinishReason != genai.FinishReasonStop {
			t.Errorf("streamGenerateContent: the last chunk has no finishReason STOP: %s", genaiJSON(last))
		}
		if u := last.UsageMetadata; u == nil || u.CandidatesTokenCount <= 0 {
			t.Errorf("streamGenerateContent: the last chunk's usage %s", genaiJSON(last.UsageMetadata))
		}
	})
	return 2
}

// genaiTools runs a function-calling round trip: the mock calls the only
// function, the reply carries its result. It returns how many requests
// reached the mock.
func genaiTools(t *testing.T, gc *genai.Client, model string) int {
	config := &genai.GenerateContentConfig{Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{
		Name: "get_weather", Description: "Current weather in a city", ParametersJsonSchema: weatherSchema,
	}}}}}
	ask := genai.NewContentFromText("What is the weather in Paris?", genai.RoleUser)
	t.Run("tools", func(t *testing.T) {
		r, err := gc.Models.GenerateContent(sdkCtx(t), model, []*genai.Content{ask}, config)
		if err != nil {
			t.Fatalf("function call: %v", err)
		}
		fcs := r.FunctionCalls()
		if len(fcs) != 1 || fcs[0].Name != "get_weather" || fcs[0].Args["city"] != "mock" {
			t.Fatalf("function call: want one get_weather call with city \"mock\", got %s", genaiJSON(r))
		}
		res := genai.NewPartFromFunctionResponse("get_weather", map[string]any{"forecast": "Sunny, 21°C"})
		res.FunctionResponse.ID = fcs[0].ID
		r2, err := gc.Models.GenerateContent(sdkCtx(t), model, []*genai.Content{ask, r.Candidates[0].Content,
			genai.NewContentFromParts([]*genai.Part{res}, genai.RoleUser)}, config)
		if err != nil {
			t.Fatalf("function result: %v", err)
		}
		if !strings.HasPrefix(r2.Text(), "Tool result received") || !strings.Contains(r2.Text(), "Sunny") {
			t.Errorf("function result: reply %q in %s", r2.Text(), genaiJSON(r2))
		}
	})
	return 2
}

// genaiCountTokens counts a prompt's tokens (the gateway answers; nothing
// goes upstream): a longer prompt counts more.
func genaiCountTokens(t *testing.T, gc *genai.Client, model string) {
	t.Run("count-tokens", func(t *testing.T) {
		short, err := gc.Models.CountTokens(sdkCtx(t), model, genai.Text("Hello"), nil)
		if err != nil {
			t.Fatalf("countTokens: %v", err)
		}
		long, err := gc.Models.CountTokens(sdkCtx(t), model, genai.Text(strings.Repeat("The weather in Paris is sunny. ", 40)), nil)
		if err != nil {
			t.Fatalf("countTokens: %v", err)
		}
		if short.TotalTokens <= 0 || long.TotalTokens <= short.TotalTokens {
			t.Errorf("countTokens: %d tokens for a word, %d for 40 sentences", short.TotalTokens, long.TotalTokens)
		}
	})
}

// genaiEmbed embeds two texts in one call (the SDK sends
// batchEmbedContents) and one alone.
func genaiEmbed(t *testing.T, gc *genai.Client, model string) {
	t.Run("embed", func(t *testing.T) {
		e, err := gc.Models.EmbedContent(sdkCtx(t), model, []*genai.Content{
			genai.NewContentFromText("one", genai.RoleUser), genai.NewContentFromText("two", genai.RoleUser)}, nil)
		if err != nil {
			t.Fatalf("embedContent: %v", err)
		}
		if len(e.Embeddings) != 2 || len(e.Embeddings[0].Values) == 0 || len(e.Embeddings[1].Values) != len(e.Embeddings[0].Values) {
			t.Fatalf("embedContent of two texts: %s", genaiJSON(e))
		}
		if fmt.Sprint(e.Embeddings[0].Values) == fmt.Sprint(e.Embeddings[1].Values) {
			t.Errorf("embedContent: two texts got the same vector %v", e.Embeddings[0].Values)
		}
	})
}

// genaiSpend checks that the ledger recorded the route's requests that
// reached the mock (n of them, with tokens), and its embeddings.
func genaiSpend(t *testing.T, g *gateway, route string, n int, embeds bool) {
	if t.Failed() {
		return
	}
	want := n
	if embeds {
		want++
	}
	var recs []spendRecord
	waitFor(t, 10*time.Second, fmt.Sprintf("%d spend records of %s", want, route), func() bool {
		recs = recs[:0]
		for _, r := range g.spendLogs(t, "--limit", "1000") {
			if r.Model == route {
				recs = append(recs, r)
			}
		}
		return len(recs) >= want
	})
	chats, streams := 0, 0
	for _, r := range recs {
		if r.Status != http.StatusOK {
			t.Errorf("spend record of %s with status %d: %+v", route, r.Status, r)
		}
		if r.PromptTokens <= 0 {
			t.Errorf("spend record of %s without prompt tokens: %+v", route, r)
		}
		if r.CompletionTokens > 0 {
			chats++
		}
		if r.Stream {
			streams++
		}
	}
	if len(recs) != want || chats != n || streams != 1 {
		t.Errorf("%s: %d spend records (%d with completion tokens, %d streamed), want %d (%d, 1): %+v", route, len(recs), chats, streams, want, n, recs)
	}
}

// genaiJSON renders an SDK value for a failure message.
func genaiJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}
