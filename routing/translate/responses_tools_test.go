package translate

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// codexRequest is Codex CLI 0.171.0's first request with its default
// configuration (recorded, texts shortened): function tools, the
// multi_agent_v1 namespace of five functions, and web_search.
func codexRequest(t *testing.T) []byte {
	t.Helper()
	return respRead(t, filepath.Join(respTestdata, "codex_0.171.0.json"))
}

func TestResponsesCodexRequestFlattensNamespaceAndDropsHostedTools(t *testing.T) {
	req := respDecode(t, codexRequest(t))
	var names []string
	for _, tl := range req.Tools {
		names = append(names, tl.Function.Name)
	}
	for _, want := range []string{"exec_command", "multi_agent_v1__spawn_agent", "multi_agent_v1__close_agent", "update_goal"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools = %v, want %s among them", names, want)
		}
	}
	if len(req.Tools) != 12 {
		t.Errorf("%d tools, want 12 (7 functions, 5 of the namespace)", len(req.Tools))
	}
	if !slices.Equal(req.DroppedTools, []string{"web_search"}) {
		t.Errorf("dropped = %v, want [web_search]", req.DroppedTools)
	}
	if got := req.ToolNamespaces["multi_agent_v1__spawn_agent"]; got != (NamespacedName{"multi_agent_v1", "spawn_agent"}) {
		t.Errorf("namespace map = %v", req.ToolNamespaces)
	}
	for _, tl := range req.Tools {
		if tl.Function.Name == "multi_agent_v1__spawn_agent" && !strings.Contains(tl.Function.Description, "\n\n") {
			t.Errorf("the namespace's description is not carried: %q", tl.Function.Description)
		}
	}
	// Every translated upstream takes it.
	for _, p := range []struct {
		prov Provider
		t    *Target
	}{
		{OpenAIChat, &Target{Provider: "openai-compatible", BaseURL: "http://127.0.0.1:1/v1", UpstreamModel: "m"}},
		{Anthropic, &Target{Provider: "anthropic", BaseURL: "http://127.0.0.1:1/v1", UpstreamModel: "m", Credential: "k"}},
		{Gemini, &Target{Provider: "gemini", BaseURL: "http://127.0.0.1:1/v1beta", UpstreamModel: "m", Credential: "k"}},
		{Bedrock, &Target{Provider: "bedrock", BaseURL: "http://127.0.0.1:1", UpstreamModel: "m", Credential: "A:B", Options: map[string]string{"region": "us-east-1"}}},
	} {
		if _, err := p.prov.NewRequest(req, p.t, req.Stream); err != nil {
			t.Errorf("%s refused Codex's request: %v", p.t.Provider, err)
		}
	}
}

