package proxy_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/routing"
)

// providerDeps returns a deployment of each non-OpenAI provider kind on
// the mock, by kind.
func providerDeps(url string) map[string]*pb.Deployment {
	return map[string]*pb.Deployment{
		routing.ProviderAnthropic: {Id: uniq("anthropic"), Provider: routing.ProviderAnthropic, BaseUrl: url + "/v1",
			UpstreamModel: "claude-mock", Credential: "cred-a"},
		routing.ProviderGemini: {Id: uniq("gemini"), Provider: routing.ProviderGemini, BaseUrl: url + "/v1beta",
			UpstreamModel: "gemini-mock", Credential: "cred-g"},
		routing.ProviderBedrock: {Id: uniq("bedrock"), Provider: routing.ProviderBedrock, BaseUrl: url,
			UpstreamModel: "anthropic.claude-3-haiku-20240307-v1:0", Credential: "cred-b",
			Options: map[string]string{"region": "us-east-1"}},
		"vertex": {Id: uniq("vertex"), Provider: routing.ProviderGemini, BaseUrl: url + "/v1",
			UpstreamModel: "gemini-mock", Credential: "cred-g", Options: map[string]string{"vertex_project": "p1", "vertex_location": "us-central1"}},
	}
}

const toolsMember = `"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather of a city",` +
	`"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`

