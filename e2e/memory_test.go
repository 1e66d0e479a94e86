package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// rssBytes reads a process's resident set size from /proc.
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

// TestMemoryReturnsAfterAbuse hits a node with large bodies from many
// connections at once, then stops: within 60 s its RSS must be back within
// 1.5 times what it was before.
func TestMemoryReturnsAfterAbuse(t *testing.T) {
	if testing.Short() {
		t.Skip("waits up to a minute for memory to come back")
	}
	mock := mockLLM(t)
	g := startGateway(t, t.TempDir(), "t")
	g.ctl(t, "model", "add", "gpt-test", "--provider", "openai-compatible", "--base-url", mock, "--upstream-model", "mock-model")
	_, key := g.createKey(t, "--name", "abuse")
	url := "http://" + g.http + "/v1/chat/completions"
	small := `{"model":"gpt-test","messages":[{"role":"user","content":"hi"}]}`
	for range 50 {
		if code, b := post(t, url, key, small); code != 200 {
			t.Fatalf("%d %s", code, b)
		}
	}
	time.Sleep(time.Second)
	pid := g.cmd.Process.Pid
	base := rssBytes(t, pid)

	big := `{"model":"gpt-test","messages":[{"role":"user","content":"` + strings.Repeat("abuse ", 1<<20/6) + `"}]}`
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	c := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed int
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 {
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(big))
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := c.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if err != nil || resp.StatusCode != http.StatusOK {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	tr.CloseIdleConnections()
	peak := rssBytes(t, pid)
	t.Logf("RSS before %.1f MB, after the abuse %.1f MB (%d requests failed)", mb(base), mb(peak), failed)
	// The abuse must have been served and must have cost memory, or the
	// check below proves nothing.
	if failed > 0 {
		t.Fatalf("%d of 256 large requests failed; the node must serve them", failed)
	}
	if peak < base+32<<20 {
		t.Fatalf("RSS rose only from %.1f MB to %.1f MB under 64 concurrent 1 MB bodies: the abuse did not load the node", mb(base), mb(peak))
	}

	start := time.Now()
	limit := base * 3 / 2
	var rss int64
	for {
		rss = rssBytes(t, pid)
		if rss <= limit {
			break
		}
		if time.Since(start) > 60*time.Second {
			t.Fatalf("RSS %.1f MB 60 s after the abuse; want at most %.1f MB (1.5 × %.1f MB)", mb(rss), mb(limit), mb(base))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("RSS back to %.1f MB after %v", mb(rss), time.Since(start).Round(100*time.Millisecond))
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }
