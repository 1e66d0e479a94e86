package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/e2e/ports"
)

// node is one tollgate process started as scenario (j) starts it: a fresh
// data dir, loopback ports, --log-level warn --no-seed.
type node struct {
	cmd                       *exec.Cmd
	http, admin, dir, tollctl string
}

// startNode launches bin with the harness's flags plus extra, with env
// added, and waits for /readyz 200.
func startNode(bin, tollctl, tmp string, env, extra []string) (*node, error) {
	n := &node{tollctl: tollctl}
	var raft, gossip string
	for _, p := range []*string{&n.http, &n.admin, &raft, &gossip} {
		a, err := ports.Addr()
		if err != nil {
			return nil, err
		}
		*p = a
	}
	var err error
	if n.dir, err = os.MkdirTemp(tmp, "node-"); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(n.dir, "tollgate.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	args := append([]string{"--data-dir", filepath.Join(n.dir, "data"), "--http-addr", n.http, "--admin-addr", n.admin,
		"--raft-addr", raft, "--gossip-addr", gossip, "--log-level", "warn", "--no-seed"}, extra...)
	n.cmd = exec.Command(bin, args...)
	n.cmd.Env = append(append(os.Environ(), "TOLLGATE_ADMIN_TOKEN=rss"), env...)
	n.cmd.Stdout, n.cmd.Stderr = log, log
	if err := n.cmd.Start(); err != nil {
		return nil, err
	}
	if err := waitFor("http://"+n.http+"/readyz", time.Minute); err != nil {
		n.stop()
		return nil, err
	}
	return n, nil
}

// waitFor polls url until it answers 200 or timeout passes.
func waitFor(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("%s: no 200 within %v", url, timeout)
}

// stop sends SIGTERM, waits for the exit and removes the data dir.
func (n *node) stop() {
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = n.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = n.cmd.Process.Kill()
		<-done
	}
	_ = os.RemoveAll(n.dir)
}

func (n *node) pid() int { return n.cmd.Process.Pid }

func (n *node) ctl(args ...string) (string, error) {
	cmd := exec.Command(n.tollctl, args...)
	cmd.Env = append(os.Environ(), "TOLLGATE_ADDR="+n.admin, "TOLLGATE_TOKEN=rss")
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("tollctl %s: %v: %s%s", strings.Join(args, " "), err, out, errOut.String())
	}
	return string(out), nil
}

// routes are the harness's routes (e2e/bench/procs.go): public name and
// the mock's upstream model.
var routes = [][2]string{
	{"bench", "m?size=1000"}, {"bench-stream", "m?chunks=50"}, {"bench-slow", "m?latency=300ms&size=1000"},
	{"bench-paced", "m?chunks=50&interval=5ms"}, {"bench-embed", "text-embedding-3-small"},
}

// configure adds the harness's routes (with its failover route) and a key,
// then sends each kind of request the harness's smoke test sends once.
func (n *node) configure(mockBase, deadBase string) (string, error) {
	for _, r := range routes {
		if _, err := n.ctl("model", "add", r[0], "--provider", "openai-compatible", "--base-url", mockBase, "--upstream-model", r[1]); err != nil {
			return "", err
		}
	}
	for i, base := range []string{deadBase, mockBase} {
		if _, err := n.ctl("model", "add", "bench-failover", "--provider", "openai-compatible", "--base-url", base,
			"--upstream-model", "m?size=1000", "--deployment", []string{"primary", "secondary"}[i], "--priority", fmt.Sprint(i)); err != nil {
			return "", err
		}
	}
	out, err := n.ctl("key", "create", "--name", "rss", "-o", "json")
	if err != nil {
		return "", err
	}
	var k struct{ Secret string }
	if err := json.Unmarshal([]byte(out), &k); err != nil || k.Secret == "" {
		return "", fmt.Errorf("key create: %q", out)
	}
	return k.Secret, n.smoke(k.Secret)
}

func msg(model string, size int, stream bool) string {
	b, _ := json.Marshal(map[string]any{"model": model, "stream": stream,
		"messages": []map[string]string{{"role": "user", "content": strings.Repeat("x", size)}}})
	return string(b)
}

// load sends total chat requests of 1 KiB (half of them streams) from 16
// clients, as a stand-in for the harness's load before "rest after load".
func (n *node) load(secret string, total int) error {
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < total; i += 16 {
				if err := n.post(secret, "/v1/chat/completions", msg([]string{"bench", "bench-stream"}[i%2], 1024, i%2 == 1)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// post sends one request and wants 200.
func (n *node) post(secret, path, body string) error {
	req, _ := http.NewRequest("POST", "http://"+n.http+path, bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s %s: %s %s", path, body[:min(40, len(body))], resp.Status, buf.String())
	}
	return nil
}

// smoke sends one request of each kind the harness's smokeAll sends.
func (n *node) smoke(secret string) error {
	reqs := []struct{ path, body string }{
		{"/v1/chat/completions", msg("bench", 1024, false)},
		{"/v1/chat/completions", msg("bench", 64<<10, false)},
		{"/v1/chat/completions", msg("bench-stream", 1024, true)},
		{"/v1/chat/completions", msg("bench-paced", 1024, true)},
		{"/v1/embeddings", `{"model":"bench-embed","input":"hello"}`},
		{"/v1/chat/completions", msg("bench-failover", 1024, false)},
		{"/v1/chat/completions", msg("bench-slow", 1024, false)},
	}
	for _, r := range reqs {
		if err := n.post(secret, r.path, r.body); err != nil {
			return err
		}
	}
	return nil
}
