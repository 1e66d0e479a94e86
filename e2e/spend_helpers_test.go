package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// jint is an int64 as protojson writes it: a JSON string (or a number).
type jint int64

func (j *jint) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "null" || s == "" {
		*j = 0
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	*j = jint(n)
	return err
}

// reportRow is a row of tollctl spend report -o json.
type reportRow struct {
	Group            string `json:"group"`
	Requests         jint   `json:"requests"`
	PromptTokens     jint   `json:"prompt_tokens"`
	CompletionTokens jint   `json:"completion_tokens"`
	CachedTokens     jint   `json:"cached_tokens"`
	CacheWriteTokens jint   `json:"cache_write_tokens"`
	CostNanos        jint   `json:"cost_nanos"`
	UnpricedRequests jint   `json:"unpriced_requests"`
}

func (r reportRow) String() string {
	return fmt.Sprintf("%d requests, %d+%d tokens, %s", r.Requests, r.PromptTokens, r.CompletionTokens, dollars(int64(r.CostNanos)))
}

// spendRecord is a record of tollctl spend logs -o json.
type spendRecord struct {
	RequestID        string `json:"request_id"`
	Node             string `json:"node"`
	KeyID            string `json:"key_id"`
	TeamID           string `json:"team_id"`
	Model            string `json:"model"`
	Stream           bool   `json:"stream"`
	PromptTokens     jint   `json:"prompt_tokens"`
	CompletionTokens jint   `json:"completion_tokens"`
	CachedTokens     jint   `json:"cached_tokens"`
	CacheWriteTokens jint   `json:"cache_write_tokens"`
	CostNanos        jint   `json:"cost_nanos"`
	Unpriced         bool   `json:"unpriced"`
	Status           int    `json:"status"`
	Endpoint         string `json:"endpoint"`
}

func dollars(nanos int64) string { return fmt.Sprintf("$%.6f", float64(nanos)/1e9) }

// spendTotal runs tollctl spend report -o json with args and returns the
// TOTAL row.
func (g *gateway) spendTotal(t testing.TB, args ...string) reportRow {
	t.Helper()
	out := g.ctl(t, append([]string{"spend", "report", "-o", "json"}, args...)...)
	var r struct {
		Rows  []reportRow `json:"rows"`
		Total *reportRow  `json:"total"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Total == nil {
		t.Fatalf("spend report -o json gave %q (%v)", out, err)
	}
	return *r.Total
}

// spendLogs runs tollctl spend logs -o json with args; it fails the test if
// a node could not be asked.
func (g *gateway) spendLogs(t testing.TB, args ...string) []spendRecord {
	t.Helper()
	out := g.ctl(t, append([]string{"spend", "logs", "-o", "json"}, args...)...)
	var r struct {
		Records     []spendRecord `json:"records"`
		Unreachable []string      `json:"unreachable_nodes"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("spend logs -o json gave %q (%v)", out, err)
	}
	if len(r.Unreachable) > 0 {
		t.Fatalf("spend logs on %s could not ask %v", g.id, r.Unreachable)
	}
	return r.Records
}

// sumRecords totals records the way spend report does.
func sumRecords(recs []spendRecord) reportRow {
	r := reportRow{Group: "total"}
	for _, x := range recs {
		r.Requests++
		r.PromptTokens += x.PromptTokens
		r.CompletionTokens += x.CompletionTokens
		r.CachedTokens += x.CachedTokens
		r.CostNanos += x.CostNanos
		if x.Unpriced {
			r.UnpricedRequests++
		}
	}
	return r
}

// waitReportsSettled polls spend report on g every 2.5 s (longer than the
// 2 s report interval) until two consecutive answers are the same, and
// returns it.
func (g *gateway) waitReportsSettled(t testing.TB, timeout time.Duration, args ...string) reportRow {
	t.Helper()
	deadline := time.Now().Add(timeout)
	prev := g.spendTotal(t, args...)
	for {
		time.Sleep(2500 * time.Millisecond)
		cur := g.spendTotal(t, args...)
		if cur == prev {
			return cur
		}
		if time.Now().After(deadline) {
			t.Fatalf("spend report on %s still moving after %v: %v, then %v", g.id, timeout, prev, cur)
		}
		prev = cur
	}
}

