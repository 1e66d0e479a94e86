package proxy_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/routing"
)

// TestUpstreamBodyBroken: the upstream's headers arrive but its body is cut
// short (buffered response) or never finishes (within the timeout).
func TestUpstreamBodyBroken(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/cut/v1/chat/completions":
			conn, bw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err)
			}
			_, _ = bw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"id\":\"x\",")
			_ = bw.Flush()
			_ = conn.Close()
		case "/stall/v1/chat/completions":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "1000")
			_, _ = io.WriteString(w, `{"id":"x",`)
			_ = http.NewResponseController(w).Flush()
			<-r.Context().Done()
		}
	}))
	t.Cleanup(up.Close)
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{})

	cut := dep(uniq("dep"), up.URL+"/cut", "m")
	r := g.post(t, "/v1/chat/completions", secret, chatBody(newRoute(t, "cut", cut)))
	e := wantError(t, r, 502, "upstream_error", "upstream_failed")
	if !strings.Contains(e.Error.Message, cut.Id) {
		t.Errorf("message %q", e.Error.Message)
	}
	if rec := g.rec.of(t, r); rec.Status != 502 || rec.Usage.Present {
		t.Errorf("Record %+v", rec)
	}

	stall := dep(uniq("dep"), up.URL+"/stall", "m")
	stall.TimeoutMs = 200
	r = g.post(t, "/v1/chat/completions", secret, chatBody(newRoute(t, "stall", stall)))
	e = wantError(t, r, 504, "timeout_error", "upstream_timeout")
	if !strings.Contains(e.Error.Message, "did not finish its answer within its per-attempt timeout of 200ms") {
		t.Errorf("message %q", e.Error.Message)
	}
	if rec := g.rec.of(t, r); rec.Status != 504 {
		t.Errorf("Record %+v", rec)
	}
}

// TestStreamLongLines: events longer than the relay's read buffer are
// relayed whole, with the injected "usage":null still hidden.
func TestStreamLongLines(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("0123456789", 10_000) // 100 kB
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"`+long+`"}}],"usage":null}`+"\n\n")
		_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"`+long[:20_000]+`"}}]}`+"\n\n")
		_, _ = io.WriteString(w, `data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`+"\n\n")
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	route := newRoute(t, "longline", dep(uniq("dep"), up.URL, "m"))
	_, secret := newKey(t, route)
	g := startGateway(t, proxy.Config{})
	resp, sse := g.openStream(t, context.Background(), "/v1/chat/completions", secret, chatBody(route, `"stream":true`))
	events, err := sse.all()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"choices":[{"index":0,"delta":{"content":"` + long + `"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"` + long[:20_000] + `"}}]}`,
		"[DONE]",
	}
	if !slices.Equal(events, want) {
		t.Errorf("got %d events (lengths %v), want %d (lengths %v)", len(events), lens(events), len(want), lens(want))
	}
	rec := g.rec.wait(t, resp.Header.Get("X-Request-Id"))
	if want := (routing.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3, Present: true}); rec.Usage != want {
		t.Errorf("Record usage %+v, want %+v", rec.Usage, want)
	}
}

func lens(ss []string) []int {
	out := make([]int, len(ss))
	for i, s := range ss {
		out[i] = len(s)
	}
	return out
}

// TestModelsListEscapesNames: route names are JSON-escaped in /v1/models.
func TestModelsListEscapesNames(t *testing.T) {
	t.Parallel()
	prefix := uniq("esc")
	names := []string{prefix + `-q"uote\back`, prefix + "-tab\there\x01", prefix + "-ünï/ø"}
	for _, n := range names {
		addDeployments(t, n, &pb.Deployment{Id: "demo", Provider: routing.ProviderDemo})
	}
	_, secret := newKey(t, prefix+"-*")
	g := startGateway(t, proxy.Config{})
	r := g.do(t, http.MethodGet, "/v1/models", secret, "")
	var l struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatalf("%s: %v", r.body, err)
	}
	var got []string
	for _, m := range l.Data {
		got = append(got, m.ID)
	}
	want := slices.Sorted(slices.Values(names))
	if !slices.Equal(got, want) {
		t.Errorf("ids %q, want %q", got, want)
	}
}
