package main

// The tracing-cost scenario (issue 16): scenario (c) — 32 closed-loop
// clients flat out, non-streaming chat completions — through nodes that
// differ only in their OTEL_* environment: tracing off, traces on at 100%
// sampling, and everything on (traces, request logs and the GenAI
// metrics), exported over OTLP/HTTP to a receiver that discards what it
// gets.
//
// The receiver is this harness binary again, started as a child process
// with -otlp-sink: a process of its own, so its CPU is neither the
// gateway's nor the load generator's, and it is reported apart. A goroutine
// of the harness would charge it to the load generator, which competes for
// the same two cores.

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// tracingOptions are the flags of the tracing-cost scenario.
type tracingOptions struct {
	on      bool
	sink    string
	profile bool
}

// tracingFlags defines them.
func (o *options) tracingFlags() {
	flag.BoolVar(&o.tracing.on, "tracing", false, "run only the tracing-cost scenario (issue 16): (c) direct and through nodes with tracing off, traces on (100% sampled), and traces, request logs and metrics on, exported over OTLP/HTTP to a discarding receiver; -reps rounds of -dur each, alternating")
	flag.BoolVar(&o.tracing.profile, "tracing-profile", true, "with -tracing: after the rounds, keep a CPU and a heap profile of each node (pprof) in the results folder")
	flag.StringVar(&o.tracing.sink, "otlp-sink", "", "internal: serve as the discarding OTLP/HTTP receiver on this loopback address")
}

// tracingMode is one node of the scenario and its environment.
type tracingMode struct {
	Name string   `json:"name"`
	Env  []string `json:"env"`
}

// TracingRow is the medians of one target over the rounds.
type TracingRow struct {
	Target string     `json:"target"`
	Env    []string   `json:"env,omitempty"`
	Median *RunResult `json:"median"`
	// GatewayUSPerR is the gateway's CPU per request, BoxUSPerR that of
	// every process of the run (gateway, mock, load generator, receiver):
	// medians of each round's.
	GatewayUSPerR float64 `json:"gateway_cpu_us_per_request"`
	BoxUSPerR     float64 `json:"all_processes_cpu_us_per_request"`
	SinkCPU       float64 `json:"otlp_sink_cpu_cores"`
	VsOff         float64 `json:"throughput_vs_off"`
	// CPUVsOff is the throughput the box would have, CPU-bound and alone,
	// relative to the node with tracing off: off's BoxUSPerR / this one's.
	CPUVsOff float64      `json:"cpu_bound_throughput_vs_off"`
	Runs     []*RunResult `json:"runs"`
	sink     []float64
}

// TracingResults is what the scenario writes.
type TracingResults struct {
	Date     string        `json:"date"`
	Command  string        `json:"command"`
	Machine  Machine       `json:"machine"`
	Rounds   int           `json:"rounds"`
	Dur      float64       `json:"measure_s"`
	Warmup   float64       `json:"warmup_s"`
	Rows     []*TracingRow `json:"rows"`
	Profiles []string      `json:"profiles,omitempty"`
	Seconds  float64       `json:"seconds"`
}

// mainTracing runs the tracing-cost scenario alone (or, with -otlp-sink,
// the receiver).
func mainTracing(start time.Time, o *options) error {
	if o.tracing.sink != "" {
		return runSink(o.tracing.sink)
	}
	if o.reps < 1 || o.dur <= 0 || o.dur > 10*time.Minute {
		return fmt.Errorf("-tracing: -reps ≥ 1 and 0 < -dur ≤ 10m")
	}
	return standalone("tracing", o.out, o.devBuild, func(out, tmp string, bin *Binaries, root string, logf func(string, ...any)) error {
		res := &TracingResults{Date: start.Format("2006-01-02"), Command: "go run ./e2e/bench " + strings.Join(os.Args[1:], " "),
			Machine: machineInfo(root), Rounds: o.reps, Dur: o.dur.Seconds(), Warmup: o.warmup.Seconds()}
		res.Machine.Build = bin.Build
		dir := filepath.Join(out, res.Date+"-tracing-cost")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		err := runTracing(bin, tmp, dir, o, res, logf)
		res.Seconds = time.Since(start).Seconds()
		if werr := res.write(dir); werr != nil {
			return werr
		}
		fmt.Printf("\nReport: %s\n", filepath.Join(dir, "README.md"))
		return err
	})
}

// tracingNode is a node of one mode and the request sent to it.
type tracingNode struct {
	mode tracingMode
	gw   *Gateway
	t    *Target
	row  *TracingRow
	prof *profiler // nil: no pprof
}

// runTracing starts the mock, the receiver and one node per mode, then
// measures (c) on each target, o.reps rounds in alternating order.
func runTracing(bin *Binaries, tmp, dir string, o *options, res *TracingResults, logf func(string, ...any)) error {
	mock, mockBase, err := startMockFor(bin, tmp)
	if err != nil {
		return err
	}
	sinkAddr, sink, err := startSink(tmp)
	if err != nil {
		return err
	}
	otlp := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + sinkAddr, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_SERVICE_NAME=tollgate-bench"}
	// "all" is what one OTEL_EXPORTER_OTLP_ENDPOINT turns on: traces,
	// request logs and the GenAI metrics.
	modes := []tracingMode{{Name: "off"}, {Name: "traces", Env: append([]string{"OTEL_LOGS_EXPORTER=none", "OTEL_METRICS_EXPORTER=none"}, otlp...)},
		{Name: "all", Env: otlp}}
	direct := &tracingNode{mode: tracingMode{Name: "direct"}}
	direct.t = &Target{Name: "direct", URL: mockBase + "/chat/completions", Body: chatBody(upstreamOf("bench"), false, 1024), Shape: "choices",
		MinBytes: 1000, Header: http.Header{"Content-Type": {"application/json"}}}
	nodes := []*tracingNode{direct}
	for _, m := range modes {
		n, err := startTracingNode(bin, tmp, dir, m, mockBase, o.tracing.profile)
		if err != nil {
			return err
		}
		logf("node %-12s ready on %s %s", m.Name, n.gw.HTTP, strings.Join(m.Env, " "))
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		n.row = &TracingRow{Target: n.mode.Name, Env: n.mode.Env}
		res.Rows = append(res.Rows, n.row)
		if err := smoke(n.t); err != nil {
			return err
		}
	}
	cl := ClosedLoop{Clients: 32, Warmup: o.warmup, Dur: o.dur, MaxRequests: o.maxReq}
	for rep := range o.reps {
		order := append([]*tracingNode(nil), nodes...)
		if rep%2 == 1 { // ABCD DCBA: no target always first
			for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
				order[i], order[j] = order[j], order[i]
			}
		}
		for _, n := range order {
			r, sinkCPU := measureTracing(cl, n, mock, sink)
			n.row.Runs, n.row.sink = append(n.row.Runs, r), append(n.row.sink, sinkCPU)
			logf("  round %d/%d %-12s %7.0f req/s  p50 %9s  p99 %9s  errors %d  cpu gw/mock/load/sink %.2f/%.2f/%.2f/%.2f",
				rep+1, o.reps, n.mode.Name, r.Throughput, fmtUS(r.Lat.P50), fmtUS(r.Lat.P99), r.Errors,
				r.Usage.GatewayCPU, r.Usage.MockCPU, r.Usage.LoadCPU, sinkCPU)
		}
	}
	summarizeTracing(res.Rows)
	if o.tracing.profile {
		res.Profiles = profileTracing(cl, nodes, logf)
	}
	for _, n := range nodes[1:] {
		if err := n.gw.Stop(); err != nil {
			logf("stopping %s: %v", n.mode.Name, err)
		}
	}
	_ = sink.terminate(5 * time.Second)
	_ = mock.terminate(5 * time.Second)
	return nil
}

// startMockFor starts mockllm and returns it and its /v1 base URL.
func startMockFor(bin *Binaries, tmp string) (*child, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	mock, err := startChild("mockllm", filepath.Join(tmp, "mockllm.log"), "", nil, bin.Mockllm, "--addr", addr, "--quiet")
	if err != nil {
		return nil, "", err
	}
	if _, err := waitStatus(mock, "http://"+addr+"/v1/models", 200, 10*time.Millisecond, 30*time.Second); err != nil {
		return nil, "", err
	}
	return mock, "http://" + addr + "/v1", nil
}

// startSink starts this binary again as the discarding OTLP receiver.
func startSink(tmp string) (string, *child, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return "", nil, err
	}
	c, err := startChild("otlp-sink", filepath.Join(tmp, "otlp-sink.log"), "", nil, exe, "-otlp-sink", addr)
	if err != nil {
		return "", nil, err
	}
	if _, err := waitStatus(c, "http://"+addr+"/stats", 200, 10*time.Millisecond, 30*time.Second); err != nil {
		return "", nil, err
	}
	return addr, c, nil
}

