package e2e

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	oaoption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// respRoutes are the routes of TestSDKResponses: every upstream kind, the
// Responses API passed through (openai, azure-openai, openai-compatible
// with responses=on) or translated (the others), and the start of the
// mock's paths that must see it.
var respRoutes = []struct{ name, path string }{
	{"resp-openai", "/v1/responses"},
	{"resp-azure", "/openai/v1/responses"},
	{"resp-vllm", "/v1/responses"},
	{"resp-compat", "/v1/chat/completions"},
	{"resp-anthropic", "/v1/messages"},
	{"resp-gemini", "/v1beta/models/"},
	{"resp-bedrock", "/model/"},
}

// TestSDKResponses drives the Responses API with openai-go on every route
// (plain, streamed, a tool call and its result, a streamed tool call) and
// embeddings with encoding_format base64 on the routes that embed.
func TestSDKResponses(t *testing.T) {
	mock := mockLLM(t) // http://ADDR/v1
	root := strings.TrimSuffix(mock, "/v1")
	g := startGateway(t, t.TempDir(), "t", "--no-seed")
	gw := "http://" + g.http

	g.ctl(t, "credential", "set", "mock", "--value", "mock-secret")
	g.ctl(t, "credential", "set", "aws", "--value", "AKID:SECRET")
	g.ctl(t, "model", "add", "resp-openai", "--provider", "openai", "--base-url", mock, "--upstream-model", "gpt-mock", "--credential", "mock")
	g.ctl(t, "model", "add", "resp-azure", "--provider", "azure-openai", "--base-url", root, "--upstream-model", "my-gpt", "--credential", "mock")
	g.ctl(t, "model", "add", "resp-vllm", "--provider", "vllm", "--base-url", mock, "--upstream-model", "mock-model", "--option", "responses=on")
	g.ctl(t, "model", "add", "resp-compat", "--provider", "openai-compatible", "--base-url", mock, "--upstream-model", "mock-model")
	g.ctl(t, "model", "add", "resp-anthropic", "--provider", "anthropic", "--base-url", mock, "--upstream-model", "claude-mock", "--credential", "mock")
	g.ctl(t, "model", "add", "resp-gemini", "--provider", "gemini", "--base-url", root+"/v1beta", "--upstream-model", "gemini-mock", "--credential", "mock")
	g.ctl(t, "model", "add", "resp-bedrock", "--provider", "bedrock", "--base-url", root, "--option", "region=us-east-1",
		"--upstream-model", "anthropic.claude-mock", "--credential", "aws")
	g.ctl(t, "model", "add", "emb-gemini", "--provider", "gemini", "--base-url", root+"/v1beta", "--upstream-model", "text-embedding-004", "--credential", "mock")
	g.ctl(t, "model", "add", "emb-openai", "--provider", "openai-compatible", "--base-url", mock, "--upstream-model", "emb-mock")
	_, secret := g.createKey(t, "--name", "sdk-resp", "--models", "resp-*,emb-*")

	oa := openai.NewClient(oaoption.WithBaseURL(gw+"/v1"), oaoption.WithAPIKey(secret),
		oaoption.WithMaxRetries(0), oaoption.WithRequestTimeout(20*time.Second))
	for _, rt := range respRoutes {
		t.Run(rt.name, func(t *testing.T) {
			before := mockPaths(t, mock)
			n := sdkOpenAIResponses(t, oa, rt.name)
			n += sdkResponsesTools(t, oa, rt.name)
			after := mockPaths(t, mock)
			var d int64
			for p, c := range after {
				if strings.HasPrefix(p, rt.path) {
					d += c - before[p]
				}
			}
			if !t.Failed() && d != int64(n) {
				t.Errorf("the mock's %s... saw %d requests, want %d (before %v, after %v)", rt.path, d, n, before, after)
			}
		})
	}
	for _, model := range []string{"emb-gemini", "emb-openai"} {
		t.Run(model, func(t *testing.T) {
			e, err := oa.Embeddings.New(sdkCtx(t), openai.EmbeddingNewParams{Model: model,
				Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"one", "two"}},
				EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64})
			if err != nil {
				t.Fatalf("embeddings: %s", sdkErr(err))
			}
			var raw struct {
				Data []struct {
					Embedding string `json:"embedding"`
				} `json:"data"`
			}
			if err := json.Unmarshal([]byte(e.RawJSON()), &raw); err != nil || len(raw.Data) != 2 {
				t.Fatalf("embeddings: %v in %s", err, e.RawJSON())
			}
			for _, d := range raw.Data {
				if b, err := base64.StdEncoding.DecodeString(d.Embedding); err != nil || len(b) == 0 || len(b)%4 != 0 {
					t.Errorf("embedding %q is not base64 float32 (%v)", d.Embedding, err)
				}
			}
		})
	}
}

