package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/routing"
)

var requestIDPattern = regexp.MustCompile(`^req_[0-9a-f]{12}_[0-9a-z]+$`)

type chatResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
}

func TestChatNonStream(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{})
	depID := uniq("dep")
	route := newRoute(t, "chat", dep(depID, url, "mock-up"))
	keyID, secret := newKey(t, route)
	g := startGateway(t, proxy.Config{})

	body := chatBody(route, `"temperature":0.25`, `"max_tokens":64`, `"metadata":{"model":"keep-me"}`)
	start := time.Now()
	r := g.post(t, "/v1/chat/completions", secret, body)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	reqID := r.header.Get("X-Request-Id")
	if !requestIDPattern.MatchString(reqID) {
		t.Errorf("X-Request-Id %q", reqID)
	}
	if got := r.header.Get("X-Tollgate-Deployment"); got != depID {
		t.Errorf("X-Tollgate-Deployment %q, want %q", got, depID)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if cl := r.header.Get("Content-Length"); cl != strconv.Itoa(len(r.body)) {
		t.Errorf("Content-Length %q for a %d-byte body", cl, len(r.body))
	}
	var resp chatResponse
	if err := json.Unmarshal(r.body, &resp); err != nil {
		t.Fatalf("body %s: %v", r.body, err)
	}
	if resp.Object != "chat.completion" || resp.Model != "mock-up" || len(resp.Choices) != 1 ||
		!strings.HasPrefix(resp.Choices[0].Message.Content, "Hello from mockllm.") {
		t.Errorf("unexpected body %.300s", r.body)
	}

	// Upstream got the body with only the model replaced, and not the
	// client's key.
	st := ms.Stats()
	wantUp := strings.Replace(body, `"model":"`+route+`"`, `"model":"mock-up"`, 1)
	if string(st.LastBody) != wantUp {
		t.Errorf("upstream body\n got %s\nwant %s", st.LastBody, wantUp)
	}
	if st.ByPath["/v1/chat/completions"] != 1 || st.Requests != 1 {
		t.Errorf("upstream requests %+v", st.ByPath)
	}
	if st.LastAuthorization != "" {
		t.Errorf("upstream got Authorization %q; the client's key must not be forwarded", st.LastAuthorization)
	}

	rec := g.rec.wait(t, reqID)
	wantUsage := routing.Usage{PromptTokens: chatPromptTokens, CompletionTokens: 250, TotalTokens: chatPromptTokens + 250, Present: true}
	if rec.Usage != wantUsage {
		t.Errorf("Record usage %+v, want %+v", rec.Usage, wantUsage)
	}
	if u := resp.Usage; u.PromptTokens != wantUsage.PromptTokens || u.CompletionTokens != wantUsage.CompletionTokens || u.TotalTokens != wantUsage.TotalTokens {
		t.Errorf("body usage %+v, want %+v", u, wantUsage)
	}
	if rec.Status != 200 || rec.Deployment != depID || rec.Model != route || rec.KeyID != keyID ||
		rec.Endpoint != routing.EndpointChat || rec.Stream || rec.Attempts != 1 {
		t.Errorf("Record %+v", rec)
	}
	if rec.Latency <= 0 || rec.UpstreamLatency <= 0 || rec.UpstreamLatency > rec.Latency || rec.Start.Before(start) {
		t.Errorf("Record times: start %v latency %v upstream %v", rec.Start, rec.Latency, rec.UpstreamLatency)
	}
}

