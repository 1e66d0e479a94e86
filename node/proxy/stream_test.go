package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/routing"
)

type chunk struct {
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
}

// TestStreamEventsArriveIncrementally: the first event reaches the client
// while the upstream is still streaming.
func TestStreamEventsArriveIncrementally(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{})
	depID := uniq("dep")
	route := newRoute(t, "incr", dep(depID, url, "mock-up?chunks=5&interval=100ms"))
	_, secret := newKey(t, route)
	g := startGateway(t, proxy.Config{})

	resp, sse := g.openStream(t, context.Background(), "/v1/chat/completions", secret, chatBody(route, `"stream":true`))
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	for h, want := range map[string]string{
		"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no",
		"X-Tollgate-Deployment": depID,
	} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	if !requestIDPattern.MatchString(resp.Header.Get("X-Request-Id")) {
		t.Errorf("X-Request-Id %q", resp.Header.Get("X-Request-Id"))
	}
	first, err := sse.next()
	if err != nil {
		t.Fatal(err)
	}
	// The mock sends its last chunk 400ms after its first.
	if st := ms.Stats(); st.Completed != 0 || st.InFlight != 1 {
		t.Fatalf("the first event was only readable after the upstream finished (completed %d, in flight %d)", st.Completed, st.InFlight)
	}
	rest, err := sse.all()
	if err != nil {
		t.Fatal(err)
	}
	events := append([]string{first}, rest...)
	if len(events) != 6 || events[5] != "[DONE]" {
		t.Fatalf("events %q", events)
	}
	var text strings.Builder
	for i, ev := range events[:5] {
		var c chunk
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("event %d %q: %v", i, ev, err)
		}
		if c.Object != "chat.completion.chunk" || c.Model != "mock-up" || len(c.Choices) != 1 {
			t.Errorf("event %d: %s", i, ev)
		}
		text.WriteString(c.Choices[0].Delta.Content)
	}
	if text.String() != "Hello from mockllm. This is" {
		t.Errorf("streamed text %q", text.String())
	}
	rec := g.rec.wait(t, resp.Header.Get("X-Request-Id"))
	want := routing.Usage{PromptTokens: chatPromptTokens, CompletionTokens: 5, TotalTokens: chatPromptTokens + 5, Present: true}
	if rec.Status != 200 || !rec.Stream || rec.Usage != want || rec.Deployment != depID {
		t.Errorf("Record %+v, want usage %+v", rec, want)
	}
}

// TestStreamRelaysEachEventImmediately uses an upstream that sends its next
// event only once the client has read the previous one from the gateway:
// it deadlocks (and times out) unless every event is flushed on its own.
func TestStreamRelaysEachEventImmediately(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		rc := http.NewResponseController(w)
		for i := range 3 {
			// A comment line, a multi-line-free event, CRLF line ends.
			fmt.Fprintf(w, ": keep-alive\r\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"c%d\"}}]}\r\n\r\n", i)
			_ = rc.Flush()
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprint(w, "data: [DONE]\r\n\r\n")
	}))
	t.Cleanup(up.Close)
	route := newRoute(t, "gated", dep(uniq("dep"), up.URL, "m"))
	_, secret := newKey(t, route)
	g := startGateway(t, proxy.Config{})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, sse := g.openStream(t, ctx, "/v1/chat/completions", secret, chatBody(route, `"stream":true`))
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	for i := range 3 {
		ev, err := sse.next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if want := fmt.Sprintf("<non-data line : keep-alive>\n{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"c%d\"}}]}", i); ev != want {
			t.Fatalf("event %d %q, want %q", i, ev, want)
		}
		gate <- struct{}{}
	}
	rest, err := sse.all()
	if err != nil || len(rest) != 1 || rest[0] != "[DONE]" {
		t.Fatalf("rest %q, %v", rest, err)
	}
}

