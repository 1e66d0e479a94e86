package proxy_test

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// garbageUpstream answers every request with status 200, the given
// Content-Type and body, and counts the requests.
func garbageUpstream(t *testing.T, contentType, body string) (string, *int) {
	t.Helper()
	n := new(int)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		*n++
		w.Header().Set("Content-Type", contentType)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, n
}

func withPriority(d *pb.Deployment, p uint32) *pb.Deployment {
	d.Priority = p
	return d
}

// A 200 whose body is not a whole JSON object reaches neither the client
// nor the ledger as an answer: it is a 502 of that deployment, and the next
// deployment serves the request.
func TestUpstreamGarbageAnswerIsRetriedOnTheNextDeployment(t *testing.T) {
	_, good := startMock(t, mock.Options{})
	g := startGateway(t, proxy.Config{RetryBackoff: 1})
	_, secret := newKey(t)
	for _, tc := range []struct{ name, ct, body string }{
		{"non-JSON", "application/json", "<html>502 Bad Gateway</html>"},
		{"truncated", "application/json", `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assis`},
		{"empty", "application/json", ""},
		{"JSON but no object", "application/json", `"ok"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad, hits := garbageUpstream(t, tc.ct, tc.body)
			model := newRoute(t, "garbage", withPriority(dep("bad", bad, "m"), 0), withPriority(dep("good", good, "m"), 1))
			r := g.post(t, "/v1/chat/completions", secret, chatBody(model))
			if r.status != 200 || r.header.Get("X-Tollgate-Deployment") != "good" {
				t.Fatalf("%d from %q: %s; want 200 from the good deployment", r.status, r.header.Get("X-Tollgate-Deployment"), r.body)
			}
			if *hits == 0 {
				t.Fatal("the bad deployment was not tried first")
			}
			rec := g.rec.of(t, r)
			if rec.Attempts < 2 || !rec.Usage.Present {
				t.Errorf("record: attempts %d, usage %+v", rec.Attempts, rec.Usage)
			}

			only := newRoute(t, "garbage-only", dep("bad", bad, "m"))
			r = g.post(t, "/v1/chat/completions", secret, chatBody(only))
			wantError(t, r, http.StatusBadGateway, "upstream_error", "bad_upstream_response")
			if rec := g.rec.of(t, r); rec.Status != http.StatusBadGateway || rec.Usage.Present {
				t.Errorf("recorded status %d usage %+v", rec.Status, rec.Usage)
			}
		})
	}
}

// An Anthropic deployment's non-JSON 200 to a /v1/messages client is a 502
// in Anthropic's shape.
func TestAnthropicGarbageAnswerIs502(t *testing.T) {
	bad, _ := garbageUpstream(t, "application/json", `{"id":"msg_1","content":[`)
	g := startGateway(t, proxy.Config{RetryBackoff: 1})
	_, secret := newKey(t)
	model := newRoute(t, "garbage-anthropic", &pb.Deployment{Id: "a", Provider: "anthropic", BaseUrl: bad + "/v1", UpstreamModel: "claude"})
	r := g.post(t, "/v1/messages", secret, `{"model":"`+model+`","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
	if r.status != http.StatusBadGateway || !strings.Contains(string(r.body), `"type":"error"`) {
		t.Fatalf("%d %s; want 502 in Anthropic's shape", r.status, r.body)
	}
}

// A stream that ends without [DONE] was cut short: the client's
// connection is aborted rather than ended cleanly, and the ledger gets 502.
func TestStreamWithoutDoneIsAbortedAndRecorded502(t *testing.T) {
	chunk := `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}` + "\n\n"
	bad, _ := garbageUpstream(t, "text/event-stream", chunk+chunk)
	g := startGateway(t, proxy.Config{})
	_, secret := newKey(t)
	model := newRoute(t, "nodone", dep("bad", bad, "m"))
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(chatBody(model, `"stream":true`)))
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(bufio.NewReader(resp.Body))
	if err == nil {
		t.Error("the stream without [DONE] ended cleanly for the client")
	}
	rec := g.rec.wait(t, resp.Header.Get("X-Request-Id"))
	if rec.Status != http.StatusBadGateway {
		t.Errorf("recorded status %d, want 502", rec.Status)
	}
}

// Usage that cannot be true (negative, or beyond MaxUsageTokens) is
// flagged, counts as zero tokens, and is charged what the request
// reserved, never its face value; the client still gets the answer.
func TestImpossibleUsageIsFlaggedAndChargedAtTheReservation(t *testing.T) {
	fb := &fakeBudgets{}
	g := startGateway(t, proxy.Config{Budgets: fb, Pricing: linearPricing{}, OutputCap: 100})
	secret := newBudgetKey(t)
	for _, tc := range []struct{ name, usage string }{
		{"negative", `{"prompt_tokens":-5,"completion_tokens":3,"total_tokens":-2}`},
		{"huge", `{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807,"total_tokens":9223372036854775807}`},
		{"above the bound", `{"prompt_tokens":1,"completion_tokens":10000001,"total_tokens":10000002}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, _ := garbageUpstream(t, "application/json", `{"id":"c1","object":"chat.completion","created":1,"model":"m",`+
				`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":`+tc.usage+`}`)
			model := newRoute(t, "usage", dep("d", up, "m"))
			r := g.post(t, "/v1/chat/completions", secret, chatBody(model))
			if r.status != 200 || !strings.Contains(string(r.body), `"content":"ok"`) {
				t.Fatalf("%d %s", r.status, r.body)
			}
			rec := g.rec.of(t, r)
			reserved := fb.last()
			if !rec.UsageRejected || rec.Usage.PromptTokens != 0 || rec.Usage.CompletionTokens != 0 {
				t.Errorf("record: rejected %v, usage %+v", rec.UsageRejected, rec.Usage)
			}
			if rec.CostNanos != reserved || rec.BudgetNanos != reserved || fb.lastSettled() != reserved {
				t.Errorf("cost %d, budget %d, settled %d; want the reservation %d", rec.CostNanos, rec.BudgetNanos, fb.lastSettled(), reserved)
			}
		})
	}
}

// Without a budget the same bound prices it: the body's bytes as prompt
// tokens and the output cap, at the deployment's dearest price.
func TestImpossibleUsageWithoutBudgetIsChargedTheEstimateBound(t *testing.T) {
	g := startGateway(t, proxy.Config{Pricing: linearPricing{}, OutputCap: 100})
	_, secret := newKey(t)
	up, _ := garbageUpstream(t, "application/json", `{"id":"c1","object":"chat.completion","created":1,"model":"m",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":-1,"completion_tokens":-1}}`)
	model := newRoute(t, "usage-nobudget", dep("d", up, "m"))
	body := chatBody(model)
	r := g.post(t, "/v1/chat/completions", secret, body)
	rec := g.rec.of(t, r)
	if want := int64(len(body)) + 10*100; !rec.UsageRejected || rec.CostNanos != want {
		t.Errorf("rejected %v, cost %d; want %d", rec.UsageRejected, rec.CostNanos, want)
	}
}
