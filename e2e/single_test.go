package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestSingleNode walks the foundation's acceptance path over real
// processes: mockllm, one tollgate node and tollctl.
func TestSingleNode(t *testing.T) {
	mock := mockLLM(t)
	g := startGateway(t, t.TempDir(), "t")
	chat := "http://" + g.http + "/v1/chat/completions"

	g.ctl(t, "model", "add", "gpt-test", "--provider", "openai-compatible", "--base-url", mock, "--upstream-model", "mock-model")
	g.ctl(t, "model", "add", "other", "--provider", "openai-compatible", "--base-url", mock, "--upstream-model", "mock-other")
	g.ctl(t, "model", "add", "gpt-slow", "--provider", "openai-compatible", "--base-url", mock, "--upstream-model", "mock-model?chunks=6&interval=60ms")
	keyID, secret := g.createKey(t, "--name", "svc", "--models", "gpt-test")
	_, secret2 := g.createKey(t, "--name", "svc2", "--models", "gpt-*,other")

	// Non-streaming: the mock's content, the model rewritten upstream.
	code, body := post(t, chat, secret, `{"model":"gpt-test","messages":[{"role":"user","content":"hello"}]}`)
	if code != 200 {
		t.Fatalf("chat: %d %s", code, body)
	}
	var resp struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &resp); err != nil || len(resp.Choices) != 1 {
		t.Fatalf("chat body %s (%v)", body, err)
	}
	if !strings.HasPrefix(resp.Choices[0].Message.Content, "Hello from mockllm") || resp.Model != "mock-model" || resp.Usage.TotalTokens == 0 {
		t.Fatalf("unexpected completion: %s", body)
	}

	// Streaming: separate events, flushed as they come, ending in [DONE];
	// the usage chunk the gateway asked for is not shown to this client.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events := streamEvents(t, ctx, chat, secret2, `{"model":"gpt-slow","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if n := len(events); n < 7 || events[n-1].data != "[DONE]" {
		t.Fatalf("stream events: %v", events)
	}
	for _, e := range events[:len(events)-1] {
		var c struct {
			Object string `json:"object"`
		}
		if err := json.Unmarshal([]byte(e.data), &c); err != nil || c.Object != "chat.completion.chunk" {
			t.Fatalf("stream event %q is not a chunk", e.data)
		}
	}
	// The mock spaces six chunks 60 ms apart; a gateway that buffered the
	// stream would deliver them together.
	if spread := events[len(events)-2].at.Sub(events[0].at); spread < 200*time.Millisecond {
		t.Fatalf("stream arrived in one piece (first to last chunk: %v)", spread)
	}
	code, body = post(t, chat, secret, `{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if code != 200 || !strings.Contains(string(body), "data: [DONE]") {
		t.Fatalf("stream: %d %s", code, body)
	}
	if strings.Contains(string(body), `"usage"`) {
		t.Fatalf("a client that did not ask for usage saw it: %s", body)
	}

	// Errors in OpenAI's shape.
	code, body = post(t, chat, "", `{"model":"gpt-test","messages":[]}`)
	if code != 401 || openAIError(t, body) != "missing_api_key" {
		t.Fatalf("no key: %d %s", code, body)
	}
	code, body = post(t, chat, "tg-wrong", `{"model":"gpt-test","messages":[]}`)
	if code != 401 || openAIError(t, body) != "invalid_api_key" {
		t.Fatalf("bad key: %d %s", code, body)
	}
	code, body = post(t, chat, secret, `{"model":"other","messages":[]}`)
	if code != 403 || openAIError(t, body) != "model_not_allowed" {
		t.Fatalf("model outside the allow-list: %d %s", code, body)
	}
	code, body = post(t, chat, secret2, `{"model":"gpt-nope","messages":[]}`)
	if code != 404 || openAIError(t, body) != "model_not_found" {
		t.Fatalf("unknown model: %d %s", code, body)
	}
	code, body = post(t, chat, secret, `{"model":"gpt-test","messages":[`)
	if code != 400 || openAIError(t, body) != "invalid_json" {
		t.Fatalf("malformed JSON: %d %s", code, body)
	}
	code, body = post(t, chat, secret2, `{"model":"other","messages":[{"role":"user","content":"x"}]}`)
	if code != 200 {
		t.Fatalf("pattern allow-list: %d %s", code, body)
	}

	// Revoke: the next request is refused.
	g.ctl(t, "key", "revoke", keyID)
	code, body = post(t, chat, secret, `{"model":"gpt-test","messages":[]}`)
	if code != 401 || openAIError(t, body) != "invalid_api_key" {
		t.Fatalf("revoked key: %d %s", code, body)
	}

	// kill -9 and restart on the same data dir: everything is still there.
	g.kill()
	g.start(t)
	var keys []struct {
		ID        string `json:"id"`
		RevokedAt any    `json:"revoked_at"`
	}
	if err := json.Unmarshal([]byte(g.ctl(t, "key", "list", "--all", "-o", "json")), &keys); err != nil || len(keys) != 2 {
		t.Fatalf("keys after restart: %v %v", keys, err)
	}
	for _, k := range keys {
		if (k.ID == keyID) != (k.RevokedAt != nil) {
			t.Fatalf("after restart, key %s revoked_at=%v", k.ID, k.RevokedAt)
		}
	}
	if out := g.ctl(t, "model", "list"); !strings.Contains(out, "gpt-test") || !strings.Contains(out, "other") {
		t.Fatalf("routes after restart:\n%s", out)
	}
	code, _ = post(t, chat, secret, `{"model":"gpt-test","messages":[]}`)
	if code != 401 {
		t.Fatalf("revoked key works after restart: %d", code)
	}
	code, body = post(t, chat, secret2, `{"model":"gpt-test","messages":[{"role":"user","content":"x"}]}`)
	if code != 200 {
		t.Fatalf("live key after restart: %d %s", code, body)
	}
}
