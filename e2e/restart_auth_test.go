package e2e

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRestartingNodeNeverRejectsValidKeys kills a node with -9 and
// restarts it while clients keep sending with a valid key: until the node
// has caught up it answers 503 with Retry-After, never 401, 403 or 404 from
// a state that is not yet current.
func TestRestartingNodeNeverRejectsValidKeys(t *testing.T) {
	mock := mockLLM(t)
	g := startGateway(t, t.TempDir(), "t")
	g.ctl(t, "model", "add", "gpt-test", "--provider", "openai-compatible", "--base-url", mock, "--upstream-model", "mock-model")
	_, secret := g.createKey(t, "--name", "restart")
	// Enough state to replay that loading it takes a moment.
	for i := range 20 {
		g.ctl(t, "key", "create", "--name", "filler-"+string(rune('a'+i)))
	}
	url := "http://" + g.http + "/v1/chat/completions"
	body := `{"model":"gpt-test","messages":[{"role":"user","content":"hi"}]}`

	g.kill()
	g.launch(t)
	c := &http.Client{Timeout: 5 * time.Second}
	var mu sync.Mutex
	counts := map[int]int{}
	var bad []string
	deadline := time.Now().Add(30 * time.Second)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok := 0
			for ok < 50 && time.Now().Before(deadline) {
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+secret)
				resp, err := c.Do(req)
				if err != nil { // not listening yet
					time.Sleep(2 * time.Millisecond)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				counts[resp.StatusCode]++
				switch resp.StatusCode {
				case 200:
					ok++
				case 503:
					if resp.Header.Get("Retry-After") == "" {
						bad = append(bad, "503 without Retry-After")
					}
				default:
					bad = append(bad, resp.Status+": "+string(b))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("answers while restarting: %v", counts)
	if len(bad) > 0 {
		t.Fatalf("%d answers other than 200 or 503+Retry-After to a valid key, e.g. %s", len(bad), bad[0])
	}
	if counts[200] < 200 {
		t.Fatalf("the restarted node served %d requests in 30s", counts[200])
	}
}