func TestEndpoints(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{EmbeddingDims: 4})
	depID := uniq("dep")
	route := newRoute(t, "ep", dep(depID, url, "mock-up"))
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{})
	quoted, _ := json.Marshal(route)
	m := string(quoted)
	cases := []struct {
		path, upstreamPath, body, object string
		ep                               routing.Endpoint
		usage                            routing.Usage
	}{
		{"/v1/chat/completions", "/v1/chat/completions", chatBody(route), "chat.completion", routing.EndpointChat,
			routing.Usage{PromptTokens: chatPromptTokens, CompletionTokens: 250, TotalTokens: chatPromptTokens + 250, Present: true}},
		{"/chat/completions", "/v1/chat/completions", chatBody(route), "chat.completion", routing.EndpointChat,
			routing.Usage{PromptTokens: chatPromptTokens, CompletionTokens: 250, TotalTokens: chatPromptTokens + 250, Present: true}},
		{"/v1/completions", "/v1/completions", `{"model":` + m + `,"prompt":"Say hi"}`, "text_completion", routing.EndpointCompletions,
			routing.Usage{PromptTokens: 2, CompletionTokens: 250, TotalTokens: 252, Present: true}},
		{"/completions", "/v1/completions", `{"model":` + m + `,"prompt":"Say hi"}`, "text_completion", routing.EndpointCompletions,
			routing.Usage{PromptTokens: 2, CompletionTokens: 250, TotalTokens: 252, Present: true}},
		{"/v1/embeddings", "/v1/embeddings", `{"model":` + m + `,"input":["embed this", "and this one"]}`, "list", routing.EndpointEmbeddings,
			routing.Usage{PromptTokens: 3 + 3, TotalTokens: 6, Present: true}},
		{"/embeddings", "/v1/embeddings", `{"model":` + m + `,"input":"embed this"}`, "list", routing.EndpointEmbeddings,
			routing.Usage{PromptTokens: 3, TotalTokens: 3, Present: true}},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			before := ms.Stats().ByPath[tc.upstreamPath]
			r := g.post(t, tc.path, secret, tc.body)
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			var resp struct{ Object, Model string }
			if err := json.Unmarshal(r.body, &resp); err != nil || resp.Object != tc.object || resp.Model != "mock-up" {
				t.Errorf("body %.200s (%v)", r.body, err)
			}
			if got := ms.Stats().ByPath[tc.upstreamPath]; got != before+1 {
				t.Errorf("upstream %s requests %d, want %d", tc.upstreamPath, got, before+1)
			}
			rec := g.rec.of(t, r)
			if rec.Endpoint != tc.ep || rec.Usage != tc.usage || rec.Status != 200 {
				t.Errorf("Record endpoint %v usage %+v status %d; want %v %+v", rec.Endpoint, rec.Usage, rec.Status, tc.ep, tc.usage)
			}
		})
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{})
	route := newRoute(t, "auth", dep(uniq("dep"), url, "mock-up"))
	_, good := newKey(t, route)
	revokedID, revoked := newKey(t, route)
	revokeKey(t, revokedID)
	expiredID, expired := newKey(t, route)
	setKeyExpiry(t, expiredID, time.Now().Add(-time.Minute))
	futureID, future := newKey(t, route)
	setKeyExpiry(t, futureID, time.Now().Add(time.Hour))
	g := startGateway(t, proxy.Config{})

	cases := []struct {
		name   string
		header []string
		status int
		code   string
		msg    string
	}{
		{"no key", nil, 401, "missing_api_key", "didn't provide an API key"},
		{"empty bearer", []string{"Authorization", "Bearer "}, 401, "missing_api_key", ""},
		{"other scheme", []string{"Authorization", "Basic " + good}, 401, "missing_api_key", ""},
		{"wrong key", []string{"Authorization", "Bearer sk-wrong"}, 401, "invalid_api_key", "Incorrect API key"},
		{"wrong x-api-key", []string{"X-Api-Key", "sk-wrong"}, 401, "invalid_api_key", ""},
		{"revoked", []string{"Authorization", "Bearer " + revoked}, 401, "invalid_api_key", "revoked"},
		{"expired", []string{"Authorization", "Bearer " + expired}, 401, "key_expired", "expired"},
		{"bearer", []string{"Authorization", "Bearer " + good}, 200, "", ""},
		{"lower-case scheme", []string{"Authorization", "bearer " + good}, 200, "", ""},
		{"extra spaces", []string{"Authorization", "Bearer   " + good}, 200, "", ""},
		{"x-api-key", []string{"x-api-key", good}, 200, "", ""},
		{"not yet expired", []string{"Authorization", "Bearer " + future}, 200, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := ms.Stats().Requests
			r := g.do(t, http.MethodPost, "/v1/chat/completions", "", chatBody(route), tc.header...)
			if !requestIDPattern.MatchString(r.header.Get("X-Request-Id")) {
				t.Errorf("X-Request-Id %q", r.header.Get("X-Request-Id"))
			}
			rec := g.rec.of(t, r)
			if tc.status == 200 {
				if r.status != 200 {
					t.Fatalf("status %d: %s", r.status, r.body)
				}
				if rec.KeyID == "" {
					t.Error("Record without key id")
				}
				return
			}
			e := wantError(t, r, tc.status, "invalid_request_error", tc.code)
			if !strings.Contains(e.Error.Message, tc.msg) {
				t.Errorf("message %q lacks %q", e.Error.Message, tc.msg)
			}
			if after := ms.Stats().Requests; after != before {
				t.Error("an unauthenticated request reached the upstream")
			}
			if rec.Status != tc.status || rec.KeyID != "" || rec.Model != "" {
				t.Errorf("Record %+v", rec)
			}
		})
	}
}

