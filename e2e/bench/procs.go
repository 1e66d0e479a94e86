package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/e2e/ports"
)

// Binaries are the programs built for the run.
type Binaries struct {
	Dir, Tollgate, Tollctl, Mockllm string // the Go references are in Dir by name (refs.go)
	// Build is how Tollgate was built; Dev is a plain `go build` of it, for
	// the size table.
	Build, Dev string
}

// releaseBuild is how deploy/Dockerfile builds the shipped binary (plus
// its version stamp): static, no cgo, no local paths, no symbol tables,
// and without gRPC's request tracing (x/net/trace), whose debug pages make
// the linker keep every exported method: 4 MB of code and data.
var releaseBuild = []string{"-trimpath", "-tags", "grpcnotrace", "-ldflags=-s -w"}

// build compiles cmd/tollgate (as released unless dev), cmd/tollctl and
// cmd/mockllm into dir, and a plain build of tollgate for the size table.
func build(root, dir string, dev bool) (*Binaries, error) {
	b := &Binaries{Dir: dir, Tollgate: filepath.Join(dir, "tollgate"), Tollctl: filepath.Join(dir, "tollctl"),
		Mockllm: filepath.Join(dir, "mockllm"), Dev: filepath.Join(dir, "dev", "tollgate")}
	run := func(env []string, args ...string) error {
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run(nil, append([]string{"build", "-o", dir + string(os.PathSeparator), "./cmd/tollctl", "./cmd/mockllm"}, goRefPackages()...)...); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(b.Dev), 0o755); err != nil {
		return nil, err
	}
	if err := run(nil, "build", "-o", b.Dev, "./cmd/tollgate"); err != nil {
		return nil, err
	}
	if dev {
		b.Build = "go build ./cmd/tollgate (cgo as the toolchain defaults)"
		return b, os.Link(b.Dev, b.Tollgate)
	}
	b.Build = "CGO_ENABLED=0 go build " + strings.Join(releaseBuild, " ") + " ./cmd/tollgate (as deploy/Dockerfile)"
	args := append(append([]string{"build"}, releaseBuild...), "-o", b.Tollgate, "./cmd/tollgate")
	if err := run([]string{"CGO_ENABLED=0"}, args...); err != nil {
		return nil, err
	}
	return b, nil
}

// freeAddr returns a loopback address whose port was free a moment ago
// (from below the ephemeral range: see package ports).
func freeAddr() (string, error) { return ports.Addr() }

// child is a process started by the harness; its output goes to a log
// file in the temp dir.
type child struct {
	name    string
	cmd     *exec.Cmd
	log     string
	started time.Time
	done    chan struct{}
}

var (
	childrenMu sync.Mutex
	children   = map[*child]bool{}
)

// startChild starts path with args; cpus, if not empty, pins it with
// taskset -c. The child gets SIGKILL if the harness dies.
func startChild(name, logPath, cpus string, env []string, path string, args ...string) (*child, error) {
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if cpus != "" {
		args = append([]string{"-c", cpus, path}, args...)
		path = "taskset"
	}
	c := &child{name: name, log: logPath, done: make(chan struct{})}
	c.cmd = exec.Command(path, args...)
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stdout, c.cmd.Stderr = lf, lf
	killWithParent(c.cmd)
	c.started = time.Now()
	if err := c.cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	childrenMu.Lock()
	children[c] = true
	childrenMu.Unlock()
	go func() {
		_ = c.cmd.Wait()
		lf.Close()
		childrenMu.Lock()
		delete(children, c)
		childrenMu.Unlock()
		close(c.done)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// exited reports whether the process has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits (bounded) for the process to be gone.
func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
	}
}

// terminate sends SIGTERM and waits up to timeout for the exit.
func (c *child) terminate(timeout time.Duration) error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		if code := c.cmd.ProcessState.ExitCode(); code != 0 {
			return fmt.Errorf("%s exited with %d after SIGTERM", c.name, code)
		}
		return nil
	case <-time.After(timeout):
		c.kill()
		return fmt.Errorf("%s did not exit within %v of SIGTERM", c.name, timeout)
	}
}

