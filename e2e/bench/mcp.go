package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP latency scenario (issue 19): the latency a tool call gains
// through Tollgate. A real MCP server — a small Go SDK server with an
// echo tool, run as its own process (this binary, re-executed) — is
// called by the Go SDK's client directly and through a node, one call at a
// time, for both protocol eras: the session protocol (2025-11-25) and the
// sessionless one (2026-07-28). Rounds alternate the order of the targets;
// each round measures every target, and the added latency of a round is
// the gateway's percentile less the direct one. The report gives the
// medians over the rounds.
//
//	go run ./e2e/bench -mcp 10 [-mcp-calls 500] [-mcp-before /path/to/old/tollgate]

var (
	mcpRounds = flag.Int("mcp", 0, "run only the MCP latency scenario (issue 19) with this many alternating rounds, e.g. 10")
	mcpCalls  = flag.Int("mcp-calls", 500, "tool calls per target and round of the MCP latency scenario")
	mcpBefore = flag.String("mcp-before", "", "a tollgate binary to measure as well in the MCP latency scenario (e.g. one built from an earlier commit)")
)

// mcpServerEnv makes this binary serve the scenario's MCP server on the
// address it holds instead of running the harness.
const mcpServerEnv = "TOLLGATE_BENCH_MCP_SERVER"