// startTracingNode starts and configures the node of mode m; with
// profile, it also serves pprof.
func startTracingNode(bin *Binaries, tmp, dir string, m tracingMode, mockBase string, profile bool) (*tracingNode, error) {
	gw, err := newNamedGateway(bin, tmp, "", strings.ReplaceAll(m.Name, "+", "-"))
	if err != nil {
		return nil, err
	}
	gw.Env = m.Env
	var prof *profiler
	if profile {
		if prof, err = newProfiler(dir); err != nil {
			return nil, err
		}
		gw.Extra = []string{"--pprof-addr", prof.addr}
	}
	if _, err := gw.Start(); err != nil {
		return nil, err
	}
	dead, err := freeAddr()
	if err != nil {
		return nil, err
	}
	secret, err := gw.configure(mockBase, "http://"+dead+"/v1")
	if err != nil {
		return nil, err
	}
	t := &Target{Name: m.Name, URL: "http://" + gw.HTTP + "/v1/chat/completions", Body: chatBody("bench", false, 1024), Shape: "choices",
		MinBytes: 1000, Header: http.Header{"Authorization": {"Bearer " + secret}, "Content-Type": {"application/json"}}}
	return &tracingNode{mode: m, gw: gw, t: t, prof: prof}, nil
}

// measureTracing runs cl against n and returns the result and the
// receiver's CPU (cores) over it.
func measureTracing(cl ClosedLoop, n *tracingNode, mock, sink *child) (*RunResult, float64) {
	mon := &Monitor{Gateway: func() int { return mock.pid() }, Mock: mock.pid(), Interval: time.Second}
	if n.gw != nil {
		mon.Gateway = n.gw.Pid
	}
	s0, _ := cpuTicks(sink.pid())
	start := time.Now()
	r := cl.Run(n.t, mon)
	s1, _ := cpuTicks(sink.pid())
	el := time.Since(start).Seconds() // warm-up included: the receiver drains what it queued
	if n.gw == nil {
		r.Usage.GatewayCPU = 0 // direct: no gateway
	}
	return r, float64(s1-s0) / clockTicks() / el
}

// summarizeTracing fills each row's medians and its throughput against
// the node with tracing off.
func summarizeTracing(rows []*TracingRow) {
	var off *TracingRow
	for _, row := range rows {
		row.Median = medianRun(row.Runs)
		if row.Median == nil {
			continue
		}
		row.SinkCPU = median(row.sink)
		var gw, box []float64
		for i, r := range row.Runs {
			if r.Throughput <= 0 {
				continue
			}
			u := r.Usage
			gw = append(gw, u.GatewayCPU/r.Throughput*1e6)
			box = append(box, (u.GatewayCPU+u.MockCPU+u.LoadCPU+row.sink[i])/r.Throughput*1e6)
		}
		row.GatewayUSPerR, row.BoxUSPerR = median(gw), median(box)
		if row.Target == "off" {
			off = row
		}
	}
	for _, row := range rows {
		if row.Median == nil || off == nil || off.Median.Throughput <= 0 || row.BoxUSPerR <= 0 {
			continue
		}
		row.VsOff = row.Median.Throughput / off.Median.Throughput
		row.CPUVsOff = off.BoxUSPerR / row.BoxUSPerR
	}
}

// profileTracing runs (c) once more on each node, unrecorded, while its
// CPU is profiled, then takes its heap profile; it returns the files.
func profileTracing(cl ClosedLoop, nodes []*tracingNode, logf func(string, ...any)) []string {
	var files []string
	for _, n := range nodes {
		if n.prof == nil {
			continue
		}
		name := strings.ReplaceAll(n.mode.Name, "+", "-")
		done := n.prof.cpu("cpu-"+name+".pprof", cl.Dur)
		ClosedLoop{Clients: cl.Clients, Dur: cl.Dur + time.Second, MaxRequests: cl.MaxRequests}.Run(n.t, nil)
		if err := <-done; err != nil {
			logf("cpu profile of %s: %v", n.mode.Name, err)
			continue
		}
		files = append(files, "cpu-"+name+".pprof")
		if err := n.prof.heap("heap-" + name + ".pprof"); err != nil {
			logf("heap profile of %s: %v", n.mode.Name, err)
			continue
		}
		files = append(files, "heap-"+name+".pprof")
	}
	return files
}

