package mock

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// anthropicCall posts body to path with Anthropic's required headers
// (overridable by hdr).
func anthropicCall(t testing.TB, ts *httptest.Server, path, body string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	return call(t, ts, path, body, append([]string{"X-Api-Key", "sk-ant-test", "Anthropic-Version", "2023-06-01"}, hdr...)...)
}

// anthropicMsg builds a Messages request body.
func anthropicMsg(model string, extra string, messages string) string {
	return `{"model":"` + model + `","max_tokens":1024` + extra + `,"messages":` + messages + `}`
}

const (
	anthropicHi   = `[{"role":"user","content":"hi"}]`
	anthropicTool = `,"tools":[{"name":"get_weather","description":"d","input_schema":{"type":"object",` +
		`"properties":{"city":{"type":"string"},"days":{"type":"integer"},"metric":{"type":"boolean"}},"required":["city","days","metric"]}},` +
		`{"name":"second","input_schema":{"type":"object"}}]`
)

func TestAnthropicMessage(t *testing.T) {
	s, ts := start(t, Options{ContentSize: 20})
	longSystem := strings.Repeat("s", 120)
	toolResult := `[{"role":"user","content":"weather?"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"sunny, 22C"},` +
		`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]},{"type":"text","text":"thanks"}]}]`
	usage := func(in, cached, out int) string {
		return `"stop_sequence":null,"usage":{"input_tokens":` + strconv.Itoa(in) + `,"cache_creation_input_tokens":0,"cache_read_input_tokens":` +
			strconv.Itoa(cached) + `,"output_tokens":` + strconv.Itoa(out) + `}}`
	}
	const head = `{"type":"message","role":"assistant","model":"claude-x","content":`
	for _, tc := range []struct{ name, path, body, want string }{
		{"text", "/v1/messages", anthropicMsg("claude-x", "", anthropicHi),
			head + `[{"type":"text","text":"Hello from mockllm. "}],"stop_reason":"end_turn",` + usage(1, 0, 5)},
		{"alias path", "/messages", anthropicMsg("claude-x", "", anthropicHi),
			head + `[{"type":"text","text":"Hello from mockllm. "}],"stop_reason":"end_turn",` + usage(1, 0, 5)},
		{"cached system prompt", "/v1/messages", anthropicMsg("claude-x", `,"system":"`+longSystem+`"`, `[{"role":"user","content":"abcd"}]`),
			head + `[{"type":"text","text":"Hello from mockllm. "}],"stop_reason":"end_turn",` + usage(16, 15, 5)}, // 124 chars: 31 tokens
		{"system blocks", "/v1/messages", anthropicMsg("claude-x", `,"system":[{"type":"text","text":"`+longSystem+`","cache_control":{"type":"ephemeral"}}]`, anthropicHi),
			head + `[{"type":"text","text":"Hello from mockllm. "}],"stop_reason":"end_turn",` + usage(16, 15, 5)},
		{"max tokens", "/v1/messages", `{"model":"claude-x","max_tokens":2,"messages":` + anthropicHi + `}`,
			head + `[{"type":"text","text":"Hello fr"}],"stop_reason":"max_tokens",` + usage(1, 0, 2)},
		{"tool use", "/v1/messages", anthropicMsg("claude-x", anthropicTool, anthropicHi),
			head + `[{"type":"tool_use","id":"toolu_mock_1","name":"get_weather","input":{"city":"mock","days":1,"metric":true}}],"stop_reason":"tool_use",` + usage(1, 0, 13)},
		{"forced tool", "/v1/messages", anthropicMsg("claude-x", anthropicTool+`,"tool_choice":{"type":"tool","name":"second"}`, anthropicHi),
			head + `[{"type":"tool_use","id":"toolu_mock_1","name":"second","input":{}}],"stop_reason":"tool_use",` + usage(1, 0, 2)},
		{"tool choice none", "/v1/messages", anthropicMsg("claude-x", anthropicTool+`,"tool_choice":{"type":"none"}`, anthropicHi),
			head + `[{"type":"text","text":"Hello from mockllm. "}],"stop_reason":"end_turn",` + usage(1, 0, 5)},
		{"image and tool", "/v1/messages", anthropicMsg("claude-x", anthropicTool,
			`[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x/y.png"}},{"type":"text","text":"hi"}]}]`),
			head + `[{"type":"text","text":"I see 1 image(s). "},{"type":"tool_use","id":"toolu_mock_1","name":"get_weather",` +
				`"input":{"city":"mock","days":1,"metric":true}}],"stop_reason":"tool_use",` + usage(1, 0, 18)},
		{"tool result", "/v1/messages", anthropicMsg("claude-x", anthropicTool, toolResult),
			head + `[{"type":"text","text":"I see 1 image(s). Tool result received: sunny, 22C\nHello from mockllm. "}],"stop_reason":"end_turn",` +
				usage(6, 0, 18)},
		{"tool result string", "/v1/messages", anthropicMsg("claude-x", "",
			`[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"`+strings.Repeat("x", 50)+`"}]}]`),
			head + `[{"type":"text","text":"Tool result received: ` + strings.Repeat("x", 40) + `\nHello from mockllm. "}],"stop_reason":"end_turn",` +
				usage(13, 0, 21)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, b := anthropicCall(t, ts, tc.path, tc.body)
			if status != 200 || hdr.Get("Content-Type") != "application/json" || !strings.HasPrefix(hdr.Get("Request-Id"), "req_mock_") {
				t.Fatalf("status %d, headers %v: %s", status, hdr, b)
			}
			if id := decode[struct{ ID string }](t, b).ID; !strings.HasPrefix(id, "msg_mock_") {
				t.Errorf("id %q", id)
			}
			sameJSON(t, b, tc.want, "id")
		})
	}
	st := s.Stats()
	if st.ByPath["/v1/messages"] != 10 || st.ByPath["/messages"] != 1 || st.ByFormat["anthropic"] != 11 ||
		st.LastAuthorization != "sk-ant-test" || st.LastAuthHeader != "x-api-key" {
		t.Errorf("stats %+v", st)
	}
}