func TestStreamUsage(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{Chunks: 3})
	route := newRoute(t, "susage", dep(uniq("dep"), url, "mock-up"))
	_, secret := newKey(t, route)
	g := startGateway(t, proxy.Config{})
	q, _ := json.Marshal(route)
	completion := func(extra string) string {
		return `{"model":` + string(q) + `,"prompt":"Say hi","stream":true` + extra + `}`
	}
	cases := []struct {
		name, path, body string
		asked            bool
		prompt           int64
	}{
		{"chat, absent", "/v1/chat/completions", chatBody(route, `"stream":true`), false, chatPromptTokens},
		{"chat, false", "/v1/chat/completions", chatBody(route, `"stream":true`, `"stream_options":{"include_usage":false}`), false, chatPromptTokens},
		{"chat, null", "/v1/chat/completions", chatBody(route, `"stream":true`, `"stream_options":null`), false, chatPromptTokens},
		{"chat, empty options", "/v1/chat/completions", chatBody(route, `"stream_options":{}`, `"stream":true`), false, chatPromptTokens},
		{"chat, true", "/v1/chat/completions", chatBody(route, `"stream":true`, `"stream_options":{"include_usage":true}`), true, chatPromptTokens},
		{"completions, absent", "/v1/completions", completion(""), false, 2},
		{"completions, true", "/v1/completions", completion(`,"stream_options":{"include_usage":true}`), true, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, sse := g.openStream(t, context.Background(), tc.path, secret, tc.body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			events, err := sse.all()
			if err != nil {
				t.Fatal(err)
			}
			// The upstream was always asked for usage.
			var up struct {
				StreamOptions struct {
					IncludeUsage bool `json:"include_usage"`
				} `json:"stream_options"`
			}
			if err := json.Unmarshal(ms.Stats().LastBody, &up); err != nil || !up.StreamOptions.IncludeUsage {
				t.Errorf("upstream body %s does not ask for usage", ms.Stats().LastBody)
			}
			wantEvents := 3 + 1
			if tc.asked {
				wantEvents++
			}
			if len(events) != wantEvents || events[len(events)-1] != "[DONE]" {
				t.Fatalf("events %q", events)
			}
			for i, ev := range events[:3] {
				var c chunk
				if err := json.Unmarshal([]byte(ev), &c); err != nil {
					t.Fatalf("event %d %q: %v", i, ev, err)
				}
				if len(c.Choices) != 1 {
					t.Errorf("event %d: %s", i, ev)
				}
				if hasUsage := strings.Contains(ev, `"usage":null`); hasUsage != tc.asked {
					t.Errorf("event %d %s: \"usage\":null present %v, want %v", i, ev, hasUsage, tc.asked)
				}
				if !tc.asked && strings.Contains(ev, "usage") {
					t.Errorf("event %d mentions usage: %s", i, ev)
				}
			}
			want := routing.Usage{PromptTokens: tc.prompt, CompletionTokens: 3, TotalTokens: tc.prompt + 3, Present: true}
			if tc.asked {
				var c chunk
				if err := json.Unmarshal([]byte(events[3]), &c); err != nil {
					t.Fatal(err)
				}
				if len(c.Choices) != 0 || c.Usage == nil || c.Usage.PromptTokens != want.PromptTokens ||
					c.Usage.CompletionTokens != want.CompletionTokens || c.Usage.TotalTokens != want.TotalTokens {
					t.Errorf("usage chunk %s, want usage %+v", events[3], want)
				}
			}
			rec := g.rec.wait(t, resp.Header.Get("X-Request-Id"))
			if rec.Usage != want || rec.Status != 200 || !rec.Stream {
				t.Errorf("Record %+v, want usage %+v", rec, want)
			}
		})
	}
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{})
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{})

	t.Run("mid-stream", func(t *testing.T) {
		route := newRoute(t, "disc-stream", dep(uniq("dep"), url, "m?chunks=100000&interval=10ms"))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		before := ms.Stats().Cancelled
		resp, sse := g.openStream(t, ctx, "/v1/chat/completions", secret, chatBody(route, `"stream":true`))
		for range 3 {
			if _, err := sse.next(); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		waitFor(t, "the upstream request to be cancelled", func() bool { return ms.Stats().Cancelled == before+1 })
		rec := g.rec.wait(t, resp.Header.Get("X-Request-Id"))
		if rec.Status != 499 || !rec.Stream {
			t.Errorf("Record %+v", rec)
		}
	})
	t.Run("waiting for headers", func(t *testing.T) {
		goAwayWhileTheUpstreamWaits(t, g, ms, secret, newRoute(t, "disc-wait", dep(uniq("dep"), url, "m?latency=1m")))
		rec := g.rec.next(t) // the only request of this gateway left
		if rec.Status != 499 {
			t.Errorf("Record %+v", rec)
		}
	})
	t.Cleanup(func() { waitFor(t, "no upstream request in flight", func() bool { return ms.Stats().InFlight == 0 }) })
}