// mockPaths reads a mockllm's requests by route.
func mockPaths(t testing.TB, base string) map[string]int64 {
	t.Helper()
	resp, err := client.Get(strings.TrimSuffix(base, "/v1") + "/mock/stats")
	if err != nil {
		t.Fatalf("mock stats: %v", err)
	}
	defer resp.Body.Close()
	var s struct {
		ByPath map[string]int64 `json:"by_path"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s.ByPath
}

// sdkResponsesTools runs a Responses tool round trip (the call, then its
// function_call_output) and a streamed call through openai-go. It returns
// how many requests reached the mock.
func sdkResponsesTools(t *testing.T, oa openai.Client, model string) int {
	tools := []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
		Name: "get_weather", Description: openai.String("Current weather in a city"), Parameters: weatherSchema}}}
	ask := responses.ResponseInputItemParamOfMessage("What is the weather in Paris?", responses.EasyInputMessageRoleUser)
	t.Run("responses-tools", func(t *testing.T) {
		r, err := oa.Responses.New(sdkCtx(t), responses.ResponseNewParams{Model: model, Tools: tools,
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{ask}}})
		if err != nil {
			t.Fatalf("tool call: %s", sdkErr(err))
		}
		var call *responses.ResponseOutputItemUnion
		for i := range r.Output {
			if r.Output[i].Type == "function_call" {
				call = &r.Output[i]
			}
		}
		if call == nil || call.Name != "get_weather" || call.CallID == "" {
			t.Fatalf("tool call: no get_weather call in %s", r.RawJSON())
		}
		checkArgs(t, "tool call", []byte(call.Arguments.OfString))
		input := responses.ResponseInputParam{ask,
			responses.ResponseInputItemParamOfFunctionCall(call.Arguments.OfString, call.CallID, call.Name),
			{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: openai.String(call.CallID),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("Sunny, 21°C")}}}}
		r, err = oa.Responses.New(sdkCtx(t), responses.ResponseNewParams{Model: model, Tools: tools,
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
		if err != nil {
			t.Fatalf("tool result: %s", sdkErr(err))
		}
		if !strings.HasPrefix(r.OutputText(), "Tool result received") {
			t.Errorf("tool result: reply %s", r.RawJSON())
		}
	})
	t.Run("responses-tools-stream", func(t *testing.T) {
		st := oa.Responses.NewStreaming(sdkCtx(t), responses.ResponseNewParams{Model: model, Tools: tools,
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{ask}}})
		defer st.Close()
		var args strings.Builder
		var done string
		var final *responses.Response
		for st.Next() {
			ev := st.Current()
			switch ev.Type {
			case "response.function_call_arguments.delta":
				args.WriteString(ev.Delta)
			case "response.output_item.done":
				if ev.Item.Type == "function_call" {
					done = ev.Item.Name
				}
			case "response.completed":
				r := ev.AsResponseCompleted().Response
				final = &r
			}
		}
		if err := st.Err(); err != nil {
			t.Fatalf("tool stream: %s", sdkErr(err))
		}
		checkArgs(t, "tool stream", []byte(args.String()))
		if done != "get_weather" || final == nil || final.Usage.OutputTokens <= 0 {
			t.Errorf("tool stream: call %q done, final %v", done, final)
		}
	})
	return 3
}
