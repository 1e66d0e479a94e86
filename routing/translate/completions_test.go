package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCompletionsDecode(t *testing.T) {
	c, err := CompletionsInbound.DecodeRequest([]byte(`{"model":"m","prompt":["Say this is a test"],"max_tokens":7,"temperature":0,"stop":"\n","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(c)
	want := `{"model":"m","messages":[{"role":"user","content":"Say this is a test"}],"max_tokens":7,"temperature":0,"stop":["\n"],"stream":true,"stream_options":{}}`
	if !jsonEqualCompletions(t, got, []byte(want)) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	c, err = CompletionsInbound.DecodeRequest([]byte(`{"model":"m","prompt":"hi"}`))
	if err != nil || c.MaxTokens == nil || *c.MaxTokens != 16 {
		t.Errorf("default max_tokens: %+v %v", c, err)
	}
	for body, param := range map[string]string{
		`{"model":"m"}`:                               "prompt",
		`{"model":"m","prompt":["a","b"]}`:            "prompt",
		`{"model":"m","prompt":[1,2,3]}`:              "prompt",
		`{"model":"m","prompt":"x","best_of":2}`:      "best_of",
		`{"model":"m","prompt":"x","echo":true}`:      "echo",
		`{"model":"m","prompt":"x","suffix":"end"}`:   "suffix",
		`{"model":"m","prompt":"x","logprobs":2}`:     "logprobs",
		`{"model":"m","prompt":"x","max_tokens":"a"}`: "",
	} {
		_, err := CompletionsInbound.DecodeRequest([]byte(body))
		var e *Error
		if !errors.As(err, &e) || e.Status != 400 || e.Param != param {
			t.Errorf("%s: err %v, want a 400 naming %q", body, err, param)
		}
	}
}

func TestCompletionsEncode(t *testing.T) {
	out, err := CompletionsInbound.EncodeResponse(&ChatResponse{ID: "chatcmpl-abc", Created: 5, Model: "m",
		Choices: []Choice{{Message: Message{Role: "assistant", Content: TextContent("This is a test")}, FinishReason: "length"}},
		Usage:   &Usage{PromptTokens: 5, CompletionTokens: 7, TotalTokens: 12}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"cmpl-abc","object":"text_completion","created":5,"model":"m","choices":[{"text":"This is a test","index":0,"logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`
	if !jsonEqualCompletions(t, out, []byte(want)) {
		t.Errorf("got  %s\nwant %s", out, want)
	}

	var buf bytes.Buffer
	enc := CompletionsInbound.NewStreamEncoder(&buf, "m")
	SetIncludeUsage(enc, true)
	hello, stop := "Hello", FinishStop
	for _, c := range []*Chunk{
		{ID: "chatcmpl-1", Choices: []ChunkChoice{{Delta: Delta{Role: "assistant"}}}},
		{ID: "chatcmpl-1", Choices: []ChunkChoice{{Delta: Delta{Content: &hello}}}},
		{ID: "chatcmpl-1", Choices: []ChunkChoice{{FinishReason: &stop}}},
		{ID: "chatcmpl-1", Usage: &Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}},
	} {
		if err := enc.WriteChunk(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(nil); err != nil {
		t.Fatal(err)
	}
	events := strings.Split(strings.TrimSpace(buf.String()), "\n\n")
	if len(events) != 4 || events[3] != "data: [DONE]" ||
		!strings.Contains(events[0], `"text":"Hello"`) || !strings.Contains(events[1], `"finish_reason":"stop"`) ||
		!strings.Contains(events[2], `"usage"`) || !strings.Contains(events[0], `"object":"text_completion"`) {
		t.Errorf("stream:\n%s", buf.String())
	}
}

func jsonEqualCompletions(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func FuzzCompletionsRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","prompt":["Say this is a test"],"max_tokens":7,"stop":"\n","stream":true}`))
	f.Add([]byte(`{"model":"m","prompt":"x","best_of":2}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := CompletionsInbound.DecodeRequest(body)
		if err == nil && (len(c.Messages) != 1 || c.Messages[0].Role != "user") {
			t.Fatalf("decoded %+v", c)
		}
	})
}
