// Regression tests from a review of the Anthropic and Responses translators
// (the stream checks use anthropic-sdk-go's own accumulator as the client).

package translate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

func drain(t *testing.T, d StreamDecoder) []*Chunk {
	var out []*Chunk
	for {
		c, err := d.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		out = append(out, c)
	}
}

// F1: Claude Code -> OpenAI upstream sends the deprecated max_tokens.
func TestRegressionAnthropicInboundMaxTokensToOpenAI(t *testing.T) {
	req, err := AnthropicInbound.DecodeRequest([]byte(`{"model":"gpt-5","max_tokens":32000,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	hr, err := OpenAIChat.NewRequest(req, &Target{Provider: "openai", BaseURL: "https://api.openai.com/v1", UpstreamModel: "gpt-5"}, false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(hr.Body)
	t.Logf("upstream body: %s", b)
	if bytes.Contains(b, []byte(`"max_tokens"`)) {
		t.Errorf("sends max_tokens (rejected by o-series / gpt-5: use max_completion_tokens)")
	}
}

// F2: streaming no-argument tool_use yields arguments "" (non-stream gives "{}").
func TestRegressionAnthropicStreamNoArgTool(t *testing.T) {
	sse := `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"list_files","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":5}}

event: message_stop
data: {"type":"message_stop"}

`
	args := ""
	for _, c := range drain(t, Anthropic.NewStreamDecoder(strings.NewReader(sse), "m")) {
		for _, ch := range c.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				args += tc.Function.Arguments
			}
		}
	}
	if !json.Valid([]byte(args)) {
		t.Errorf("streamed arguments = %q, not JSON (non-stream ParseResponse gives \"{}\")", args)
	}
	// Through the Responses encoder (Codex):
	var buf bytes.Buffer
	enc := ResponsesInbound.NewStreamEncoder(&buf, "m")
	for _, c := range drain(t, Anthropic.NewStreamDecoder(strings.NewReader(sse), "m")) {
		enc.WriteChunk(c)
	}
	enc.Close(nil)
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, "function_call_arguments.done") && strings.HasPrefix(l, "data:") {
			t.Logf("responses: %s", l)
		}
	}
}

// F3: OpenAI-compatible upstream (Ollama) reusing index 0 for parallel calls.
func TestRegressionAnthropicEncoderReusedIndex(t *testing.T) {
	zero := 0
	str := func(s string) *string { return &s }
	chunks := []*Chunk{
		{ID: "c", Choices: []ChunkChoice{{Delta: Delta{Role: "assistant", Content: str("")}}}},
		{ID: "c", Choices: []ChunkChoice{{Delta: Delta{ToolCalls: []ToolCall{{Index: &zero, ID: "call_a", Type: "function", Function: FunctionCall{Name: "read", Arguments: `{"path":"a"}`}}}}}}},
		{ID: "c", Choices: []ChunkChoice{{Delta: Delta{ToolCalls: []ToolCall{{Index: &zero, ID: "call_b", Type: "function", Function: FunctionCall{Name: "write", Arguments: `{"path":"b"}`}}}}}}},
		{ID: "c", Choices: []ChunkChoice{{Delta: Delta{}, FinishReason: str("tool_calls")}}},
	}
	var buf bytes.Buffer
	enc := AnthropicInbound.NewStreamEncoder(&buf, "m")
	for _, c := range chunks {
		if err := enc.WriteChunk(c); err != nil {
			t.Fatal(err)
		}
	}
	enc.Close(nil)
	msg := accumulate(t, buf.String())
	for _, b := range msg.Content {
		t.Logf("block %s id=%s name=%s input=%s", b.Type, b.ID, b.Name, b.Input)
	}
	if len(msg.Content) != 2 {
		t.Errorf("%d tool_use blocks, want 2 (second call merged into first)", len(msg.Content))
	}
	// The Responses encoder handles the same input:
	buf.Reset()
	renc := ResponsesInbound.NewStreamEncoder(&buf, "m")
	for _, c := range chunks {
		renc.WriteChunk(c)
	}
	renc.Close(nil)
	t.Logf("responses function_call items: %d", strings.Count(buf.String(), `event: response.output_item.done`))
}

func accumulate(t *testing.T, sse string) anthropic.Message {
	var msg anthropic.Message
	sc := bufio.NewScanner(strings.NewReader(sse))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		var ev anthropic.MessageStreamEventUnion
		if err := json.Unmarshal([]byte(line[6:]), &ev); err != nil {
			t.Fatalf("sdk: %v", err)
		}
		if err := msg.Accumulate(ev); err != nil {
			t.Fatalf("sdk accumulate: %v", err)
		}
	}
	return msg
}

// F4: Claude Code tool_result with an image -> OpenAI tool message with image_url (OpenAI: 400).
func TestRegressionToolResultImageToOpenAI(t *testing.T) {
	in := `{"model":"gpt-4o","max_tokens":100,"messages":[
	 {"role":"user","content":"look at shot.png"},
	 {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"shot.png"}}]},
	 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]}]}`
	req, err := AnthropicInbound.DecodeRequest([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	hr, err := OpenAIChat.NewRequest(req, &Target{Provider: "openai", BaseURL: "x", UpstreamModel: "gpt-4o"}, false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(hr.Body)
	t.Logf("%s", b)
	if bytes.Contains(b, []byte(`"role":"tool","content":[{"type":"image_url"`)) {
		t.Errorf("image_url part inside a role=tool message; OpenAI accepts only text parts there")
	}
}

// F5: a history tool call with non-object (truncated) arguments -> 400 forever.
func TestRegressionTruncatedArgsHistory(t *testing.T) {
	req := &ChatRequest{Model: "m", Messages: []Message{
		{Role: "user", Content: TextContent("write the file")},
		{Role: "assistant", Content: Content{Null: true}, ToolCalls: []ToolCall{{ID: "call_1", Type: "function", Function: FunctionCall{Name: "write", Arguments: `{"path":"a.go","content":"package ma`}}}},
		{Role: "tool", ToolCallID: "call_1", Content: TextContent("error: invalid arguments")},
		{Role: "user", Content: TextContent("try again")},
	}}
	_, err := Anthropic.NewRequest(req, &Target{BaseURL: "x", UpstreamModel: "claude"}, false)
	if err != nil {
		t.Errorf("conversation refused: %v", err)
	}
}
