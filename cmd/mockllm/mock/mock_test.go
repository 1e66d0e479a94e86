package mock

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func start(t testing.TB, o Options) (*Server, *httptest.Server) {
	t.Helper()
	s := New(o)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

func do(t testing.TB, ctx context.Context, ts *httptest.Server, method, path, body string, hdr ...string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return ts.Client().Do(req)
}

// call performs a request and returns the status, headers and body.
func call(t testing.TB, ts *httptest.Server, path, body string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	method := http.MethodPost
	if body == "" {
		method = http.MethodGet
	}
	resp, err := do(t, context.Background(), ts, method, path, body, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func decode[T any](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// events returns the data payloads of a server-sent event stream.
func events(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out, sc.Err()
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

type completion struct {
	ID, Object, Model string
	Created           int64
	Choices           []struct {
		Index   int
		Text    string
		Message struct{ Role, Content string }
		Delta   struct{ Role, Content string }
		// pointer: distinguishes null from absent only via Usage below
		FinishReason *string `json:"finish_reason"`
	}
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	}
}

type apiError struct {
	Error struct {
		Message, Type string
		Param         *string
		Code          *string
	}
}

const chatBody = `{"model":"gpt-x","messages":[{"role":"system","content":"hello there"},{"role":"user","content":[{"type":"text","text":"abcd"}]}]}`

func TestNonStream(t *testing.T) {
	_, ts := start(t, Options{})
	for _, tc := range []struct {
		path, body, idPrefix, object string
		prompt                       int
	}{
		{"/v1/chat/completions", chatBody, "chatcmpl-mock-", "chat.completion", 4}, // 15 chars
		{"/v1/completions", `{"model":"gpt-x","prompt":"a prompt of 22 chars."}`, "cmpl-mock-", "text_completion", 6},
	} {
		t.Run(tc.object, func(t *testing.T) {
			status, hdr, b := call(t, ts, tc.path, tc.body)
			if status != 200 || hdr.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d, content type %q", status, hdr.Get("Content-Type"))
			}
			c := decode[completion](t, b)
			if !strings.HasPrefix(c.ID, tc.idPrefix) || c.Object != tc.object || c.Model != "gpt-x" || c.Created == 0 || len(c.Choices) != 1 {
				t.Fatalf("bad completion: %s", b)
			}
			ch := c.Choices[0]
			text := ch.Text
			if tc.object == "chat.completion" {
				text = ch.Message.Content
				if ch.Message.Role != "assistant" {
					t.Errorf("role %q", ch.Message.Role)
				}
			}
			if !strings.HasPrefix(text, "Hello from mockllm.") || len(text) != 1000 {
				t.Errorf("content %d bytes: %.40q", len(text), text)
			}
			if ch.FinishReason == nil || *ch.FinishReason != "stop" {
				t.Errorf("finish_reason %v", ch.FinishReason)
			}
			if u := c.Usage; u == nil || u.PromptTokens != tc.prompt || u.CompletionTokens != 250 || u.TotalTokens != tc.prompt+250 {
				t.Errorf("usage %+v", u)
			}
		})
	}
}

func TestStream(t *testing.T) {
	_, ts := start(t, Options{})
	for _, tc := range []struct {
		name, path, body string
		includeUsage     bool
	}{
		{"chat", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"content":"hi"}]}`, false},
		{"chat usage", "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"content":"hi"}]}`, true},
		{"chat usage false", "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":false},"messages":[{"content":"hi"}]}`, false},
		{"legacy", "/v1/completions", `{"model":"m","stream":true,"prompt":"hi"}`, false},
		{"legacy usage", "/v1/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"prompt":"hi"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := do(t, context.Background(), ts, "POST", tc.path, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
				t.Fatalf("status %d, content type %q", resp.StatusCode, ct)
			}
			evs, err := events(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			want := 10 + 1 // chunks + [DONE]
			if tc.includeUsage {
				want++
			}
			if len(evs) != want || evs[len(evs)-1] != "[DONE]" {
				t.Fatalf("got %d events, want %d ending in [DONE]: %q", len(evs), want, evs)
			}
			var text strings.Builder
			for i, ev := range evs[:10] {
				c := decode[completion](t, []byte(ev))
				if strings.Contains(ev, `"usage":null`) != tc.includeUsage || c.Usage != nil {
					t.Errorf("chunk %d usage field wrong (include_usage=%v): %s", i, tc.includeUsage, ev)
				}
				if len(c.Choices) != 1 || c.Model != "m" {
					t.Fatalf("chunk %d: %s", i, ev)
				}
				ch := c.Choices[0]
				text.WriteString(ch.Text + ch.Delta.Content)
				if isChat := tc.path == "/v1/chat/completions"; isChat && (ch.Delta.Role == "assistant") != (i == 0) {
					t.Errorf("chunk %d delta role %q", i, ch.Delta.Role)
				}
				if (ch.FinishReason != nil) != (i == 9) || i == 9 && *ch.FinishReason != "stop" {
					t.Errorf("chunk %d finish_reason %v", i, ch.FinishReason)
				}
			}
			if !strings.HasPrefix(text.String(), "Hello from mockllm.") {
				t.Errorf("streamed text %q", text.String())
			}
			if tc.includeUsage {
				c := decode[completion](t, []byte(evs[10]))
				if !strings.Contains(evs[10], `"choices":[]`) || c.Usage == nil || c.Usage.CompletionTokens != 10 || c.Usage.PromptTokens != 1 || c.Usage.TotalTokens != 11 {
					t.Errorf("usage chunk %s", evs[10])
				}
			}
		})
	}
}

func TestEmbeddings(t *testing.T) {
	_, ts := start(t, Options{})
	type embeddings struct {
		Object string
		Model  string
		Data   []struct {
			Object    string
			Index     int
			Embedding json.RawMessage
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		}
	}
	for _, tc := range []struct {
		name, input, extra string
		n, dims, tokens    int
	}{
		{"string", `"hello world"`, "", 1, 8, 3},
		{"array", `["a","bb","hello world"]`, "", 3, 8, 5},
		{"token ids", `[1,2,3]`, "", 1, 8, 3},
		{"token arrays", `[[1,2],[3]]`, "", 2, 8, 3},
		{"dimensions", `"x"`, `,"dimensions":3`, 1, 3, 1},
		{"base64", `["x","y"]`, `,"encoding_format":"base64"`, 2, 8, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := call(t, ts, "/v1/embeddings", `{"model":"emb?latency=1ms","input":`+tc.input+tc.extra+`}`)
			if status != 200 {
				t.Fatalf("status %d: %s", status, b)
			}
			e := decode[embeddings](t, b)
			if e.Object != "list" || e.Model != "emb" || len(e.Data) != tc.n || e.Usage.PromptTokens != tc.tokens || e.Usage.TotalTokens != tc.tokens {
				t.Fatalf("bad response: %s", b)
			}
			for i, d := range e.Data {
				var vec []float32
				if tc.name == "base64" {
					raw, err := base64.StdEncoding.DecodeString(decode[string](t, d.Embedding))
					if err != nil || len(raw) != 4*tc.dims {
						t.Fatalf("base64 embedding %s: %v", d.Embedding, err)
					}
					vec = make([]float32, tc.dims)
				} else {
					vec = decode[[]float32](t, d.Embedding)
				}
				if d.Object != "embedding" || d.Index != i || len(vec) != tc.dims {
					t.Errorf("datum %d: %+v", i, d)
				}
			}
		})
	}
	_, _, b1 := call(t, ts, "/v1/embeddings", `{"model":"e","input":"same"}`)
	_, _, b2 := call(t, ts, "/v1/embeddings", `{"model":"e","input":["same"]}`)
	if !bytes.Equal(b1, b2) {
		t.Errorf("embeddings not deterministic:\n%s\n%s", b1, b2)
	}
}

func TestModels(t *testing.T) {
	_, ts := start(t, Options{})
	status, _, b := call(t, ts, "/v1/models", "")
	m := decode[struct {
		Object string
		Data   []struct{ ID, Object string }
	}](t, b)
	if status != 200 || m.Object != "list" || len(m.Data) == 0 || m.Data[0].ID == "" || m.Data[0].Object != "model" {
		t.Fatalf("status %d: %s", status, b)
	}
}

func TestErrors(t *testing.T) {
	_, ts := start(t, Options{})
	for _, tc := range []struct {
		name, path, body string
		hdr              []string
		status           int
		typ, code        string
	}{
		{"status 500 header", "/v1/chat/completions", chatBody, []string{"X-Mock-Status", "500"}, 500, "server_error", ""},
		{"status 429 header", "/v1/chat/completions", chatBody, []string{"X-Mock-Status", "429"}, 429, "requests", "rate_limit_exceeded"},
		{"status 503 model", "/v1/chat/completions", `{"model":"m?status=503","messages":[{"content":"x"}]}`, nil, 503, "server_error", ""},
		{"status 429 model", "/v1/embeddings", `{"model":"m?status=429","input":"x"}`, nil, 429, "requests", "rate_limit_exceeded"},
		{"status 404 model", "/v1/completions", `{"model":"m?status=404","prompt":"x"}`, nil, 404, "invalid_request_error", "model_not_found"},
		{"status on models", "/v1/models", "", []string{"X-Mock-Status", "401"}, 401, "invalid_request_error", "invalid_api_key"},
		{"malformed json", "/v1/chat/completions", `{"model":`, nil, 400, "invalid_request_error", ""},
		{"missing model", "/v1/chat/completions", `{"messages":[{"content":"x"}]}`, nil, 400, "invalid_request_error", ""},
		{"missing messages", "/v1/chat/completions", `{"model":"m"}`, nil, 400, "invalid_request_error", ""},
		{"bad embeddings input", "/v1/embeddings", `{"model":"m","input":42}`, nil, 400, "invalid_request_error", ""},
		{"unknown fault", "/v1/chat/completions", `{"model":"m?fault=explode","messages":[{"content":"x"}]}`, nil, 400, "invalid_request_error", "invalid_mock_directive"},
		{"unknown directive", "/v1/chat/completions", `{"model":"m?colour=red","messages":[{"content":"x"}]}`, nil, 400, "invalid_request_error", "invalid_mock_directive"},
		{"status out of range", "/v1/chat/completions", `{"model":"m?status=200","messages":[{"content":"x"}]}`, nil, 400, "invalid_request_error", "invalid_mock_directive"},
		{"bad latency header", "/v1/chat/completions", chatBody, []string{"X-Mock-Latency", "soon"}, 400, "invalid_request_error", "invalid_mock_directive"},
		{"bad chunks header", "/v1/chat/completions", chatBody, []string{"X-Mock-Chunks", "0"}, 400, "invalid_request_error", "invalid_mock_directive"},
		{"unknown header", "/v1/chat/completions", chatBody, []string{"X-Mock-Colour", "red"}, 400, "invalid_request_error", "invalid_mock_directive"},
		{"unknown path", "/v1/nope", chatBody, nil, 404, "invalid_request_error", ""},
		{"wrong method", "/v1/chat/completions", "", nil, 405, "invalid_request_error", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, b := call(t, ts, tc.path, tc.body, tc.hdr...)
			e := decode[apiError](t, b)
			code := ""
			if e.Error.Code != nil {
				code = *e.Error.Code
			}
			if status != tc.status || e.Error.Message == "" || e.Error.Type != tc.typ || code != tc.code || e.Error.Param != nil {
				t.Fatalf("status %d: %s", status, b)
			}
			if (hdr.Get("Retry-After") == "1") != (status == 429) {
				t.Errorf("Retry-After %q", hdr.Get("Retry-After"))
			}
		})
	}
}

func TestDirectives(t *testing.T) {
	_, ts := start(t, Options{})
	msgs := `,"messages":[{"content":"x"}]}`
	for _, tc := range []struct {
		name, model string
		hdr         []string
		stream      bool
		size        int // content bytes, or stream events before [DONE]
		minElapsed  time.Duration
	}{
		{"size model", "gpt-x?size=64", nil, false, 64, 0},
		{"size header", "gpt-x", []string{"X-Mock-Size", "64"}, false, 64, 0},
		{"model beats header", "gpt-x?size=32", []string{"X-Mock-Size", "64"}, false, 32, 0},
		{"size zero", "gpt-x?size=0", nil, false, 0, 0},
		{"chunks model", "gpt-x?chunks=3&interval=1ms", nil, true, 3, 2 * time.Millisecond},
		{"chunks header", "gpt-x", []string{"X-Mock-Chunks", "50", "X-Mock-Interval", "0s"}, true, 50, 0},
		{"latency model", "gpt-x?latency=30ms&size=10", nil, false, 10, 30 * time.Millisecond},
		{"latency header", "gpt-x", []string{"X-Mock-Latency", "30ms"}, false, 1000, 30 * time.Millisecond},
		{"latency stream", "gpt-x?latency=20ms&chunks=5&interval=5ms", nil, true, 5, 40 * time.Millisecond},
		{"fault none", "gpt-x?fault=none", nil, false, 1000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"` + tc.model + `","stream":` + map[bool]string{true: "true", false: "false"}[tc.stream] + msgs
			begin := time.Now()
			status, _, b := call(t, ts, "/v1/chat/completions", body, tc.hdr...)
			if elapsed := time.Since(begin); status != 200 || elapsed < tc.minElapsed {
				t.Fatalf("status %d after %v: %s", status, elapsed, b)
			}
			if tc.stream {
				evs, _ := events(bytes.NewReader(b))
				if len(evs) != tc.size+1 || decode[completion](t, []byte(evs[0])).Model != "gpt-x" {
					t.Fatalf("got %d events: %s", len(evs), b)
				}
				return
			}
			c := decode[completion](t, b)
			if c.Model != "gpt-x" || len(c.Choices[0].Message.Content) != tc.size || c.Usage.CompletionTokens != (tc.size+3)/4 {
				t.Fatalf("bad response: %s", b)
			}
		})
	}
}

