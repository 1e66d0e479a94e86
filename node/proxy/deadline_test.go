package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/mockllm/mock"
	"github.com/tollgate/tollgate/node/budget"
	"github.com/tollgate/tollgate/node/proxy"
	"github.com/tollgate/tollgate/raftstore"
)

// trickle sends a POST whose body comes one byte every 50 ms (for at most
// 10 s) and returns the response the gateway answers meanwhile.
func trickle(t *testing.T, gatewayURL, path, secret string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(gatewayURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Content-Length: 100000\r\n\r\n{", path, secret)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for range 200 {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func TestSlowRequestBodyGets408InTheClientsErrorShape(t *testing.T) {
	g := startGateway(t, proxy.Config{BodyReadTimeout: 300 * time.Millisecond})
	_, secret := newKey(t)

	start := time.Now()
	resp, body := trickle(t, g.URL, "/v1/chat/completions", secret)
	wantError(t, response{resp.StatusCode, resp.Header, body}, http.StatusRequestTimeout, "invalid_request_error", "request_timeout")
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the 408 came after %v", took)
	}
	if !resp.Close {
		t.Error("the connection is kept open after an unfinished body")
	}
	rec := g.rec.of(t, response{resp.StatusCode, resp.Header, body})
	if rec.Status != http.StatusRequestTimeout {
		t.Errorf("recorded status %d", rec.Status)
	}

	resp, body = trickle(t, g.URL, "/v1/messages", secret)
	var a struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal(body, &a); resp.StatusCode != http.StatusRequestTimeout || err != nil || a.Type != "error" ||
		a.Error.Type == "" || !strings.Contains(a.Error.Message, "did not arrive within 300ms") {
		t.Errorf("/v1/messages: %d %s, want 408 in Anthropic's shape", resp.StatusCode, body)
	}
}

// The body read deadline bounds the body only: an answer that takes longer
// than BodyReadTimeout is still served.
func TestAnswerSlowerThanBodyReadTimeoutIsServed(t *testing.T) {
	_, url := startMock(t, mock.Options{})
	g := startGateway(t, proxy.Config{BodyReadTimeout: 200 * time.Millisecond})
	model := newRoute(t, "deadline", dep("d1", url, "m?latency=600ms"))
	_, secret := newKey(t)
	r := g.post(t, "/v1/chat/completions", secret, chatBody(model))
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

// A hung upstream is given up on at the request's deadline, whatever the
// per-attempt timeout and the attempts left, and the 504 says that the
// request's timeout fired.
func TestRequestTimeoutEndsRetriesAndSaysSo(t *testing.T) {
	_, url := startMock(t, mock.Options{})
	g := startGateway(t, proxy.Config{RequestTimeout: 500 * time.Millisecond, RetryBackoff: time.Millisecond})
	d := dep("hung", url, "m?fault=hang")
	d.TimeoutMs = 300
	model := newRoute(t, "hung", d)
	_, secret := newKey(t)
	r := g.post(t, "/v1/chat/completions", secret, chatBody(model))
	e := wantError(t, r, http.StatusGatewayTimeout, "timeout_error", "request_timeout")
	if !strings.Contains(e.Error.Message, "request timeout of 500ms") {
		t.Errorf("message %q does not name the request timeout", e.Error.Message)
	}
	if rec := g.rec.of(t, r); rec.Attempts != 2 {
		t.Errorf("%d attempts; want 2 (the second cut short by the deadline)", rec.Attempts)
	}
}

// Without a request timeout each attempt runs its own; the 504 names the
// per-attempt timeout and how many attempts were made.
func TestPerAttemptTimeoutMessageNamesTheAttempt(t *testing.T) {
	_, url := startMock(t, mock.Options{})
	g := startGateway(t, proxy.Config{RetryBackoff: time.Millisecond, MaxAttempts: 2})
	d := dep("hung", url, "m?fault=hang")
	d.TimeoutMs = 100
	model := newRoute(t, "hung", d)
	_, secret := newKey(t)
	r := g.post(t, "/v1/chat/completions", secret, chatBody(model))
	e := wantError(t, r, http.StatusGatewayTimeout, "timeout_error", "upstream_timeout")
	if !strings.Contains(e.Error.Message, "per-attempt timeout of 100ms (attempt 2,") {
		t.Errorf("message %q", e.Error.Message)
	}
}

// refusingBudgets refuses every reservation as a budget with limit and
// spent would.
type refusingBudgets struct{ limit, spent int64 }

func (b refusingBudgets) Reserve(context.Context, []*raftstore.Limit, int64, time.Time) (*budget.Reservation, error) {
	return nil, &budget.Exceeded{Budget: &raftstore.Limit{ID: "key:k1", LimitNanos: b.limit, Period: "total"}, SpentNanos: b.spent}
}

func (refusingBudgets) Settle(*budget.Reservation, int64) {}

// A refusal says what the request would reserve and what is left when
// the budget is not spent, and what was spent when it is.
func TestBudgetRefusalSaysWhatTheRequestWouldReserve(t *testing.T) {
	_, url := startMock(t, mock.Options{})
	model := newRoute(t, "refused", dep("dear", url, "m"))
	secret := newBudgetKey(t)
	for _, tc := range []struct {
		b    refusingBudgets
		want string
	}{
		{refusingBudgets{limit: 1e9, spent: 999_900_000}, "it would reserve $0.0002 (its largest possible cost), and $0.0001 of $1.0000 (total) is left"},
		{refusingBudgets{limit: 1e9, spent: 1e9}, "is exhausted: spent $1.0000 of $1.0000 (total)"},
	} {
		g := startGateway(t, proxy.Config{Budgets: tc.b, Pricing: linearPricing{}, OutputCap: 10})
		body := chatBody(model, `"max_tokens":100`) // reserves 100*(len(body) + 10*100) nano-dollars
		r := g.post(t, "/v1/chat/completions", secret, body)
		e := wantError(t, r, http.StatusTooManyRequests, "insufficient_quota", "budget_exceeded")
		want := strings.Replace(tc.want, "$0.0002", fmt.Sprintf("$0.%04d", (100*(int64(len(body))+1000)+50_000)/100_000), 1)
		if !strings.Contains(e.Error.Message, want) {
			t.Errorf("message %q lacks %q", e.Error.Message, want)
		}
	}
}
