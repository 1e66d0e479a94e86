package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/routing"
)

// The same streams, recorded from cmd/mockllm, go through every stream
// path of the gateway — the OpenAI-wire, Responses and Anthropic
// pass-throughs and the translations between the formats — and every
// path must relay each event as it arrives, read the same usage, record
// before the end, abort the client's stream when the upstream breaks or
// ends early, and cancel the upstream when the client goes away.

// recording is an upstream event stream, frame by frame (each an event
// with its blank line), as cmd/mockllm wrote it.
type recording struct{ frames []string }

// record fetches a stream from a mockllm and cuts it into events.
func record(t *testing.T, url, path, body string) recording {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
	for k, v := range map[string]string{"Authorization": "Bearer k", "X-Api-Key": "k", "Anthropic-Version": "2023-06-01",
		"Content-Type": "application/json", "X-Mock-Chunks": "4", "X-Mock-Interval": "0s"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	all, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("recording %s: status %d, %v: %s", path, resp.StatusCode, err, all)
	}
	var rc recording
	for s := string(all); s != ""; {
		i := strings.Index(s, "\n\n")
		if i < 0 {
			t.Fatalf("recording %s ends without a blank line: %q", path, s)
		}
		rc.frames = append(rc.frames, s[:i+2])
		s = s[i+2:]
	}
	return rc
}

// textOf returns the text delta of a client event of any format.
func textOf(data string) string {
	var ev struct {
		Type    string          `json:"type"`
		Delta   json.RawMessage `json:"delta"`
		Choices []struct {
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if json.Unmarshal([]byte(data), &ev) != nil {
		return ""
	}
	switch {
	case len(ev.Choices) > 0:
		return ev.Choices[0].Delta.Content
	case ev.Type == "content_block_delta":
		var d struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(ev.Delta, &d)
		return d.Text
	case ev.Type == "response.output_text.delta":
		var s string
		_ = json.Unmarshal(ev.Delta, &s)
		return s
	}
	return ""
}

// textsOf returns the text the client has after each frame of rc.
func textsOf(rc recording) []string {
	out := make([]string, len(rc.frames))
	text := ""
	for i, f := range rc.frames {
		for _, line := range strings.Split(f, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				text += textOf(d)
			}
		}
		out[i] = text
	}
	return out
}

// clientView is what the client of a relayed stream has read so far.
type clientView struct {
	mu       sync.Mutex
	raw      bytes.Buffer
	text     string
	last     string // the data of the last event
	progress chan struct{}
}

func (c *clientView) add(line string) {
	c.mu.Lock()
	c.raw.WriteString(line)
	if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok {
		c.text += textOf(d)
		c.last = d
	}
	c.mu.Unlock()
	select {
	case c.progress <- struct{}{}:
	default:
	}
}

func (c *clientView) textNow() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.text
}

