package proxy_test

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
)

// Until the node's state is current, every API request gets 503 with
// Retry-After in the endpoint's error shape, never a 401, 403 or 404 from a
// state that may be stale; once it is, the same requests are served.
func TestNotReadyNodeAnswers503NeverAnAuthError(t *testing.T) {
	_, url := startMock(t, mock.Options{})
	var ready atomic.Bool
	g := startGateway(t, proxy.Config{Ready: ready.Load})
	model := newRoute(t, "ready", dep("d", url, "m"))
	_, secret := newKey(t)

	for _, tc := range []struct{ name, method, path, secret, body string }{
		{"valid key", http.MethodPost, "/v1/chat/completions", secret, chatBody(model)},
		{"unknown key", http.MethodPost, "/v1/chat/completions", "sk-unknown", chatBody(model)},
		{"unknown model", http.MethodPost, "/v1/chat/completions", secret, chatBody("no-such-model")},
		{"models", http.MethodGet, "/v1/models", secret, ""},
	} {
		r := g.do(t, tc.method, tc.path, tc.secret, tc.body)
		wantError(t, r, http.StatusServiceUnavailable, "server_error", "not_ready")
		if r.header.Get("Retry-After") == "" {
			t.Errorf("%s: 503 without Retry-After", tc.name)
		}
	}
	r := g.post(t, "/v1/messages", secret, `{"model":"`+model+`","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	var a struct {
		Type  string `json:"type"`
		Error struct{ Type string }
	}
	if err := json.Unmarshal(r.body, &a); r.status != http.StatusServiceUnavailable || err != nil || a.Type != "error" {
		t.Errorf("/v1/messages before ready: %d %s; want 503 in Anthropic's shape", r.status, r.body)
	}

	ready.Store(true)
	if r := g.post(t, "/v1/chat/completions", secret, chatBody(model)); r.status != http.StatusOK {
		t.Fatalf("once ready: %d %s", r.status, r.body)
	}
	if r := g.post(t, "/v1/chat/completions", "sk-unknown", chatBody(model)); r.status != http.StatusUnauthorized {
		t.Errorf("once ready, an unknown key: %d %s", r.status, r.body)
	}
}
