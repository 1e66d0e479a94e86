package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	oaoption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// sdkRoute is one model route of TestSDK and the wire format its
// deployment speaks with the mock.
type sdkRoute struct{ name, format string }

var sdkRoutes = []sdkRoute{
	{"sdk-openai", "openai"},
	{"sdk-native", "openai"},
	{"sdk-azure", "azure"},
	{"sdk-anthropic", "anthropic"},
	{"sdk-gemini", "gemini"},
	{"sdk-bedrock", "bedrock"},
}

// TestSDK drives the gateway with the official OpenAI and Anthropic Go SDKs
// against deployments of every wire format (issue 6, acceptance 1), and
// checks failover and cooldowns with the SDKs' own retries off (acceptance
// 3). One mockllm serves the working deployments, a second one the failing
// ones, so that its request count is the number of attempts on them.
func TestSDK(t *testing.T) {
	good := mockLLM(t) // http://ADDR/v1
	goodRoot := strings.TrimSuffix(good, "/v1")
	bad := mockLLM(t)
	g := startGateway(t, t.TempDir(), "t", "--no-seed", "--cooldown", "1s")
	gw := "http://" + g.http

	g.ctl(t, "credential", "set", "mock", "--value", "mock-secret")
	g.ctl(t, "credential", "set", "aws", "--value", "AKID:SECRET")
	g.ctl(t, "model", "add", "sdk-openai", "--provider", "openai-compatible", "--base-url", good, "--upstream-model", "mock-model")
	g.ctl(t, "model", "add", "sdk-native", "--provider", "openai", "--base-url", good, "--upstream-model", "gpt-mock", "--credential", "mock")
	g.ctl(t, "model", "add", "sdk-azure", "--provider", "azure-openai", "--base-url", goodRoot, "--upstream-model", "my-gpt", "--credential", "mock")
	g.ctl(t, "model", "add", "sdk-anthropic", "--provider", "anthropic", "--base-url", good, "--upstream-model", "claude-mock", "--credential", "mock")
	g.ctl(t, "model", "add", "sdk-gemini", "--provider", "gemini", "--base-url", goodRoot+"/v1beta", "--upstream-model", "gemini-mock", "--credential", "mock")
	g.ctl(t, "model", "add", "sdk-bedrock", "--provider", "bedrock", "--base-url", goodRoot, "--option", "region=us-east-1",
		"--upstream-model", "anthropic.claude-mock", "--credential", "aws")
	_, secret := g.createKey(t, "--name", "sdk", "--models", "sdk-*")

	oa := openai.NewClient(oaoption.WithBaseURL(gw+"/v1"), oaoption.WithAPIKey(secret),
		oaoption.WithMaxRetries(0), oaoption.WithRequestTimeout(20*time.Second))
	an := anthropic.NewClient(anoption.WithBaseURL(gw), anoption.WithAPIKey(secret),
		anoption.WithMaxRetries(0), anoption.WithRequestTimeout(20*time.Second))

	for _, rt := range sdkRoutes {
		t.Run("OpenAI/"+rt.name, func(t *testing.T) {
			before := mockStats(t, good)
			n := sdkOpenAIChat(t, oa, rt.name)
			n += sdkOpenAIResponses(t, oa, rt.name)
			checkFormat(t, before, mockStats(t, good), rt.format, n)
		})
	}
	for _, rt := range sdkRoutes {
		t.Run("Anthropic/"+rt.name, func(t *testing.T) {
			before := mockStats(t, good)
			n := sdkAnthropic(t, an, rt.name)
			checkFormat(t, before, mockStats(t, good), rt.format, n)
		})
	}
	t.Run("Failover", func(t *testing.T) { sdkFailover(t, g, oa, good, bad) })
	t.Run("ModelTest", func(t *testing.T) {
		out := g.ctl(t, "model", "test", "sdk-anthropic")
		t.Logf("tollctl model test sdk-anthropic:\n%s", out)
		if !strings.Contains(out, "200 from deployment anthropic") {
			t.Errorf("tollctl model test sdk-anthropic did not print a 200 from the deployment anthropic:\n%s", out)
		}
		var res map[string]any
		out = g.ctl(t, "model", "test", "sdk-anthropic", "-o", "json")
		t.Logf("tollctl model test sdk-anthropic -o json:\n%s", out)
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("model test -o json: %v\n%s", err, out)
		}
		if res["deployment"] != "anthropic" || res["provider"] != "anthropic" || res["route"] != "sdk-anthropic" || res["status"] != 200.0 {
			t.Errorf("model test -o json: want status 200 from route sdk-anthropic, deployment and provider anthropic:\n%s", out)
		}
	})
}

