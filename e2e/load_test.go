package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// failure is one failed request of a load run.
type failure struct {
	at  time.Time
	err string
}

// load sends chat completions through url from a fixed number of workers
// until stopped (or a hard cap of count and time is reached), and records
// every failure with its time.
type load struct {
	ok       atomic.Int64
	mu       sync.Mutex
	failures []failure
	cancel   context.CancelFunc
	done     sync.WaitGroup
}

// startLoad starts workers sending to url with key; every tenth request
// streams.
func startLoad(t testing.TB, url, key string, workers int) *load {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	l := &load{cancel: cancel}
	tr := &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers}
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	const maxRequests = 2_000_000
	var sent atomic.Int64
	for w := 0; w < workers; w++ {
		l.done.Add(1)
		go func(w int) {
			defer l.done.Done()
			for i := 0; ctx.Err() == nil && sent.Add(1) < maxRequests; i++ {
				stream := (i+w)%10 == 0
				if err := l.one(ctx, c, url, key, stream); err != nil {
					if ctx.Err() != nil {
						return
					}
					l.mu.Lock()
					l.failures = append(l.failures, failure{time.Now(), err.Error()})
					l.mu.Unlock()
					time.Sleep(5 * time.Millisecond)
				} else {
					l.ok.Add(1)
				}
			}
		}(w)
	}
	t.Cleanup(l.stop)
	return l
}

func (l *load) one(ctx context.Context, c *http.Client, url, key string, stream bool) error {
	body := `{"model":"gpt-test","messages":[{"role":"user","content":"hello"}]}`
	if stream {
		body = `{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"hello"}]}`
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("status %d, body cut: %v", resp.StatusCode, err)
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
	}
	if stream && !strings.HasSuffix(strings.TrimSpace(string(b)), "data: [DONE]") {
		return fmt.Errorf("stream without [DONE]: %.200s", b)
	}
	if !stream && !strings.Contains(string(b), "Hello from mockllm") {
		return fmt.Errorf("unexpected body: %.200s", b)
	}
	return nil
}

func (l *load) stop() {
	l.cancel()
	l.done.Wait()
}

// failuresSince returns the failures recorded at or after since.
func (l *load) failuresSince(since time.Time) []failure {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []failure
	for _, f := range l.failures {
		if !f.at.Before(since) {
			out = append(out, f)
		}
	}
	return out
}

// progress waits until at least n more requests have succeeded.
func (l *load) progress(t testing.TB, n int64) {
	t.Helper()
	target := l.ok.Load() + n
	waitFor(t, 30*time.Second, fmt.Sprintf("%d more successful requests", n), func() bool { return l.ok.Load() >= target })
}