// waitText waits until the client has read text (false: ctx ended first).
func (c *clientView) waitText(ctx context.Context, text string) bool {
	for c.textNow() != text {
		select {
		case <-c.progress:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// replayMode is how a replaying upstream ends its stream.
type replayMode int

const (
	replayWhole  replayMode = iota // every frame
	replayAbort                    // the frames up to the first text, then the connection breaks
	replayNoEnd                    // the frames up to the last text, then a clean end of the body
	replayHangOn                   // the frames up to the first text, then it waits for the client to leave
)

// replay serves rc. After each frame that carries text it waits until the
// client has read that text: a relay that holds an event back deadlocks,
// and the test times out.
func replay(t *testing.T, rc recording, mode replayMode, view *clientView, upstreamGone chan struct{}) *httptest.Server {
	texts := textsOf(rc)
	// The frames with text; the last may carry the finish reason too.
	firstText, beforeLast, lastText := -1, -1, -1
	for i := range texts {
		if texts[i] != "" && (i == 0 || texts[i] != texts[i-1]) {
			if firstText < 0 {
				firstText = i
			}
			beforeLast, lastText = lastText, i
		}
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc2 := http.NewResponseController(w)
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		for i, f := range rc.frames {
			_, _ = io.WriteString(w, f)
			_ = rc2.Flush()
			if texts[i] != "" && (i == 0 || texts[i] != texts[i-1]) && !view.waitText(ctx, texts[i]) {
				if r.Context().Err() == nil {
					t.Errorf("the client never got %q: the relay held an event back", texts[i])
				}
				return
			}
			switch {
			case mode == replayAbort && i == firstText:
				panic(http.ErrAbortHandler)
			case mode == replayNoEnd && i == beforeLast:
				return
			case mode == replayHangOn && i == firstText:
				<-ctx.Done()
				if r.Context().Err() != nil {
					close(upstreamGone)
				}
				return
			}
		}
	}))
	t.Cleanup(up.Close)
	return up
}

// relayPath is one way through the gateway: a deployment kind and a
// client format.
type relayPath struct {
	name       string
	deployment func(url string) *pb.Deployment
	path, body func(model string) string
	// end is the client's last event of a whole stream.
	end func(data string) bool
	// same: the client gets the upstream's bytes unchanged.
	same bool
}

func openAIDep(url string) *pb.Deployment { return dep(uniq("oai"), url, "m") }
func anthropicDep(url string) *pb.Deployment {
	return &pb.Deployment{Id: uniq("ant"), Provider: routing.ProviderAnthropic, BaseUrl: url + "/v1", UpstreamModel: "m"}
}
func responsesDep(url string) *pb.Deployment {
	d := dep(uniq("resp"), url, "m")
	d.Options = map[string]string{"responses": "on"}
	return d
}

func chatReq(model string) string {
	return chatBody(model, `"stream":true`, `"stream_options":{"include_usage":true}`)
}
func messagesReq(model string) string {
	return `{"model":"` + model + `","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Hello there, gateway!"}]}`
}
func responsesReq(model string) string {
	return `{"model":"` + model + `","stream":true,"input":"Hello there, gateway!"}`
}

func isDone(d string) bool { return d == "[DONE]" }
func isType(typ string) func(string) bool {
	return func(d string) bool { return strings.Contains(d, `"type":"`+typ+`"`) }
}

func TestEveryStreamPathRelaysTheSameRecordings(t *testing.T) {
	_, mockURL := startMock(t, mock.Options{})
	recs := map[string]recording{
		"chat":      record(t, mockURL, "/v1/chat/completions", chatReq("gpt-x")),
		"anthropic": record(t, mockURL, "/v1/messages", messagesReq("claude-x")),
		"responses": record(t, mockURL, "/v1/responses", responsesReq("gpt-x")),
	}
	chat := func(string) string { return "/v1/chat/completions" }
	messages := func(string) string { return "/v1/messages" }
	responses := func(string) string { return "/v1/responses" }
	paths := map[string][]relayPath{
		"chat": {
			{"chat pass-through", openAIDep, chat, chatReq, isDone, true},
			{"chat to messages", openAIDep, messages, messagesReq, isType("message_stop"), false},
			{"chat to responses", openAIDep, responses, responsesReq, isType("response.completed"), false},
		},
		"anthropic": {
			{"anthropic pass-through", anthropicDep, messages, messagesReq, isType("message_stop"), true},
			{"anthropic to chat", anthropicDep, chat, chatReq, isDone, false},
			{"anthropic to responses", anthropicDep, responses, responsesReq, isType("response.completed"), false},
		},
		"responses": {
			{"responses pass-through", responsesDep, responses, responsesReq, isType("response.completed"), true},
		},
	}
	for recName, rc := range recs {
		var usage *routing.Usage // every path reads the same usage
		for _, p := range paths[recName] {
			t.Run(p.name+"/whole", func(t *testing.T) {
				rec := relayOnce(t, rc, p, replayWhole, func(t *testing.T, view *clientView, body io.Reader, err error) {
					if err != nil {
						t.Fatalf("a whole stream broke for the client: %v", err)
					}
					if p.same && view.raw.String() != strings.Join(rc.frames, "") {
						t.Errorf("the client's bytes differ from the upstream's:\n%s\nwant\n%s", view.raw.String(), strings.Join(rc.frames, ""))
					}
					if texts := textsOf(rc); view.text != texts[len(texts)-1] {
						t.Errorf("the client's text %q, want %q", view.text, texts[len(texts)-1])
					}
					if !p.end(view.last) {
						t.Errorf("the client's stream ends with %q", view.last)
					}
				})
				if rec.Status != 200 || !rec.Usage.Present || rec.Usage.CompletionTokens == 0 {
					t.Errorf("record %+v", rec)
				}
				if rec.FirstByte <= 0 || rec.FirstByte > rec.Latency {
					t.Errorf("time to first byte %v, latency %v", rec.FirstByte, rec.Latency)
				}
				if usage == nil {
					usage = &rec.Usage
				} else if rec.Usage != *usage {
					t.Errorf("usage %+v, another path of the same stream read %+v", rec.Usage, *usage)
				}
			})
			for _, tc := range []struct {
				name string
				mode replayMode
			}{{"upstream abort", replayAbort}, {"no proper end", replayNoEnd}} {
				t.Run(p.name+"/"+tc.name, func(t *testing.T) {
					rec := relayOnce(t, rc, p, tc.mode, func(t *testing.T, view *clientView, body io.Reader, err error) {
						if err == nil {
							t.Errorf("the client's stream ended cleanly after %q", view.last)
						}
					})
					if rec.Status != http.StatusBadGateway {
						t.Errorf("record status %d, want 502", rec.Status)
					}
				})
			}
			t.Run(p.name+"/client gone", func(t *testing.T) {
				rec := relayOnce(t, rc, p, replayHangOn, nil)
				if rec.Status != 499 {
					t.Errorf("record status %d, want 499", rec.Status)
				}
			})
		}
	}
}

// relayOnce relays rc through path p with a replaying upstream, reads the
// client's stream (check sees it; nil: the client leaves after the first
// text), and returns the request's record.
func relayOnce(t *testing.T, rc recording, p relayPath, mode replayMode,
	check func(t *testing.T, view *clientView, body io.Reader, err error)) proxy.Record {
	view := &clientView{progress: make(chan struct{}, 1)}
	upstreamGone := make(chan struct{})
	up := replay(t, rc, mode, view, upstreamGone)
	route := newRoute(t, "relay", p.deployment(up.URL))
	_, secret := newKey(t, route)
	g := startGateway(t, proxy.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, _ := g.openStream(t, ctx, p.path(route), secret, p.body(route))
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	br := bufio.NewReader(resp.Body)
	var err error
	for {
		var line string
		line, err = br.ReadString('\n')
		if line != "" {
			view.add(line)
		}
		if err != nil {
			break
		}
		if check == nil && view.textNow() != "" {
			cancel() // the client leaves
			select {
			case <-upstreamGone:
			case <-time.After(10 * time.Second):
				t.Fatal("the upstream request was not cancelled when the client left")
			}
			break
		}
	}
	if err == io.EOF {
		err = nil
	}
	if check != nil {
		check(t, view, br, err)
	}
	return g.rec.wait(t, resp.Header.Get("X-Request-Id"))
}
