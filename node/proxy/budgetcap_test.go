package proxy_test

import (
	"bufio"
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
	"github.com/tollgate/tollgate/node/budget"
	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
)

// fakeBudgets grants every reservation and records its estimate and
// what was settled.
type fakeBudgets struct {
	mu        sync.Mutex
	estimates []int64
	settled   []int64
}

func (f *fakeBudgets) Reserve(_ context.Context, _ []*raftstore.Limit, estimate int64, _ time.Time) (*budget.Reservation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.estimates = append(f.estimates, estimate)
	return budget.NewReservation(estimate), nil
}

func (f *fakeBudgets) Settle(_ *budget.Reservation, cost int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settled = append(f.settled, cost)
}

func (f *fakeBudgets) lastSettled() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.settled) == 0 {
		return -1
	}
	return f.settled[len(f.settled)-1]
}

func (f *fakeBudgets) last() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.estimates[len(f.estimates)-1]
}

// linearPricing: a prompt token costs 1, a completion token 10; on a
// deployment named "dear", 100 times that; one named "free" is unpriced.
type linearPricing struct{}

func (linearPricing) Cost(d *raftstore.Deployment, u routing.Usage) (int64, bool) {
	prompt, completion := u.PromptTokens, u.CompletionTokens
	switch d.ID {
	case "dear":
		return 100 * (prompt + 10*completion), true
	case "free":
		return 0, false
	}
	return prompt + 10*completion, true
}

func (p linearPricing) MaxCost(d *raftstore.Deployment, prompt, completion int64) (int64, bool) {
	return p.Cost(d, routing.Usage{PromptTokens: prompt, CompletionTokens: completion})
}

// bodyCapture is an OpenAI- and Anthropic-format upstream that keeps the
// last request body.
type bodyCapture struct {
	mu   sync.Mutex
	last map[string]any
}

func (c *bodyCapture) body(t *testing.T) map[string]any {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		t.Fatal("the upstream got no request")
	}
	return c.last
}

func startCapture(t *testing.T) (*bodyCapture, string) {
	c := &bodyCapture{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			http.Error(w, "bad json: "+err.Error(), 400)
			return
		}
		c.mu.Lock()
		c.last = m
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/messages") {
			_, _ = io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"up","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
			return
		}
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	t.Cleanup(srv.Close)
	return c, srv.URL
}

func newBudgetKey(t *testing.T) string { return newBudgetKeyWith(t, false) }

// newBudgetKeyWith makes a key with a budget that allows unpriced models
// or not.
func newBudgetKeyWith(t *testing.T, allowUnpriced bool) string {
	t.Helper()
	id := uniq("key")
	secret := "sk-tg-" + id + "-secret"
	h := raftstore.HashSecret(secret)
	apply(t, &pb.Command{Op: &pb.Command_CreateKey{CreateKey: &pb.CreateKeyCommand{Key: &pb.StoredKey{
		Key: &pb.Key{Id: id, Name: "budget " + id,
			Budget: &pb.Budget{LimitNanos: 1e12, Period: "total", AllowUnpriced: allowUnpriced}},
		SecretHash: h[:],
	}}}})
	return secret
}

