package proxy_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/node/budget"
	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
)

// fakeBudgets grants every reservation and records its estimate.
type fakeBudgets struct {
	mu        sync.Mutex
	estimates []int64
}

func (f *fakeBudgets) Reserve(_ context.Context, _ []*raftstore.Limit, estimate int64, _ time.Time) (*budget.Reservation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.estimates = append(f.estimates, estimate)
	return &budget.Reservation{}, nil
}

func (f *fakeBudgets) Settle(*budget.Reservation, int64) {}

func (f *fakeBudgets) last() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.estimates[len(f.estimates)-1]
}

// linearPricing: a prompt token costs 1, a completion token 10.
type linearPricing struct{}

func (linearPricing) Cost(_ *raftstore.Deployment, prompt, completion, _ int64) (int64, bool) {
	return prompt + 10*completion, true
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

func newBudgetKey(t *testing.T) string {
	t.Helper()
	id := uniq("key")
	secret := "sk-tg-" + id + "-secret"
	h := raftstore.HashSecret(secret)
	apply(t, &pb.Command{Op: &pb.Command_CreateKey{CreateKey: &pb.CreateKeyCommand{Key: &pb.StoredKey{
		Key:        &pb.Key{Id: id, Name: "budget " + id, Budget: &pb.Budget{LimitNanos: 1e12, Period: "total"}},
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

	// The estimate: body bytes in, cap × n out, 50,000 per media URL.
	for _, c := range []struct {
		name, extra string
		outs, urls  int64
	}{
		{"one answer", "", 1, 0},
		{"n=3", `"n":3,`, 3, 0},
		{"an image by URL", `"x":"https://example.com/cat.png",`, 1, 1},
	} {
		body := chat(compat, c.extra)
		if r := gw.post(t, "/v1/chat/completions", budgeted, body); r.status != 200 {
			t.Fatalf("%s: %d %s", c.name, r.status, r.body)
		}
		want := int64(len(body)) + 50_000*c.urls + 10*outputCap*c.outs
		if got := fb.last(); got != want {
			t.Errorf("%s: estimate %d, want %d", c.name, got, want)
		}
	}
}