func init() {
	if addr := os.Getenv(mcpServerEnv); addr != "" {
		if err := serveMCPUpstream(addr); err != nil {
			fmt.Fprintln(os.Stderr, "mcp server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// mcpVersions are the protocol eras measured.
var mcpVersions = []string{"2025-11-25", "2026-07-28"}

// MCPConfig is the scenario's configuration.
type MCPConfig struct {
	Rounds int    `json:"rounds"`
	Calls  int    `json:"calls_per_target_and_round"`
	Warmup int    `json:"warmup_calls"`
	Before string `json:"before_binary,omitempty"`
}

// MCPRound is one target's calls in one round.
type MCPRound struct {
	Round    int     `json:"round"`
	Protocol string  `json:"protocol"`
	Target   string  `json:"target"` // direct, tollgate or before
	P50us    float64 `json:"p50_us"`
	P90us    float64 `json:"p90_us"`
	P99us    float64 `json:"p99_us"`
}

// MCPSummary is one protocol and target over all rounds: the medians of
// its rounds' percentiles and of its rounds' added latency (the target's
// percentile less direct's in the same round).
type MCPSummary struct {
	Protocol   string  `json:"protocol"`
	Target     string  `json:"target"`
	P50us      float64 `json:"median_p50_us"`
	P99us      float64 `json:"median_p99_us"`
	AddedP50us float64 `json:"median_added_p50_us"`
	AddedP90us float64 `json:"median_added_p90_us"`
	AddedP99us float64 `json:"median_added_p99_us"`
}

// MCPResults is the report of the scenario.
type MCPResults struct {
	Date    string        `json:"date"`
	Command string        `json:"command"`
	Machine Machine       `json:"machine"`
	Config  MCPConfig     `json:"config"`
	Seconds float64       `json:"seconds"`
	Rounds  []*MCPRound   `json:"rounds"`
	Summary []*MCPSummary `json:"summary"`
}

// mainMCP runs the MCP latency scenario alone.
func mainMCP(start time.Time, out string, dev bool) error {
	cfg := MCPConfig{Rounds: *mcpRounds, Calls: *mcpCalls, Warmup: 50, Before: *mcpBefore}
	if cfg.Rounds > 100 || cfg.Calls < 10 || cfg.Calls > 100_000 {
		return fmt.Errorf("-mcp: at most 100 rounds; -mcp-calls between 10 and 100000")
	}
	return standalone("mcp", out, dev, func(out, tmp string, bin *Binaries, root string, logf func(string, ...any)) error {
		res := &MCPResults{Date: start.Format("2006-01-02"), Command: "go run ./e2e/bench " + strings.Join(os.Args[1:], " "),
			Machine: machineInfo(root), Config: cfg}
		res.Machine.Build = bin.Build
		if err := runMCP(bin, tmp, cfg, res, logf); err != nil {
			return err
		}
		if ld, err := os.ReadFile("/proc/loadavg"); err == nil {
			res.Machine.LoadAvgEnd = strings.Join(strings.Fields(string(ld))[:3], " ")
		}
		res.Seconds = time.Since(start).Seconds()
		res.Summary = summarizeMCP(res.Rounds)
		dir := filepath.Join(out, res.Date+"-mcp-latency")
		if err := res.write(dir); err != nil {
			return err
		}
		fmt.Printf("\nReport: %s\n", filepath.Join(dir, "README.md"))
		return nil
	})
}

// mcpTarget is one endpoint the calls go to, with a client session per
// protocol.
type mcpTarget struct {
	name  string
	tool  string
	sess  map[string]*sdk.ClientSession
	close func()
}

// runMCP starts the MCP server and the node(s), connects the clients and
// measures the rounds.
func runMCP(bin *Binaries, tmp string, cfg MCPConfig, res *MCPResults, logf func(string, ...any)) error {
	upURL, err := startMCPUpstream(tmp)
	if err != nil {
		return err
	}
	direct, err := connectMCP("direct", upURL, "echo", "")
	if err != nil {
		return err
	}
	defer direct.close()
	targets := []*mcpTarget{direct}
	nodes := []struct{ name, binary string }{{"tollgate", bin.Tollgate}}
	if cfg.Before != "" {
		nodes = append(nodes, struct{ name, binary string }{"before", cfg.Before})
	}
	for _, n := range nodes {
		t, err := startMCPNode(bin, tmp, n.name, n.binary, upURL)
		if err != nil {
			return err
		}
		defer t.close()
		targets = append(targets, t)
	}
	logf("mcp: %d rounds of %d calls per target (%d warm-up), protocols %s", cfg.Rounds, cfg.Calls, cfg.Warmup, strings.Join(mcpVersions, ", "))
	for r := range cfg.Rounds {
		order := slices.Clone(targets)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, v := range mcpVersions {
			for _, t := range order {
				round, err := measureMCP(t, v, cfg)
				if err != nil {
					return fmt.Errorf("round %d, %s %s: %w", r+1, t.name, v, err)
				}
				round.Round = r + 1
				res.Rounds = append(res.Rounds, round)
			}
		}
		logf("mcp: round %d of %d done", r+1, cfg.Rounds)
	}
	return nil
}

// measureMCP makes the warm-up calls and then cfg.Calls calls, one after
// another, and returns their percentiles.
func measureMCP(t *mcpTarget, version string, cfg MCPConfig) (*MCPRound, error) {
	cs := t.sess[version]
	args := map[string]any{"text": "hello"}
	lat := make([]time.Duration, 0, cfg.Calls)
	for i := range cfg.Warmup + cfg.Calls {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t0 := time.Now()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: t.tool, Arguments: args})
		d := time.Since(t0)
		cancel()
		if err != nil {
			return nil, err
		}
		if res.IsError {
			return nil, errors.New("the tool call failed")
		}
		if i >= cfg.Warmup {
			lat = append(lat, d)
		}
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
	return &MCPRound{Protocol: version, Target: t.name, P50us: q(0.5), P90us: q(0.9), P99us: q(0.99)}, nil
}

// startMCPUpstream runs this binary as the MCP server and returns its URL.
func startMCPUpstream(tmp string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	addr, err := freeAddr()
	if err != nil {
		return "", err
	}
	c, err := startChild("mcp-server", filepath.Join(tmp, "mcp-server.log"), "", []string{mcpServerEnv + "=" + addr}, self)
	if err != nil {
		return "", err
	}
	if _, err := waitStatus(c, "http://"+addr+"/healthz", 200, 10*time.Millisecond, 30*time.Second); err != nil {
		return "", err
	}
	return "http://" + addr + "/mcp", nil
}

// startMCPNode starts a node from binary, configures the MCP server and a
// key allowed all its tools, waits until the node is connected to it and
// connects the clients.
func startMCPNode(bin *Binaries, tmp, name, binary, upURL string) (*mcpTarget, error) {
	b := *bin
	b.Tollgate = binary
	gw, err := newNamedGateway(&b, tmp, "", name)
	if err != nil {
		return nil, err
	}
	if _, err := gw.Start(); err != nil {
		return nil, err
	}
	stop := func() { _ = gw.Stop() }
	if _, err := gw.ctl("mcp", "add", "bench", "--url", upURL); err != nil {
		stop()
		return nil, err
	}
	secret, err := mcpKey(gw)
	if err == nil {
		err = waitMCPConnected(gw)
	}
	var t *mcpTarget
	if err == nil {
		t, err = connectMCP(name, "http://"+gw.HTTP+"/mcp", "bench__echo", secret)
	}
	if err != nil {
		stop()
		return nil, err
	}
	closeClients := t.close
	t.close = func() { closeClients(); stop() }
	return t, nil
}

// mcpKey creates a key allowed every MCP tool and returns its secret.
func mcpKey(gw *Gateway) (string, error) {
	out, err := gw.ctl("key", "create", "--name", "mcp-bench", "-o", "json")
	if err != nil {
		return "", err
	}
	var k struct{ ID, Secret string }
	if err := json.Unmarshal([]byte(out), &k); err != nil || k.ID == "" || k.Secret == "" {
		return "", fmt.Errorf("key create -o json gave %q (%v)", out, err)
	}
	_, err = gw.ctl("mcp", "tools", "--key", k.ID, "*")
	return k.Secret, err
}

// waitMCPConnected waits until the node reports the server connected.
func waitMCPConnected(gw *Gateway) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := gw.ctl("mcp", "get", "bench", "-o", "json")
		if err == nil && strings.Contains(out, `"connected"`) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the node did not connect to the MCP server: %s %v", out, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// connectMCP opens a client session per protocol to url, with the key
// (if any) as a bearer token.
func connectMCP(name, url, tool, secret string) (*mcpTarget, error) {
	t := &mcpTarget{name: name, tool: tool, sess: map[string]*sdk.ClientSession{}}
	t.close = func() {
		for _, cs := range t.sess {
			_ = cs.Close()
		}
	}
	hc := &http.Client{Transport: bearerTransport{secret: secret, base: http.DefaultTransport}}
	for _, v := range mcpVersions {
		c := sdk.NewClient(&sdk.Implementation{Name: "tollgate-bench", Version: "1"}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1},
			&sdk.ClientSessionOptions{ProtocolVersion: v})
		cancel()
		if err != nil {
			t.close()
			return nil, fmt.Errorf("connect %s (%s): %w", name, v, err)
		}
		if got := cs.InitializeResult().ProtocolVersion; got != v {
			t.close()
			return nil, fmt.Errorf("connect %s: asked for protocol %s, got %s", name, v, got)
		}
		t.sess[v] = cs
	}
	return t, nil
}

// bearerTransport adds the key to every request (the harness talks to
// loopback only).
type bearerTransport struct {
	secret string
	base   http.RoundTripper
}

func (t bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.secret == "" {
		return t.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.secret)
	return t.base.RoundTrip(r)
}

// serveMCPUpstream serves an MCP server with an echo tool on addr, with
// sessions to clients of the older protocol versions and without to those
// of the sessionless one, until SIGTERM or SIGINT.
func serveMCPUpstream(addr string) error {
	s := sdk.NewServer(&sdk.Implementation{Name: "bench-upstream", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "echo", Description: "echoes its arguments", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo:" + string(req.Params.Arguments)}}}, nil
		})
	get := func(*http.Request) *sdk.Server { return s }
	stateful := sdk.NewStreamableHTTPHandler(get, nil)
	stateless := sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28" {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// summarizeMCP gives, per protocol and target, the medians over the
// rounds.
func summarizeMCP(rounds []*MCPRound) []*MCPSummary {
	type key struct{ protocol, target string }
	by := map[key][]*MCPRound{}
	var keys []key
	for _, r := range rounds {
		k := key{r.Protocol, r.Target}
		if by[k] == nil {
			keys = append(keys, k)
		}
		by[k] = append(by[k], r)
	}
	var out []*MCPSummary
	for _, k := range keys {
		s := &MCPSummary{Protocol: k.protocol, Target: k.target}
		var p50, p99, a50, a90, a99 []float64
		for _, r := range by[k] {
			p50, p99 = append(p50, r.P50us), append(p99, r.P99us)
			if d := directOf(rounds, r); d != nil && k.target != "direct" {
				a50, a90, a99 = append(a50, r.P50us-d.P50us), append(a90, r.P90us-d.P90us), append(a99, r.P99us-d.P99us)
			}
		}
		s.P50us, s.P99us = median(p50), median(p99)
		s.AddedP50us, s.AddedP90us, s.AddedP99us = median(a50), median(a90), median(a99)
		out = append(out, s)
	}
	return out
}

// directOf returns the direct measurement of r's round and protocol.
func directOf(rounds []*MCPRound, r *MCPRound) *MCPRound {
	for _, d := range rounds {
		if d.Round == r.Round && d.Protocol == r.Protocol && d.Target == "direct" {
			return d
		}
	}
	return nil
}

// write writes README.md and results.json into dir.
func (r *MCPResults) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Tollgate MCP tool-call latency — %s\n\n", r.Date)
	fmt.Fprintf(&b, "`%s` on %d cores (%s), %.0f s, load average %s at the start and %s at the end.\n",
		r.Command, r.Machine.NProc, r.Machine.CPUModel, r.Seconds, r.Machine.LoadAvgStart, r.Machine.LoadAvgEnd)
	fmt.Fprintf(&b, "Tollgate: %s, commit %s.\n\n", r.Machine.Build, r.Machine.Commit)
	fmt.Fprintf(&b, "A Go SDK MCP server (echo tool, own process) called by the Go SDK client, one call at a time: %d rounds,\n", r.Config.Rounds)
	fmt.Fprintf(&b, "each with %d warm-up and %d measured calls per target and protocol, targets in alternating order.\n", r.Config.Warmup, r.Config.Calls)
	b.WriteString("Added = the target's percentile less direct's in the same round; the table gives medians over the rounds.\n")
	b.WriteString("The machine may be shared with other work (see the load average): absolute figures then include waiting for a core;\n")
	b.WriteString("the rounds alternate so that the targets share the conditions. `before` is the -mcp-before binary, if given.\n\n")
	b.WriteString("| protocol | target | p50 µs | p99 µs | added p50 µs | added p90 µs | added p99 µs |\n|---|---|---|---|---|---|---|\n")
	for _, s := range r.Summary {
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %+.0f | %+.0f | %+.0f |\n", s.Protocol, s.Target, s.P50us, s.P99us, s.AddedP50us, s.AddedP90us, s.AddedP99us)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "results.json"), js, 0o644)
}
