package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/e2e/ports"
)

// bin holds the paths of the binaries built once for the whole run.
var bin struct{ tollgate, tollctl, mockllm string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tollgate-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin.tollgate = filepath.Join(dir, "tollgate")
	bin.tollctl = filepath.Join(dir, "tollctl")
	bin.mockllm = filepath.Join(dir, "mockllm")
	cmd := exec.Command("go", "build", "-o", dir, "../cmd/tollgate", "../cmd/tollctl", "../cmd/mockllm")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building the binaries failed:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freePort returns a loopback address with a port below the ephemeral
// range that was free a moment ago and is never handed out again.
func freePort(t testing.TB) string {
	t.Helper()
	addr, err := ports.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// proc is a running child process whose output is kept for failure
// reports.
type proc struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// Output returns what the process printed so far.
func (p *proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func startProc(t testing.TB, name string, env []string, path string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("--- output of %s:\n%s", name, p.Output())
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// mockLLM starts mockllm and returns its base URL (API root with /v1).
func mockLLM(t testing.TB) string {
	addr := freePort(t)
	startProc(t, "mockllm", nil, bin.mockllm, "--addr", addr, "--quiet")
	waitHTTP(t, "http://"+addr+"/v1/models", 200)
	return "http://" + addr + "/v1"
}

// gateway is one tollgate process.
type gateway struct {
	*proc
	id, dir, http, admin, raft, gossip, token string
	args                                      []string // extra flags of every start
	ctlEnv                                    []string // extra environment of tollctl
}

func newGateway(t testing.TB, id, dir, token string, extra ...string) *gateway {
	return &gateway{id: id, dir: dir, http: freePort(t), admin: freePort(t), raft: freePort(t),
		gossip: freePort(t), token: token, args: extra}
}

func startGateway(t testing.TB, dir, token string, extra ...string) *gateway {
	t.Helper()
	g := newGateway(t, "", dir, token, extra...)
	g.start(t)
	return g
}

// start (re)starts the gateway process on its data dir and ports and
// waits until /readyz says 200.
func (g *gateway) start(t testing.TB, extra ...string) {
	t.Helper()
	g.launch(t, extra...)
	waitHTTP(t, "http://"+g.http+"/readyz", 200)
}

// launch starts the process without waiting for it to be ready.
func (g *gateway) launch(t testing.TB, extra ...string) {
	t.Helper()
	var env []string
	if g.token != "" {
		env = append(env, "TOLLGATE_ADMIN_TOKEN="+g.token)
	}
	args := []string{"--data-dir", g.dir, "--http-addr", g.http, "--admin-addr", g.admin,
		"--raft-addr", g.raft, "--gossip-addr", g.gossip, "--log-level", "warn"}
	if g.id != "" {
		args = append(args, "--node-id", g.id)
	}
	args = append(append(args, g.args...), extra...)
	name := "tollgate"
	if g.id != "" {
		name += " " + g.id
	}
	g.proc = startProc(t, name, env, bin.tollgate, args...)
}

// stop sends SIGTERM and waits for the process to exit, for up to a
// minute.
func (g *gateway) stop(t testing.TB) {
	t.Helper()
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
		if code := g.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("%s exited with %d after SIGTERM", g.name, code)
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s did not exit within a minute of SIGTERM", g.name)
	}
}

// ctl runs tollctl against the gateway and returns stdout; it fails the
// test on a non-zero exit.
func (g *gateway) ctl(t testing.TB, args ...string) string {
	t.Helper()
	out, errOut, code := g.ctlCode(args...)
	if code != 0 {
		t.Fatalf("tollctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func (g *gateway) ctlCode(args ...string) (string, string, int) {
	cmd := exec.Command(bin.tollctl, args...)
	cmd.Env = append(append(os.Environ(), "TOLLGATE_ADDR="+g.admin, "TOLLGATE_TOKEN="+g.token), g.ctlEnv...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
	}
	return out.String(), errOut.String(), code
}

// createKey makes a key through tollctl and returns its id and secret.
func (g *gateway) createKey(t testing.TB, args ...string) (id, secret string) {
	t.Helper()
	out := g.ctl(t, append([]string{"key", "create", "-o", "json"}, args...)...)
	var k struct{ ID, Secret string }
	if err := json.Unmarshal([]byte(out), &k); err != nil || k.ID == "" || k.Secret == "" {
		t.Fatalf("key create -o json gave %q (%v)", out, err)
	}
	return k.ID, k.Secret
}

var client = &http.Client{Timeout: 30 * time.Second}

// waitHTTP polls url until it answers want, for up to 30 seconds.
func waitHTTP(t testing.TB, url string, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not answer %d within 30s (last: %s)", url, want, last)
}

// post sends a JSON body with a bearer key and returns status and body.
func post(t testing.TB, url, key, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// openAIError checks that b is an error in OpenAI's shape and returns its
// code.
func openAIError(t testing.TB, b []byte) string {
	t.Helper()
	var e struct {
		Error *struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not an OpenAI error body: %s", b)
	}
	if e.Error.Code == nil {
		return ""
	}
	return *e.Error.Code
}

// event is one server-sent event's data and when it arrived.
type event struct {
	data string
	at   time.Time
}

// streamEvents sends a streaming request and returns the data payloads of
// the events in the order they arrived, with their arrival times.
func streamEvents(t testing.TB, ctx context.Context, url, key, body string) []event {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %s %s: %s", resp.Status, resp.Header.Get("Content-Type"), b)
	}
	var events []event
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			events = append(events, event{d, time.Now()})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading stream: %v", err)
	}
	return events
}

// waitFor polls cond every 50 ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
