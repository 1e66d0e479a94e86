package translate

import (
	"crypto/sha256"
	"encoding/hex"
)

// MaxToolName is the longest function name OpenAI, Gemini and Bedrock
// accept. Anthropic allows longer ones, and clients such as Claude Code
// send them (MCP tools are named mcp__SERVER__TOOL).
const MaxToolName = 64

// shortToolName returns name, or for a longer one its first 47 bytes, '_'
// and 16 hex digits of its hash: 64 bytes, the same every time.
func shortToolName(name string) string {
	if len(name) <= MaxToolName {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:MaxToolName-17] + "_" + hex.EncodeToString(sum[:8])
}

// ShortenToolNames returns req with every tool name over MaxToolName
// shortened (in tools, tool_choice and the history's tool calls) and the
// map from short names back to the client's; req itself is not modified.
// It returns req and nil when no name is too long.
func ShortenToolNames(req *ChatRequest) (*ChatRequest, map[string]string) {
	var names map[string]string
	short := func(n string) string {
		s := shortToolName(n)
		if s != n {
			if names == nil {
				names = map[string]string{}
			}
			names[s] = n
		}
		return s
	}
	long := false
	for _, t := range req.Tools {
		long = long || len(t.Function.Name) > MaxToolName
	}
	for _, m := range req.Messages {
		for _, tc := range m.ToolCalls {
			long = long || len(tc.Function.Name) > MaxToolName
		}
	}
	if !long {
		return req, nil
	}
	out := *req
	out.Tools = make([]Tool, len(req.Tools))
	for i, t := range req.Tools {
		t.Function.Name = short(t.Function.Name)
		out.Tools[i] = t
	}
	if req.ToolChoice != nil && req.ToolChoice.Function != "" {
		tc := *req.ToolChoice
		tc.Function = short(tc.Function)
		out.ToolChoice = &tc
	}
	out.Messages = make([]Message, len(req.Messages))
	for i, m := range req.Messages {
		if len(m.ToolCalls) > 0 {
			calls := make([]ToolCall, len(m.ToolCalls))
			for j, tc := range m.ToolCalls {
				tc.Function.Name = short(tc.Function.Name)
				calls[j] = tc
			}
			m.ToolCalls = calls
		}
		out.Messages[i] = m
	}
	return &out, names
}

// RestoreToolNames gives tool calls their client's names back (see
// ShortenToolNames).
func RestoreToolNames(calls []ToolCall, names map[string]string) {
	for i := range calls {
		if n, ok := names[calls[i].Function.Name]; ok {
			calls[i].Function.Name = n
		}
	}
}