// runSink serves the discarding OTLP/HTTP receiver until SIGTERM.
func runSink(addr string) error {
	h := &sink{}
	srv := &http.Server{Addr: addr, Handler: h.handler(), ReadHeaderTimeout: 10 * time.Second}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	go func() {
		<-sigs
		fmt.Printf("otlp-sink: %v\n", h.stats())
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// sink counts OTLP exports and their bytes by signal.
type sink struct {
	exports, bytes [3]atomic.Int64 // traces, logs, metrics
}

// handler reads every POST to its end and answers it with an empty (valid)
// OTLP response; GET /stats counts them.
func (s *sink) handler() http.Handler {
	mux := http.NewServeMux()
	for i, path := range []string{"/v1/traces", "/v1/logs", "/v1/metrics"} {
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
			n, _ := io.Copy(io.Discard, io.LimitReader(r.Body, 256<<20))
			s.exports[i].Add(1)
			s.bytes[i].Add(n)
			w.Header().Set("Content-Type", "application/x-protobuf")
		})
	}
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(s.stats()) })
	return mux
}

func (s *sink) stats() map[string]int64 {
	return map[string]int64{"trace_exports": s.exports[0].Load(), "trace_bytes": s.bytes[0].Load(),
		"log_exports": s.exports[1].Load(), "log_bytes": s.bytes[1].Load(),
		"metric_exports": s.exports[2].Load(), "metric_bytes": s.bytes[2].Load()}
}

// write saves results.json and README.md (the table and the command).
func (r *TracingResults) write(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
		return err
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Tracing cost, harness scenario (c)\n\n```sh\n%s\n```\n\n", r.Command)
	fmt.Fprintf(&sb, "%s, %d cores, %s; %s. Load average %s at the start.\n\n", r.Machine.CPUModel, r.Machine.NProc, r.Machine.GoVersion,
		r.Machine.Build, r.Machine.LoadAvgStart)
	fmt.Fprintf(&sb, "32 closed-loop clients flat out, non-streaming chat completions (~1 KB request, ~1.3 KB answer), %d rounds of %.0f s "+
		"after %.1f s of warm-up, targets in alternating order (ABCD DCBA …); medians. Every node is a fresh single-node "+
		"cluster with the same routes and key; only its OTEL_* environment differs. The OTLP receiver is a process of its own "+
		"that reads and discards every export.\n\n", r.Rounds, r.Dur, r.Warmup)
	sb.WriteString("| target | req/s | vs off | p50 | p99 | errors | gw CPU (cores) | mock / load / receiver CPU | gw CPU µs/req | all CPU µs/req | CPU-bound vs off |\n")
	sb.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, row := range r.Rows {
		m := row.Median
		if m == nil {
			continue
		}
		vs, gw, gwUS, cpuVs := "", "", "", ""
		if row.Target != "direct" {
			vs, gw, gwUS = fmt.Sprintf("%.1f%%", row.VsOff*100), fmt.Sprintf("%.2f", m.Usage.GatewayCPU), fmt.Sprintf("%.1f", row.GatewayUSPerR)
			cpuVs = fmt.Sprintf("%.1f%%", row.CPUVsOff*100)
		}
		fmt.Fprintf(&sb, "| %s | %.0f | %s | %s | %s | %d | %s | %.2f / %.2f / %.2f | %s | %.1f | %s |\n", row.Target, m.Throughput, vs,
			fmtUS(m.Lat.P50), fmtUS(m.Lat.P99), m.Errors, gw, m.Usage.MockCPU, m.Usage.LoadCPU, row.SinkCPU, gwUS, row.BoxUSPerR, cpuVs)
	}
	sb.WriteString("\n*vs off* is the median throughput against the node with tracing off. On a machine shared with other " +
		"work it swings with whatever else runs; *CPU-bound vs off* is steadier: the CPU every process of the run spent " +
		"per request (gateway, mock, load generator, receiver; median of the rounds) with tracing off, divided by the same " +
		"with it on: the throughput ratio of a box the run has to itself and saturates.\n")
	sb.WriteString("\nPer round (req/s):\n\n| target | rounds |\n|---|---|\n")
	for _, row := range r.Rows {
		var rs []string
		for _, run := range row.Runs {
			rs = append(rs, fmt.Sprintf("%.0f", run.Throughput))
		}
		fmt.Fprintf(&sb, "| %s | %s |\n", row.Target, strings.Join(rs, ", "))
	}
	for _, row := range r.Rows {
		if len(row.Env) > 0 {
			fmt.Fprintf(&sb, "\n`%s`: `%s`", row.Target, strings.Join(row.Env, " "))
		}
	}
	if len(r.Profiles) > 0 {
		fmt.Fprintf(&sb, "\n\nProfiles of each node under the same load, after the rounds: %s (`go tool pprof -top FILE`).", strings.Join(r.Profiles, ", "))
	}
	sb.WriteString("\n")
	return os.WriteFile(filepath.Join(dir, "README.md"), []byte(sb.String()), 0o644)
}
