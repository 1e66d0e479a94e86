package translate

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// claudeCodeLike is an Anthropic Messages request with prompt-cache
// breakpoints where coding agents put them: the last tool, the system
// prompt, a tool result, an assistant turn and the newest user turn.
const claudeCodeLike = `{"model":"claude-sonnet-4-5","max_tokens":512,
 "system":[{"type":"text","text":"You are a coding agent."},{"type":"text","text":"Repository rules...","cache_control":{"type":"ephemeral"}}],
 "tools":[{"name":"read","input_schema":{"type":"object"}},{"name":"edit","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],
 "messages":[
  {"role":"user","content":"Fix the bug."},
  {"role":"assistant","content":[{"type":"text","text":"Reading."},{"type":"tool_use","id":"toolu_1","name":"read","input":{},"cache_control":{"type":"ephemeral"}}]},
  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"main.go ...","cache_control":{"type":"ephemeral","ttl":"1h"}},{"type":"text","text":"go on"}]}
 ]}`

func decodeClaudeCodeLike(t *testing.T) *ChatRequest {
	t.Helper()
	req, err := AnthropicInbound.DecodeRequest([]byte(claudeCodeLike))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// Breakpoints from an Anthropic client reach Bedrock as cachePoint blocks
// right after the block they marked, so Claude on Bedrock caches the same
// prefixes; a model without prompt caching gets none.
func TestCacheControlToBedrock(t *testing.T) {
	req := decodeClaudeCodeLike(t)
	sonnet45 := bedrockTarget()
	sonnet45.UpstreamModel = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
	hr, err := Bedrock.NewRequest(req, sonnet45, false)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(hr.Body)
	var got struct {
		System     []map[string]any `json:"system"`
		ToolConfig struct {
			Tools []map[string]any `json:"tools"`
		} `json:"toolConfig"`
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	kinds := func(blocks []map[string]any) string {
		var ks []string
		for _, b := range blocks {
			for k := range b {
				ks = append(ks, k)
			}
		}
		return strings.Join(ks, ",")
	}
	if k := kinds(got.System); k != "text,text,cachePoint" {
		t.Errorf("system blocks %s; want text,text,cachePoint (%s)", k, body)
	}
	if k := kinds(got.ToolConfig.Tools); k != "toolSpec,toolSpec,cachePoint" {
		t.Errorf("tools %s; want toolSpec,toolSpec,cachePoint", k)
	}
	want := []string{"text", "text,toolUse,cachePoint", "toolResult,cachePoint,text"}
	if len(got.Messages) != len(want) {
		t.Fatalf("%d messages; want %d: %s", len(got.Messages), len(want), body)
	}
	for i, m := range got.Messages {
		if k := kinds(m.Content); k != want[i] {
			t.Errorf("message %d (%s): blocks %s; want %s", i, m.Role, k, want[i])
		}
	}
	if !strings.Contains(string(body), `"cachePoint":{"type":"default"}`) {
		t.Errorf("cachePoint form: %s", body)
	}

	// Which models get cachePoint blocks, and where: Bedrock refuses them
	// (AccessDeniedException) for models without prompt caching, and Nova
	// takes none among its tools. The option prompt_caching overrides the
	// model's default (an application inference profile ARN names none).
	for _, c := range []struct {
		model, option string
		system, tools bool
	}{
		{"anthropic.claude-3-7-sonnet-20250219-v1:0", "", true, true},
		{"us.anthropic.claude-3-5-haiku-20241022-v1:0", "", true, true},
		{"global.anthropic.claude-opus-4-1-20250805-v1:0", "", true, true},
		{"anthropic.claude-haiku-4-5-20251001-v1:0", "", true, true},
		{"us.amazon.nova-pro-v1:0", "", true, false},
		{"anthropic.claude-3-haiku-20240307-v1:0", "", false, false},
		{"anthropic.claude-3-5-sonnet-20240620-v1:0", "", false, false},
		{"anthropic.claude-3-opus-20240229-v1:0", "", false, false},
		{"anthropic.claude-v2:1", "", false, false},
		{"meta.llama3-1-70b-instruct-v1:0", "", false, false},
		{"anthropic.claude-sonnet-4-20250514-v1:0", "off", false, false},
		{"arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123", "", false, false},
		{"arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123", "on", true, true},
	} {
		tg := bedrockTarget()
		tg.UpstreamModel = c.model
		if c.option != "" {
			tg.Options = map[string]string{"region": "us-west-2", "prompt_caching": c.option}
		}
		hr, err := Bedrock.NewRequest(decodeClaudeCodeLike(t), tg, false)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			System     []map[string]any `json:"system"`
			ToolConfig struct {
				Tools []map[string]any `json:"tools"`
			} `json:"toolConfig"`
		}
		body, _ := io.ReadAll(hr.Body)
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		system, tools := strings.Contains(kinds(got.System), "cachePoint"), strings.Contains(kinds(got.ToolConfig.Tools), "cachePoint")
		if system != c.system || tools != c.tools || (!c.system && strings.Contains(string(body), "cachePoint")) {
			t.Errorf("%s (prompt_caching %q): cachePoint in system %v, tools %v; want %v, %v", c.model, c.option, system, tools, c.system, c.tools)
		}
	}
}

// Anthropic → canonical → Anthropic keeps every breakpoint on its block;
// one on an assistant tool_use stays at the end of that turn.
func TestCacheControlToAnthropic(t *testing.T) {
	req := decodeClaudeCodeLike(t)
	tgt := *anthTarget
	tgt.UpstreamModel = req.Model
	hr, err := Anthropic.NewRequest(req, &tgt, false)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(hr.Body)
	var got struct {
		System   []map[string]json.RawMessage `json:"system"`
		Tools    []map[string]json.RawMessage `json:"tools"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(body), `"cache_control"`); n != 4 {
		t.Errorf("%d cache_control in the request; want 4: %s", n, body)
	}
	if got.System[1]["cache_control"] == nil || got.Tools[1]["cache_control"] == nil || got.Tools[0]["cache_control"] != nil {
		t.Errorf("system or tools lost their breakpoints: %s", body)
	}
	var asst, user []map[string]json.RawMessage
	_ = json.Unmarshal(got.Messages[1].Content, &asst)
	_ = json.Unmarshal(got.Messages[2].Content, &user)
	if len(asst) != 2 || asst[1]["cache_control"] == nil {
		t.Errorf("assistant turn %s; want the breakpoint on its tool_use", got.Messages[1].Content)
	}
	if len(user) != 2 || string(user[0]["cache_control"]) != `{"type":"ephemeral","ttl":"1h"}` {
		t.Errorf("tool result %s; want its breakpoint (ttl kept)", got.Messages[2].Content)
	}
}

// OpenAI-format clients mark parts as LiteLLM does; Anthropic gets the
// breakpoints, OpenAI-wire upstreams do not (their format has none).
func TestCacheControlFromOpenAIClients(t *testing.T) {
	chat := `{"model":"m","messages":[
	  {"role":"system","content":[{"type":"text","text":"long rules","cache_control":{"type":"ephemeral"}}]},
	  {"role":"user","content":"hi","cache_control":{"type":"ephemeral"}}],
	 "tools":[{"type":"function","function":{"name":"f"},"cache_control":{"type":"ephemeral"}}]}`
	req, err := OpenAIInbound.DecodeRequest([]byte(chat))
	if err != nil {
		t.Fatal(err)
	}
	tgt := *anthTarget
	tgt.UpstreamModel = "claude-sonnet-4-5"
	hr, err := Anthropic.NewRequest(req, &tgt, false)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(hr.Body)
	if n := strings.Count(string(body), `"cache_control":{"type":"ephemeral"}`); n != 3 {
		t.Errorf("%d breakpoints reached Anthropic; want 3 (system, user, tool): %s", n, body)
	}
	if !strings.Contains(string(body), `"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control"`) {
		t.Errorf("a string message with a breakpoint is not a marked block: %s", body)
	}

	hr, err = OpenAIChat.NewRequest(req, &Target{Provider: "openai", BaseURL: "https://api.openai.com/v1", UpstreamModel: "gpt-4o"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := io.ReadAll(hr.Body); strings.Contains(string(body), "cache_control") {
		t.Errorf("cache_control sent to an OpenAI-wire upstream: %s", body)
	}
	if req.Messages[0].Content.Parts[0].CacheControl == nil || req.Tools[0].CacheControl == nil {
		t.Error("encoding for OpenAI changed the caller's request")
	}
}
