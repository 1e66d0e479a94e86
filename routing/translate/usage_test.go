package translate_test

// The same recorded answers, fed through every path that reads their
// usage, must bill the same numbers: usage is what the ledger records.

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate/tollgate/routing"
	"github.com/tollgate/tollgate/routing/translate"
)

// billed is what billing reads of a usage.
type billed struct {
	Prompt, Completion, Cached, CacheWrite int64
	Present                                bool
}

func billedOf(u *translate.Usage) billed {
	if u == nil {
		return billed{}
	}
	return billed{u.PromptTokens, u.CompletionTokens, u.Cached(), u.CacheCreationTokens, true}
}

func billedOfRouting(u routing.Usage) billed {
	if !u.Present {
		return billed{}
	}
	return billed{u.PromptTokens, u.CompletionTokens, u.CachedTokens, u.CacheWriteTokens, true}
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodedUsage runs a provider's stream decoder to the end and returns the
// last usage a chunk carried, as the proxy's translated path records it;
// the chunks are handed to each.
func decodedUsage(t *testing.T, p translate.Provider, raw []byte, each func(*translate.Chunk)) *translate.Usage {
	t.Helper()
	dec := p.NewStreamDecoder(bytes.NewReader(raw), "m")
	var last *translate.Usage
	for {
		c, err := dec.Next()
		if errors.Is(err, io.EOF) {
			return last
		}
		if err != nil {
			t.Fatalf("decoding: %v", err)
		}
		if c.Usage != nil {
			last = c.Usage
		}
		if each != nil {
			each(c)
		}
	}
}

// eachEvent calls f with every server-sent event of raw.
func eachEvent(t *testing.T, raw []byte, f func(name string, data []byte) bool) {
	t.Helper()
	sse := translate.NewSSEReader(bytes.NewReader(raw))
	for {
		ev, err := sse.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		f(ev.Event, ev.Data)
	}
}

// anthropicStreamPaths are the ways an Anthropic stream's usage is read.
var anthropicStreamPaths = map[string]func(t *testing.T, raw []byte) billed{
	// An OpenAI client on an Anthropic deployment: the stream decoder.
	"translated": func(t *testing.T, raw []byte) billed {
		return billedOf(decodedUsage(t, translate.Anthropic, raw, nil))
	},
	// An Anthropic client on an Anthropic deployment: events relayed as
	// they are, usage read from each.
	"pass-through": func(t *testing.T, raw []byte) billed {
		var u translate.AnthropicStreamUsage
		eachEvent(t, raw, u.Event)
		return billedOf(u.Usage())
	},
	// What an Anthropic client is shown after a translation: the decoded
	// chunks encoded back into Anthropic events, read again.
	"re-encoded": func(t *testing.T, raw []byte) billed {
		var out bytes.Buffer
		enc := translate.AnthropicInbound.NewStreamEncoder(&out, "m")
		last := decodedUsage(t, translate.Anthropic, raw, func(c *translate.Chunk) {
			if err := enc.WriteChunk(c); err != nil {
				t.Fatal(err)
			}
		})
		if err := enc.Close(last); err != nil {
			t.Fatal(err)
		}
		var u translate.AnthropicStreamUsage
		eachEvent(t, out.Bytes(), u.Event)
		if last == nil {
			return billed{} // the encoder always writes a usage; nothing was billed
		}
		return billedOf(u.Usage())
	},
}

// openAIStreamPaths are the ways an OpenAI chat stream's usage is read.
var openAIStreamPaths = map[string]func(t *testing.T, raw []byte) billed{
	"translated": func(t *testing.T, raw []byte) billed {
		return billedOf(decodedUsage(t, translate.OpenAIChat, raw, nil))
	},
	"pass-through": func(t *testing.T, raw []byte) billed {
		var last routing.Usage
		eachEvent(t, raw, func(_ string, data []byte) bool {
			u, _ := routing.ChunkUsage(data)
			if u.Present {
				last = u
			}
			return u.Present
		})
		return billedOfRouting(last)
	},
}

// usageCase is a recorded answer, the paths that read its usage, and the
// usage every one of them must read.
type usageCase struct {
	file  string
	paths map[string]func(*testing.T, []byte) billed
	want  billed
}

func runUsageCases(t *testing.T, cases []usageCase) {
	t.Helper()
	for _, tc := range cases {
		raw := readFixture(t, tc.file)
		for name, path := range tc.paths {
			t.Run(tc.file+"/"+name, func(t *testing.T) {
				if got := path(t, raw); got != tc.want {
					t.Errorf("usage %+v, want %+v", got, tc.want)
				}
			})
		}
	}
}

func TestStreamUsageIsTheSameOnEveryPath(t *testing.T) {
	cases := []usageCase{
		{"anthropic/stream_text.sse", anthropicStreamPaths, billed{25, 15, 0, 0, true}},
		{"anthropic/stream_tool_use.sse", anthropicStreamPaths, billed{472 + 1024 + 100, 89, 1024, 100, true}},
		// message_delta's cumulative input (web search results) is larger
		// than message_start's.
		{"anthropic/stream_server_tool.sse", anthropicStreamPaths, billed{10682, 510, 0, 0, true}},
		{"anthropic/stream_thinking.sse", anthropicStreamPaths, billed{}},
		// A compatible upstream's message_delta reports 0 input and cache
		// tokens: message_start's counts stand.
		{"usage/anthropic_compatible_zero_input.sse", anthropicStreamPaths, billed{150, 42, 30, 0, true}},
		{"usage/anthropic_no_message_stop.sse", anthropicStreamPaths, billed{509, 7, 0, 500, true}},
		{"usage/openai_chat_include_usage.sse", openAIStreamPaths, billed{1540, 4, 1408, 0, true}},
		{"usage/openai_chat_usage_on_last_choice.sse", openAIStreamPaths, billed{33, 8, 0, 0, true}},
	}
	runUsageCases(t, cases)
}

func TestAnswerUsageIsTheSameOnEveryPath(t *testing.T) {
	anthropic := map[string]func(t *testing.T, body []byte) billed{
		"translated": func(t *testing.T, body []byte) billed {
			resp, err := translate.Anthropic.ParseResponse(body, "m")
			if err != nil {
				t.Fatal(err)
			}
			return billedOf(resp.Usage)
		},
		"pass-through": func(t *testing.T, body []byte) billed {
			u, err := translate.AnthropicBodyUsage(body)
			if err != nil {
				t.Fatal(err)
			}
			return billedOf(u)
		},
	}
	openAI := map[string]func(t *testing.T, body []byte) billed{
		"translated": func(t *testing.T, body []byte) billed {
			resp, err := translate.OpenAIChat.ParseResponse(body, "m")
			if err != nil {
				t.Fatal(err)
			}
			return billedOf(resp.Usage)
		},
		"pass-through": func(t *testing.T, body []byte) billed {
			return billedOfRouting(routing.UsageFromBody(body))
		},
	}
	cases := []usageCase{
		{"anthropic/response_text.anthropic.json", anthropic, billed{2095, 503, 0, 0, true}},
		{"anthropic/response_tool_only.anthropic.json", anthropic, billed{849, 47, 0, 0, true}},
		{"anthropic/response_tool_use.anthropic.json", anthropic, billed{21 + 188086 + 1024, 393, 1024, 188086, true}},
		{"usage/openai_chat_response.json", openAI, billed{2210, 3, 2048, 0, true}},
		// An OpenAI-compatible server that names the counts as the
		// Responses API does: billed the same translated and passed through.
		{"usage/openai_compatible_input_output.json", openAI, billed{12, 5, 4, 0, true}},
	}
	runUsageCases(t, cases)
}

func TestAnthropicBodyUsageRefusesABodyThatIsNotJSON(t *testing.T) {
	if _, err := translate.AnthropicBodyUsage([]byte(`{"usage":`)); err == nil {
		t.Error("a truncated body was read without an error")
	}
	if u, err := translate.AnthropicBodyUsage([]byte(`{"type":"message","content":[]}`)); err != nil || u != nil {
		t.Errorf("a body without usage: %+v, %v", u, err)
	}
}

func TestAnthropicStreamUsageKeepsCountsADeltaLeavesOut(t *testing.T) {
	var u translate.AnthropicStreamUsage
	if u.Usage() != nil {
		t.Fatal("usage before any event")
	}
	events := []struct {
		name, data string
		carries    bool
	}{
		{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":40,"output_tokens":1}}}`, true},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\"usage\""}}`, false},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":12}}`, true},
		// A later delta with no output count (or a null one) keeps 12.
		{"message_delta", `{"type":"message_delta","delta":{},"usage":{"input_tokens":40,"output_tokens":null}}`, true},
		{"message_delta", `{"type":"message_delta","usage":`, false}, // not JSON: passed over
		{"", `{"type":"message_delta","usage":null}`, false},
	}
	for _, ev := range events {
		if got := u.Event(ev.name, []byte(ev.data)); got != ev.carries {
			t.Errorf("Event(%s) = %v, want %v", ev.data, got, ev.carries)
		}
	}
	if got, want := billedOf(u.Usage()), (billed{40, 12, 0, 0, true}); got != want {
		t.Errorf("usage %+v, want %+v", got, want)
	}
}
