package mock

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

func respClient(ts string) openai.Client {
	return openai.NewClient(option.WithBaseURL(ts+"/v1"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
}

var respWeatherTool = responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
	Name: "get_weather", Parameters: map[string]any{"type": "object",
		"properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}}

// The official SDK reads the mock's Response objects: text, a tool call,
// the answer to a tool result, and usage.
func TestResponsesPlainWithTheOpenAISDK(t *testing.T) {
	s, ts := start(t, Options{})
	c := respClient(ts.URL)
	ctx := context.Background()

	r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-x", Instructions: openai.String("Be brief."),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.OutputText(), "Hello from mockllm.") || r.Status != "completed" || r.Usage.InputTokens == 0 || r.Usage.OutputTokens == 0 {
		t.Errorf("response = %q %s %+v", r.OutputText(), r.Status, r.Usage)
	}
	if st := s.Stats(); st.ByPath["/v1/responses"] != 1 || st.ByFormat["openai"] != 1 || st.LastAuthorization != "Bearer sk-test" {
		t.Errorf("stats = %+v", st)
	}

	r, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-x",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather?")}, Tools: []responses.ToolUnionParam{respWeatherTool}})
	if err != nil {
		t.Fatal(err)
	}
	call := r.Output[len(r.Output)-1]
	if call.Type != "function_call" || call.Name != "get_weather" || call.Arguments.OfString != `{"city":"mock"}` || call.CallID == "" {
		t.Fatalf("output = %+v", r.Output)
	}

	input := responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("Weather?", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfFunctionCall(call.Arguments.OfString, call.CallID, call.Name),
		{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: openai.String(call.CallID),
			Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("sunny, 21 degrees")}}},
	}
	r, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-x",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}, Tools: []responses.ToolUnionParam{respWeatherTool}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.OutputText(), "Tool result received: sunny, 21 degrees") {
		t.Errorf("after the tool result: %q", r.OutputText())
	}

	r, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-x", MaxOutputTokens: openai.Int(3),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "incomplete" || r.IncompleteDetails.Reason != "max_output_tokens" || len(r.OutputText()) != 12 {
		t.Errorf("cut answer: %s %+v %q", r.Status, r.IncompleteDetails, r.OutputText())
	}
}

// A stream has the API's event sequence, which the SDK reads; a call of a
// namespace's function names the namespace.
func TestResponsesStreamEventSequence(t *testing.T) {
	_, ts := start(t, Options{Chunks: 3})
	c := respClient(ts.URL)
	ctx := context.Background()

	stream := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "gpt-x",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hi")}})
	var types []string
	var text strings.Builder
	var final responses.Response
	seq := int64(-1)
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if ev.SequenceNumber != seq+1 {
			t.Errorf("sequence_number %d after %d", ev.SequenceNumber, seq)
		}
		seq = ev.SequenceNumber
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := "response.created response.in_progress response.output_item.added response.content_part.added " +
		"response.output_text.delta response.output_text.delta response.output_text.delta response.output_text.done " +
		"response.content_part.done response.output_item.done response.completed"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("events:\n%s\nwant\n%s", got, want)
	}
	if text.String() != "Hello from mockllm." || final.OutputText() != text.String() || final.Usage.OutputTokens != 3 {
		t.Errorf("text %q, final %q, usage %+v", text.String(), final.OutputText(), final.Usage)
	}

	body := `{"model":"gpt-x","stream":true,"input":"go","tools":[{"type":"namespace","name":"multi_agent_v1","description":"d",
		"tools":[{"type":"function","name":"spawn_agent","parameters":{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}}]}]}`
	status, _, b := call(t, ts, "/v1/responses", body)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	evs, err := events(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	var args strings.Builder
	var sawDone, sawCompleted bool
	for _, data := range evs {
		var ev struct {
			Type     string
			Delta    string
			Item     *respItem
			Response *respObject
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		switch ev.Type {
		case "response.output_text.delta", "response.output_item.added":
			if ev.Item != nil && ev.Item.Type != "function_call" {
				t.Errorf("a %s item before the call", ev.Item.Type)
			}
		case "response.function_call_arguments.delta":
			args.WriteString(ev.Delta)
		case "response.output_item.done":
			sawDone = ev.Item.Name == "spawn_agent" && ev.Item.Namespace == "multi_agent_v1" && *ev.Item.Arguments == `{"message":"mock"}`
		case "response.completed":
			sawCompleted = len(ev.Response.Output) == 1 && ev.Response.Usage != nil
		}
	}
	if args.String() != `{"message":"mock"}` || !sawDone || !sawCompleted {
		t.Errorf("args %q, done %v, completed %v:\n%s", args.String(), sawDone, sawCompleted, b)
	}
}

// Azure OpenAI's paths: the deployment API needs api-version and takes
// the deployment as the model; the v1 API takes the model from the body.
// The key comes in api-key.
func TestAzurePaths(t *testing.T) {
	s, ts := start(t, Options{})
	chat := `{"messages":[{"role":"user","content":"Hi"}]}`
	cases := []struct {
		name, path, body string
		status           int
		want             string
	}{
		{"deployment chat", "/openai/deployments/my-gpt/chat/completions?api-version=2024-10-21", chat, 200, `"model":"my-gpt"`},
		{"deployment chat without api-version", "/openai/deployments/my-gpt/chat/completions", chat, 404, "api-version"},
		{"deployment embeddings", "/openai/deployments/emb/embeddings?api-version=2024-10-21", `{"input":"x"}`, 200, `"model":"emb"`},
		{"v1 responses", "/openai/v1/responses", `{"model":"my-gpt","input":"Hi"}`, 200, `"object":"response"`},
		{"preview responses", "/openai/responses?api-version=2025-04-01-preview", `{"model":"my-gpt","input":"Hi"}`, 200, `"object":"response"`},
		{"preview responses without api-version", "/openai/responses", `{"model":"my-gpt","input":"Hi"}`, 404, "api-version"},
		{"v1 chat", "/openai/v1/chat/completions", `{"model":"my-gpt","messages":[{"role":"user","content":"Hi"}]}`, 200, `"chat.completion"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, _, b := call(t, ts, c.path, c.body, "api-key", "azure-key")
			if status != c.status || !strings.Contains(string(b), c.want) {
				t.Errorf("status %d, body %s; want %d with %s", status, b, c.status, c.want)
			}
			if st := s.Stats(); st.LastAuthorization != "azure-key" || st.LastAuthHeader != "api-key" {
				t.Errorf("auth = %q from %q", st.LastAuthorization, st.LastAuthHeader)
			}
		})
	}
	if st := s.Stats(); st.ByFormat["azure"] != int64(len(cases)) || st.ByPath["/openai/deployments/{deployment}/chat/completions"] != 2 {
		t.Errorf("stats = %+v", st)
	}
}
