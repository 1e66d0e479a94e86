package proxy_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/proxy"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/ratelimit"
)

// newLimitedKey creates a key allowed to use models, with the rate limits
// lim (nil: none), and returns its id and secret.
func newLimitedKey(tb testing.TB, lim *pb.RateLimits, models ...string) (id, secret string) {
	tb.Helper()
	id = uniq("key")
	secret = "sk-tg-" + id + "-secret"
	h := raftstore.HashSecret(secret)
	apply(tb, &pb.Command{Op: &pb.Command_CreateKey{CreateKey: &pb.CreateKeyCommand{Key: &pb.StoredKey{
		Key:        &pb.Key{Id: id, Name: "test " + id, Models: models, Limits: lim},
		SecretHash: h[:],
	}}}})
	return id, secret
}

// BenchmarkHandlerChatLimits: BenchmarkHandlerChat (the gateway alone, with
// a canned upstream) with a real ratelimit.Limiter and a key that has RPM,
// TPM and max-parallel limits, so that Admit, Status (for the
// x-ratelimit-* headers) and Ticket.Done run on every request ("on"),
// against the same handler without a limiter and a key without limits
// ("off"). The limits are far above anything a run can reach, so nothing is
// ever refused (a refusal fails the benchmark).
func BenchmarkHandlerChatLimits(b *testing.B) {
	resp := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"mock-up","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"` + strings.Repeat("x", 1000) + `"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":6,"completion_tokens":250,"total_tokens":256}}`
	for _, c := range []struct {
		name    string
		limiter bool
		limits  *pb.RateLimits
	}{
		{"off", false, nil},
		{"on", true, &pb.RateLimits{Rpm: 1 << 40, Tpm: 1 << 48, MaxParallel: 1 << 20}},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg := proxy.Config{State: testStore(b), Transport: newCannedTransport("application/json", []byte(resp))}
			if c.limiter {
				cfg.Limiter = ratelimit.New(ratelimit.Config{NodeID: "bench"})
			}
			route := newRoute(b, "hlbench", dep(uniq("dep"), "http://upstream.invalid", "mock-up"))
			_, secret := newLimitedKey(b, c.limits, route)
			h := proxy.New(cfg)
			body := []byte(chatBody(route))
			rd := bytes.NewReader(body)
			req, _ := http.NewRequest(http.MethodPost, "http://gateway/v1/chat/completions", rd)
			req.Header.Set("Authorization", "Bearer "+secret)
			req.Header.Set("Content-Type", "application/json")
			w := &statusWriter{discardWriter: discardWriter{h: http.Header{}}}
			serve := func() {
				rd.Reset(body)
				req.Body = io.NopCloser(rd)
				req.ContentLength = int64(len(body))
				clear(w.h)
				w.status = 0
				h.ServeHTTP(w, req)
			}
			// One request outside the loop checks the setup: 200, and the
			// rate-limit headers exactly when limits are on.
			serve()
			if w.status != http.StatusOK {
				b.Fatalf("status %d", w.status)
			}
			if got, want := w.h.Get("X-Ratelimit-Limit-Requests") != "", c.limits != nil; got != want {
				b.Fatalf("x-ratelimit-limit-requests present: %v, want %v (headers %v)", got, want, w.h)
			}
			b.ReportAllocs()
			for b.Loop() {
				serve()
				if w.status != http.StatusOK {
					b.Fatalf("status %d", w.status)
				}
			}
		})
	}
}

// statusWriter is a discardWriter that keeps the status code.
type statusWriter struct {
	discardWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) { s.status = code }

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return len(p), nil
}

// TestDeploymentTicketReleasedWhenSkipped: a deployment with rate limits
// whose ticket was taken but that did not serve (its upstream refused the
// connection, or its credential is missing) must release the ticket at
// once, as forward does when the next deployment has limits too
// (tickets[1].Done(0)). When the next deployment has no limits, forward
// keeps the skipped deployment's ticket in rec.tickets[1]: it stays in
// flight for the whole request served by the other deployment, and commit
// charges it that request's tokens (Done(actual)).
func TestDeploymentTicketReleasedWhenSkipped(t *testing.T) {
	const tpm = 1_000_000
	_, url := startMock(t, mock.Options{})
	refused := func() *pb.Deployment { return dep("a", closedURL(t), "up-a") }
	noCredential := func() *pb.Deployment {
		d := dep("a", url, "up-a")
		d.Credential = uniq("unset-credential")
		return d
	}
	for _, c := range []struct {
		name     string
		a        func() *pb.Deployment
		bLimited bool // b has limits too: the path forward handles (passes)
	}{
		{"connection refused, b limited", refused, true},
		{"connection refused", refused, false},
		{"credential missing", noCredential, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			lim := ratelimit.New(ratelimit.Config{NodeID: "t"})
			a := c.a()
			a.Limits = &pb.RateLimits{Tpm: tpm, MaxParallel: 1}
			b := dep("b", url, "up-b")
			b.Priority = 1 // a is always tried first
			if c.bLimited {
				b.Limits = &pb.RateLimits{Rpm: 1 << 30}
			}
			route := newRoute(t, "skip", a, b)
			_, secret := newKey(t, route)
			g := startGateway(t, proxy.Config{Limiter: lim})
			r := g.post(t, "/v1/chat/completions", secret, chatBody(route))
			if r.status != http.StatusOK || r.header.Get("X-Tollgate-Deployment") != "b" {
				t.Fatalf("status %d from deployment %q, want 200 from b: %s", r.status, r.header.Get("X-Tollgate-Deployment"), r.body)
			}
			var u struct {
				Usage struct {
					Total int64 `json:"total_tokens"`
				} `json:"usage"`
			}
			_ = json.Unmarshal(r.body, &u)
			st := lim.Status(ratelimit.Check{Bucket: "dep:" + route + "/a", Limits: ratelimit.Limits{TPM: tpm}})
			if used := tpm - st.RemainingTokens; used != 0 {
				t.Errorf("deployment a served nothing, yet %d of its tokens a minute are used (b's answer had %d tokens)", used, u.Usage.Total)
			}
		})
	}
}