// An OpenAI chat client reaches every provider kind: plain, streamed,
// tool calls (also streamed) and images, with usage recorded, and the
// upstream called in its own format.
func TestChatClientEveryProvider(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{})
	setCredential(t, "cred-a", "sk-ant")
	setCredential(t, "cred-g", "g-key")
	setCredential(t, "cred-b", "AKIDEXAMPLE:wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{MaxAttempts: 1})
	for kind, d := range providerDeps(url) {
		t.Run(kind, func(t *testing.T) {
			route := newRoute(t, kind, d)
			format := map[string]string{"anthropic": "anthropic", "gemini": "gemini", "bedrock": "bedrock", "vertex": "vertex"}[kind]
			before := ms.Stats().ByFormat[format]

			r := g.post(t, "/v1/chat/completions", secret, chatBody(route))
			var resp struct {
				Object  string
				Choices []struct {
					Message struct {
						Content   *string
						ToolCalls []struct {
							ID       string
							Function struct{ Name, Arguments string }
						} `json:"tool_calls"`
					}
					FinishReason string `json:"finish_reason"`
				}
				Usage struct {
					PromptTokens     int64 `json:"prompt_tokens"`
					CompletionTokens int64 `json:"completion_tokens"`
				}
			}
			if r.status != 200 || json.Unmarshal(r.body, &resp) != nil || resp.Object != "chat.completion" || len(resp.Choices) != 1 ||
				resp.Choices[0].Message.Content == nil || *resp.Choices[0].Message.Content == "" || resp.Usage.CompletionTokens == 0 {
				t.Fatalf("plain: %d %s", r.status, r.body)
			}
			if rec := g.rec.of(t, r); !rec.Usage.Present || rec.Usage.CompletionTokens != resp.Usage.CompletionTokens || rec.Deployment != d.Id {
				t.Errorf("Record %+v", rec)
			}
			if got := ms.Stats().ByFormat[format] - before; got != 1 {
				t.Errorf("the mock saw %d %s-format requests, want 1", got, format)
			}

			// Tools: the mock calls the first tool with {"city":"mock"}.
			r = g.post(t, "/v1/chat/completions", secret, chatBody(route, toolsMember))
			resp.Choices = nil
			if r.status != 200 || json.Unmarshal(r.body, &resp) != nil || len(resp.Choices) != 1 ||
				len(resp.Choices[0].Message.ToolCalls) != 1 || resp.Choices[0].FinishReason != "tool_calls" {
				t.Fatalf("tools: %d %s", r.status, r.body)
			}
			tc := resp.Choices[0].Message.ToolCalls[0]
			if tc.Function.Name != "get_weather" || tc.ID == "" || !json.Valid([]byte(tc.Function.Arguments)) ||
				!strings.Contains(tc.Function.Arguments, `"mock"`) {
				t.Errorf("tool call %+v", tc)
			}
			// The tool result goes back.
			follow := `{"model":"` + route + `","messages":[{"role":"user","content":"Weather in Paris?"},` +
				`{"role":"assistant","content":null,"tool_calls":[{"id":"` + tc.ID + `","type":"function","function":{"name":"get_weather","arguments":` +
				strconvQuote(tc.Function.Arguments) + `}}]},{"role":"tool","tool_call_id":"` + tc.ID + `","content":"sunny, 21C"}],` + toolsMember + `}`
			r = g.post(t, "/v1/chat/completions", secret, follow)
			if r.status != 200 || !strings.Contains(string(r.body), "Tool result received: sunny, 21C") {
				t.Errorf("tool result: %d %s", r.status, r.body)
			}

			// An image survives translation.
			img := `{"model":"` + route + `","messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},` +
				`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="}}]}]}`
			r = g.post(t, "/v1/chat/completions", secret, img)
			if r.status != 200 || !strings.Contains(string(r.body), "I see 1 image") {
				t.Errorf("image: %d %s", r.status, r.body)
			}

			// The legacy completions API reaches it too.
			r = g.post(t, "/v1/completions", secret, `{"model":"`+route+`","prompt":"Say hi","max_tokens":30}`)
			var cmpl struct {
				Object  string
				Choices []struct{ Text string }
				Usage   struct {
					CompletionTokens int64 `json:"completion_tokens"`
				}
			}
			if r.status != 200 || json.Unmarshal(r.body, &cmpl) != nil || cmpl.Object != "text_completion" || len(cmpl.Choices) != 1 ||
				cmpl.Choices[0].Text == "" || cmpl.Usage.CompletionTokens == 0 {
				t.Errorf("completions: %d %s", r.status, r.body)
			}
			r = g.post(t, "/v1/completions", secret, `{"model":"`+route+`","prompt":"Say hi","max_tokens":30,"stream":true}`)
			if body := string(r.body); r.status != 200 || !strings.Contains(body, `"object":"text_completion"`) ||
				!strings.HasSuffix(strings.TrimSpace(body), "data: [DONE]") || strings.Contains(body, `"usage"`) {
				t.Errorf("completions stream: %d %s", r.status, body)
			}

			// Streamed, with a streamed tool call; usage only when asked.
			r = g.post(t, "/v1/chat/completions", secret, chatBody(route, `"stream":true,"stream_options":{"include_usage":true}`, toolsMember))
			body := string(r.body)
			if r.status != 200 || !strings.HasSuffix(strings.TrimSpace(body), "data: [DONE]") || !strings.Contains(body, `"tool_calls"`) ||
				!strings.Contains(body, `"finish_reason":"tool_calls"`) || !strings.Contains(body, `"completion_tokens"`) {
				t.Errorf("stream: %d %s", r.status, body)
			}
			args := ""
			for _, line := range strings.Split(body, "\n") {
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok || data == "[DONE]" {
					continue
				}
				var c struct {
					Choices []struct {
						Delta struct {
							ToolCalls []struct{ Function struct{ Arguments string } } `json:"tool_calls"`
						}
					}
				}
				if err := json.Unmarshal([]byte(data), &c); err != nil {
					t.Fatalf("chunk %q: %v", data, err)
				}
				for _, ch := range c.Choices {
					for _, tc := range ch.Delta.ToolCalls {
						args += tc.Function.Arguments
					}
				}
			}
			if !json.Valid([]byte(args)) || !strings.Contains(args, `"mock"`) {
				t.Errorf("streamed arguments %q", args)
			}
			if rec := g.rec.of(t, r); !rec.Usage.Present || !rec.Stream || rec.Status != 200 {
				t.Errorf("stream Record %+v", rec)
			}
			r = g.post(t, "/v1/chat/completions", secret, chatBody(route, `"stream":true`))
			if strings.Contains(string(r.body), `"usage"`) {
				t.Errorf("usage sent to a client that did not ask: %s", r.body)
			}
		})
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// An Anthropic client reaches an Anthropic deployment by pass-through
// (its fields arrive untouched) and a Gemini one by translation.
func TestMessagesClient(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{})
	setCredential(t, "cred-a", "sk-ant")
	setCredential(t, "cred-g", "g-key")
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{MaxAttempts: 1})
	deps := providerDeps(url)
	native := newRoute(t, "native", deps[routing.ProviderAnthropic])
	body := `{"model":"` + native + `","max_tokens":64,"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],` +
		`"messages":[{"role":"user","content":"Hi"}]}`
	r := g.do(t, http.MethodPost, "/v1/messages", "", body, "X-Api-Key", secret, "Anthropic-Version", "2023-06-01", "Anthropic-Beta", "tools-2024-04-04")
	if r.status != 200 || !strings.Contains(string(r.body), `"type":"message"`) {
		t.Fatalf("native: %d %s", r.status, r.body)
	}
	st := ms.Stats()
	if !strings.Contains(string(st.LastBody), `"cache_control"`) || !strings.Contains(string(st.LastBody), `"claude-mock"`) {
		t.Errorf("pass-through lost fields or the model rename: %s", st.LastBody)
	}
	if st.LastAuthHeader != "x-api-key" || st.LastAuthorization != "sk-ant" {
		t.Errorf("upstream auth %s=%q", st.LastAuthHeader, st.LastAuthorization)
	}
	if rec := g.rec.of(t, r); !rec.Usage.Present || rec.Usage.CompletionTokens == 0 {
		t.Errorf("Record %+v", rec)
	}
	r = g.do(t, http.MethodPost, "/v1/messages", "", strings.Replace(body, `"max_tokens":64`, `"max_tokens":64,"stream":true`, 1), "X-Api-Key", secret)
	if r.status != 200 || !strings.Contains(string(r.body), "event: message_stop") {
		t.Fatalf("native stream: %d %s", r.status, r.body)
	}
	if rec := g.rec.of(t, r); !rec.Usage.Present || rec.Usage.CompletionTokens == 0 || rec.Usage.PromptTokens == 0 {
		t.Errorf("native stream Record %+v", rec)
	}

	gem := newRoute(t, "gem", deps[routing.ProviderGemini])
	tools := `"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]`
	r = g.do(t, http.MethodPost, "/v1/messages", "", `{"model":"`+gem+`","max_tokens":64,"messages":[{"role":"user","content":"Weather?"}],`+tools+`}`,
		"X-Api-Key", secret)
	if r.status != 200 || !strings.Contains(string(r.body), `"type":"tool_use"`) || !strings.Contains(string(r.body), `"stop_reason":"tool_use"`) {
		t.Fatalf("gemini tool use: %d %s", r.status, r.body)
	}
	r = g.do(t, http.MethodPost, "/v1/messages", "", `{"model":"`+gem+`","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Weather?"}],`+tools+`}`,
		"X-Api-Key", secret)
	if r.status != 200 || !strings.Contains(string(r.body), `"input_json_delta"`) || !strings.Contains(string(r.body), "event: message_stop") {
		t.Fatalf("gemini streamed tool use: %d %s", r.status, r.body)
	}
	// A provider error comes back in Anthropic's shape.
	bad := newRoute(t, "gembad", &pb.Deployment{Id: uniq("gemini"), Provider: routing.ProviderGemini, BaseUrl: url + "/v1beta",
		UpstreamModel: "gemini-mock?status=429", Credential: "cred-g"})
	r = g.do(t, http.MethodPost, "/v1/messages", "", `{"model":"`+bad+`","max_tokens":64,"messages":[{"role":"user","content":"x"}]}`, "X-Api-Key", secret)
	wantAnthropicError(t, r, 429, "rate_limit_error")
}

// Tool names over 64 bytes (Claude Code's MCP tools) reach an OpenAI-format
// deployment shortened and come back to the client as sent.
func TestLongToolNames(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{})
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{MaxAttempts: 1})
	route := newRoute(t, "longtool", dep(uniq("dep"), url, "ok"))
	long := "mcp__" + strings.Repeat("a_really_long_server_name_", 3) + "__read_file"
	tools := `"tools":[{"name":"` + long + `","description":"read","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}]`
	for _, stream := range []string{"false", "true"} {
		r := g.do(t, http.MethodPost, "/v1/messages", "", `{"model":"`+route+`","max_tokens":64,"stream":`+stream+
			`,"messages":[{"role":"user","content":"read it"}],`+tools+`}`, "X-Api-Key", secret)
		if r.status != 200 || !strings.Contains(string(r.body), `"name":"`+long+`"`) {
			t.Errorf("stream=%s: %d %s", stream, r.status, r.body)
		}
		if sent := string(ms.Stats().LastBody); strings.Contains(sent, long) || !strings.Contains(sent, long[:40]) {
			t.Errorf("stream=%s: the upstream got %s", stream, sent)
		}
	}
}
