package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// rlLong reports whether the long variants of the rate-limit tests were
// asked for (TOLLGATE_LONG=1): two-minute runs and the node kill.
func rlLong() bool { return os.Getenv("TOLLGATE_LONG") == "1" }

// rlOutcome is one request of a rate-limit load run.
type rlOutcome struct {
	at      time.Duration // when it was sent, from the start of the run
	status  int           // 0: no answer
	problem string        // what was wrong (transport error, unexpected answer); "" if nothing
	tokens  int64         // prompt+completion tokens in the usage of a 200
	dep     string        // X-Tollgate-Deployment of a 200
	model   string        // the model a 200 names (the upstream's echo)
	message string        // the error message of a 429
}

// answerCheck inspects one answer and returns what is wrong with it, ""
// when nothing is.
type answerCheck func(r reply) string

// checkLimited accepts 200s and 429s of the gateway's rate limiter. kind is
// "requests" or "tokens": the x-ratelimit-*-<kind> headers a 200 must
// carry (remaining) and a 429 must carry (limit, equal to limit), and the
// error type of the 429. Every 429 must have code rate_limit_exceeded and
// a Retry-After of a whole number of seconds ≥ 1.
func checkLimited(kind string, limit int64) answerCheck {
	limitHdr := "X-Ratelimit-Limit-" + strings.ToUpper(kind[:1]) + kind[1:]
	remainingHdr := "X-Ratelimit-Remaining-" + strings.ToUpper(kind[:1]) + kind[1:]
	want := strconv.FormatInt(limit, 10)
	return func(r reply) string {
		switch r.status {
		case http.StatusOK:
			if _, err := strconv.ParseInt(r.header.Get(remainingHdr), 10, 64); err != nil {
				return fmt.Sprintf("200 without a numeric %s (%q)", remainingHdr, r.header.Get(remainingHdr))
			}
			if got := r.header.Get(limitHdr); got != want {
				return fmt.Sprintf("200 with %s %q, want %s", limitHdr, got, want)
			}
		case http.StatusTooManyRequests:
			typ, code, ok := errorCode(r.body)
			if !ok || code != "rate_limit_exceeded" || typ != kind {
				return fmt.Sprintf("429 that is not a %s rate_limit_exceeded: %.300s", kind, r.body)
			}
			if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
				return fmt.Sprintf("429 with Retry-After %q", r.header.Get("Retry-After"))
			}
			if got := r.header.Get(limitHdr); got != want {
				return fmt.Sprintf("429 with %s %q, want %s", limitHdr, got, want)
			}
		default:
			return fmt.Sprintf("status %d: %.300s", r.status, r.body)
		}
		return ""
	}
}

// openLoad is an open-loop load run: requests are sent on a fixed
// schedule, whatever the answers, so the offered rate does not depend on
// the gateway.
type openLoad struct {
	start  time.Time
	out    []rlOutcome
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sched  chan struct{} // closed when the last request has been sent
}

const (
	openLoadMaxInFlight = 256              // more in flight: the request is recorded as not sent
	openLoadSlack       = 45 * time.Second // after the last send, answers must come within this
)

// startOpenLoad sends rate requests a second to url with key for dur:
// request i is sent at start + i/rate with bodies[i%len(bodies)], and its
// answer checked with check. It sends exactly rate×dur requests, with at
// most openLoadMaxInFlight in flight.
func startOpenLoad(t testing.TB, url, key string, bodies []string, rate float64, dur time.Duration, check answerCheck) *openLoad {
	t.Helper()
	n := int(math.Round(rate * dur.Seconds()))
	ctx, cancel := context.WithTimeout(context.Background(), dur+openLoadSlack)
	l := &openLoad{out: make([]rlOutcome, n), ctx: ctx, cancel: cancel, sched: make(chan struct{})}
	tr := &http.Transport{MaxIdleConnsPerHost: openLoadMaxInFlight}
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	sem := make(chan struct{}, openLoadMaxInFlight)
	sendAt := func(i int) time.Duration { return time.Duration(float64(i) / rate * float64(time.Second)) }
	l.start = time.Now()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer close(l.sched)
		for i := range n {
			at := sendAt(i)
			select {
			case <-ctx.Done():
				for j := i; j < n; j++ {
					l.out[j] = rlOutcome{at: sendAt(j), problem: "not sent: run cancelled"}
				}
				return
			case <-time.After(time.Until(l.start.Add(at))):
			}
			select {
			case sem <- struct{}{}:
			default:
				l.out[i] = rlOutcome{at: at, problem: fmt.Sprintf("not sent: %d requests in flight", openLoadMaxInFlight)}
				continue
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				defer func() { <-sem }()
				l.out[i] = oneLimited(ctx, c, url, key, bodies[i%len(bodies)], at, check)
			}()
		}
	}()
	t.Cleanup(func() { l.cancel(); l.wg.Wait(); tr.CloseIdleConnections() })
	return l
}