func TestRequestErrors(t *testing.T) {
	t.Parallel()
	const limit = 512
	ms, url := startMock(t, mock.Options{})
	allowed := newRoute(t, "req-ok", dep(uniq("dep"), url, "mock-up"))
	other := newRoute(t, "req-other", dep(uniq("dep"), url, "mock-up"))
	_, restricted := newKey(t, allowed)
	_, all := newKey(t)
	g := startGateway(t, proxy.Config{MaxBodyBytes: limit})

	pad := func(n int) string { // a chat body of exactly n bytes
		b := chatBody(allowed, `"user":""`)
		return chatBody(allowed, `"user":"`+strings.Repeat("x", n-len(b))+`"`)
	}
	if len(pad(limit)) != limit {
		t.Fatal("pad is wrong")
	}
	cases := []struct {
		name, secret, body string
		chunked            bool
		status             int
		typ, code, param   string
	}{
		{"model not allowed", restricted, chatBody(other), false, 403, "permission_error", "model_not_allowed", "model"},
		{"unknown model, restricted key", restricted, chatBody("no-such-model"), false, 403, "permission_error", "model_not_allowed", "model"},
		{"unknown model", all, chatBody(uniq("no-such-model")), false, 404, "invalid_request_error", "model_not_found", "model"},
		{"truncated JSON", all, `{"model":`, false, 400, "invalid_request_error", "invalid_json", ""},
		{"array body", all, `[{"model":"x"}]`, false, 400, "invalid_request_error", "invalid_json", ""},
		{"not JSON", all, `model=x`, false, 400, "invalid_request_error", "invalid_json", ""},
		{"empty body", all, ``, false, 400, "invalid_request_error", "invalid_json", ""},
		{"no model", all, `{"messages":[]}`, false, 400, "invalid_request_error", "missing_model", "model"},
		{"empty model", all, `{"model":""}`, false, 400, "invalid_request_error", "missing_model", "model"},
		{"model not a string", all, `{"model":42}`, false, 400, "invalid_request_error", "invalid_request", ""},
		{"too large", all, pad(limit + 1), false, 413, "invalid_request_error", "request_too_large", ""},
		{"too large, much", all, pad(limit * 20), false, 413, "invalid_request_error", "request_too_large", ""},
		{"too large, chunked", all, pad(limit + 1), true, 413, "invalid_request_error", "request_too_large", ""},
		{"too large, chunked, much", all, pad(limit * 20), true, 413, "invalid_request_error", "request_too_large", ""},
		{"at the limit", all, pad(limit), false, 200, "", "", ""},
		{"at the limit, chunked", all, pad(limit), true, 200, "", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := ms.Stats().Requests
			var body io.Reader = strings.NewReader(tc.body)
			if tc.chunked {
				body = io.MultiReader(strings.NewReader(tc.body)) // unknown length
			}
			req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", body)
			req.Header.Set("Authorization", "Bearer "+tc.secret)
			if tc.chunked {
				req.ContentLength = -1
			}
			r := g.send(t, req)
			rec := g.rec.of(t, r)
			if rec.Status != tc.status {
				t.Errorf("Record status %d, want %d", rec.Status, tc.status)
			}
			if tc.status == 200 {
				if r.status != 200 {
					t.Fatalf("status %d: %s", r.status, r.body)
				}
				return
			}
			e := wantError(t, r, tc.status, tc.typ, tc.code)
			if got := deref(e.Error.Param); tc.param != "" && got != tc.param {
				t.Errorf("param %q, want %q", got, tc.param)
			}
			if tc.status == 413 && !strings.Contains(e.Error.Message, strconv.Itoa(limit)) {
				t.Errorf("413 message %q does not name the limit", e.Error.Message)
			}
			if ms.Stats().Requests != before {
				t.Error("a rejected request reached the upstream")
			}
		})
	}
}

func TestMethodAndPath(t *testing.T) {
	t.Parallel()
	g := startGateway(t, proxy.Config{})
	cases := []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{http.MethodGet, "/v1/chat/completions", 405, "method_not_allowed", "POST"},
		{http.MethodPut, "/v1/completions", 405, "method_not_allowed", "POST"},
		{http.MethodDelete, "/v1/embeddings", 405, "method_not_allowed", "POST"},
		{http.MethodPost, "/v1/models", 405, "method_not_allowed", "GET"},
		{http.MethodGet, "/v1/unknown", 404, "unknown_url", ""},
		{http.MethodPost, "/v1/chat/completions/extra", 404, "unknown_url", ""},
		{http.MethodPost, "/v2/chat/completions", 404, "unknown_url", ""},
		{http.MethodGet, "/", 404, "unknown_url", ""},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := g.do(t, tc.method, tc.path, "", "")
			e := wantError(t, r, tc.status, "invalid_request_error", tc.code)
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Errorf("Allow %q, want %q", got, tc.allow)
			}
			if tc.status == 404 && !strings.Contains(e.Error.Message, tc.path) {
				t.Errorf("message %q does not name the path", e.Error.Message)
			}
		})
	}
}

