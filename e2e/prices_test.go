package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestCacheWritesAndLongPromptsPriced: an Anthropic deployment of Claude
// Sonnet 4.5 at the built-in price, served by mockllm, reports tokens
// written to the prompt cache. The ledger prices them at the cache-write
// rate ($3.75 per million, not the input's $3), and a call whose prompt
// passes 200,000 tokens at the long-context rates ($6, $7.50 and $22.50)
// for all its tokens, on the native Messages API and translated from chat
// completions alike. The expected costs are worked out here from Anthropic's
// published rates, not by the gateway's price code.
func TestCacheWritesAndLongPromptsPriced(t *testing.T) {
	mock := mockLLM(t)
	g := startGateway(t, t.TempDir(), "t", "--no-seed")
	g.ctl(t, "credential", "set", "anthropic", "--value", "sk-ant-e2e")
	// The mock's cache-write directive rides on the upstream model name; the
	// price table still recognises claude-sonnet-4-5 in it.
	g.ctl(t, "model", "add", "sonnet", "--provider", "anthropic", "--base-url", mock,
		"--upstream-model", "claude-sonnet-4-5?cache-write=2000", "--credential", "anthropic")
	g.ctl(t, "model", "add", "sonnet-long", "--provider", "anthropic", "--base-url", mock,
		"--upstream-model", "claude-sonnet-4-5?cache-write=250000", "--credential", "anthropic")
	keyID, secret := g.createKey(t, "--name", "cache", "--models", "sonnet*")

	prices := g.ctl(t, "model", "prices", "sonnet")
	for _, want := range []string{"$3.75", ">200000: $6.00/$22.50", "built-in anthropic/claude-sonnet-4-5"} {
		if !strings.Contains(prices, want) {
			t.Errorf("model prices lacks %q:\n%s", want, prices)
		}
	}

	type rates struct{ in, cacheWrite, cacheRead, out int64 } // micro-dollars per million tokens
	base := rates{3_000_000, 3_750_000, 300_000, 15_000_000}
	long := rates{6_000_000, 7_500_000, 600_000, 22_500_000}
	// cost is Anthropic's bill in nano-dollars, rounded half up.
	cost := func(r rates, in, written, read, out int64) int64 {
		return (in*r.in + written*r.cacheWrite + read*r.cacheRead + out*r.out + 500) / 1000
	}

	messages := "http://" + g.http + "/v1/messages"
	chat := "http://" + g.http + "/v1/chat/completions"
	for _, c := range []struct{ url, body string }{
		{messages, `{"model":"sonnet","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`},
		{chat, `{"model":"sonnet","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{messages, `{"model":"sonnet-long","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{chat, `{"model":"sonnet-long","messages":[{"role":"user","content":"hi"}]}`},
	} {
		code, body := post(t, c.url, secret, c.body)
		if code != 200 {
			t.Fatalf("%s %s: %d %s", c.url, c.body, code, body)
		}
		if c.url == messages && !strings.Contains(c.body, `"stream":true`) {
			var m struct {
				Usage struct {
					CacheWrite int64 `json:"cache_creation_input_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(body, &m); err != nil || m.Usage.CacheWrite != 2000 {
				t.Errorf("the client's usage shows %d tokens written to the cache (%v); want 2000: %s", m.Usage.CacheWrite, err, body)
			}
		}
	}

	recs := g.spendLogs(t, "--key", keyID)
	if len(recs) != 4 {
		t.Fatalf("%d spend records; want 4: %+v", len(recs), recs)
	}
	var sum int64
	for _, r := range recs {
		sum += int64(r.CostNanos)
		written, rt := int64(2000), base
		if r.Model == "sonnet-long" {
			written, rt = 250_000, long
		}
		// The mock counts the prompt "hi" as one token, and adds the ones
		// it reports as written to the cache.
		prompt, cached, out := int64(r.PromptTokens), int64(r.CachedTokens), int64(r.CompletionTokens)
		if r.Status != 200 || prompt != 1+written || cached != 0 || int64(r.CacheWriteTokens) != written || out <= 0 {
			t.Errorf("record %+v: want status 200, %d prompt tokens of which %d written to the cache", r, 1+written, written)
			continue
		}
		want := cost(rt, prompt-written-cached, written, cached, out)
		if int64(r.CostNanos) != want || r.Unpriced {
			t.Errorf("%s %s (stream %v): cost %s; want %s (%d in, %d written, %d out)", r.Model, r.Endpoint, r.Stream,
				dollars(int64(r.CostNanos)), dollars(want), prompt-written, written, out)
		}
	}
	// The cluster-wide report (the rollups in Raft) counts the cache writes too.
	rep := g.waitReportsSettled(t, 30*time.Second, "--key", keyID)
	if rep.Requests != 4 || rep.CacheWriteTokens != 2*2000+2*250_000 || int64(rep.CostNanos) != sum {
		t.Errorf("spend report %+v; want 4 requests, %d tokens written to the cache, cost %s", rep, 2*2000+2*250_000, dollars(sum))
	}
}