// A request under a budget that sets no output limit gets the one its
// reservation assumed, in the upstream's own field, so the upstream cannot
// write more than was reserved; n multiplies the output reserved, and each
// media URL adds what its bytes do not cover.
func TestBudgetedRequestOutputCapped(t *testing.T) {
	const outputCap = 777
	up, base := startCapture(t)
	fb := &fakeBudgets{}
	gw := startGateway(t, proxy.Config{Budgets: fb, Pricing: linearPricing{}, OutputCap: outputCap})
	budgeted := newBudgetKey(t)
	_, free := newKey(t)
	mk := func(provider string) string {
		return newRoute(t, "cap", &pb.Deployment{Id: "d", Provider: provider, BaseUrl: base + "/v1", UpstreamModel: "up"})
	}
	openai, compat, anthropic := mk(routing.ProviderOpenAI), mk(routing.ProviderOpenAICompatible), mk(routing.ProviderAnthropic)
	azure := func(apiVersion string) string {
		d := &pb.Deployment{Id: "d", Provider: routing.ProviderAzureOpenAI, BaseUrl: base, UpstreamModel: "up"}
		if apiVersion != "" {
			d.Options = map[string]string{"api_version": apiVersion}
		}
		return newRoute(t, "cap", d)
	}
	chat := func(model, extra string) string {
		return `{"model":"` + model + `",` + extra + `"messages":[{"role":"user","content":"hi"}]}`
	}
	num := func(m map[string]any, k string) any {
		if v, ok := m[k]; ok {
			return v
		}
		return nil
	}
	for _, c := range []struct {
		name, key, body, field string
		want                   any // the field's value upstream; nil: absent
		absent                 string
	}{
		{"openai, no limit", budgeted, chat(openai, ""), "max_completion_tokens", float64(outputCap), "max_tokens"},
		{"openai-compatible, no limit", budgeted, chat(compat, ""), "max_tokens", float64(outputCap), "max_completion_tokens"},
		{"client's own limit kept", budgeted, chat(openai, `"max_tokens":50,`), "max_tokens", float64(50), "max_completion_tokens"},
		{"no budget, no limit added", free, chat(openai, ""), "max_completion_tokens", nil, "max_tokens"},
		{"translated to Anthropic", budgeted, chat(anthropic, ""), "max_tokens", float64(outputCap), ""},
		// Azure knows max_completion_tokens from 2024-09-01-preview on;
		// an older api-version refuses it.
		{"azure, default api-version", budgeted, chat(azure(""), ""), "max_completion_tokens", float64(outputCap), "max_tokens"},
		{"azure 2024-10-21", budgeted, chat(azure("2024-10-21"), ""), "max_completion_tokens", float64(outputCap), "max_tokens"},
		{"azure 2024-09-01-preview", budgeted, chat(azure("2024-09-01-preview"), ""), "max_completion_tokens", float64(outputCap), "max_tokens"},
		{"azure 2024-06-01", budgeted, chat(azure("2024-06-01"), ""), "max_tokens", float64(outputCap), "max_completion_tokens"},
		{"azure 2024-08-01-preview", budgeted, chat(azure("2024-08-01-preview"), ""), "max_tokens", float64(outputCap), "max_completion_tokens"},
		{"azure v1 preview", budgeted, chat(azure("preview"), ""), "max_completion_tokens", float64(outputCap), "max_tokens"},
	} {
		r := gw.post(t, "/v1/chat/completions", c.key, c.body)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", c.name, r.status, r.body)
		}
		got := up.body(t)
		if v := num(got, c.field); v != c.want {
			t.Errorf("%s: upstream %s = %v, want %v (body %v)", c.name, c.field, v, c.want, got)
		}
		if c.absent != "" && num(got, c.absent) != nil {
			t.Errorf("%s: upstream got %s too: %v", c.name, c.absent, got)
		}
	}

	// The estimate: body bytes in, 50,000 per image part, the cap for each
	// answer out.
	image := `"messages":[{"role":"user","content":[{"type":"text","text":"what is it?"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}`
	for _, c := range []struct {
		name, path, body string
		outs, media      int64
	}{
		{"one answer", "/v1/chat/completions", chat(compat, ""), 1, 0},
		{"n=3", "/v1/chat/completions", chat(compat, `"n":3,`), 3, 0},
		{"a small PNG", "/v1/chat/completions", `{"model":"` + compat + `",` + image, 1, 1},
		{"three prompts", "/v1/completions", `{"model":"` + compat + `","prompt":["a","b","c"],"n":2}`, 6, 0},
		{"tool schema URLs are not media", "/v1/chat/completions", chat(compat, `"tools":[{"type":"function","function":{"name":"f","parameters":{"$schema":"http://json-schema.org/draft-07/schema#"}}}],`), 1, 0},
	} {
		if r := gw.post(t, c.path, budgeted, c.body); r.status != 200 {
			t.Fatalf("%s: %d %s", c.name, r.status, r.body)
		}
		want := int64(len(c.body)) + 50_000*c.media + 10*outputCap*c.outs
		if got := fb.last(); got != want {
			t.Errorf("%s: estimate %d, want %d", c.name, got, want)
		}
	}

	// A dearer fallback route counts; an unpriced deployment beside a
	// priced one does not zero the estimate.
	dear := newRoute(t, "dear", &pb.Deployment{Id: "dear", Provider: routing.ProviderOpenAICompatible, BaseUrl: base + "/v1", UpstreamModel: "up"})
	withFallback := newRoute(t, "fb", &pb.Deployment{Id: "d", Provider: routing.ProviderOpenAICompatible, BaseUrl: base + "/v1", UpstreamModel: "up"})
	apply(t, &pb.Command{Op: &pb.Command_SetRouteOptions{SetRouteOptions: &pb.SetRouteOptionsCommand{
		Route: withFallback, Options: &pb.RouteOptions{Fallbacks: []string{dear}}}}})
	body := chat(withFallback, "")
	if r := gw.post(t, "/v1/chat/completions", budgeted, body); r.status != 200 {
		t.Fatalf("fallback route: %d %s", r.status, r.body)
	}
	if got, want := fb.last(), 100*(int64(len(body))+10*outputCap); got != want {
		t.Errorf("route with a dearer fallback: estimate %d, want %d", got, want)
	}
	mixed := newRoute(t, "mixed",
		&pb.Deployment{Id: "d", Provider: routing.ProviderOpenAICompatible, BaseUrl: base + "/v1", UpstreamModel: "up"},
		&pb.Deployment{Id: "free", Provider: routing.ProviderOpenAICompatible, BaseUrl: base + "/v1", UpstreamModel: "up"})
	body = chat(mixed, "")
	if r := gw.post(t, "/v1/chat/completions", budgeted, body); r.status == 200 {
		t.Errorf("a budget without allow_unpriced served a route with an unpriced deployment")
	}
	if r := gw.post(t, "/v1/chat/completions", newBudgetKeyWith(t, true), body); r.status != 200 {
		t.Fatalf("mixed route under allow_unpriced: %d %s", r.status, r.body)
	}
	if got, want := fb.last(), int64(len(body))+10*outputCap; got != want {
		t.Errorf("route mixing priced and unpriced deployments: estimate %d, want the priced one's %d", got, want)
	}

	// Output limits the upstream could read otherwise are refused.
	for _, extra := range []string{`"MAX_TOKENS":64000,`, `"max_tokens":null,`, `"max_tokens":5,"max_tokens":6000,`,
		`"max_tokens":"5",`, `"max_tokens":1.5,`, `"max_tokens":0,`, `"max_tokens":-1,`, `"max_output_tokens":5,`} {
		r := gw.post(t, "/v1/chat/completions", budgeted, chat(openai, extra))
		if r.status != 400 || !strings.Contains(string(r.body), "invalid_output_limit") {
			t.Errorf("%s: %d %s", extra, r.status, r.body)
		}
		if r := gw.post(t, "/v1/chat/completions", free, chat(compat, extra)); r.status == 400 && strings.Contains(string(r.body), "invalid_output_limit") {
			t.Errorf("%s without a budget: refused", extra)
		}
	}
}

// A stream whose usage never arrives (the client went away) counts its
// whole reservation against the budget; a finished one its real cost.
func TestBudgetChargedWhenUsageNeverArrives(t *testing.T) {
	_, url := startMock(t, mock.Options{})
	fb := &fakeBudgets{}
	g := startGateway(t, proxy.Config{Budgets: fb, Pricing: linearPricing{}, OutputCap: 500})
	secret := newBudgetKey(t)
	route := newRoute(t, "abort", dep(uniq("dep"), url, "m?chunks=100000&interval=10ms"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, sse := g.openStream(t, ctx, "/v1/chat/completions", secret, chatBody(route, `"stream":true`))
	for range 3 {
		if _, err := sse.next(); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	rec := g.rec.wait(t, resp.Header.Get("X-Request-Id"))
	reserved := fb.last()
	if rec.Status != 499 || rec.BudgetNanos != reserved || fb.lastSettled() != reserved {
		t.Errorf("aborted stream: status %d, budget %d, settled %d; want 499 and the reservation %d", rec.Status, rec.BudgetNanos, fb.lastSettled(), reserved)
	}

	full := newRoute(t, "whole", dep(uniq("dep"), url, "m?chunks=5"))
	r := g.post(t, "/v1/chat/completions", secret, chatBody(full, `"stream":true`))
	if r.status != 200 {
		t.Fatalf("stream: %d %s", r.status, r.body)
	}
	rec = g.rec.next(t)
	if !rec.Usage.Present || rec.BudgetNanos != rec.CostNanos || fb.lastSettled() != rec.CostNanos || rec.CostNanos >= fb.last() {
		t.Errorf("finished stream: usage %v, budget %d, cost %d, settled %d, reserved %d", rec.Usage.Present, rec.BudgetNanos, rec.CostNanos, fb.lastSettled(), fb.last())
	}
}

// A stream that began and then broke (or ended without its proper end),
// its usage never reported, counts its whole reservation against the
// budget, as a client that went away does: the upstream answered part of
// it and the client got that part.
func TestBudgetChargedWhenStreamBreaksMidway(t *testing.T) {
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"The answer is"}}]}`+"\n\n")
	}))
	t.Cleanup(cut.Close)
	fb := &fakeBudgets{}
	g := startGateway(t, proxy.Config{Budgets: fb, Pricing: linearPricing{}, OutputCap: 500})
	secret := newBudgetKey(t)
	route := newRoute(t, "cutbudget", dep(uniq("dep"), cut.URL, "m"))
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		req, _ := http.NewRequest(http.MethodPost, g.URL+path, strings.NewReader(chatBody(route, `"stream":true`, `"max_tokens":20`)))
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		rec := g.rec.wait(t, resp.Header.Get("X-Request-Id"))
		reserved := fb.last()
		if rec.Status != http.StatusBadGateway || rec.BudgetNanos != reserved || fb.lastSettled() != reserved {
			t.Errorf("%s: broken stream: status %d, budget %d, settled %d; want 502 and the reservation %d",
				path, rec.Status, rec.BudgetNanos, fb.lastSettled(), reserved)
		}
	}
}

// On the Anthropic pass-through, message_start's usage is the prompt's and
// a provisional output count (0 or 1), not what the answer cost: a stream
// that ends before message_delta (the client went away, or the stream
// broke) has no usage, and counts its whole reservation, rather than the
// prompt and one output token.
func TestAnthropicPassThroughCutBeforeMessageDeltaCountsTheReservation(t *testing.T) {
	start := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n"
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, start)
		if strings.Contains(r.Header.Get("Anthropic-Beta"), "hold") {
			w.(http.Flusher).Flush()
			select { // until the gateway cancels the call
			case <-r.Context().Done():
			case <-hold:
			}
		}
	}))
	t.Cleanup(up.Close)
	d := &pb.Deployment{Id: uniq("anthropic"), Provider: routing.ProviderAnthropic, BaseUrl: up.URL + "/v1", UpstreamModel: "claude-mock"}
	route := newRoute(t, "acut", d)
	fb := &fakeBudgets{}
	g := startGateway(t, proxy.Config{Budgets: fb, Pricing: linearPricing{}, OutputCap: 500})
	secret := newBudgetKey(t)
	body := `{"model":"` + route + `","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`
	check := func(what string, rec proxy.Record, status int) {
		t.Helper()
		reserved := fb.last()
		if rec.Status != status || rec.Usage.Present || rec.BudgetNanos != reserved || fb.lastSettled() != reserved {
			t.Errorf("%s: status %d, usage %+v, budget %d, settled %d; want %d, no usage and the reservation %d",
				what, rec.Status, rec.Usage, rec.BudgetNanos, fb.lastSettled(), status, reserved)
		}
	}

	req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Api-Key", secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	check("broken stream", g.rec.wait(t, resp.Header.Get("X-Request-Id")), http.StatusBadGateway)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Api-Key", secret)
	req.Header.Set("Anthropic-Beta", "hold")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sse := &sseReader{bufio.NewReader(resp.Body)}
	for range 2 {
		if _, err := sse.next(); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	resp.Body.Close()
	check("client gone", g.rec.wait(t, resp.Header.Get("X-Request-Id")), 499)
}
