package mock

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sameJSON fails unless got and want are equal JSON values, after removing
// the top-level keys drop from got (ids, timestamps).
func sameJSON(t testing.TB, got []byte, want string, drop ...string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("decode %s: %v", got, err)
	}
	if m, ok := g.(map[string]any); ok {
		for _, k := range drop {
			delete(m, k)
		}
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		gb, _ := json.Marshal(g)
		t.Errorf("JSON differs\n got %s\nwant %s", gb, want)
	}
}

// jsonEq reports whether a and b encode to the same JSON.
func jsonEq(a, b any) bool {
	x, errX := json.Marshal(a)
	y, errY := json.Marshal(b)
	return errX == nil && errY == nil && bytes.Equal(x, y)
}

// weatherTool is an OpenAI tools array whose first tool's schema exercises
// every property type; its arguments are weatherArgs.
const (
	weatherTool = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",` +
		`"properties":{"city":{"type":"string"},"days":{"type":"integer"},"metric":{"type":"boolean"},"opt":{"type":"string"}},` +
		`"required":["city","days","metric"]}}},{"type":"function","function":{"name":"second","parameters":{}}}]`
	weatherArgs = `{"city":"mock","days":1,"metric":true}`
)

func TestSchemaArgs(t *testing.T) {
	for _, tc := range []struct{ name, schema, want string }{
		{"all types", `{"type":"object","properties":{"s":{"type":"string"},"i":{"type":"integer"},"n":{"type":"number"},` +
			`"b":{"type":"boolean"},"o":{"type":"object"},"a":{"type":"array"},"opt":{"type":"string"}},` +
			`"required":["s","i","n","b","o","a","missing"]}`, `{"s":"mock","i":1,"n":1,"b":true}`},
		{"required order", `{"properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["b","a"]}`, `{"b":"mock","a":"mock"}`},
		{"gemini upper case", `{"type":"OBJECT","properties":{"q":{"type":"STRING"},"k":{"type":"INTEGER"}},"required":["q","k"]}`, `{"q":"mock","k":1}`},
		{"type list and duplicates", `{"properties":{"q":{"type":["null","boolean"]}},"required":["q","q"]}`, `{"q":true}`},
		{"escaped name", `{"properties":{"a\"b":{"type":"number"}},"required":["a\"b"]}`, `{"a\"b":1}`},
		{"none required", `{"properties":{"q":{"type":"string"}}}`, `{}`},
		{"empty", ``, `{}`},
		{"invalid", `[1,2]`, `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := schemaArgs(json.RawMessage(tc.schema))
			if string(got) != tc.want || !json.Valid(got) {
				t.Errorf("schemaArgs = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestJSONText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`"plain"`, "plain"},
		{`{"result":"sunny"}`, "sunny"},
		{`{"result": 22}`, `{"result":22}`},
		{`{ "a": "x", "b": "y" }`, `{"a":"x","b":"y"}`},
		{`[1, 2]`, `[1,2]`},
	} {
		if got := jsonText(json.RawMessage(tc.in)); got != tc.want {
			t.Errorf("jsonText(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPieces(t *testing.T) {
	for _, tc := range []struct {
		args   string
		chunks int
		want   int
	}{
		{`{}`, 1, 2}, {`{}`, 10, 2}, {weatherArgs, 1, 2}, {weatherArgs, 5, 5},
		{weatherArgs, 1000, len(weatherArgs)}, {`{"é":"ü"}`, 100, 9},
	} {
		rp := reply{args: []byte(tc.args)}
		off := rp.pieces(tc.chunks)
		var sb strings.Builder
		for i := range len(off) - 1 {
			piece := tc.args[off[i]:off[i+1]]
			if piece == "" || !strings.ContainsRune(tc.args, []rune(piece)[0]) {
				t.Errorf("%s/%d: bad piece %q", tc.args, tc.chunks, piece)
			}
			sb.WriteString(piece)
		}
		if len(off)-1 != tc.want || sb.String() != tc.args {
			t.Errorf("%s/%d: %d pieces %v, want %d", tc.args, tc.chunks, len(off)-1, off, tc.want)
		}
	}
}

func TestMayHaveExtras(t *testing.T) {
	for body, want := range map[string]bool{
		chatBody: false,
		`{"stream_options":{"include_usage":true},"max_tokens":5,"messages":[{"content":"snake_case tool_call_id image_url"}]}`: false,
		`{"messages":[{"role":"tool","tool_call_id":"c1","content":"x"}]}`:                                                      true,
		`{"messages":[{"content":[{"type":"image_url","image_url":{"url":"u"}}]}]}`:                                             true,
		`_`:                   false,
		`"image_`:             false,
		`{"tool_call_id":""}`: true,
	} {
		if got := mayHaveExtras([]byte(body)); got != want {
			t.Errorf("mayHaveExtras(%s) = %v", body, got)
		}
	}
}

func TestOpenAIToolCall(t *testing.T) {
	_, ts := start(t, Options{})
	const head = `{"object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant",`
	for _, tc := range []struct{ name, body, want string }{
		{"first tool", `{"model":"m","messages":[{"role":"user","content":"hi"}],` + weatherTool + `}`,
			head + `"content":null,"tool_calls":[{"id":"call_mock_1","type":"function","function":{"name":"get_weather","arguments":` +
				`"{\"city\":\"mock\",\"days\":1,\"metric\":true}"}}],"refusal":null},` +
				`"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":13,"total_tokens":14}}`},
		{"forced tool", `{"model":"m","messages":[{"role":"user","content":"hi"}],` + weatherTool +
			`,"tool_choice":{"type":"function","function":{"name":"second"}}}`,
			head + `"content":null,"tool_calls":[{"id":"call_mock_1","type":"function","function":{"name":"second","arguments":"{}"}}],` +
				`"refusal":null},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`},
		{"image and tool", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"},` +
			`{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]}],` + weatherTool + `}`,
			head + `"content":"I see 1 image(s). ","tool_calls":[{"id":"call_mock_1","type":"function","function":{"name":"get_weather",` +
				`"arguments":"{\"city\":\"mock\",\"days\":1,\"metric\":true}"}}],"refusal":null},` +
				`"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":18,"total_tokens":19}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := call(t, ts, "/v1/chat/completions", tc.body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, b)
			}
			sameJSON(t, b, tc.want, "id", "created")
		})
	}
}

func TestOpenAIToolResultAndImages(t *testing.T) {
	_, ts := start(t, Options{ContentSize: 20})
	const result = `It is \"sunny\" in Paris today, 22 degrees and no wind at all`
	for _, tc := range []struct{ name, body, want string }{
		{"tool result", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,` +
			`"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"c1","content":"` + result + `"}],` + weatherTool + `}`,
			"Tool result received: It is \"sunny\" in Paris today, 22 degrees\nHello from mockllm. "},
		{"tool result parts", `{"model":"m","messages":[{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"ok"}]}]}`,
			"Tool result received: ok\nHello from mockllm. "},
		{"multibyte cut", `{"model":"m","messages":[{"role":"tool","tool_call_id":"c1","content":"` + strings.Repeat("é", 30) + `"}]}`,
			"Tool result received: " + strings.Repeat("é", 20) + "\nHello from mockllm. "},
		{"images", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"a"}}]},` +
			`{"role":"user","content":[{"type":"text","text":"and"},{"type":"image_url","image_url":{"url":"b"}}]}]}`,
			"I see 2 image(s). Hello from mockllm. "},
		{"images and result", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"a"}}]},` +
			`{"role":"tool","tool_call_id":"c1","content":"42"}]}`,
			"I see 1 image(s). Tool result received: 42\nHello from mockllm. "},
		{"tools null", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":null}`, "Hello from mockllm. "},
		{"tool choice none", `{"model":"m","messages":[{"role":"user","content":"hi"}],` + weatherTool + `,"tool_choice":"none"}`,
			"Hello from mockllm. "},
		{"tool word only", `{"model":"m","messages":[{"role":"user","content":"\"tools\" are great"},{"role":"tool_fan","content":"x"}]}`,
			"Hello from mockllm. "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := call(t, ts, "/v1/chat/completions", tc.body)
			c := decode[completion](t, b)
			if status != 200 || len(c.Choices) != 1 {
				t.Fatalf("status %d: %s", status, b)
			}
			ch := c.Choices[0]
			if ch.Message.Content != tc.want || // content(20) is "Hello from mockllm. "
				*ch.FinishReason != "stop" || c.Usage.CompletionTokens != tokens(len(ch.Message.Content)) {
				t.Errorf("answer %q (finish %s, usage %+v), want %q + content", ch.Message.Content, *ch.FinishReason, c.Usage, tc.want)
			}
		})
	}
}