// logTail is the end of the child's log, for error messages.
func (c *child) logTail() string {
	b, _ := os.ReadFile(c.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// killChildren ends every child still running (on exit or interrupt).
func killChildren() {
	childrenMu.Lock()
	var cs []*child
	for c := range children {
		cs = append(cs, c)
	}
	childrenMu.Unlock()
	for _, c := range cs {
		c.kill()
	}
}

var pollClient = &http.Client{Timeout: 2 * time.Second}

// waitStatus polls url every `every` until it answers want, c exits or
// timeout passes; it returns when the answer came.
func waitStatus(c *child, url string, want int, every, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		if c.exited() {
			return time.Time{}, fmt.Errorf("%s exited while starting:\n%s", c.name, c.logTail())
		}
		resp, err := pollClient.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return time.Now(), nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(every)
	}
	return time.Time{}, fmt.Errorf("%s did not answer %d within %v (last: %s)", url, want, timeout, last)
}

// Gateway is the one Tollgate node under test.
type Gateway struct {
	bin                              *Binaries
	dir, logPath, cpus               string
	HTTP, Admin, Raft, Gossip, Token string
	// Extra are more flags for the node (a cluster's join flags, pprof).
	Extra []string
	// Env is more environment for the node (e.g. GOMEMLIMIT).
	Env []string
	// ReadyTimeout bounds Start's wait for /readyz (0: a minute).
	ReadyTimeout time.Duration
	proc         *child
}

func newGateway(bin *Binaries, tmp, cpus string) (*Gateway, error) {
	return newNamedGateway(bin, tmp, cpus, "")
}

// newNamedGateway is a node whose data dir and log carry name (one of a
// cluster's nodes); an empty name is the harness's single node.
func newNamedGateway(bin *Binaries, tmp, cpus, name string) (*Gateway, error) {
	dir, log := "data", "tollgate.log"
	if name != "" {
		dir, log = "data-"+name, "tollgate-"+name+".log"
	}
	g := &Gateway{bin: bin, dir: filepath.Join(tmp, dir), logPath: filepath.Join(tmp, log), cpus: cpus, Token: "bench"}
	for _, p := range []*string{&g.HTTP, &g.Admin, &g.Raft, &g.Gossip} {
		a, err := freeAddr()
		if err != nil {
			return nil, err
		}
		*p = a
	}
	return g, nil
}

// Start launches the node on its data dir and waits for /readyz 200; it
// returns the time from process start to the first 200.
func (g *Gateway) Start() (time.Duration, error) {
	if err := g.launch(); err != nil {
		return 0, err
	}
	return g.waitReady()
}

// launch starts the node's process on its data dir.
func (g *Gateway) launch() error {
	c, err := startChild("tollgate", g.logPath, g.cpus, append([]string{"TOLLGATE_ADMIN_TOKEN=" + g.Token}, g.Env...), g.bin.Tollgate,
		append([]string{"--data-dir", g.dir, "--http-addr", g.HTTP, "--admin-addr", g.Admin, "--raft-addr", g.Raft,
			"--gossip-addr", g.Gossip, "--log-level", "warn", "--no-seed"}, g.Extra...)...)
	if err != nil {
		return err
	}
	g.proc = c
	return nil
}

// waitReady waits for the launched node's /readyz 200 and returns the time
// from its process start.
func (g *Gateway) waitReady() (time.Duration, error) {
	c := g.proc
	at, err := waitStatus(c, "http://"+g.HTTP+"/readyz", 200, 2*time.Millisecond, cmp.Or(g.ReadyTimeout, time.Minute))
	if err != nil {
		c.kill()
		return 0, err
	}
	return at.Sub(c.started), nil
}

// Stop sends SIGTERM and waits for a clean exit.
func (g *Gateway) Stop() error { return g.proc.terminate(60 * time.Second) }

func (g *Gateway) Pid() int { return g.proc.pid() }

// ctl runs the built tollctl against the node's admin API.
func (g *Gateway) ctl(args ...string) (string, error) {
	cmd := exec.Command(g.bin.Tollctl, args...)
	cmd.Env = append(os.Environ(), "TOLLGATE_ADDR="+g.Admin, "TOLLGATE_TOKEN="+g.Token)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("tollctl %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String(), nil
}

// Routes are the public model names configured on the gateway and the
// upstream model strings (with mockllm directives) they map to.
var Routes = []struct{ Name, Upstream string }{
	{"bench", "m?size=1000"},
	{"bench-stream", "m?chunks=50"},
	{"bench-slow", "m?latency=300ms&size=1000"},
	{"bench-paced", "m?chunks=50&interval=5ms"},
	{"bench-embed", "text-embedding-3-small"},
}

// FailoverRoute has a priority-0 deployment at a closed port and a
// priority-1 deployment at the mock.
const FailoverRoute, FailoverUpstream = "bench-failover", "m?size=1000"

// configure creates the routes and a key, and returns the key's secret.
func (g *Gateway) configure(mockBase, deadBase string) (string, error) {
	for _, r := range Routes {
		if _, err := g.ctl("model", "add", r.Name, "--provider", "openai-compatible", "--base-url", mockBase,
			"--upstream-model", r.Upstream); err != nil {
			return "", err
		}
	}
	if _, err := g.ctl("model", "add", FailoverRoute, "--provider", "openai-compatible", "--base-url", deadBase,
		"--upstream-model", FailoverUpstream, "--deployment", "primary", "--priority", "0"); err != nil {
		return "", err
	}
	if _, err := g.ctl("model", "add", FailoverRoute, "--provider", "openai-compatible", "--base-url", mockBase,
		"--upstream-model", FailoverUpstream, "--deployment", "secondary", "--priority", "1"); err != nil {
		return "", err
	}
	return g.createKey("bench")
}

// createKey creates a key named name with tollctl and returns its secret.
func (g *Gateway) createKey(name string) (string, error) {
	out, err := g.ctl("key", "create", "--name", name, "-o", "json")
	if err != nil {
		return "", err
	}
	var k struct{ Secret string }
	if err := json.Unmarshal([]byte(out), &k); err != nil || k.Secret == "" {
		return "", fmt.Errorf("key create -o json gave %q (%v)", out, err)
	}
	return k.Secret, nil
}

// Pinning is the CPU placement of the three parties.
type Pinning struct {
	Requested bool   `json:"requested"`
	Applied   bool   `json:"applied"`
	Gateway   string `json:"gateway_cpus,omitempty"`
	Mock      string `json:"mock_cpus,omitempty"`
	LoadGen   string `json:"loadgen_cpus,omitempty"`
	Note      string `json:"note"`
}

// planPinning decides the cores: gateway, mock and load generator each
// get their own share when there are at least three cores.
func planPinning(requested bool, ncpu int, tasksetPath string) Pinning {
	p := Pinning{Requested: requested}
	switch {
	case !requested:
		p.Note = "not requested (-pin); the OS schedules gateway, mock and load generator on all cores"
	case tasksetPath == "":
		p.Note = "requested, but taskset (util-linux) is not installed: not pinned"
	case ncpu < 3:
		p.Note = fmt.Sprintf("requested, but only %d cores: three separate cores are needed, not pinned", ncpu)
	default:
		// Gateway gets the first third (at least one core), the mock and the
		// load generator share the rest in two halves.
		g := max(1, ncpu/3)
		rest := ncpu - g
		m := max(1, rest/2)
		p.Applied = true
		p.Gateway = cpuRange(0, g)
		p.Mock = cpuRange(g, m)
		p.LoadGen = cpuRange(g+m, ncpu-g-m)
		p.Note = fmt.Sprintf("pinned with taskset: gateway on %s, mock on %s, load generator on %s", p.Gateway, p.Mock, p.LoadGen)
	}
	return p
}

func cpuRange(first, n int) string {
	if n == 1 {
		return strconv.Itoa(first)
	}
	return fmt.Sprintf("%d-%d", first, first+n-1)
}

// pinSelf pins every thread of the harness with taskset -a -p.
func pinSelf(cpus string) error {
	out, err := exec.Command("taskset", "-a", "-p", "-c", cpus, strconv.Itoa(os.Getpid())).CombinedOutput()
	if err != nil {
		return fmt.Errorf("taskset -a -p -c %s: %v: %s", cpus, err, out)
	}
	return nil
}