// sdkCtx is the context of one SDK call.
func sdkCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// tinyPNG returns a valid 2×2 PNG, base64-encoded.
var tinyPNG = sync.OnceValue(func() string {
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{255, 0, 0, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
})

// weatherSchema is the parameters schema of the test tool: one required
// string, for which the mock supplies "mock".
var weatherSchema = map[string]any{
	"type":       "object",
	"properties": map[string]any{"city": map[string]any{"type": "string", "description": "the city"}},
	"required":   []string{"city"},
}

// checkArgs checks that a tool call's arguments are a JSON object whose
// city is "mock".
func checkArgs(t *testing.T, what string, args []byte) {
	t.Helper()
	var a struct {
		City string `json:"city"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.City != "mock" {
		t.Errorf("%s: tool arguments %s (%v), want {\"city\":\"mock\"}", what, args, err)
	}
}

func sdkErr(err error) string {
	var b strings.Builder
	b.WriteString(err.Error())
	var oe *openai.Error
	if errors.As(err, &oe) {
		fmt.Fprintf(&b, " [openai.Error status=%d raw=%s]", oe.StatusCode, oe.RawJSON())
	}
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		fmt.Fprintf(&b, " [anthropic.Error status=%d raw=%s]", ae.StatusCode, ae.RawJSON())
	}
	return b.String()
}

// sdkOpenAIChat runs chat completions through the OpenAI SDK: plain,
// streamed, a tool call (plain and streamed) and its result, and an
// image. It returns how many requests reached the mock.
func sdkOpenAIChat(t *testing.T, oa openai.Client, model string) int {
	n := 0
	t.Run("chat", func(t *testing.T) {
		n++
		var hr *http.Response
		c, err := oa.Chat.Completions.New(sdkCtx(t), openai.ChatCompletionNewParams{
			Model:    model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello there")},
		}, oaoption.WithResponseInto(&hr))
		if err != nil {
			t.Fatalf("chat: %s", sdkErr(err))
		}
		if len(c.Choices) != 1 || c.Choices[0].Message.Content == "" || c.Choices[0].FinishReason != "stop" {
			t.Errorf("chat: unexpected completion %s", c.RawJSON())
		}
		if c.Usage.PromptTokens <= 0 || c.Usage.CompletionTokens <= 0 || c.Usage.TotalTokens != c.Usage.PromptTokens+c.Usage.CompletionTokens {
			t.Errorf("chat: usage %+v in %s", c.Usage, c.RawJSON())
		}
		if hr == nil || hr.Header.Get("X-Tollgate-Deployment") == "" {
			t.Errorf("chat: no X-Tollgate-Deployment header")
		}
	})
	t.Run("stream", func(t *testing.T) {
		n++
		st := oa.Chat.Completions.NewStreaming(sdkCtx(t), openai.ChatCompletionNewParams{
			Model:         model,
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello there")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		defer st.Close()
		var acc openai.ChatCompletionAccumulator
		chunks := 0
		for st.Next() {
			chunks++
			if !acc.AddChunk(st.Current()) {
				t.Fatalf("stream: the accumulator refused chunk %d: %s", chunks, st.Current().RawJSON())
			}
		}
		if err := st.Err(); err != nil {
			t.Fatalf("stream: after %d chunks: %s", chunks, sdkErr(err))
		}
		if chunks < 2 || len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" || acc.Choices[0].FinishReason != "stop" {
			t.Errorf("stream: %d chunks accumulated to %+v", chunks, acc.Choices)
		}
		if acc.Usage.PromptTokens <= 0 || acc.Usage.CompletionTokens <= 0 {
			t.Errorf("stream: usage asked for but got %+v", acc.Usage)
		}
	})
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:        "get_weather",
		Description: openai.String("Current weather in a city"),
		Parameters:  weatherSchema,
	})}
	t.Run("tools", func(t *testing.T) {
		n += 2
		user := openai.UserMessage("What is the weather in Paris?")
		c, err := oa.Chat.Completions.New(sdkCtx(t), openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{user}, Tools: tools,
		})
		if err != nil {
			t.Fatalf("tool call: %s", sdkErr(err))
		}
		if len(c.Choices) != 1 || len(c.Choices[0].Message.ToolCalls) != 1 {
			t.Fatalf("tool call: no single tool call in %s", c.RawJSON())
		}
		msg := c.Choices[0].Message
		tc := msg.ToolCalls[0]
		if tc.ID == "" || tc.Type != "function" || tc.Function.Name != "get_weather" || c.Choices[0].FinishReason != "tool_calls" {
			t.Errorf("tool call: unexpected %s", c.RawJSON())
		}
		checkArgs(t, "tool call", []byte(tc.Function.Arguments))
		c, err = oa.Chat.Completions.New(sdkCtx(t), openai.ChatCompletionNewParams{
			Model: model, Tools: tools,
			Messages: []openai.ChatCompletionMessageParamUnion{user, msg.ToParam(), openai.ToolMessage("Sunny, 21°C", tc.ID)},
		})
		if err != nil {
			t.Fatalf("tool result: %s", sdkErr(err))
		}
		if len(c.Choices) != 1 || !strings.HasPrefix(c.Choices[0].Message.Content, "Tool result received") {
			t.Errorf("tool result: reply %s", c.RawJSON())
		}
	})
	t.Run("tools-stream", func(t *testing.T) {
		n++
		st := oa.Chat.Completions.NewStreaming(sdkCtx(t), openai.ChatCompletionNewParams{
			Model: model, Tools: tools,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")},
		})
		defer st.Close()
		var acc openai.ChatCompletionAccumulator
		var finished []openai.FinishedChatCompletionToolCall
		for st.Next() {
			if !acc.AddChunk(st.Current()) {
				t.Fatalf("tool stream: the accumulator refused %s", st.Current().RawJSON())
			}
			if tc, ok := acc.JustFinishedToolCall(); ok {
				finished = append(finished, tc)
			}
		}
		if err := st.Err(); err != nil {
			t.Fatalf("tool stream: %s", sdkErr(err))
		}
		if len(acc.Choices) != 1 || len(acc.Choices[0].Message.ToolCalls) != 1 || acc.Choices[0].FinishReason != "tool_calls" {
			t.Fatalf("tool stream: accumulated %+v", acc.Choices)
		}
		tc := acc.Choices[0].Message.ToolCalls[0]
		if tc.ID == "" || tc.Function.Name != "get_weather" {
			t.Errorf("tool stream: tool call %+v", tc)
		}
		checkArgs(t, "tool stream", []byte(tc.Function.Arguments))
		if len(finished) != 1 || finished[0].Name != "get_weather" {
			t.Errorf("tool stream: JustFinishedToolCall saw %+v", finished)
		}
	})
	t.Run("image", func(t *testing.T) {
		n++
		c, err := oa.Chat.Completions.New(sdkCtx(t), openai.ChatCompletionNewParams{
			Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart("What is in this picture?"),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64," + tinyPNG()}),
			})},
		})
		if err != nil {
			t.Fatalf("image: %s", sdkErr(err))
		}
		if len(c.Choices) != 1 || !strings.HasPrefix(c.Choices[0].Message.Content, "I see 1 image") {
			t.Errorf("image: reply %s", c.RawJSON())
		}
	})
	return n
}

// sdkOpenAIResponses runs the Responses API through the OpenAI SDK, plain
// and streamed. It returns how many requests reached the mock.
func sdkOpenAIResponses(t *testing.T, oa openai.Client, model string) int {
	params := responses.ResponseNewParams{
		Model: model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Write a haiku about gateways")},
	}
	t.Run("responses", func(t *testing.T) {
		r, err := oa.Responses.New(sdkCtx(t), params)
		if err != nil {
			t.Fatalf("responses: %s", sdkErr(err))
		}
		if r.OutputText() == "" || r.Status != "completed" {
			t.Errorf("responses: status %q, output text %q in %s", r.Status, r.OutputText(), r.RawJSON())
		}
		if r.Usage.InputTokens <= 0 || r.Usage.OutputTokens <= 0 {
			t.Errorf("responses: usage %+v", r.Usage)
		}
	})
	t.Run("responses-stream", func(t *testing.T) {
		st := oa.Responses.NewStreaming(sdkCtx(t), params)
		defer st.Close()
		var deltas strings.Builder
		var final *responses.Response
		var types []string
		for st.Next() {
			ev := st.Current()
			types = append(types, ev.Type)
			switch ev.Type {
			case "response.output_text.delta":
				deltas.WriteString(ev.Delta)
			case "response.completed":
				r := ev.AsResponseCompleted().Response
				final = &r
			}
		}
		if err := st.Err(); err != nil {
			t.Fatalf("responses stream: after events %v: %s", types, sdkErr(err))
		}
		if final == nil {
			t.Fatalf("responses stream: no response.completed among %v", types)
		}
		if deltas.Len() == 0 || final.OutputText() != deltas.String() {
			t.Errorf("responses stream: deltas %q, final output text %q (events %v)", deltas.String(), final.OutputText(), types)
		}
		if final.Usage.OutputTokens <= 0 {
			t.Errorf("responses stream: final usage %+v", final.Usage)
		}
	})
	return 2
}

// sdkAnthropic runs the Messages API through the Anthropic SDK: plain,
// streamed, tool use (plain and streamed) and its result, an image, and
// token counting. It returns how many requests reached the mock (count
// tokens may be answered by the gateway, so it is not counted).
func sdkAnthropic(t *testing.T, an anthropic.Client, model string) int {
	n := 0
	text := func(m *anthropic.Message) string {
		var b strings.Builder
		for _, c := range m.Content {
			if c.Type == "text" {
				b.WriteString(c.Text)
			}
		}
		return b.String()
	}
	hello := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello there"))}
	t.Run("messages", func(t *testing.T) {
		n++
		m, err := an.Messages.New(sdkCtx(t), anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256, Messages: hello})
		if err != nil {
			t.Fatalf("messages: %s", sdkErr(err))
		}
		if text(m) == "" || m.StopReason != anthropic.StopReasonEndTurn || m.Role != "assistant" || m.ID == "" {
			t.Errorf("messages: unexpected %s", m.RawJSON())
		}
		if m.Usage.InputTokens <= 0 || m.Usage.OutputTokens <= 0 {
			t.Errorf("messages: usage %+v in %s", m.Usage, m.RawJSON())
		}
	})
	t.Run("stream", func(t *testing.T) {
		n++
		st := an.Messages.NewStreaming(sdkCtx(t), anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256, Messages: hello})
		defer st.Close()
		var m anthropic.Message
		var types []string
		for st.Next() {
			ev := st.Current()
			types = append(types, ev.Type)
			if err := m.Accumulate(ev); err != nil {
				t.Fatalf("stream: Accumulate(%s): %v", ev.RawJSON(), err)
			}
		}
		if err := st.Err(); err != nil {
			t.Fatalf("stream: after events %v: %s", types, sdkErr(err))
		}
		if len(types) == 0 || types[0] != "message_start" || types[len(types)-1] != "message_stop" {
			t.Errorf("stream: events %v", types)
		}
		if text(&m) == "" || m.StopReason != anthropic.StopReasonEndTurn || m.Usage.OutputTokens <= 0 {
			t.Errorf("stream: accumulated text %q, stop %q, usage %+v (events %v)", text(&m), m.StopReason, m.Usage, types)
		}
	})
	tools := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
		Name:        "get_weather",
		Description: anthropic.String("Current weather in a city"),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: weatherSchema["properties"], Required: []string{"city"}},
	}}}
	ask := anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))
	toolUse := func(t *testing.T, what string, m *anthropic.Message) string {
		t.Helper()
		var uses []anthropic.ContentBlockUnion
		for _, c := range m.Content {
			if c.Type == "tool_use" {
				uses = append(uses, c)
			}
		}
		if len(uses) != 1 || uses[0].Name != "get_weather" || uses[0].ID == "" || m.StopReason != anthropic.StopReasonToolUse {
			t.Fatalf("%s: want one get_weather tool_use and stop_reason tool_use, got stop %q, content %+v", what, m.StopReason, m.Content)
		}
		checkArgs(t, what, uses[0].Input)
		return uses[0].ID
	}
	t.Run("tools", func(t *testing.T) {
		n += 2
		m, err := an.Messages.New(sdkCtx(t), anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256,
			Messages: []anthropic.MessageParam{ask}, Tools: tools})
		if err != nil {
			t.Fatalf("tool use: %s", sdkErr(err))
		}
		id := toolUse(t, "tool use", m)
		m2, err := an.Messages.New(sdkCtx(t), anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256, Tools: tools,
			Messages: []anthropic.MessageParam{ask, m.ToParam(),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock(id, "Sunny, 21°C", false))}})
		if err != nil {
			t.Fatalf("tool result: %s", sdkErr(err))
		}
		if !strings.HasPrefix(text(m2), "Tool result received") {
			t.Errorf("tool result: reply %s", m2.RawJSON())
		}
	})
	t.Run("tools-stream", func(t *testing.T) {
		n++
		st := an.Messages.NewStreaming(sdkCtx(t), anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256,
			Messages: []anthropic.MessageParam{ask}, Tools: tools})
		defer st.Close()
		var m anthropic.Message
		for st.Next() {
			if err := m.Accumulate(st.Current()); err != nil {
				t.Fatalf("tool stream: Accumulate(%s): %v", st.Current().RawJSON(), err)
			}
		}
		if err := st.Err(); err != nil {
			t.Fatalf("tool stream: %s", sdkErr(err))
		}
		toolUse(t, "tool stream", &m)
	})
	t.Run("image", func(t *testing.T) {
		n++
		m, err := an.Messages.New(sdkCtx(t), anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(
				anthropic.NewImageBlockBase64("image/png", tinyPNG()),
				anthropic.NewTextBlock("What is in this picture?"))}})
		if err != nil {
			t.Fatalf("image: %s", sdkErr(err))
		}
		if !strings.HasPrefix(text(m), "I see 1 image") {
			t.Errorf("image: reply %s", m.RawJSON())
		}
	})
	t.Run("count_tokens", func(t *testing.T) {
		c, err := an.Messages.CountTokens(sdkCtx(t), anthropic.MessageCountTokensParams{Model: anthropic.Model(model),
			Messages: []anthropic.MessageParam{ask}, Tools: []anthropic.MessageCountTokensToolUnionParam{{OfTool: tools[0].OfTool}}})
		if err != nil {
			t.Fatalf("count tokens: %s", sdkErr(err))
		}
		if c.InputTokens <= 0 {
			t.Errorf("count tokens: %s", c.RawJSON())
		}
	})
	return n
}

// mockStats reads a mockllm's counters; base is its API root (…/v1).
func mockStats(t testing.TB, base string) mockCounters {
	t.Helper()
	resp, err := client.Get(strings.TrimSuffix(base, "/v1") + "/mock/stats")
	if err != nil {
		t.Fatalf("mock stats: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var s mockCounters
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("mock stats %s: %v", b, err)
	}
	return s
}

type mockCounters struct {
	Requests int64            `json:"requests"`
	ByFormat map[string]int64 `json:"by_format"`
}

// checkFormat checks that the n requests between two snapshots of the
// mock's counters all arrived in the wire format want.
func checkFormat(t *testing.T, before, after mockCounters, want string, n int) {
	t.Helper()
	if t.Failed() {
		return // the requests that failed may not have reached the mock
	}
	for f, c := range after.ByFormat {
		d := c - before.ByFormat[f]
		switch {
		case f == want && d < int64(n):
			t.Errorf("mock saw %d %s requests, want at least %d (before %v, after %v)", d, f, n, before.ByFormat, after.ByFormat)
		case f != want && d != 0:
			t.Errorf("mock saw %d requests in the %s format, want only %s (before %v, after %v)", d, f, want, before.ByFormat, after.ByFormat)
		}
	}
}

// sdkFailover checks failover with the SDK's own retries off: a route
// whose priority-0 deployment fails in one of several ways and whose
// priority-1 deployment works serves every request; the failing
// deployment cools down after its first failure (the bad mock sees
// almost none of the requests); once it works again it serves again
// after its cooldown.
func sdkFailover(t *testing.T, g *gateway, oa openai.Client, good, bad string) {
	cases := []struct{ name, upstream string }{
		{"500", "m?status=500"},
		{"429", "m?status=429"},
		{"reset", "m?fault=reset"},
		{"hang", "m?fault=hang"},
	}
	for _, c := range cases {
		route := "sdk-failover-" + c.name
		g.ctl(t, "model", "add", route, "--deployment", "primary", "--provider", "openai-compatible", "--base-url", bad,
			"--upstream-model", c.upstream, "--upstream-timeout", "300ms")
		g.ctl(t, "model", "add", route, "--deployment", "backup", "--priority", "1", "--provider", "openai-compatible",
			"--base-url", good, "--upstream-model", "mock-model")
	}
	// A route whose only deployment fails, with a fallback route.
	g.ctl(t, "model", "add", "sdk-backup", "--deployment", "backup-route", "--provider", "openai-compatible", "--base-url", good, "--upstream-model", "mock-model")
	g.ctl(t, "model", "add", "sdk-failover-fb", "--deployment", "primary", "--provider", "openai-compatible", "--base-url", bad, "--upstream-model", "m?status=500")
	g.ctl(t, "model", "route", "sdk-failover-fb", "--fallback", "sdk-backup")

	const requests = 20
	// send makes one chat request and returns the deployment that served it
	// ("" and the error on failure).
	send := func(t *testing.T, model string) (string, error) {
		var hr *http.Response
		c, err := oa.Chat.Completions.New(sdkCtx(t), openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		}, oaoption.WithResponseInto(&hr))
		if err != nil {
			return "", err
		}
		if len(c.Choices) != 1 || c.Choices[0].Message.Content == "" {
			return "", fmt.Errorf("empty completion %s", c.RawJSON())
		}
		return hr.Header.Get("X-Tollgate-Deployment"), nil
	}
	burst := func(t *testing.T, route string) (served map[string]int, hits int64, took time.Duration) {
		served = map[string]int{}
		before := mockStats(t, bad).Requests
		start := time.Now()
		var fails []string
		for i := range requests {
			dep, err := send(t, route)
			if err != nil {
				fails = append(fails, fmt.Sprintf("request %d: %s", i, sdkErr(err)))
				continue
			}
			served[dep]++
		}
		took = time.Since(start)
		hits = mockStats(t, bad).Requests - before
		if len(fails) > 0 {
			t.Errorf("%s: %d of %d requests failed:\n%s", route, len(fails), requests, strings.Join(fails, "\n"))
		}
		t.Logf("%s: %d requests in %v, served by %v, %d attempts reached the failing upstream", route, requests, took, served, hits)
		return served, hits, took
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			route := "sdk-failover-" + c.name
			start := time.Now() // the cooldown starts after this and lasts at least 1s
			served, hits, took := burst(t, route)
			if served["backup"] != requests {
				t.Errorf("%s: served by %v, want all %d by backup", route, served, requests)
			}
			// One attempt before the cooldown, and one probe per cooldown
			// (1s, then 2s, ...) that ended during the burst.
			if limit := int64(1 + took/time.Second); hits < 1 || hits > limit {
				t.Errorf("%s: the failing deployment got %d attempts in %v, want 1..%d (is it cooling down?)", route, hits, took, limit)
			}

			// Fix the primary while it cools down: until the cooldown ends
			// the backup serves; then one request probes the primary and
			// from then on it serves.
			g.ctl(t, "model", "update", route, "--deployment", "primary", "--upstream-model", "ok")
			before := mockStats(t, bad).Requests
			dep, err := send(t, route)
			if err != nil {
				t.Fatalf("%s after the fix: %s", route, sdkErr(err))
			}
			if at := time.Since(start); at < time.Second {
				if n := mockStats(t, bad).Requests - before; dep != "backup" || n != 0 {
					t.Errorf("%s: %v after the first failure, within the 1s cooldown, the request was served by %q and %d attempts reached the primary; want backup and none",
						route, at, dep, n)
				}
			} else {
				t.Logf("%s: the fix took until %v after the burst began; that the backup serves during the cooldown is not checked", route, at)
			}
			deadline := time.Now().Add(10 * time.Second)
			for dep != "primary" && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
				if dep, err = send(t, route); err != nil {
					t.Fatalf("%s during recovery: %s", route, sdkErr(err))
				}
			}
			at := time.Since(start)
			if dep != "primary" {
				t.Fatalf("%s: the fixed primary did not serve again within 10s (served by %q)", route, dep)
			}
			t.Logf("%s: the fixed primary serves again %v after the burst began", route, at.Round(time.Millisecond))
			if at < time.Second {
				t.Errorf("%s: the primary served again %v after it failed, before its 1s cooldown ended", route, at)
			}
			for range 3 {
				if dep, err := send(t, route); err != nil || dep != "primary" {
					t.Errorf("%s after recovery: served by %q (%v), want primary", route, dep, err)
				}
			}
		})
	}
	// A route whose only deployment fails, with a fallback route: every
	// request is served by the fallback, and the failing deployment cools
	// down as well (it is not tried again, and retried, on every request).
	t.Run("fallback-route", func(t *testing.T) {
		served, hits, took := burst(t, "sdk-failover-fb")
		if served["backup-route"] != requests {
			t.Errorf("sdk-failover-fb: served by %v, want all %d by sdk-backup's backup-route", served, requests)
		}
		if limit := int64(3 + took/time.Second); hits > limit {
			t.Errorf("sdk-failover-fb: its only deployment, failing, got %d attempts for %d requests in %v, want at most %d: "+
				"it should cool down after its first failure, the fallback route serving meanwhile", hits, requests, took, limit)
		}
	})
}