func oneLimited(ctx context.Context, c *http.Client, url, key, body string, at time.Duration, check answerCheck) rlOutcome {
	o := rlOutcome{at: at}
	r, err := send(ctx, c, url, key, body)
	if err != nil {
		o.problem = err.Error()
		return o
	}
	o.status = r.status
	o.problem = check(r)
	switch r.status {
	case http.StatusOK:
		var a struct {
			Model string `json:"model"`
			Usage *struct {
				Prompt     int64 `json:"prompt_tokens"`
				Completion int64 `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(r.body, &a); err != nil || a.Usage == nil {
			if o.problem == "" {
				o.problem = fmt.Sprintf("200 without usage: %.200s", r.body)
			}
		} else {
			o.tokens = a.Usage.Prompt + a.Usage.Completion
		}
		o.model = a.Model
		o.dep = r.header.Get("X-Tollgate-Deployment")
	case http.StatusTooManyRequests:
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(r.body, &e)
		o.message = e.Error.Message
	}
	return o
}

// wait waits for every answer and returns the outcomes in send order.
func (l *openLoad) wait() []rlOutcome {
	<-l.sched
	l.wg.Wait()
	return l.out
}

// rlWindow sums the outcomes of one period of a run.
type rlWindow struct {
	from, to          time.Duration
	sent              int
	admitted, refused int
	failed            int   // any other rlOutcome
	tokens            int64 // of the admitted
}

func (w rlWindow) String() string {
	return fmt.Sprintf("[%v,%v): %d sent, %d admitted (%d tokens), %d refused, %d failed",
		w.from, w.to, w.sent, w.admitted, w.tokens, w.refused, w.failed)
}

// windows splits a run's outcomes by send time into n periods of length
// each.
func rlWindows(out []rlOutcome, length time.Duration, n int) []rlWindow {
	ws := make([]rlWindow, n)
	for i := range ws {
		ws[i].from, ws[i].to = time.Duration(i)*length, time.Duration(i+1)*length
	}
	for _, o := range out {
		i := int(o.at / length)
		if i < 0 || i >= n {
			continue
		}
		w := &ws[i]
		w.sent++
		switch {
		case o.status == http.StatusOK:
			w.admitted++
			w.tokens += o.tokens
		case o.status == http.StatusTooManyRequests:
			w.refused++
		default:
			w.failed++
		}
	}
	return ws
}

// problems returns the distinct problems of the outcomes with their
// counts, most frequent first, for outcomes for which keep is true (nil:
// all).
func rlProblems(out []rlOutcome, keep func(o rlOutcome) bool) (total int, summary string) {
	byText := map[string]int{}
	for _, o := range out {
		if o.problem != "" && (keep == nil || keep(o)) {
			total++
			byText[o.problem]++
		}
	}
	texts := make([]string, 0, len(byText))
	for s := range byText {
		texts = append(texts, s)
	}
	sort.Slice(texts, func(i, j int) bool { return byText[texts[i]] > byText[texts[j]] })
	var b strings.Builder
	for i, s := range texts {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more kinds", len(texts)-5)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%d× %s", byText[s], s)
	}
	return total, b.String()
}

// within reports whether got is within frac (0.05: ±5%) of want.
func rlWithin(got, want int64, frac float64) bool {
	return math.Abs(float64(got-want)) <= frac*float64(want)
}

// metric scrapes g's /metrics and returns the sum of the samples of the
// metric called name whose labels include every one of labels (each
// `name="value"`); 0 when there are none.
func (g *gateway) rlMetric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	resp, err := client.Get("http://" + g.http + "/metrics")
	if err != nil {
		t.Fatalf("metrics of %s: %v", g.id, err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		sp := strings.LastIndexByte(rest, ' ')
		set := rest[:sp]
		all := true
		for _, l := range labels {
			if !strings.Contains(set, l) {
				all = false
				break
			}
		}
		if !all {
			continue
		}
		v, err := strconv.ParseFloat(rest[sp+1:], 64)
		if err != nil {
			t.Fatalf("metrics of %s: bad line %q", g.id, line)
		}
		sum += v
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("metrics of %s: %v", g.id, err)
	}
	return sum
}

// signal sends sig to the gateway's process.
func (g *gateway) rlSignal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := g.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, g.id, err)
	}
}

// rlMockStats is what mockllm's /mock/stats reports.
type rlMockStats struct {
	Requests    int64 `json:"requests"`
	InFlight    int64 `json:"in_flight"`
	MaxInFlight int64 `json:"max_in_flight"`
}

// rlMockRoot returns the root URL (without /v1) of the mock at base.
func rlMockRoot(base string) string { return strings.TrimSuffix(base, "/v1") }

func rlMockStatsOf(t testing.TB, base string) rlMockStats {
	t.Helper()
	resp, err := client.Get(rlMockRoot(base) + "/mock/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s rlMockStats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("mock stats: %v", err)
	}
	return s
}

func rlResetMock(t testing.TB, base string) {
	t.Helper()
	resp, err := client.Post(rlMockRoot(base)+"/mock/reset", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("mock reset: %s", resp.Status)
	}
}

// rlCluster forms three nodes behind HAProxy, adds the routes (each
// "name=upstream-model" at the mock) through n1, and waits until HAProxy
// passes requests, using a warm-up key without limits on the first route.
func rlCluster(t *testing.T, token, mock string, routes ...string) (nodes []*gateway, lbURL, leader string) {
	t.Helper()
	nodes, lb, leader := startCluster3(t, token)
	for _, r := range routes {
		name, upstream, _ := strings.Cut(r, "=")
		nodes[0].ctl(t, "model", "add", name, "--provider", "openai-compatible", "--base-url", mock, "--upstream-model", upstream)
	}
	first, _, _ := strings.Cut(routes[0], "=")
	_, warm := nodes[0].createKey(t, "--name", "warm-up", "--models", first)
	lbURL = "http://" + lb.addr + "/v1/chat/completions"
	waitLB(t, lbURL, warm, rlChat(first, 0, "warm up"))
	return nodes, lbURL, leader
}

// rlChat is a chat request body for model with max_tokens (0: none).
func rlChat(model string, maxTokens int, content string) string {
	m, _ := json.Marshal(model)
	c, _ := json.Marshal(content)
	mt := ""
	if maxTokens > 0 {
		mt = `,"max_tokens":` + strconv.Itoa(maxTokens)
	}
	return `{"model":` + string(m) + mt + `,"messages":[{"role":"user","content":` + string(c) + `}]}`
}

// closedLoad runs clients that each send a request, wait for its answer,
// and after a 429 wait backoff, until dur has passed.
type closedLoad struct {
	admitted, refused atomic.Int64
	mu                sync.Mutex
	out               []rlOutcome // the answers that had a problem, and the 429s (up to a bound)
}

func runClosedLoad(t testing.TB, url, key, body string, clients int, dur, backoff time.Duration, check answerCheck) *closedLoad {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	l := &closedLoad{}
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				// The request itself is not tied to ctx: the ones in
				// flight at the end finish and are counted.
				o := oneLimited(context.Background(), c, url, key, body, time.Since(start), check)
				switch {
				case o.problem != "":
				case o.status == http.StatusOK:
					l.admitted.Add(1)
					continue
				case o.status == http.StatusTooManyRequests:
					l.refused.Add(1)
				}
				l.mu.Lock()
				if len(l.out) < 10000 {
					l.out = append(l.out, o)
				}
				l.mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(backoff):
				}
			}
		}()
	}
	wg.Wait()
	return l
}
