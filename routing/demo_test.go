package routing_test

import (
	"bufio"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/routing"
)

func serveDemo(t *testing.T, e routing.Endpoint, body string) (*httptest.ResponseRecorder, routing.Usage) {
	t.Helper()
	req, err := routing.ScanRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	u := routing.ServeDemo(w, e, req.Model, []byte(body), &req, nil)
	if w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	return w, u
}

type demoUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

func (d demoUsage) usage() routing.Usage {
	return routing.Usage{PromptTokens: d.PromptTokens, CompletionTokens: d.CompletionTokens, TotalTokens: d.TotalTokens, Present: true}
}

type demoResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message *struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Delta *struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Data []struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	} `json:"data"`
	Usage *demoUsage `json:"usage"`
}

func TestServeDemoChat(t *testing.T) {
	body := `{"model":"demo","messages":[{"role":"system","content":"be nice"},{"role":"user","content":"first"},` +
		`{"role":"assistant","content":"ok"},{"role":"user","content":[{"type":"text","text":"hello "},{"type":"text","text":"demo"}]}]}`
	w, u := serveDemo(t, routing.EndpointChat, body)
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var r demoResponse
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Object != "chat.completion" || r.Model != "demo" || r.ID == "" || r.Created == 0 || len(r.Choices) != 1 {
		t.Fatalf("unexpected response %s", w.Body)
	}
	c := r.Choices[0]
	if c.Message == nil || c.Message.Role != "assistant" || !strings.HasSuffix(c.Message.Content, "You said: hello demo") {
		t.Errorf("message %+v", c.Message)
	}
	if c.FinishReason == nil || *c.FinishReason != "stop" {
		t.Errorf("finish_reason %v", c.FinishReason)
	}
	if r.Usage == nil || r.Usage.usage() != u {
		t.Errorf("body usage %+v, returned %+v", r.Usage, u)
	}
	if u.PromptTokens != int64(len("hello demo")/4+1) || u.TotalTokens != u.PromptTokens+u.CompletionTokens || u.CompletionTokens == 0 {
		t.Errorf("usage %+v", u)
	}
}

func TestServeDemoLongPromptTruncated(t *testing.T) {
	long := strings.Repeat("x", 500)
	w, _ := serveDemo(t, routing.EndpointChat, `{"model":"demo","messages":[{"role":"user","content":"`+long+`"}]}`)
	var r demoResponse
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if got := r.Choices[0].Message.Content; !strings.HasSuffix(got, strings.Repeat("x", 200)+"…") {
		t.Errorf("content %q", got)
	}
}

func TestServeDemoCompletions(t *testing.T) {
	w, u := serveDemo(t, routing.EndpointCompletions, `{"model":"demo-text","prompt":"say hi"}`)
	var r demoResponse
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Object != "text_completion" || r.Model != "demo-text" || len(r.Choices) != 1 || r.Choices[0].Text == nil ||
		!strings.HasSuffix(*r.Choices[0].Text, "You said: say hi") {
		t.Fatalf("unexpected response %s", w.Body)
	}
	if r.Usage == nil || r.Usage.usage() != u {
		t.Errorf("body usage %+v, returned %+v", r.Usage, u)
	}
}

func TestServeDemoEmbeddings(t *testing.T) {
	w, u := serveDemo(t, routing.EndpointEmbeddings, `{"model":"demo-embed","input":"embed me"}`)
	var r demoResponse
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Object != "list" || r.Model != "demo-embed" || len(r.Data) != 1 || r.Data[0].Object != "embedding" || len(r.Data[0].Embedding) != 8 {
		t.Fatalf("unexpected response %s", w.Body)
	}
	want := routing.Usage{PromptTokens: int64(len("embed me")/4 + 1), Present: true}
	want.TotalTokens = want.PromptTokens
	if u != want || r.Usage == nil || r.Usage.PromptTokens != want.PromptTokens || r.Usage.TotalTokens != want.TotalTokens {
		t.Errorf("usage returned %+v body %+v, want %+v", u, r.Usage, want)
	}
}