// TestStreamBrokenMidStream: the upstream dies after half of the stream.
func TestStreamBrokenMidStream(t *testing.T) {
	t.Parallel()
	_, url := startMock(t, mock.Options{})
	route := newRoute(t, "midreset", dep(uniq("dep"), url, "m?chunks=10&fault=reset-mid-stream"))
	_, secret := newKey(t, route)
	g := startGateway(t, proxy.Config{})
	resp, sse := g.openStream(t, context.Background(), "/v1/chat/completions", secret, chatBody(route, `"stream":true`))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	events, _ := sse.all() // how the stream ends is up to the gateway
	if len(events) != 5 {
		t.Errorf("events %q, want the 5 the upstream sent", events)
	}
	for _, ev := range events {
		if ev == "[DONE]" {
			t.Error("[DONE] relayed for a broken stream")
		}
	}
	rec := g.rec.wait(t, resp.Header.Get("X-Request-Id"))
	if rec.Status != 502 || rec.Usage.Present {
		t.Errorf("Record %+v", rec)
	}
}

// TestMalformedUpstreamStream: odd or truncated data lines from the
// upstream must be relayed, not crash the handler mid-stream (a crash shows
// as a panic in the gateway's server log, which startGateway checks).
func TestMalformedUpstreamStream(t *testing.T) {
	t.Parallel()
	const first = `data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}` + "\n\n"
	cases := []struct{ name, line string }{
		{"choices is a number", `data: {"choices":0,"usage":{"prompt_tokens":1}}` + "\n\n"}, // valid JSON
		{"usage chunk cut off", `data: {"id":"c","choices":[],"usage":{"prompt_tokens":5,"`},
		{"chunk cut off after usage", `data: {"usage":{"prompt_tokens":5},"`},
	}
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, first+tc.line)
			}))
			t.Cleanup(up.Close)
			route := newRoute(t, "badstream", dep(uniq("dep"), up.URL, "m"))
			resp, sse := g.openStream(t, context.Background(), "/v1/chat/completions", secret, chatBody(route, `"stream":true`))
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			events, _ := sse.all()
			if len(events) == 0 {
				t.Fatal("no events relayed")
			}
			rec := g.rec.wait(t, resp.Header.Get("X-Request-Id"))
			if rec.Status == 0 {
				t.Errorf("Record without status (the handler did not finish normally): %+v", rec)
			}
		})
	}
}

// flushCounter is a ResponseWriter that counts flushes.
type flushCounter struct {
	*httptest.ResponseRecorder
	flushes int
}

func (f *flushCounter) Flush() { f.flushes++; f.ResponseRecorder.Flush() }

// relayCanned serves one streamed request through a gateway whose
// upstream answers the event stream upstream in a single read, and checks
// that the client got exactly that stream.
func relayCanned(t *testing.T, upstream, path, body, authHeader, authValue string) *flushCounter {
	t.Helper()
	w := serveCanned(t, upstream, path, body, authHeader, authValue)
	if w.Body.String() != upstream {
		t.Fatalf("body differs from the upstream's:\n%s", w.Body.String())
	}
	return w
}

// serveCanned serves one streamed request through a gateway whose upstream
// answers the event stream upstream in a single read.
func serveCanned(t *testing.T, upstream, path, body, authHeader, authValue string) *flushCounter {
	t.Helper()
	h := proxy.New(proxy.Config{State: testStore(t), Transport: newCannedTransport("text/event-stream", []byte(upstream))})
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set(authHeader, authValue)
	w := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
	h.ServeHTTP(w, req)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body.String())
	}
	return w
}

// Events that arrived together from the upstream go to the client in one
// write, not one flush (system call) each.
func TestStreamCoalescesBufferedEvents(t *testing.T) {
	var up strings.Builder
	for i := range 50 {
		fmt.Fprintf(&up, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"c%d\"}}]}\n\n", i)
	}
	up.WriteString("data: [DONE]\n\n")
	route := newRoute(t, "coalesce", dep(uniq("dep"), "http://upstream.invalid", "m"))
	_, secret := newKey(t, route)
	w := relayCanned(t, up.String(), "/v1/chat/completions", chatBody(route, `"stream":true`), "Authorization", "Bearer "+secret)
	// All 51 events were in the 16 KiB read buffer at once.
	if w.flushes > 3 {
		t.Errorf("%d flushes for 51 events that arrived together", w.flushes)
	}
}

