package translate

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// claudeCodeRequest is a request as Claude Code 2.1.197 sends it by
// default (recorded, texts shortened): 24 tools, adaptive thinking,
// context_management, output_config.effort, cache_control on system and
// user blocks, and — beta mid-conversation-system-2026-04-07 — a
// {"role":"system"} message at messages[1].
func claudeCodeRequest(t *testing.T) []byte {
	t.Helper()
	return anthRead(t, "claude_code_2.1.197.json")
}

// claudeCodeSystemText is the start of the system message at messages[1].
const claudeCodeSystemText = "Available agent types for the Agent tool:"

// claudeCodeToolTurn is the same request one tool round later: the
// assistant called Bash, the tool answered, and a system message follows.
func claudeCodeToolTurn(t *testing.T) []byte {
	t.Helper()
	var req map[string]any
	if err := json.Unmarshal(claudeCodeRequest(t), &req); err != nil {
		t.Fatal(err)
	}
	msgs := req["messages"].([]any)
	msgs = append(msgs,
		map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "thinking", "thinking": "t", "signature": "sig"},
			map[string]any{"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": map[string]any{"command": "echo hi"}}}},
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_01", "content": "hi", "cache_control": map[string]any{"type": "ephemeral"}}}},
		map[string]any{"role": "system", "content": []any{map[string]any{"type": "text", "text": "Later system note."}}},
	)
	req["messages"] = msgs
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestClaudeCodeRequestDecodesWithSystemMessageInPlace(t *testing.T) {
	req, err := AnthropicInbound.DecodeRequest(claudeCodeRequest(t))
	if err != nil {
		t.Fatalf("Claude Code's default request refused: %v", err)
	}
	if len(req.Tools) != 24 {
		t.Errorf("tools = %d, want 24", len(req.Tools))
	}
	var roles []string
	for _, m := range req.Messages {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "system,user,system" {
		t.Fatalf("roles = %s, want system,user,system (the top-level system, then the turns in order)", got)
	}
	if !strings.HasPrefix(req.Messages[2].Content.String(), claudeCodeSystemText) {
		t.Errorf("messages[2] = %q, want the system message of messages[1]", req.Messages[2].Content.String())
	}
	if req.ReasoningEffort != "" || req.ResponseFormat != nil {
		t.Errorf("behaviour-only fields carried: effort %q, format %s", req.ReasoningEffort, req.ResponseFormat)
	}
}

func TestClaudeCodeSystemMessageRefusals(t *testing.T) {
	msgs := func(content string) []byte {
		return []byte(`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"Hi"},` + content + `]}`)
	}
	cases := []struct{ name, body, param string }{
		{"no content", `{"role":"system"}`, "messages.1.content"},
		{"object content", `{"role":"system","content":{"type":"text"}}`, "messages.1.content"},
		{"image block", `{"role":"system","content":[{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]}`, "messages.1.content.0.type"},
		{"tool role", `{"role":"tool","content":"x"}`, "messages.1.role"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := AnthropicInbound.DecodeRequest(msgs(c.body))
			e, ok := err.(*Error)
			if !ok || e.Param != c.param || !strings.HasPrefix(e.Message, c.param+": ") {
				t.Fatalf("err = %#v, want a 400 naming %s", err, c.param)
			}
		})
	}
	req, err := AnthropicInbound.DecodeRequest(msgs(`{"role":"system","content":""}`))
	if err != nil || len(req.Messages) != 1 {
		t.Fatalf("an empty system message: %v, %d messages; want it dropped", err, len(req.Messages))
	}
}