// reply is one HTTP answer.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// send posts body with a bearer key; it does not fail the test, so
// goroutines may use it.
func send(ctx context.Context, c *http.Client, url, key, body string) (reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := c.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, fmt.Errorf("status %d, body cut: %w", resp.StatusCode, err)
	}
	return reply{resp.StatusCode, resp.Header, b}, nil
}

// errorCode returns the type and code of an OpenAI-shaped error body, or
// ok false if b is not one.
func errorCode(b []byte) (typ, code string, ok bool) {
	var e struct {
		Error *struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" || e.Error.Code == nil {
		return "", "", false
	}
	return e.Error.Type, *e.Error.Code, true
}

// budgetLoad runs clients that send requests against budgets until each has
// seen a 429 budget_exceeded, and keeps them going (slowly, every backoff,
// as a client honouring the refusal would) until stopped.
type budgetLoad struct {
	ok, refused, failed, sent atomic.Int64
	exhausted                 atomic.Int64 // clients that have seen a 429 budget_exceeded
	retryAfter                atomic.Int64 // 429s that carried Retry-After
	clients                   int
	mu                        sync.Mutex
	samples                   []string // the first failures
	stopping                  chan struct{}
	stopOnce                  sync.Once
	ctx                       context.Context // ends at the time bound
	cancel                    context.CancelFunc
	done                      sync.WaitGroup
}

const (
	budgetLoadRequests = 5000             // at most this many requests in all
	budgetLoadTime     = 60 * time.Second // and for at most this long
)

// startBudgetLoad starts clients sending body to url; client c's i-th
// request uses keys[(c+i)%len(keys)].
func startBudgetLoad(t testing.TB, url string, keys []string, clients int, body string, backoff time.Duration) *budgetLoad {
	ctx, cancel := context.WithTimeout(context.Background(), budgetLoadTime)
	l := &budgetLoad{ctx: ctx, cancel: cancel, clients: clients, stopping: make(chan struct{})}
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	for cl := range clients {
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			seen := false
			for i := 0; ctx.Err() == nil; i++ {
				if seen {
					select {
					case <-ctx.Done():
						return
					case <-l.stopping:
						return
					case <-time.After(backoff):
					}
				}
				select {
				case <-l.stopping:
					return
				default:
				}
				if l.sent.Add(1) > budgetLoadRequests {
					return
				}
				r, err := send(ctx, c, url, keys[(cl+i)%len(keys)], body)
				switch {
				case ctx.Err() != nil:
					return
				case err != nil:
					l.fail(err.Error())
				case r.status == http.StatusOK:
					l.ok.Add(1)
				case r.status == http.StatusTooManyRequests:
					if typ, code, ok := errorCode(r.body); !ok || code != "budget_exceeded" || typ != "insufficient_quota" {
						l.fail(fmt.Sprintf("429 that is not budget_exceeded: %.300s", r.body))
						continue
					}
					l.refused.Add(1)
					if r.header.Get("Retry-After") != "" {
						l.retryAfter.Add(1)
					}
					if !seen {
						seen = true
						l.exhausted.Add(1)
					}
				default:
					l.fail(fmt.Sprintf("status %d: %.300s", r.status, r.body))
				}
			}
		}()
	}
	t.Cleanup(l.stop)
	return l
}

func (l *budgetLoad) fail(msg string) {
	l.failed.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.samples) < 5 {
		l.samples = append(l.samples, msg)
	}
}

// allExhausted reports whether every client has seen a 429, or the load
// has hit its bounds.
func (l *budgetLoad) allExhausted() bool {
	return l.exhausted.Load() == int64(l.clients) || l.sent.Load() >= budgetLoadRequests || l.ctxDone()
}

func (l *budgetLoad) ctxDone() bool { return l.ctx.Err() != nil }