// An event is flushed at once when only part of the next one has arrived:
// coalescing never makes an event wait for the network.
func TestStreamFlushesBeforePartialEvent(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range 3 {
			// Event i whole, and the data line of event i+1 without its blank line.
			if i == 0 {
				fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"c%d\"}}]}\n", i)
			}
			fmt.Fprintf(w, "\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"c%d\"}}]}\n", i+1)
			_ = rc.Flush()
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprint(w, "\ndata: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	route := newRoute(t, "partial", dep(uniq("dep"), up.URL, "m"))
	_, secret := newKey(t, route)
	g := startGateway(t, proxy.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, sse := g.openStream(t, ctx, "/v1/chat/completions", secret, chatBody(route, `"stream":true`))
	for i := range 3 {
		ev, err := sse.next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if want := fmt.Sprintf("{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"c%d\"}}]}", i); ev != want {
			t.Fatalf("event %d %q, want %q", i, ev, want)
		}
		gate <- struct{}{}
	}
	rest, err := sse.all()
	if err != nil || len(rest) != 2 || rest[0] != `{"choices":[{"index":0,"delta":{"content":"c3"}}]}` || rest[1] != "[DONE]" {
		t.Fatalf("rest %q, %v", rest, err)
	}
}

// The Anthropic pass-through, too, writes events that arrived together at
// once.
func TestAnthropicStreamCoalescesBufferedEvents(t *testing.T) {
	var up strings.Builder
	ev := func(name, data string) { fmt.Fprintf(&up, "event: %s\ndata: %s\n\n", name, data) }
	ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-mock","content":[],"stop_reason":null,"usage":{"input_tokens":5,"output_tokens":1}}}`)
	ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	for i := range 40 {
		ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"w%d "}}`, i))
	}
	ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":40}}`)
	ev("message_stop", `{"type":"message_stop"}`)
	d := &pb.Deployment{Id: uniq("anthropic"), Provider: routing.ProviderAnthropic, BaseUrl: "http://upstream.invalid/v1", UpstreamModel: "claude-mock"}
	route := newRoute(t, "acoalesce", d)
	_, secret := newKey(t, route)
	w := relayCanned(t, up.String(), "/v1/messages",
		`{"model":"`+route+`","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`, "X-Api-Key", secret)
	if w.flushes > 3 {
		t.Errorf("%d flushes for 46 events that arrived together", w.flushes)
	}
}

// anthropicEvents is an Anthropic stream of n text deltas ("w0 " ...).
func anthropicEvents(n int) string {
	var up strings.Builder
	ev := func(name, data string) { fmt.Fprintf(&up, "event: %s\ndata: %s\n\n", name, data) }
	ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-mock","content":[],"stop_reason":null,"usage":{"input_tokens":5,"output_tokens":1}}}`)
	ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	for i := range n {
		ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"w%d "}}`, i))
	}
	ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":40}}`)
	ev("message_stop", `{"type":"message_stop"}`)
	return up.String()
}

// A translated stream (Anthropic upstream, OpenAI client) also writes the
// chunks of events that arrived together at once, and every one of them.
func TestTranslatedStreamCoalescesBufferedEvents(t *testing.T) {
	d := &pb.Deployment{Id: uniq("anthropic"), Provider: routing.ProviderAnthropic, BaseUrl: "http://upstream.invalid/v1", UpstreamModel: "claude-mock"}
	route := newRoute(t, "tcoalesce", d)
	_, secret := newKey(t, route)
	w := serveCanned(t, anthropicEvents(40), "/v1/chat/completions", chatBody(route, `"stream":true`), "Authorization", "Bearer "+secret)
	out := w.Body.String()
	for i := range 40 {
		if !strings.Contains(out, fmt.Sprintf(`"content":"w%d "`, i)) {
			t.Fatalf("chunk w%d missing from:\n%s", i, out)
		}
	}
	if !strings.HasSuffix(out, "data: [DONE]\n\n") {
		t.Fatalf("stream does not end with [DONE]:\n%s", out)
	}
	if w.flushes > 3 {
		t.Errorf("%d flushes for 46 events that arrived together", w.flushes)
	}
}