// sseData returns the data payloads of a complete event stream, one per
// event, checking every event is a single "data: " line.
func sseData(t *testing.T, stream string) []string {
	t.Helper()
	if !strings.HasSuffix(stream, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", stream)
	}
	var out []string
	sc := bufio.NewScanner(strings.NewReader(stream))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("unexpected line %q", line)
		}
		out = append(out, d)
	}
	return out
}

func TestServeDemoStream(t *testing.T) {
	for _, tc := range []struct {
		name         string
		e            routing.Endpoint
		body         string
		includeUsage bool
		object       string
	}{
		{"chat", routing.EndpointChat, `{"model":"demo","stream":true,"messages":[{"role":"user","content":"ping"}]}`, false, "chat.completion.chunk"},
		{"chat with usage", routing.EndpointChat, `{"model":"demo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"ping"}]}`, true, "chat.completion.chunk"},
		{"completions", routing.EndpointCompletions, `{"model":"demo","stream":true,"prompt":"ping"}`, false, "text_completion"},
		{"completions with usage", routing.EndpointCompletions, `{"model":"demo","stream":true,"stream_options":{"include_usage":true},"prompt":"ping"}`, true, "text_completion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, u := serveDemo(t, tc.e, tc.body)
			if ct := w.Header().Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type %q", ct)
			}
			if !w.Flushed {
				t.Error("stream not flushed")
			}
			data := sseData(t, w.Body.String())
			if len(data) < 3 || data[len(data)-1] != "[DONE]" {
				t.Fatalf("events %q", data)
			}
			events := data[:len(data)-1]
			var usage *demoUsage
			if tc.includeUsage {
				var last demoResponse
				if err := json.Unmarshal([]byte(events[len(events)-1]), &last); err != nil {
					t.Fatal(err)
				}
				if len(last.Choices) != 0 || last.Usage == nil {
					t.Fatalf("last event is not a usage-only chunk: %s", events[len(events)-1])
				}
				usage = last.Usage
				events = events[:len(events)-1]
			}
			var text strings.Builder
			badObject := false
			for i, ev := range events {
				var r demoResponse
				if err := json.Unmarshal([]byte(ev), &r); err != nil {
					t.Fatalf("event %d %q: %v", i, ev, err)
				}
				if r.Object != tc.object && !badObject {
					badObject = true
					t.Errorf("event %d object %q, want %q (OpenAI's chunk object for this endpoint)", i, r.Object, tc.object)
				}
				if r.Usage != nil {
					t.Errorf("event %d carries usage: %s", i, ev)
				}
				if len(r.Choices) != 1 {
					t.Fatalf("event %d: %s", i, ev)
				}
				c := r.Choices[0]
				if tc.e == routing.EndpointChat {
					if c.Delta == nil {
						t.Fatalf("event %d has no delta: %s", i, ev)
					}
					if (i == 0) != (c.Delta.Role == "assistant") {
						t.Errorf("event %d role %q", i, c.Delta.Role)
					}
					text.WriteString(c.Delta.Content)
				} else {
					if c.Text == nil {
						t.Fatalf("event %d has no text: %s", i, ev)
					}
					text.WriteString(*c.Text)
				}
				last := i == len(events)-1
				if last != (c.FinishReason != nil && *c.FinishReason == "stop") {
					t.Errorf("event %d finish_reason %v", i, c.FinishReason)
				}
			}
			if !strings.HasPrefix(text.String(), "Hello from Tollgate") || !strings.HasSuffix(text.String(), "You said: ping") {
				t.Errorf("streamed text %q", text.String())
			}
			if !u.Present || u.PromptTokens != 2 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
				t.Errorf("returned usage %+v", u)
			}
			if usage != nil && usage.usage() != u {
				t.Errorf("streamed usage %+v, returned %+v", usage, u)
			}
		})
	}
}