func TestAnthropicCountTokens(t *testing.T) {
	s, ts := start(t, Options{})
	for _, path := range []string{"/v1/messages/count_tokens", "/messages/count_tokens"} {
		// no max_tokens needed; 4 + 12 characters
		status, _, b := anthropicCall(t, ts, path, `{"model":"claude-x","system":"abcd","messages":[{"role":"user","content":"twelve chars"}]}`)
		if status != 200 || string(b) != `{"input_tokens":4}` {
			t.Errorf("%s: status %d: %s", path, status, b)
		}
	}
	status, _, b := anthropicCall(t, ts, "/v1/messages/count_tokens", `{"model":"claude-x?status=429","messages":`+anthropicHi+`}`)
	if status != 429 || !strings.Contains(string(b), "rate_limit_error") {
		t.Errorf("injected status %d: %s", status, b)
	}
	if st := s.Stats(); st.ByPath["/v1/messages/count_tokens"] != 2 || st.ByPath["/messages/count_tokens"] != 1 {
		t.Errorf("by_path %v", st.ByPath)
	}
}

// anthropicEvent is the union of the stream events' fields the tests read.
type anthropicEvent struct {
	Type    string `json:"type"`
	Index   *int   `json:"index"`
	Message *struct {
		ID, Type, Role, Model string
		Content               []any
		StopReason            *string `json:"stop_reason"`
		Usage                 map[string]int
	} `json:"message"`
	ContentBlock map[string]any `json:"content_block"`
	Delta        struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		PartialJSON string  `json:"partial_json"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage map[string]int `json:"usage"`
}

// anthropicStream posts a streamed Messages request and returns its events
// after checking that each event's name matches its data's type.
func anthropicStream(t *testing.T, ts *httptest.Server, body string, hdr ...string) []anthropicEvent {
	t.Helper()
	status, h, b := anthropicCall(t, ts, "/v1/messages", body, hdr...)
	if status != 200 || h.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q: %s", status, h.Get("Content-Type"), b)
	}
	raw, err := namedEvents(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]anthropicEvent, len(raw))
	for i, ev := range raw {
		out[i] = decode[anthropicEvent](t, []byte(ev.data))
		if out[i].Type != ev.name {
			t.Errorf("event %q carries data of type %q", ev.name, out[i].Type)
		}
	}
	return out
}

func eventTypes(evs []anthropicEvent) string {
	var names []string
	for _, ev := range evs {
		names = append(names, ev.Type)
	}
	return strings.Join(names, ",")
}

func TestAnthropicStream(t *testing.T) {
	_, ts := start(t, Options{})
	deltas := func(n int) string { return strings.Repeat("content_block_delta,", n) }
	t.Run("text", func(t *testing.T) {
		evs := anthropicStream(t, ts, anthropicMsg("claude-x?chunks=4", `,"stream":true,"system":"`+strings.Repeat("s", 101)+`"`, anthropicHi))
		if got, want := eventTypes(evs), "message_start,content_block_start,ping,"+deltas(4)+"content_block_stop,message_delta,message_stop"; got != want {
			t.Fatalf("events %s\nwant   %s", got, want)
		}
		m := evs[0].Message
		if m == nil || !strings.HasPrefix(m.ID, "msg_mock_") || m.Type != "message" || m.Role != "assistant" || m.Model != "claude-x" ||
			len(m.Content) != 0 || m.StopReason != nil || m.Usage["input_tokens"] != 13 || m.Usage["cache_read_input_tokens"] != 13 ||
			m.Usage["cache_creation_input_tokens"] != 0 || m.Usage["output_tokens"] != 1 {
			t.Errorf("message_start %+v", m)
		}
		if cb := evs[1].ContentBlock; *evs[1].Index != 0 || cb["type"] != "text" || cb["text"] != "" {
			t.Errorf("content_block_start %+v", evs[1])
		}
		var text strings.Builder
		for _, ev := range evs[3:7] {
			if *ev.Index != 0 || ev.Delta.Type != "text_delta" {
				t.Errorf("delta %+v", ev)
			}
			text.WriteString(ev.Delta.Text)
		}
		if text.String() != "Hello from mockllm. This" {
			t.Errorf("text %q", text.String())
		}
		if md := evs[8]; md.Delta.StopReason == nil || *md.Delta.StopReason != "end_turn" || md.Usage["output_tokens"] != 4 {
			t.Errorf("message_delta %+v", md)
		}
	})
	t.Run("max tokens", func(t *testing.T) {
		evs := anthropicStream(t, ts, `{"model":"claude-x","max_tokens":3,"stream":true,"messages":`+anthropicHi+`}`)
		if got := eventTypes(evs); got != "message_start,content_block_start,ping,"+deltas(3)+"content_block_stop,message_delta,message_stop" {
			t.Fatalf("events %s", got)
		}
		if md := evs[7]; *md.Delta.StopReason != "max_tokens" || md.Usage["output_tokens"] != 3 {
			t.Errorf("message_delta %+v", md)
		}
	})
	t.Run("tool use", func(t *testing.T) {
		evs := anthropicStream(t, ts, anthropicMsg("claude-x", `,"stream":true`+anthropicTool, anthropicHi), "X-Mock-Chunks", "3")
		if got := eventTypes(evs); got != "message_start,content_block_start,ping,"+deltas(3)+"content_block_stop,message_delta,message_stop" {
			t.Fatalf("events %s", got)
		}
		if cb := evs[1].ContentBlock; *evs[1].Index != 0 || cb["type"] != "tool_use" || cb["id"] != "toolu_mock_1" || cb["name"] != "get_weather" ||
			!jsonEq(cb["input"], map[string]any{}) {
			t.Errorf("content_block_start %+v", cb)
		}
		var args strings.Builder
		for _, ev := range evs[3:6] {
			if *ev.Index != 0 || ev.Delta.Type != "input_json_delta" || ev.Delta.PartialJSON == "" {
				t.Errorf("delta %+v", ev)
			}
			args.WriteString(ev.Delta.PartialJSON)
		}
		if args.String() != weatherArgs {
			t.Errorf("input %s", args.String())
		}
		if md := evs[7]; *md.Delta.StopReason != "tool_use" || md.Usage["output_tokens"] != 13 {
			t.Errorf("message_delta %+v", md)
		}
	})
	t.Run("image then tool use", func(t *testing.T) {
		evs := anthropicStream(t, ts, anthropicMsg("claude-x", `,"stream":true`+anthropicTool,
			`[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]`), "X-Mock-Chunks", "1")
		want := "message_start,content_block_start,ping,content_block_delta,content_block_stop," +
			"content_block_start,content_block_delta,content_block_delta,content_block_stop,message_delta,message_stop"
		if got := eventTypes(evs); got != want {
			t.Fatalf("events %s\nwant   %s", got, want)
		}
		if evs[3].Delta.Text != "I see 1 image(s). " || *evs[5].Index != 1 || evs[5].ContentBlock["type"] != "tool_use" ||
			*evs[6].Index != 1 || evs[6].Delta.PartialJSON+evs[7].Delta.PartialJSON != weatherArgs || *evs[8].Index != 1 {
			t.Errorf("blocks %+v", evs)
		}
	})
}

func TestAnthropicErrors(t *testing.T) {
	_, ts := start(t, Options{})
	good := anthropicMsg("claude-x", "", anthropicHi)
	for _, tc := range []struct {
		name, path, body string
		hdr              []string
		status           int
		typ              string
	}{
		{"missing key", "/v1/messages", good, []string{"X-Api-Key", ""}, 401, "authentication_error"},
		{"missing version", "/v1/messages", good, []string{"Anthropic-Version", ""}, 400, "invalid_request_error"},
		{"malformed json", "/v1/messages", `{"model":`, nil, 400, "invalid_request_error"},
		{"missing model", "/v1/messages", `{"max_tokens":5,"messages":` + anthropicHi + `}`, nil, 400, "invalid_request_error"},
		{"missing max_tokens", "/v1/messages", `{"model":"m","messages":` + anthropicHi + `}`, nil, 400, "invalid_request_error"},
		{"zero max_tokens", "/v1/messages", `{"model":"m","max_tokens":0,"messages":` + anthropicHi + `}`, nil, 400, "invalid_request_error"},
		{"missing messages", "/v1/messages", `{"model":"m","max_tokens":5}`, nil, 400, "invalid_request_error"},
		{"bad directive", "/v1/messages", anthropicMsg("m?colour=red", "", anthropicHi), nil, 400, "invalid_request_error"},
		{"bad directive header", "/v1/messages", good, []string{"X-Mock-Chunks", "0"}, 400, "invalid_request_error"},
		{"injected 400", "/v1/messages", anthropicMsg("m?status=400", "", anthropicHi), nil, 400, "invalid_request_error"},
		{"injected 401", "/v1/messages", good, []string{"X-Mock-Status", "401"}, 401, "authentication_error"},
		{"injected 403", "/v1/messages", anthropicMsg("m?status=403", "", anthropicHi), nil, 403, "permission_error"},
		{"injected 404", "/v1/messages", anthropicMsg("m?status=404", "", anthropicHi), nil, 404, "not_found_error"},
		{"injected 413", "/v1/messages", anthropicMsg("m?status=413", "", anthropicHi), nil, 413, "request_too_large"},
		{"injected 422", "/v1/messages", anthropicMsg("m?status=422", "", anthropicHi), nil, 422, "invalid_request_error"},
		{"injected 429", "/v1/messages", anthropicMsg("m?status=429", "", anthropicHi), nil, 429, "rate_limit_error"},
		{"injected 500", "/v1/messages", anthropicMsg("m?status=500", "", anthropicHi), nil, 500, "api_error"},
		{"injected 503", "/v1/messages", anthropicMsg("m?status=503", "", anthropicHi), nil, 503, "api_error"},
		{"injected 504", "/v1/messages", anthropicMsg("m?status=504", "", anthropicHi), nil, 504, "timeout_error"},
		{"injected 529", "/v1/messages", good, []string{"X-Mock-Status", "529"}, 529, "overloaded_error"},
		{"injected on stream", "/v1/messages", anthropicMsg("m?status=529", `,"stream":true`, anthropicHi), nil, 529, "overloaded_error"},
		{"unknown path", "/v1/messages/batches", good, nil, 404, "not_found_error"},
		{"wrong method", "/v1/messages", "", nil, 405, "invalid_request_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, b := anthropicCall(t, ts, tc.path, tc.body, tc.hdr...)
			var e struct {
				Type  string
				Error struct{ Type, Message string }
			}
			if err := json.Unmarshal(b, &e); err != nil || status != tc.status || e.Type != "error" || e.Error.Type != tc.typ || e.Error.Message == "" {
				t.Fatalf("status %d: %s", status, b)
			}
			sameJSON(t, b, `{"type":"error","error":{"type":"`+tc.typ+`","message":`+string(mustJSON(e.Error.Message))+`}}`)
			if strings.HasPrefix(tc.name, "injected") && e.Error.Message != "mockllm: injected "+statusText(tc.status) {
				t.Errorf("message %q", e.Error.Message)
			}
			if (hdr.Get("Retry-After") == "1") != (status == 429) || hdr.Get("Request-Id") == "" {
				t.Errorf("headers %v", hdr)
			}
		})
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestAnthropicAuthAndFaults(t *testing.T) {
	t.Run("bearer", func(t *testing.T) {
		s, ts := start(t, Options{})
		status, _, _ := call(t, ts, "/v1/messages", anthropicMsg("m", "", anthropicHi), "Authorization", "Bearer oauth", "Anthropic-Version", "2023-06-01")
		if st := s.Stats(); status != 200 || st.LastAuthorization != "Bearer oauth" || st.LastAuthHeader != "authorization" {
			t.Errorf("status %d, stats %+v", status, st)
		}
	})
	t.Run("latency", func(t *testing.T) {
		_, ts := start(t, Options{})
		begin := time.Now()
		status, _, _ := anthropicCall(t, ts, "/v1/messages", anthropicMsg("m?latency=30ms", "", anthropicHi))
		if status != 200 || time.Since(begin) < 30*time.Millisecond {
			t.Errorf("status %d after %v", status, time.Since(begin))
		}
	})
	t.Run("interval", func(t *testing.T) {
		_, ts := start(t, Options{})
		begin := time.Now()
		evs := anthropicStream(t, ts, anthropicMsg("m?chunks=3&interval=15ms", `,"stream":true`, anthropicHi))
		if len(evs) != 9 || time.Since(begin) < 30*time.Millisecond {
			t.Errorf("%d events after %v", len(evs), time.Since(begin))
		}
	})
	t.Run("reset", func(t *testing.T) {
		s, ts := start(t, Options{})
		resp, err := do(t, context.Background(), ts, "POST", "/v1/messages", anthropicMsg("m?fault=reset", "", anthropicHi),
			"X-Api-Key", "k", "Anthropic-Version", "2023-06-01")
		if err == nil {
			resp.Body.Close()
			t.Fatal("want a client error from the reset")
		}
		if st := s.Stats(); st.Resets != 1 || st.Completed != 0 {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("reset mid-stream", func(t *testing.T) {
		s, ts := start(t, Options{})
		resp, err := do(t, context.Background(), ts, "POST", "/v1/messages", anthropicMsg("m?fault=reset-mid-stream&chunks=6", `,"stream":true`, anthropicHi),
			"X-Api-Key", "k", "Anthropic-Version", "2023-06-01")
		if err != nil {
			t.Fatal(err)
		}
		evs, err := namedEvents(resp.Body)
		resp.Body.Close()
		// message_start, content_block_start, ping and 3 of the 6 deltas
		if err == nil || len(evs) != 6 || evs[5].name != "content_block_delta" {
			t.Errorf("%d events (%v) before the reset, error %v", len(evs), evs, err)
		}
		if st := s.Stats(); st.Resets != 1 || st.Completed != 0 {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("hang", func(t *testing.T) {
		s, ts := start(t, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			resp, err := do(t, ctx, ts, "POST", "/v1/messages", anthropicMsg("m", "", anthropicHi),
				"X-Api-Key", "k", "Anthropic-Version", "2023-06-01", "X-Mock-Fault", "hang")
			if err == nil {
				resp.Body.Close()
			}
			errc <- err
		}()
		eventually(t, "request in flight", func() bool { return s.Stats().InFlight == 1 })
		cancel()
		if err := <-errc; err == nil {
			t.Error("want a client error after cancel")
		}
		eventually(t, "Cancelled == 1", func() bool { return s.Stats().Cancelled == 1 })
	})
}

// The cache-write directive reports prompt tokens written to the cache:
// apart from input_tokens in Anthropic's and Bedrock's usage, inside
// prompt_tokens in OpenAI's; count_tokens does not see them.
func TestCacheWriteDirective(t *testing.T) {
	_, ts := start(t, Options{ContentSize: 20})
	type usage struct {
		InputTokens              int `json:"input_tokens"`
		CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	}
	longSystem := strings.Repeat("s", 120) // 31 prompt tokens, 15 read from the cache
	status, _, b := anthropicCall(t, ts, "/v1/messages", anthropicMsg("claude-x", `,"system":"`+longSystem+`"`, `[{"role":"user","content":"abcd"}]`),
		"X-Mock-Cache-Write", "100")
	if got := decode[struct{ Usage usage }](t, b).Usage; status != 200 || got != (usage{16, 100, 15}) {
		t.Errorf("anthropic: status %d, usage %+v; want 16 input, 100 written, 15 read", status, got)
	}
	status, _, b = anthropicCall(t, ts, "/v1/messages?beta=true", anthropicMsg("claude-x?cache-write=7", "", anthropicHi))
	if got := decode[struct{ Usage usage }](t, b).Usage; status != 200 || got != (usage{1, 7, 0}) {
		t.Errorf("model directive: status %d, usage %+v", status, got)
	}
	status, _, b = anthropicCall(t, ts, "/v1/messages/count_tokens", `{"model":"claude-x","messages":`+anthropicHi+`}`, "X-Mock-Cache-Write", "100")
	if got := decode[struct {
		InputTokens int `json:"input_tokens"`
	}](t, b).InputTokens; status != 200 || got != 1 {
		t.Errorf("count_tokens: status %d, input_tokens %d; want 1", status, got)
	}
	status, _, b = call(t, ts, bedrockURL, bedrockHi, "Authorization", "Bearer k", "X-Mock-Cache-Write", "9")
	if want := bedrockUsage(1, 5, 0, 9); status != 200 || !strings.Contains(string(b), want) {
		t.Errorf("bedrock: status %d, body %s; want usage %s", status, b, want)
	}
	status, _, b = call(t, ts, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer k", "X-Mock-Cache-Write", "9")
	if got := decode[struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}](t, b).Usage.PromptTokens; status != 200 || got != 10 {
		t.Errorf("openai: status %d, prompt_tokens %d; want 10", status, got)
	}
	if status, _, _ := anthropicCall(t, ts, "/v1/messages", anthropicMsg("claude-x", "", anthropicHi), "X-Mock-Cache-Write", "-1"); status != 400 {
		t.Errorf("negative cache-write: status %d, want 400", status)
	}
}
