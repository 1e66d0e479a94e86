package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestUpstreamGarbageThroughANode runs bad upstream answers through a real
// node: a 200 that is not JSON is a 502 (or the next deployment serves),
// and impossible usage reaches the client but the ledger flags it, with
// zero tokens and a cost that is not its face value.
func TestUpstreamGarbageThroughANode(t *testing.T) {
	mock := mockLLM(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(b), `"huge"`) {
			_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"huge","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+
				`"usage":{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807,"total_tokens":9223372036854775807}}`)
			return
		}
		_, _ = io.WriteString(w, "<html>not an answer</html>")
	}))
	t.Cleanup(up.Close)

	g := startGateway(t, t.TempDir(), "t")
	g.ctl(t, "model", "add", "html", "--provider", "openai-compatible", "--base-url", up.URL+"/v1", "--upstream-model", "html")
	g.ctl(t, "model", "add", "html-then-mock", "--provider", "openai-compatible", "--base-url", up.URL+"/v1", "--upstream-model", "html", "--priority", "0")
	g.ctl(t, "model", "add", "html-then-mock", "--provider", "openai-compatible", "--base-url", mock, "--upstream-model", "mock-model", "--priority", "1")
	g.ctl(t, "model", "add", "huge", "--provider", "openai-compatible", "--base-url", up.URL+"/v1", "--upstream-model", "huge",
		"--input-price", "1", "--output-price", "1")
	keyID, key := g.createKey(t, "--name", "garbage")
	url := "http://" + g.http + "/v1/chat/completions"
	body := func(model string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
	}

	if code, b := post(t, url, key, body("html")); code != 502 || openAIError(t, b) != "bad_upstream_response" {
		t.Errorf("non-JSON 200: %d %s; want 502 bad_upstream_response", code, b)
	}
	if code, b := post(t, url, key, body("html-then-mock")); code != 200 {
		t.Errorf("non-JSON 200 with a second deployment: %d %s; want the second's 200", code, b)
	}
	code, b := post(t, url, key, body("huge"))
	if code != 200 || !json.Valid(b) {
		t.Fatalf("impossible usage: %d %s; want the answer", code, b)
	}
	var flagged bool
	for _, r := range g.spendLogs(t, "--key", keyID) {
		if r.Model != "huge" {
			continue
		}
		flagged = true
		if r.PromptTokens != 0 || r.CompletionTokens != 0 || r.CostNanos <= 0 || r.CostNanos > 1e9 {
			t.Errorf("ledger record of impossible usage: %+v; want zero tokens and the reservation's cost", r)
		}
	}
	if !flagged {
		t.Fatal("no ledger record of the request with impossible usage")
	}
	out := g.ctl(t, "spend", "logs", "-o", "json", "--key", keyID)
	if !strings.Contains(out, `"usage_rejected": true`) && !strings.Contains(out, `"usage_rejected":true`) {
		t.Errorf("spend logs do not flag the rejected usage:\n%s", out)
	}
}