func TestUpstreamErrorsPassedThrough(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{})
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{})
	// Retryable errors (5xx) are tried three times (the default
	// attempts) on the only deployment; the client then sees the
	// upstream's own error. A 429 with Retry-After is not retried on the
	// deployment that asked to wait. A 400 is the request's fault: no retry. A 401
	// means the gateway's credential is wrong: the client gets a 502.
	cases := []struct {
		status, clientStatus, calls int
		typ, code                   string
		retryAfter                  string
	}{
		{500, 500, 3, "server_error", "<null>", ""},
		{503, 503, 3, "server_error", "<null>", ""},
		{429, 429, 1, "requests", "rate_limit_exceeded", "1"}, // Retry-After: not retried
		{400, 400, 1, "invalid_request_error", "<null>", ""},
		{401, 502, 1, "invalid_request_error", "invalid_api_key", ""},
	}
	for _, tc := range cases {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			depID := uniq("dep")
			route := newRoute(t, "uperr", dep(depID, url, "m?status="+strconv.Itoa(tc.status)))
			before := ms.Stats().Errors
			r := g.post(t, "/v1/chat/completions", secret, chatBody(route))
			e := wantError(t, r, tc.clientStatus, tc.typ, tc.code)
			if want := "mockllm: injected " + http.StatusText(tc.status); e.Error.Message != want {
				t.Errorf("message %q, want the upstream's %q", e.Error.Message, want)
			}
			if got := r.header.Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tc.retryAfter)
			}
			if got := r.header.Get("X-Tollgate-Deployment"); got != depID {
				t.Errorf("X-Tollgate-Deployment %q", got)
			}
			if got := ms.Stats().Errors - before; got != int64(tc.calls) {
				t.Errorf("upstream called %d times, want %d", got, tc.calls)
			}
			rec := g.rec.of(t, r)
			if rec.Status != tc.clientStatus || rec.Usage.Present || rec.Attempts != tc.calls || rec.Deployment != depID {
				t.Errorf("Record %+v", rec)
			}
		})
	}
}

func TestUpstreamNonJSONErrorWrapped(t *testing.T) {
	t.Parallel()
	page := "<html><body>" + strings.Repeat("Bad gateway from some proxy. ", 20) + "</body></html>"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/plain/v1/chat/completions" {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(404)
			_, _ = io.WriteString(w, "  404 page not found\n")
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(502)
		_, _ = io.WriteString(w, page)
	}))
	t.Cleanup(up.Close)
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{})

	htmlDep := uniq("dep")
	r := g.post(t, "/v1/chat/completions", secret, chatBody(newRoute(t, "html", dep(htmlDep, up.URL, "m"))))
	e := wantError(t, r, 502, "upstream_error", "upstream_error")
	want := "The upstream deployment '" + htmlDep + "' answered 502: " + page[:200] + "…"
	if e.Error.Message != want {
		t.Errorf("message\n got %q\nwant %q", e.Error.Message, want)
	}
	if rec := g.rec.of(t, r); rec.Status != 502 {
		t.Errorf("Record status %d", rec.Status)
	}

	plainDep := uniq("dep")
	r = g.post(t, "/v1/chat/completions", secret, chatBody(newRoute(t, "plain", dep(plainDep, up.URL+"/plain", "m"))))
	e = wantError(t, r, 404, "upstream_error", "upstream_error")
	if want := "The upstream deployment '" + plainDep + "' answered 404: 404 page not found"; e.Error.Message != want {
		t.Errorf("message %q, want %q", e.Error.Message, want)
	}
}

func TestUpstreamReset(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{})
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{})
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			// A route each: the failed deployment is in cooldown afterwards.
			first := uniq("dep")
			backup := &pb.Deployment{Id: uniq("dep"), Provider: routing.ProviderOpenAICompatible, BaseUrl: url + "/v1",
				UpstreamModel: "ok", Priority: 1}
			route := newRoute(t, "reset", dep(first, url, "m?fault=reset"), backup)
			before := ms.Stats()
			body := chatBody(route)
			if stream {
				body = chatBody(route, `"stream":true`)
			}
			r := g.post(t, "/v1/chat/completions", secret, body)
			// A reset before any byte reached the client is retried on the
			// next deployment: the client sees the backup's answer.
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if got := r.header.Get("X-Tollgate-Deployment"); got != backup.Id {
				t.Errorf("X-Tollgate-Deployment %q, want the backup %q", got, backup.Id)
			}
			after := ms.Stats()
			if after.Resets != before.Resets+1 || after.Requests != before.Requests+2 {
				t.Errorf("upstream requests %d->%d resets %d->%d; want the reset and one request to the backup",
					before.Requests, after.Requests, before.Resets, after.Resets)
			}
			rec := g.rec.of(t, r)
			if rec.Status != 200 || rec.Attempts != 2 || rec.Deployment != backup.Id || !rec.Usage.Present {
				t.Errorf("Record %+v", rec)
			}
		})
	}
}

func TestUpstreamTimeout(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{})
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{})
	gShort := startGateway(t, proxy.Config{UpstreamTimeout: 200 * time.Millisecond})
	timed := func(model string, timeoutMs uint32) *pb.Deployment {
		return &pb.Deployment{Id: uniq("dep"), Provider: routing.ProviderOpenAICompatible, BaseUrl: url + "/v1",
			UpstreamModel: model, TimeoutMs: timeoutMs}
	}
	cases := []struct {
		name   string
		g      *gateway
		d      *pb.Deployment
		stream bool
		want   string
	}{
		{"hang, deployment timeout", g, timed("m?fault=hang", 200), false, "200ms"},
		{"slow headers, handler timeout", gShort, timed("m?latency=10s", 0), false, "200ms"},
		{"stream slow to start", g, timed("m?latency=10s", 200), true, "200ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			route := newRoute(t, "timeout", tc.d)
			body := chatBody(route)
			if tc.stream {
				body = chatBody(route, `"stream":true`)
			}
			start := time.Now()
			r := tc.g.post(t, "/v1/chat/completions", secret, body)
			elapsed := time.Since(start)
			e := wantError(t, r, 504, "timeout_error", "upstream_timeout")
			if !strings.Contains(e.Error.Message, tc.want) || !strings.Contains(e.Error.Message, tc.d.Id) {
				t.Errorf("message %q", e.Error.Message)
			}
			if elapsed < 200*time.Millisecond || elapsed > 5*time.Second {
				t.Errorf("answered after %v", elapsed)
			}
			if rec := tc.g.rec.of(t, r); rec.Status != 504 || rec.Attempts != 3 {
				t.Errorf("Record status %d after %d attempts, want 504 after 3", rec.Status, rec.Attempts)
			}
		})
	}
	// Runs after the parallel subtests: every timed-out upstream call was
	// cancelled. A timeout is retried: three attempts (the default) each.
	t.Cleanup(func() {
		waitFor(t, "nine cancelled upstream requests", func() bool { return ms.Stats().Cancelled == 9 })
		waitFor(t, "no upstream request in flight", func() bool { return ms.Stats().InFlight == 0 })
	})
}

// TestStreamOutlivesTimeout: the timeout covers the wait for a stream's
// headers, not the stream.
func TestStreamOutlivesTimeout(t *testing.T) {
	t.Parallel()
	_, url := startMock(t, mock.Options{})
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{})
	route := newRoute(t, "longstream", &pb.Deployment{Id: uniq("dep"), Provider: routing.ProviderOpenAICompatible,
		BaseUrl: url + "/v1", UpstreamModel: "m?chunks=4&interval=100ms", TimeoutMs: 150})
	start := time.Now()
	_, sse := g.openStream(t, context.Background(), "/v1/chat/completions", secret, chatBody(route, `"stream":true`))
	events, err := sse.all()
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 5 || events[4] != "[DONE]" {
		t.Fatalf("events %q", events)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("stream took %v; the test needs it to outlast the timeout", d)
	}
}

func TestFailover(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{})
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{})
	dead := func(prio uint32) *pb.Deployment {
		return &pb.Deployment{Id: uniq("dead"), Provider: routing.ProviderOpenAICompatible, BaseUrl: closedURL(t) + "/v1",
			UpstreamModel: "m", Priority: prio, Weight: 100}
	}
	live := &pb.Deployment{Id: uniq("live"), Provider: routing.ProviderOpenAICompatible, BaseUrl: url + "/v1",
		UpstreamModel: "m", Priority: 1}

	t.Run("to the next priority", func(t *testing.T) {
		for _, stream := range []bool{false, true} {
			route := newRoute(t, "failover", live, dead(0)) // added in the wrong order on purpose
			body := chatBody(route)
			if stream {
				body = chatBody(route, `"stream":true`)
			}
			r := g.post(t, "/v1/chat/completions", secret, body)
			if r.status != 200 {
				t.Fatalf("stream=%v: status %d: %s", stream, r.status, r.body)
			}
			if got := r.header.Get("X-Tollgate-Deployment"); got != live.Id {
				t.Errorf("X-Tollgate-Deployment %q, want %q", got, live.Id)
			}
			rec := g.rec.of(t, r)
			if rec.Attempts != 2 || rec.Deployment != live.Id || rec.Status != 200 || !rec.Usage.Present {
				t.Errorf("stream=%v: Record %+v", stream, rec)
			}
		}
	})
	t.Run("all unreachable", func(t *testing.T) {
		d1, d2 := dead(0), dead(1)
		route := newRoute(t, "alldead", d1, d2)
		before := ms.Stats().Requests
		r := g.post(t, "/v1/chat/completions", secret, chatBody(route))
		e := wantError(t, r, 502, "upstream_error", "upstream_unreachable")
		// Both are tried, then the first again after a backoff (three
		// attempts by default); the error names the last one tried.
		rec := g.rec.of(t, r)
		if !strings.Contains(e.Error.Message, rec.Deployment) {
			t.Errorf("message %q does not name the last deployment %s", e.Error.Message, rec.Deployment)
		}
		if rec.Attempts != 3 || (rec.Deployment != d1.Id && rec.Deployment != d2.Id) || rec.Status != 502 {
			t.Errorf("Record %+v", rec)
		}
		if ms.Stats().Requests != before {
			t.Error("unexpected upstream request")
		}
	})
}

func TestUpstreamCredential(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{})
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{})
	cred := uniq("cred")
	setCredential(t, cred, "sk-upstream-"+cred)
	d := dep(uniq("dep"), url, "m")
	d.Credential = cred
	route := newRoute(t, "cred", d)
	r := g.post(t, "/v1/chat/completions", secret, chatBody(route))
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if got, want := ms.Stats().LastAuthorization, "Bearer sk-upstream-"+cred; got != want {
		t.Errorf("upstream Authorization %q, want %q", got, want)
	}
	// x-api-key from the client is not forwarded either.
	r = g.do(t, http.MethodPost, "/v1/chat/completions", "", chatBody(route), "X-Api-Key", secret)
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if got, want := ms.Stats().LastAuthorization, "Bearer sk-upstream-"+cred; got != want {
		t.Errorf("upstream Authorization %q, want %q", got, want)
	}
}

func TestCredentialMissing(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{})
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{})
	missing := uniq("unset-cred")
	noCred := dep(uniq("dep"), url, "m")
	noCred.Credential = missing

	route := newRoute(t, "nocred", noCred)
	r := g.post(t, "/v1/chat/completions", secret, chatBody(route))
	e := wantError(t, r, 502, "upstream_error", "credential_missing")
	if !strings.Contains(e.Error.Message, "tollctl credential set "+missing) || !strings.Contains(e.Error.Message, noCred.Id) {
		t.Errorf("message %q", e.Error.Message)
	}
	if ms.Stats().Requests != 0 {
		t.Error("a deployment without its credential was called")
	}
	if rec := g.rec.of(t, r); rec.Status != 502 {
		t.Errorf("Record %+v", rec)
	}

	// A deployment without its credential is skipped when another remains.
	backup := dep(uniq("dep"), url, "m")
	backup.Priority = 1
	route = newRoute(t, "nocred-backup", noCred, backup)
	r = g.post(t, "/v1/chat/completions", secret, chatBody(route))
	if r.status != 200 || r.header.Get("X-Tollgate-Deployment") != backup.Id {
		t.Fatalf("status %d deployment %q: %s", r.status, r.header.Get("X-Tollgate-Deployment"), r.body)
	}
	if got := ms.Stats().LastAuthorization; got != "" {
		t.Errorf("upstream Authorization %q", got)
	}
}

// TestBadUpstreamURL is not parallel and flushes the buffer pool when done:
// see TestBadUpstreamURLDoesNotCorruptLaterRequests.
func TestBadUpstreamURL(t *testing.T) {
	t.Cleanup(flushPools)
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{})
	route := newRoute(t, "badurl", &pb.Deployment{Id: uniq("dep"), Provider: routing.ProviderOpenAICompatible,
		BaseUrl: "http://bad host:1/v1", UpstreamModel: "m"})
	r := g.post(t, "/v1/chat/completions", secret, chatBody(route))
	wantError(t, r, 502, "upstream_error", "bad_upstream_url")
	if strings.Contains(string(r.body), "bad host") {
		t.Errorf("the 502 echoes the base URL, which may name internal hosts or hold a password: %s", r.body)
	}
	if rec := g.rec.of(t, r); rec.Status != 502 {
		t.Errorf("Record %+v", rec)
	}
}

// TestBadUpstreamURLDoesNotCorruptLaterRequests: answering a request for a
// deployment whose URL does not parse must not hand one pooled buffer to
// two later requests. An echoing upstream shows whether each concurrent
// request was sent its own body. Not parallel: a corrupted pool would break
// other tests; flushPools repairs it.
func TestBadUpstreamURLDoesNotCorruptLaterRequests(t *testing.T) {
	t.Cleanup(flushPools)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	t.Cleanup(echo.Close)
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{})
	bad := newRoute(t, "badurl", &pb.Deployment{Id: uniq("dep"), Provider: routing.ProviderOpenAICompatible,
		BaseUrl: "http://bad host:1/v1", UpstreamModel: "m"})
	good := newRoute(t, "echo", dep(uniq("dep"), echo.URL, "echo-model"))

	const rounds, workers = 40, 4
	var mu sync.Mutex
	var bad1 []string
	for round := range rounds {
		if r := g.post(t, "/v1/chat/completions", secret, chatBody(bad)); r.status != 502 {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				tag := fmt.Sprintf("r%d-w%d-", round, w)
				body := chatBody(good, `"user":"`+strings.Repeat(tag, 200)+`"`)
				want := strings.Replace(body, `"model":"`+good+`"`, `"model":"echo-model"`, 1)
				req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+secret)
				resp, err := g.client.Do(req)
				if err != nil {
					mu.Lock()
					bad1 = append(bad1, tag+": "+err.Error())
					mu.Unlock()
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(b) != want {
					mu.Lock()
					bad1 = append(bad1, fmt.Sprintf("%s: status %d, upstream got %.120q…", tag, resp.StatusCode, b))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(bad1) > 0 {
			break
		}
	}
	if len(bad1) > 0 {
		t.Errorf("requests reached the upstream with another request's (or a garbled) body, e.g.:\n%s",
			strings.Join(bad1[:min(3, len(bad1))], "\n"))
	}
}

// flushPools empties every sync.Pool (two GCs move pooled items to the
// victim cache and then drop them).
func flushPools() {
	runtime.GC()
	runtime.GC()
}

func TestModelsList(t *testing.T) {
	t.Parallel()
	_, url := startMock(t, mock.Options{})
	d := func() *pb.Deployment { return dep(uniq("dep"), url, "m") }
	a := newRoute(t, "lst-a", d())
	prefix := uniq("lst-b")
	b1, b2 := prefix+"-1", prefix+"-2"
	addDeployments(t, b2, d())
	addDeployments(t, b1, d(), d())
	c := newRoute(t, "lst-c", d())
	_, restricted := newKey(t, a, prefix+"-*")
	_, all := newKey(t)
	g := startGateway(t, proxy.Config{})

	type list struct {
		Object string `json:"object"`
		Data   []struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Created int64  `json:"created"`
			OwnedBy string `json:"owned_by"`
		} `json:"data"`
	}
	get := func(path, secret string) (list, []string) {
		r := g.do(t, http.MethodGet, path, secret, "")
		if r.status != 200 || r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("GET %s: %d %q %s", path, r.status, r.header.Get("Content-Type"), r.body)
		}
		var l list
		if err := json.Unmarshal(r.body, &l); err != nil {
			t.Fatalf("GET %s: %s: %v", path, r.body, err)
		}
		var ids []string
		for _, m := range l.Data {
			ids = append(ids, m.ID)
			if m.Object != "model" || m.OwnedBy != "tollgate" || m.Created <= 0 {
				t.Errorf("entry %+v", m)
			}
		}
		return l, ids
	}
	for _, path := range []string{"/v1/models", "/models"} {
		l, ids := get(path, restricted)
		want := []string{a, b1, b2}
		slices.Sort(want)
		if l.Object != "list" || !slices.Equal(ids, want) {
			t.Errorf("GET %s: object %q ids %q, want %q", path, l.Object, ids, want)
		}
	}
	_, ids := get("/v1/models", all)
	for _, m := range []string{a, b1, b2, c} {
		if !slices.Contains(ids, m) {
			t.Errorf("allow-all key: %q missing from %q", m, ids)
		}
	}
	if !slices.IsSorted(ids) {
		t.Errorf("ids not sorted: %q", ids)
	}
	wantError(t, g.do(t, http.MethodGet, "/v1/models", "", ""), 401, "invalid_request_error", "missing_api_key")
	wantError(t, g.do(t, http.MethodGet, "/v1/models", "sk-nope", ""), 401, "invalid_request_error", "invalid_api_key")
}

func TestDemoProvider(t *testing.T) {
	t.Parallel()
	route := newRoute(t, "demo", &pb.Deployment{Id: "demo", Provider: routing.ProviderDemo, UpstreamModel: "demo"})
	_, secret := newKey(t, route)
	g := startGateway(t, proxy.Config{})

	r := g.post(t, "/v1/chat/completions", secret, chatBody(route))
	if r.status != 200 || r.header.Get("X-Tollgate-Deployment") != "demo" {
		t.Fatalf("status %d, deployment %q: %s", r.status, r.header.Get("X-Tollgate-Deployment"), r.body)
	}
	var resp chatResponse
	if err := json.Unmarshal(r.body, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Model != route || !strings.HasSuffix(resp.Choices[0].Message.Content, "You said: Hello there, gateway!") {
		t.Errorf("body %s", r.body)
	}
	rec := g.rec.of(t, r)
	if rec.Status != 200 || rec.Deployment != "demo" || !rec.Usage.Present || rec.Usage.PromptTokens != resp.Usage.PromptTokens {
		t.Errorf("Record %+v", rec)
	}

	resp2, sse := g.openStream(t, context.Background(), "/v1/chat/completions", secret, chatBody(route, `"stream":true`))
	if ct := resp2.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	events, err := sse.all()
	if err != nil || len(events) < 2 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("events %q, %v", events, err)
	}
	for _, ev := range events {
		if strings.Contains(ev, `"usage"`) {
			t.Errorf("usage sent to a client that did not ask: %s", ev)
		}
	}
	if rec := g.rec.wait(t, resp2.Header.Get("X-Request-Id")); !rec.Stream || !rec.Usage.Present {
		t.Errorf("Record %+v", rec)
	}
}