// toolCallChunk is a chat.completion.chunk of a tool call.
type toolCallChunk struct {
	Choices []struct {
		Delta struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string  `json:"name"`
					Arguments *string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func TestOpenAIToolCallStream(t *testing.T) {
	_, ts := start(t, Options{})
	for _, tc := range []struct {
		name, extra, content string
		chunks, pieces       int
		usage                bool
	}{
		{"default chunks", "", "", 10, 10, false},
		{"one chunk still two pieces", "", "", 1, 2, true},
		{"more chunks than runes", "", "", 1000, len(weatherArgs), false},
		{"with image", `,{"role":"user","content":[{"type":"image_url","image_url":{"url":"a"}}]}`, "I see 1 image(s). ", 3, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"m","stream":true,"stream_options":{"include_usage":` + map[bool]string{true: "true", false: "false"}[tc.usage] +
				`},"messages":[{"role":"user","content":"hi"}` + tc.extra + `],` + weatherTool + `}`
			status, hdr, b := call(t, ts, "/v1/chat/completions", body, "X-Mock-Chunks", strconv.Itoa(tc.chunks))
			if status != 200 || hdr.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d: %s", status, b)
			}
			evs, _ := events(bytes.NewReader(b))
			if len(evs) < 4 || evs[len(evs)-1] != "[DONE]" {
				t.Fatalf("events %q", evs)
			}
			evs = evs[:len(evs)-1]
			if tc.usage {
				u := decode[toolCallChunk](t, []byte(evs[len(evs)-1]))
				if len(u.Choices) != 0 || u.Usage == nil || u.Usage.CompletionTokens != tokens(len(tc.content))+tokens(len("get_weather")+len(weatherArgs)) {
					t.Errorf("usage chunk %s", evs[len(evs)-1])
				}
				evs = evs[:len(evs)-1]
			}
			i := 0
			if tc.content != "" { // the prefix comes first, as content
				c := decode[toolCallChunk](t, []byte(evs[0])).Choices[0]
				if c.Delta.Role != "assistant" || c.Delta.Content == nil || *c.Delta.Content != tc.content || c.Delta.ToolCalls != nil {
					t.Errorf("content chunk %s", evs[0])
				}
				i++
			}
			h := decode[toolCallChunk](t, []byte(evs[i])).Choices[0]
			if tc := h.Delta.ToolCalls; len(tc) != 1 || tc[0].ID != "call_mock_1" || tc[0].Type != "function" ||
				tc[0].Function.Name != "get_weather" || tc[0].Function.Arguments == nil || *tc[0].Function.Arguments != "" || h.FinishReason != nil {
				t.Errorf("tool call header chunk %s", evs[i])
			}
			if (h.Delta.Role == "assistant") != (tc.content == "") || (tc.content == "") != (h.Delta.Content == nil && strings.Contains(evs[i], `"content":null`)) {
				t.Errorf("header chunk role/content: %s", evs[i])
			}
			var args strings.Builder
			pieces := evs[i+1 : len(evs)-1]
			for _, ev := range pieces {
				c := decode[toolCallChunk](t, []byte(ev))
				d := c.Choices[0].Delta
				if len(d.ToolCalls) != 1 || d.ToolCalls[0].ID != "" || d.ToolCalls[0].Function.Arguments == nil || c.Choices[0].FinishReason != nil {
					t.Fatalf("argument chunk %s", ev)
				}
				args.WriteString(*d.ToolCalls[0].Function.Arguments)
			}
			if len(pieces) != tc.pieces || args.String() != weatherArgs {
				t.Errorf("%d pieces making %s, want %d making %s", len(pieces), args.String(), tc.pieces, weatherArgs)
			}
			last := decode[toolCallChunk](t, []byte(evs[len(evs)-1])).Choices[0]
			if last.FinishReason == nil || *last.FinishReason != "tool_calls" || !strings.Contains(evs[len(evs)-1], `"delta":{}`) {
				t.Errorf("last chunk %s", evs[len(evs)-1])
			}
		})
	}
}

func TestOpenAIStreamImagePrefix(t *testing.T) {
	_, ts := start(t, Options{})
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"a"}}]},` +
		`{"role":"tool","tool_call_id":"c","content":"say \"hi\""}]}`
	_, _, b := call(t, ts, "/v1/chat/completions", body, "X-Mock-Chunks", "3")
	evs, _ := events(bytes.NewReader(b))
	var text strings.Builder
	for _, ev := range evs[:3] {
		text.WriteString(decode[completion](t, []byte(ev)).Choices[0].Delta.Content)
	}
	if want := "I see 1 image(s). Tool result received: say \"hi\"\nHello from mockllm."; len(evs) != 4 || text.String() != want {
		t.Errorf("streamed %q in %d events, want %q", text.String(), len(evs), want)
	}
}

func TestOpenAIToolCallStreamFaults(t *testing.T) {
	body := `{"model":"m?chunks=4&interval=15ms","stream":true,"messages":[{"role":"user","content":"hi"}],` + weatherTool + `}`
	t.Run("interval", func(t *testing.T) {
		_, ts := start(t, Options{})
		begin := time.Now()
		status, _, b := call(t, ts, "/v1/chat/completions", body)
		if elapsed := time.Since(begin); status != 200 || elapsed < 45*time.Millisecond {
			t.Fatalf("status %d after %v: %s", status, elapsed, b)
		}
	})
	t.Run("reset mid-stream", func(t *testing.T) {
		s, ts := start(t, Options{})
		resp, err := do(t, context.Background(), ts, "POST", "/v1/chat/completions", body, "X-Mock-Fault", "reset-mid-stream")
		if err != nil {
			t.Fatal(err)
		}
		evs, err := events(resp.Body)
		resp.Body.Close()
		// the tool call header and 2 of the 4 argument pieces
		if err == nil || len(evs) != 3 {
			t.Errorf("got %d events and error %v before the reset", len(evs), err)
		}
		if st := s.Stats(); st.Resets != 1 || st.Completed != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}

// sseEvent is a server-sent event with its name.
type sseEvent struct{ name, data string }

// namedEvents parses a server-sent event stream of "event:" and "data:" lines.
func namedEvents(r io.Reader) ([]sseEvent, error) {
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		switch {
		case line == "":
			if cur != (sseEvent{}) {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[len("data: "):]
		}
	}
	return out, sc.Err()
}