// upstreamBody encodes req for provider p and returns the upstream body.
func upstreamBody(t *testing.T, p Provider, tg *Target, req *ChatRequest) map[string]any {
	t.Helper()
	hr, err := p.NewRequest(req, tg, req.Stream)
	if err != nil {
		t.Fatalf("%s refused Claude Code's request: %v", tg.Provider, err)
	}
	b, err := io.ReadAll(hr.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// textsOf returns every "text" string below v, in order.
func textsOf(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		if s, ok := x["text"].(string); ok {
			out = append(out, s)
		}
		for k, c := range x {
			if k != "text" {
				out = append(out, textsOf(c)...)
			}
		}
	case []any:
		for _, c := range x {
			out = append(out, textsOf(c)...)
		}
	case string:
	}
	return out
}

func hasPrefixIn(texts []string, prefix string) bool {
	for _, s := range texts {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

func TestClaudeCodeRequestOnEveryUpstreamKind(t *testing.T) {
	for _, turn := range []struct {
		name string
		body func(*testing.T) []byte
	}{{"first turn", claudeCodeRequest}, {"after a tool round", claudeCodeToolTurn}} {
		t.Run(turn.name, func(t *testing.T) {
			req, err := AnthropicInbound.DecodeRequest(turn.body(t))
			if err != nil {
				t.Fatal(err)
			}
			later := turn.name != "first turn"

			t.Run("openai", func(t *testing.T) {
				m := upstreamBody(t, OpenAIChat, &Target{Provider: "openai", BaseURL: "http://127.0.0.1:1/v1", UpstreamModel: "gpt-x"}, req)
				msgs := m["messages"].([]any)
				// In place: after the user turn that preceded it.
				second := msgs[2].(map[string]any)
				if second["role"] != "system" || !hasPrefixIn(textsOf(second), claudeCodeSystemText) &&
					!strings.HasPrefix(second["content"].(string), claudeCodeSystemText) {
					t.Fatalf("messages[2] = %v, want the system message in place", second)
				}
				if later && msgs[len(msgs)-1].(map[string]any)["role"] != "system" {
					t.Errorf("the later system message is not last: %v", msgs[len(msgs)-1])
				}
				if n := len(m["tools"].([]any)); n != 24 {
					t.Errorf("tools = %d", n)
				}
			})
			t.Run("gemini", func(t *testing.T) {
				m := upstreamBody(t, Gemini, &Target{Provider: "gemini", BaseURL: "http://127.0.0.1:1/v1beta", UpstreamModel: "gemini-2.5-pro", Credential: "k"}, req)
				sys := textsOf(m["systemInstruction"])
				if !hasPrefixIn(sys, "You are a Claude agent") || !hasPrefixIn(sys, claudeCodeSystemText) {
					t.Fatalf("systemInstruction = %q, want the top-level system and the message's", sys)
				}
				if later && sys[len(sys)-1] != "Later system note." {
					t.Errorf("systemInstruction does not end with the later system note: %q", sys)
				}
				for _, c := range m["contents"].([]any) {
					if r := c.(map[string]any)["role"]; r != "user" && r != "model" {
						t.Errorf("a content with role %v", r)
					}
				}
				decls := m["tools"].([]any)[0].(map[string]any)["functionDeclarations"].([]any)
				if len(decls) != 24 {
					t.Errorf("functionDeclarations = %d", len(decls))
				}
			})
			t.Run("bedrock", func(t *testing.T) {
				m := upstreamBody(t, Bedrock, &Target{Provider: "bedrock", BaseURL: "http://127.0.0.1:1", UpstreamModel: "anthropic.claude", Credential: "AKID:SECRET", Options: map[string]string{"region": "us-east-1"}}, req)
				sys := textsOf(m["system"])
				if !hasPrefixIn(sys, "You are a Claude agent") || !hasPrefixIn(sys, claudeCodeSystemText) {
					t.Fatalf("system = %q, want the top-level system and the message's", sys)
				}
				for _, c := range m["messages"].([]any) {
					if r := c.(map[string]any)["role"]; r != "user" && r != "assistant" {
						t.Errorf("a message with role %v", r)
					}
				}
				if n := len(m["toolConfig"].(map[string]any)["tools"].([]any)); n != 24 {
					t.Errorf("tools = %d", n)
				}
			})
			t.Run("anthropic", func(t *testing.T) {
				// The canonical form encoded for Anthropic (as for an OpenAI
				// client; Anthropic clients pass through untouched).
				m := upstreamBody(t, Anthropic, &Target{Provider: "anthropic", BaseURL: "http://127.0.0.1:1/v1", UpstreamModel: "claude-x", Credential: "k"}, req)
				if sys := textsOf(m["system"]); !hasPrefixIn(sys, claudeCodeSystemText) {
					t.Fatalf("system = %q, want the message's text", sys)
				}
				for _, c := range m["messages"].([]any) {
					if r := c.(map[string]any)["role"]; r != "user" && r != "assistant" {
						t.Errorf("a message with role %v", r)
					}
				}
			})
		})
	}
}