// A translated chunk reaches the client before the gateway waits on the
// upstream, also when what follows it in the same read is an event that
// yields no chunk (a ping).
func TestTranslatedChunkNotHeldBehindPing(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	all := anthropicEvents(1)
	cut := strings.Index(all, "event: content_block_stop")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, all[:cut]+"event: ping\ndata: {\"type\":\"ping\"}\n\n")
		_ = http.NewResponseController(w).Flush()
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, all[cut:])
	}))
	t.Cleanup(up.Close)
	d := &pb.Deployment{Id: uniq("anthropic"), Provider: routing.ProviderAnthropic, BaseUrl: up.URL + "/v1", UpstreamModel: "claude-mock"}
	route := newRoute(t, "theld", d)
	_, secret := newKey(t, route)
	g := startGateway(t, proxy.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, sse := g.openStream(t, ctx, "/v1/chat/completions", secret, chatBody(route, `"stream":true`))
	for {
		data, err := sse.next()
		if err != nil {
			t.Fatalf("before the upstream went on: %v", err)
		}
		if strings.Contains(data, `"content":"w0 "`) {
			break
		}
	}
	close(gate) // only now may the upstream go on
	rest, err := sse.all()
	if err != nil || len(rest) == 0 || rest[len(rest)-1] != "[DONE]" {
		t.Fatalf("rest %q, %v", rest, err)
	}
}

// An Anthropic event followed, in the same read, by a keep-alive comment
// (no event to relay) reaches the client before the upstream sends more:
// a comment-only block is not "the next event".
func TestAnthropicEventNotHeldBehindComment(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n: keep-alive\n\n")
		_ = http.NewResponseController(w).Flush()
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	t.Cleanup(up.Close)
	d := &pb.Deployment{Id: uniq("anthropic"), Provider: routing.ProviderAnthropic, BaseUrl: up.URL + "/v1", UpstreamModel: "claude-mock"}
	route := newRoute(t, "aheld", d)
	_, secret := newKey(t, route)
	g := startGateway(t, proxy.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/messages",
		strings.NewReader(`{"model":"`+route+`","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err) // the headers too would be held back
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "event: message_start\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(gate) // only now may the upstream go on
}

// An Anthropic event whose data spans several data lines reaches the
// client with each line still a data field: the pass-through used to
// write the joined data after one "data: ", so that every line but the
// first lost its field name and the client read a different event.
func TestAnthropicStreamKeepsMultiLineData(t *testing.T) {
	up := "event: message_start\ndata: {\"type\":\"message_start\",\n" +
		"data: \"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	d := &pb.Deployment{Id: uniq("anthropic"), Provider: routing.ProviderAnthropic, BaseUrl: "http://upstream.invalid/v1", UpstreamModel: "claude-mock"}
	route := newRoute(t, "amultiline", d)
	_, secret := newKey(t, route)
	relayCanned(t, up, "/v1/messages",
		`{"model":"`+route+`","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`, "X-Api-Key", secret)
}

// A keep-alive comment is not the first token: the first-token timeout
// still fails over to the next deployment.
func TestFirstTokenTimeoutIsNotMetByAKeepAliveComment(t *testing.T) {
	t.Parallel()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, ": PROCESSING\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the gateway gives up on it
	}))
	t.Cleanup(slow.Close)
	_, url := startMock(t, mock.Options{})
	d1 := dep(uniq("slow"), slow.URL, "m")
	d1.FirstTokenTimeoutMs = 200
	d2 := dep(uniq("fast"), url, "ok")
	d2.Priority = 1
	route := newRoute(t, "ftt", d1, d2)
	_, secret := newKey(t, route)
	// Without the first-token timeout, only the attempt's timeout (an
	// hour) would end the wait on the silent deployment.
	g := startGateway(t, proxy.Config{UpstreamTimeout: time.Hour})
	r := g.post(t, "/v1/chat/completions", secret, chatBody(route, `"stream":true`))
	if r.status != 200 || r.header.Get("X-Tollgate-Deployment") != d2.Id {
		t.Errorf("status %d from %s; want the fast deployment", r.status, r.header.Get("X-Tollgate-Deployment"))
	}
	if rec := g.rec.of(t, r); rec.Attempts != 2 {
		t.Errorf("%d attempts, want 2", rec.Attempts)
	}
}