func TestResetFaults(t *testing.T) {
	for _, tc := range []struct {
		name, model string
		hdr         []string
		stream      bool
		wantEvents  int
	}{
		{"reset model", "m?fault=reset", nil, false, 0},
		{"reset header", "m", []string{"X-Mock-Fault", "reset"}, false, 0},
		{"reset after latency", "m?fault=reset&latency=5ms", nil, false, 0},
		{"mid-stream", "m?fault=reset-mid-stream&chunks=6", nil, true, 3},
		{"mid-stream header", "m", []string{"X-Mock-Fault", "reset-mid-stream", "X-Mock-Chunks", "8"}, true, 4},
		{"mid-body", "m?fault=reset-mid-stream", nil, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ts := start(t, Options{})
			body := `{"model":"` + tc.model + `","stream":` + map[bool]string{true: "true", false: "false"}[tc.stream] + `,"messages":[{"content":"x"}]}`
			resp, err := do(t, context.Background(), ts, "POST", "/v1/chat/completions", body, tc.hdr...)
			if tc.stream || tc.name == "mid-body" {
				if err != nil {
					t.Fatalf("want headers before the reset: %v", err)
				}
				var evs []string
				if tc.stream {
					evs, err = events(resp.Body)
				} else {
					_, err = io.ReadAll(resp.Body)
				}
				resp.Body.Close()
				if len(evs) != tc.wantEvents {
					t.Errorf("got %d events before the reset, want %d", len(evs), tc.wantEvents)
				}
			} else if err == nil {
				resp.Body.Close()
			}
			if err == nil {
				t.Fatal("want a client error from the reset")
			}
			if st := s.Stats(); st.Resets != 1 || st.Completed != 0 || st.Cancelled != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestCancelled(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		hdr              []string
		firstEvent       bool // wait for a stream event before cancelling
	}{
		{"hang model", "/v1/chat/completions", `{"model":"m?fault=hang","messages":[{"content":"x"}]}`, nil, false},
		{"hang header", "/v1/models", "", []string{"X-Mock-Fault", "hang"}, false},
		{"latency", "/v1/embeddings", `{"model":"m?latency=1h","input":"x"}`, nil, false},
		{"mid-stream", "/v1/completions", `{"model":"m?interval=1h","stream":true,"prompt":"x"}`, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ts := start(t, Options{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			method := "POST"
			if tc.body == "" {
				method = "GET"
			}
			errc := make(chan error, 1)
			go func() {
				resp, err := do(t, ctx, ts, method, tc.path, tc.body, tc.hdr...)
				if err == nil {
					if tc.firstEvent {
						_, _ = bufio.NewReader(resp.Body).ReadString('\n')
						cancel()
					}
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				errc <- err
			}()
			if !tc.firstEvent {
				eventually(t, "request in flight", func() bool { return s.Stats().InFlight == 1 })
				cancel()
			}
			if err := <-errc; err == nil {
				t.Error("want a client error after cancel")
			}
			eventually(t, "Cancelled == 1", func() bool { return s.Stats().Cancelled == 1 })
			if st := s.Stats(); st.InFlight != 0 || st.Completed != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestStatsAndReset(t *testing.T) {
	s, ts := start(t, Options{})
	call(t, ts, "/v1/models", "")
	call(t, ts, "/v1/nope", "{}")
	call(t, ts, "/v1/chat/completions", `{"model":"m?status=500","messages":[{"content":"x"}]}`)
	call(t, ts, "/v1/chat/completions", chatBody, "Authorization", "Bearer sk-test")

	st := s.Stats()
	want := map[string]int64{"/v1/models": 1, "/v1/nope": 1, "/v1/chat/completions": 2}
	if st.Requests != 4 || st.Completed != 4 || st.Errors != 2 || st.InFlight != 0 || st.MaxInFlight != 1 ||
		st.LastAuthorization != "Bearer sk-test" || st.LastAuthHeader != "authorization" || string(st.LastBody) != chatBody ||
		len(st.ByPath) != len(want) || len(st.ByFormat) != 1 || st.ByFormat["openai"] != 3 {
		t.Fatalf("stats %+v", st)
	}
	for p, n := range want {
		if st.ByPath[p] != n {
			t.Errorf("ByPath[%s] = %d, want %d", p, st.ByPath[p], n)
		}
	}

	status, _, b := call(t, ts, "/mock/stats", "")
	got := decode[Stats](t, b)
	if status != 200 || !strings.Contains(string(b), `"last_body":"{`) || string(got.LastBody) != chatBody || got.Requests != 4 ||
		got.ByPath["/v1/nope"] != 1 || got.ByFormat["openai"] != 3 || got.LastAuthHeader != "authorization" {
		t.Fatalf("/mock/stats %d: %s", status, b)
	}

	if status, _, _ := call(t, ts, "/mock/reset", "{}"); status != http.StatusNoContent {
		t.Fatalf("/mock/reset status %d", status)
	}
	st = s.Stats()
	if st.Requests != 0 || st.Completed != 0 || st.Errors != 0 || st.MaxInFlight != 0 || len(st.ByPath) != 0 || len(st.ByFormat) != 0 ||
		st.LastBody != nil || st.LastAuthorization != "" || st.LastAuthHeader != "" {
		t.Fatalf("after reset: %+v", st)
	}
}

func TestMaxInFlight(t *testing.T) {
	const n = 8
	s, ts := start(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := do(t, ctx, ts, "POST", "/v1/chat/completions", `{"model":"m?fault=hang","messages":[{"content":"x"}]}`)
			if err == nil {
				resp.Body.Close()
			}
		})
	}
	eventually(t, "all requests in flight", func() bool { return s.Stats().InFlight == n })
	cancel()
	wg.Wait()
	eventually(t, "all requests cancelled", func() bool { return s.Stats().Cancelled == n })
	if st := s.Stats(); st.MaxInFlight != n || st.InFlight != 0 || st.Requests != n {
		t.Fatalf("stats %+v", st)
	}
	call(t, ts, "/v1/models", "")
	s.Reset()
	if st := s.Stats(); st.MaxInFlight != 0 {
		t.Fatalf("MaxInFlight after reset %d", st.MaxInFlight)
	}
}

// discard is a minimal ResponseWriter for measuring the handler alone.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

func BenchmarkChatCompletion(b *testing.B) {
	b.Run("handler", func(b *testing.B) {
		s := New(Options{})
		w := &discard{h: http.Header{}}
		body := strings.NewReader(chatBody)
		req := httptest.NewRequest("POST", "/v1/chat/completions", body)
		b.ReportAllocs()
		for b.Loop() {
			body.Reset(chatBody)
			s.ServeHTTP(w, req)
		}
		if st := s.Stats(); st.Errors != 0 {
			b.Fatalf("stats %+v", st)
		}
	})
	b.Run("http", func(b *testing.B) {
		_, ts := start(b, Options{})
		ts.Client().Transport.(*http.Transport).MaxIdleConnsPerHost = 64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				resp, err := ts.Client().Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	})
}