// TestConcurrentRequests exercises the buffer pools and the shared state
// under the race detector.
func TestConcurrentRequests(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{Chunks: 5})
	route := newRoute(t, "conc", dep(uniq("dep"), url, "m"), dep(uniq("dep"), url, "m"))
	_, secret := newKey(t, route)
	g := startGateway(t, proxy.Config{})
	const workers, each = 8, 6
	var mu sync.Mutex
	ids := map[string]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				body := chatBody(route, fmt.Sprintf(`"user":"w%d-%d"`, w, i))
				if (w+i)%2 == 1 {
					body = chatBody(route, `"stream":true`)
				}
				req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+secret)
				resp, err := g.client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					errs <- fmt.Errorf("status %d: %s (%v)", resp.StatusCode, b, err)
					return
				}
				if (w+i)%2 == 1 && !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
					errs <- fmt.Errorf("stream ends with %q", b[max(0, len(b)-40):])
				}
				mu.Lock()
				ids[resp.Header.Get("X-Request-Id")] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(ids) != workers*each {
		t.Errorf("%d distinct request ids for %d requests", len(ids), workers*each)
	}
	if got := ms.Stats().Requests; got != workers*each {
		t.Errorf("upstream requests %d", got)
	}
	for id := range ids {
		if rec := g.rec.wait(t, id); rec.Status != 200 || !rec.Usage.Present {
			t.Errorf("Record %+v", rec)
		}
	}
}

// TestEscapedMemberNames: the gateway must act on the members the upstream
// will decode. A member name spelled with JSON escapes is the same name to
// any JSON decoder, and the last duplicate wins in most of them.
func TestEscapedMemberNames(t *testing.T) {
	t.Parallel()
	ms, url := startMock(t, mock.Options{Chunks: 3})
	cheap := newRoute(t, "cheap", dep(uniq("dep"), url, "mock-cheap"))
	_, secret := newKey(t, cheap)
	g := startGateway(t, proxy.Config{})
	q, _ := json.Marshal(cheap)

	t.Run("allow-list", func(t *testing.T) {
		// The key may only use the route "cheap" (upstream model mock-cheap).
		body := `{"model":` + string(q) + `,"mod\u0065l":"mock-expensive","messages":[{"role":"user","content":"hi"}]}`
		before := ms.Stats().Requests
		r := g.post(t, "/v1/chat/completions", secret, body)
		if r.status >= 400 && r.status < 500 && ms.Stats().Requests == before {
			return // rejecting the body is fine
		}
		var up struct{ Model string }
		_ = json.Unmarshal(ms.Stats().LastBody, &up)
		if up.Model != "mock-cheap" {
			t.Errorf("status %d: the upstream was asked for model %q (body %s), want %q: the key's allow-list and the route's upstream model are bypassed",
				r.status, up.Model, ms.Stats().LastBody, "mock-cheap")
		}
	})
	t.Run("metering", func(t *testing.T) {
		body := `{"model":` + string(q) + `,"str\u0065am":true,"messages":[{"role":"user","content":"hi"}]}`
		before := ms.Stats().Requests
		r := g.post(t, "/v1/chat/completions", secret, body)
		if r.status >= 400 && r.status < 500 && ms.Stats().Requests == before {
			return // rejecting the body is fine
		}
		rec := g.rec.of(t, r)
		if !rec.Usage.Present {
			t.Errorf("status %d, streamed %v: the request was served but its usage was not metered (upstream body %s)",
				r.status, strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream"), ms.Stats().LastBody)
		}
	})
}

// TestMalformedUpstreamBody: a 200 JSON body cut after a member's opening
// quote must be relayed (or answered with 502), not crash the handler.
func TestMalformedUpstreamBody(t *testing.T) {
	t.Parallel()
	const truncated = `{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":5,"`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, truncated)
	}))
	t.Cleanup(up.Close)
	_, secret := newKey(t)
	g := startGateway(t, proxy.Config{})
	route := newRoute(t, "truncbody", dep(uniq("dep"), up.URL, "m"))
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(chatBody(route)))
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatalf("the gateway dropped the connection: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	if resp.StatusCode == 200 && string(b) != truncated {
		t.Errorf("body %q, want the upstream's", b)
	}
}