// A translated stream that is empty fails over; one cut off before its
// finish reason is aborted rather than ended as if complete.
func TestTranslatedStreamEmptyFailsOverAndCutOffIsAborted(t *testing.T) {
	t.Parallel()
	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
	}))
	t.Cleanup(empty.Close)
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":"The answer is"}}]}`+"\n\n")
	}))
	t.Cleanup(cut.Close)
	_, url := startMock(t, mock.Options{})
	good := dep(uniq("good"), url, "ok")
	good.Priority = 1
	route := newRoute(t, "es", dep(uniq("empty"), empty.URL, "m"), good)
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{})
	body := func(model string) string {
		return `{"model":"` + model + `","max_tokens":20,"stream":true,"messages":[{"role":"user","content":"ping"}]}`
	}
	r := g.do(t, http.MethodPost, "/v1/messages", "", body(route), "X-Api-Key", secret)
	if r.status != 200 || r.header.Get("X-Tollgate-Deployment") != good.Id || !strings.Contains(string(r.body), "message_stop") {
		t.Errorf("empty stream: %d from %s: %s", r.status, r.header.Get("X-Tollgate-Deployment"), r.body)
	}
	cutRoute := newRoute(t, "cut", dep(uniq("cut"), cut.URL, "m"))
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/messages", strings.NewReader(body(cutRoute)))
	req.Header.Set("X-Api-Key", secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	if rerr == nil || strings.Contains(string(b), "message_stop") {
		t.Errorf("a cut-off stream ended cleanly (read error %v): %s", rerr, b)
	}
	if rec := g.rec.wait(t, resp.Header.Get("X-Request-Id")); rec.Status != http.StatusBadGateway {
		t.Errorf("cut-off stream recorded as %d, want 502", rec.Status)
	}
}

// The Anthropic pass-through reads usage with the one decoder the
// translators use (translate.AnthropicStreamUsage): counts are cumulative
// and a later event without a count, or with a zero, does not lower it;
// a stream whose events carry no usage at all records none, so that the
// request is charged its reservation instead of nothing.
func TestAnthropicPassThroughUsageIsNeverLoweredNorInvented(t *testing.T) {
	start := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"
	bare := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n"
	text := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n"
	stop := "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, tc := range []struct {
		name, stream   string
		present        bool
		prompt, output int64
	}{
		{"delta without output count", start + text +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"input_tokens\":0}}\n\n" + stop,
			true, 5, 1},
		{"delta with cumulative counts", start + text +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":7}}\n\n" + stop,
			true, 5, 7},
		{"no usage anywhere", bare + text +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\n\n" + stop,
			false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, tc.stream)
			}))
			t.Cleanup(up.Close)
			d := &pb.Deployment{Id: uniq("anthropic"), Provider: routing.ProviderAnthropic, BaseUrl: up.URL + "/v1", UpstreamModel: "claude-mock"}
			route := newRoute(t, "ausage", d)
			_, secret := newKey(t, route)
			g := startGateway(t, proxy.Config{})
			r := g.post(t, "/v1/messages", secret,
				`{"model":"`+route+`","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`)
			if r.status != 200 || string(r.body) != tc.stream {
				t.Fatalf("status %d, body %q; want the upstream's stream", r.status, r.body)
			}
			u := g.rec.of(t, r).Usage
			if u.Present != tc.present || u.PromptTokens != tc.prompt || u.CompletionTokens != tc.output {
				t.Errorf("usage %+v; want present %v, %d prompt and %d output tokens", u, tc.present, tc.prompt, tc.output)
			}
		})
	}
}

// An OpenAI-wire upstream that answers 200 with an error as its stream's
// first event has not answered: the pass-through fails over, as the
// translating decoder does, instead of relaying the error as a success
// and charging the request its reservation.
func TestPassThroughStreamStartingWithAnErrorFailsOver(t *testing.T) {
	t.Parallel()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, ": keep-alive\n\ndata: {\"error\":{\"message\":\"The server is overloaded.\",\"type\":\"server_error\"}}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(bad.Close)
	_, url := startMock(t, mock.Options{})
	good := dep(uniq("good"), url, "ok")
	good.Priority = 1
	route := newRoute(t, "errfirst", dep(uniq("bad"), bad.URL, "m"), good)
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{})
	r := g.post(t, "/v1/chat/completions", secret, chatBody(route, `"stream":true`))
	if r.status != 200 || r.header.Get("X-Tollgate-Deployment") != good.Id || strings.Contains(string(r.body), "overloaded") {
		t.Errorf("status %d from %s: %s; want the good deployment's answer", r.status, r.header.Get("X-Tollgate-Deployment"), r.body)
	}
	if rec := g.rec.of(t, r); rec.Attempts != 2 || !rec.Usage.Present {
		t.Errorf("%d attempts, usage %+v; want 2 and the good answer's usage", rec.Attempts, rec.Usage)
	}
}