// wait waits until every client has been refused (or the bounds are hit).
func (l *budgetLoad) wait(t testing.TB) {
	t.Helper()
	waitFor(t, budgetLoadTime+5*time.Second, "every client to see a 429 budget_exceeded", l.allExhausted)
	if l.sent.Load() >= budgetLoadRequests {
		t.Logf("load stopped at its bound of %d requests; %d of %d clients were refused", budgetLoadRequests, l.exhausted.Load(), l.clients)
	}
}

// stop lets the requests in flight finish (they are counted) and stops.
func (l *budgetLoad) stop() {
	l.stopOnce.Do(func() { close(l.stopping) })
	l.done.Wait()
	l.cancel()
}

func (l *budgetLoad) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := fmt.Sprintf("%d admitted, %d refused (%d with Retry-After), %d failed, %d of %d clients refused",
		l.ok.Load(), l.refused.Load(), l.retryAfter.Load(), l.failed.Load(), l.exhausted.Load(), l.clients)
	if len(l.samples) > 0 {
		s += "; first failures: " + strings.Join(l.samples, " | ")
	}
	return s
}

// startCluster3 forms a three-node cluster with --bootstrap-expect behind
// HAProxy and returns the nodes, HAProxy and the leader's id.
func startCluster3(t *testing.T, token string) ([]*gateway, *haproxy, string) {
	t.Helper()
	nodes := make([]*gateway, 3)
	for i := range nodes {
		nodes[i] = newGateway(t, fmt.Sprintf("n%d", i+1), t.TempDir(), token)
	}
	join := strings.Join([]string{nodes[0].gossip, nodes[1].gossip, nodes[2].gossip}, ",")
	for _, g := range nodes {
		g.args = []string{"--bootstrap-expect", "3", "--join", join, "--dead-node-grace", "3s", "--drain-delay", "1s"}
	}
	lb := startHAProxy(t, nodes)
	for _, g := range nodes {
		g.launch(t)
	}
	for _, g := range nodes {
		waitHTTP(t, "http://"+g.http+"/readyz", 200)
	}
	var leader string
	waitFor(t, 15*time.Second, "one leader and three healthy voters", func() bool {
		s, ok := nodes[0].status()
		leader = s.Leader
		return ok && s.Leader != "" && strings.Join(s.voters(), ",") == "n1,n2,n3"
	})
	return nodes, lb, leader
}

// waitLB waits until HAProxy passes requests and has had time to see every
// node up.
func waitLB(t testing.TB, url, key, body string) {
	t.Helper()
	waitFor(t, 15*time.Second, "HAProxy to pass requests", func() bool {
		code, _ := post(t, url, key, body)
		return code == 200
	})
	time.Sleep(time.Second) // health checks every 200 ms, rise 2: all three are up
}

// checkTotalsAgree checks that spend report gives the same totals on every
// node, equal to the sums of the raw records that spend logs gathers from
// every node, and returns them.
func checkTotalsAgree(t *testing.T, nodes []*gateway) reportRow {
	t.Helper()
	var totals []reportRow
	waitFor(t, 10*time.Second, "every node to report the same totals", func() bool {
		totals = totals[:0]
		for _, g := range nodes {
			totals = append(totals, g.spendTotal(t))
		}
		for _, r := range totals[1:] {
			if r != totals[0] {
				return false
			}
		}
		return true
	})
	recs := nodes[0].spendLogs(t, "--limit", "10000")
	if len(recs) >= 10000 {
		t.Fatalf("spend logs returned its limit of %d records: cannot compare", len(recs))
	}
	byNode := map[string]int{}
	for _, r := range recs {
		byNode[r.Node]++
	}
	sum := sumRecords(recs)
	t.Logf("every node reports %v; spend logs: %d records (by node %v) summing to %v", totals[0], len(recs), byNode, sum)
	if sum != totals[0] {
		t.Errorf("spend report total %v != sum of spend logs %v", totals[0], sum)
	}
	for _, g := range nodes[1:] {
		if other := sumRecords(g.spendLogs(t, "--limit", "10000")); other != sum {
			t.Errorf("spend logs on %s sums to %v, on %s to %v", g.id, other, nodes[0].id, sum)
		}
	}
	return totals[0]
}
