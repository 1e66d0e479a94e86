package translate

import (
	"strings"
	"testing"
)

func TestShortenToolNames(t *testing.T) {
	long := "mcp__" + strings.Repeat("very_long_server_name_", 4) + "__read_file"
	req := &ChatRequest{
		Messages: []Message{{Role: "user", Content: TextContent("go")},
			{Role: "assistant", ToolCalls: []ToolCall{{ID: "a", Function: FunctionCall{Name: long, Arguments: "{}"}}}},
			{Role: "tool", ToolCallID: "a", Content: TextContent("ok")}},
		Tools:      []Tool{{Type: "function", Function: FunctionDecl{Name: long}}, {Type: "function", Function: FunctionDecl{Name: "short"}}},
		ToolChoice: &ToolChoice{Mode: "function", Function: long},
	}
	out, names := ShortenToolNames(req)
	s := out.Tools[0].Function.Name
	if len(s) != MaxToolName || !strings.HasPrefix(s, long[:40]) || names[s] != long {
		t.Fatalf("short name %q (%d), map %v", s, len(s), names)
	}
	if out.Tools[1].Function.Name != "short" || out.ToolChoice.Function != s || out.Messages[1].ToolCalls[0].Function.Name != s {
		t.Errorf("not shortened everywhere: %+v", out)
	}
	if req.Tools[0].Function.Name != long || req.ToolChoice.Function != long || req.Messages[1].ToolCalls[0].Function.Name != long {
		t.Error("the caller's request was modified")
	}
	calls := []ToolCall{{Function: FunctionCall{Name: s}}, {Function: FunctionCall{Name: "short"}}}
	RestoreToolNames(calls, names)
	if calls[0].Function.Name != long || calls[1].Function.Name != "short" {
		t.Errorf("restored %+v", calls)
	}
	if same, m := ShortenToolNames(&ChatRequest{Tools: []Tool{{Function: FunctionDecl{Name: "x"}}}}); m != nil || same.Tools[0].Function.Name != "x" {
		t.Error("short names changed")
	}
}