func TestResponsesNamespacedCallGoesBackUnderItsOwnName(t *testing.T) {
	body := []byte(`{"model":"m","input":[{"role":"user","content":"go"},
		{"type":"function_call","call_id":"c0","namespace":"multi_agent_v1","name":"spawn_agent","arguments":"{}"},
		{"type":"function_call_output","call_id":"c0","output":"ok"}],
		"tools":[{"type":"namespace","name":"multi_agent_v1","description":"Agents.","tools":[
			{"type":"function","name":"spawn_agent","parameters":{"type":"object"}}]},
			{"type":"function","name":"exec_command","parameters":{"type":"object"}}],
		"tool_choice":{"type":"function","namespace":"multi_agent_v1","name":"spawn_agent"}}`)
	req := respDecode(t, body)
	if got := req.Messages[1].ToolCalls[0].Function.Name; got != "multi_agent_v1__spawn_agent" {
		t.Errorf("replayed call name = %q, want the flattened name", got)
	}
	if req.ToolChoice == nil || req.ToolChoice.Function != "multi_agent_v1__spawn_agent" {
		t.Errorf("tool_choice = %+v", req.ToolChoice)
	}
	in := ResponsesInboundFor(req)
	calls := []ToolCall{
		{ID: "call_1", Type: "function", Function: FunctionCall{Name: "multi_agent_v1__spawn_agent", Arguments: `{"message":"x"}`}},
		{ID: "call_2", Type: "function", Function: FunctionCall{Name: "exec_command", Arguments: `{}`}},
	}
	out, err := in.EncodeResponse(&ChatResponse{ID: "chatcmpl-1", Model: "m", Choices: []Choice{{
		Message: Message{Role: "assistant", Content: Content{Null: true}, ToolCalls: calls}, FinishReason: FinishToolCalls}}})
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Output []rsItemNS `json:"output"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	want := []rsItemNS{{Name: "spawn_agent", Namespace: "multi_agent_v1"}, {Name: "exec_command"}}
	if len(resp.Output) != 2 || resp.Output[0] != want[0] || resp.Output[1] != want[1] {
		t.Errorf("output = %+v, want %+v", resp.Output, want)
	}
	if strings.Contains(string(out), `"namespace":""`) {
		t.Errorf("an empty namespace is written: %s", out)
	}

	// The same in a stream: every event that shows the item names it so.
	var w respWriter
	enc := in.NewStreamEncoder(&w, "m")
	i0 := 0
	for _, c := range []*Chunk{rsChunk(ToolCall{Index: &i0, ID: "call_1", Type: "function",
		Function: FunctionCall{Name: "multi_agent_v1__spawn_agent", Arguments: `{"message":"x"}`}}), rsFinish(FinishToolCalls)} {
		if err := enc.WriteChunk(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(nil); err != nil {
		t.Fatal(err)
	}
	events := respParseEvents(t, w.writes)
	seen := 0
	for _, ev := range events {
		var e struct {
			Name     string          `json:"name"`
			Item     *rsItemNS       `json:"item"`
			Response json.RawMessage `json:"response"`
		}
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			t.Fatal(err)
		}
		if e.Item != nil {
			seen++
			if *e.Item != want[0] {
				t.Errorf("%s item = %+v, want %+v", ev.Event, *e.Item, want[0])
			}
		}
		if ev.Event == "response.function_call_arguments.done" && e.Name != "spawn_agent" {
			t.Errorf("arguments.done name = %q", e.Name)
		}
		if ev.Event == "response.completed" && !strings.Contains(string(e.Response), `"name":"spawn_agent","namespace":"multi_agent_v1"`) {
			t.Errorf("completed response = %s", e.Response)
		}
	}
	if seen != 2 {
		t.Errorf("%d item events, want output_item.added and .done", seen)
	}
}

// rsItemNS is the name of a function_call item.
type rsItemNS struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

func TestResponsesToolRefusalsThatKeepMeaning(t *testing.T) {
	cases := []struct{ name, tools, param string }{
		{"custom tool in a namespace", `[{"type":"namespace","name":"ns","tools":[{"type":"custom","name":"x"}]}]`, "tools[0].tools[0].type"},
		{"namespace without name", `[{"type":"namespace","tools":[{"type":"function","name":"x"}]}]`, "tools[0].name"},
		{"clash with a flattened name", `[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"x"}]},{"type":"function","name":"ns__x"}]`, "tools[1].name"},
		{"local_shell", `[{"type":"local_shell"}]`, "tools[0].type"},
		{"computer use", `[{"type":"computer_use_preview","display_width":1,"display_height":1,"environment":"linux"}]`, "tools[0].type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ResponsesInbound.DecodeRequest([]byte(`{"model":"m","input":"hi","tools":` + c.tools + `}`))
			e, ok := err.(*Error)
			if !ok || e.Param != c.param {
				t.Fatalf("err = %v, want a 400 naming %s", err, c.param)
			}
		})
	}
	// Hosted tools are dropped, each type named once.
	req := respDecode(t, []byte(`{"model":"m","input":"hi","tools":[{"type":"web_search_preview"},{"type":"file_search","vector_store_ids":["v"]},
		{"type":"code_interpreter","container":{"type":"auto"}},{"type":"image_generation"},{"type":"mcp","server_label":"x"},{"type":"web_search_preview"}]}`))
	if want := []string{"web_search_preview", "file_search", "code_interpreter", "image_generation", "mcp"}; !slices.Equal(req.DroppedTools, want) || len(req.Tools) != 0 {
		t.Errorf("dropped %v, tools %v; want %v and none", req.DroppedTools, req.Tools, want)
	}
}
