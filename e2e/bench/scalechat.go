package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// Chat traffic while keys are created (issue 12): at the last step of a
// scale run, closed-loop chat completions go to the node that takes the
// writes (the leader), alternately alone ("quiet") and while key creates
// arrive through the admin API at a fixed rate ("writes"), quiet, writes,
// writes, quiet, ... The ratios of the medians say what the writes cost
// the data plane.

// ChatConfig bounds the chat phase of a scale run (Dur 0: none).
type ChatConfig struct {
	Dur        time.Duration `json:"duration_ns"`
	Clients    int           `json:"clients"`
	CreateRate float64       `json:"creates_per_second"`
	Reps       int           `json:"reps"` // pairs of quiet and writes runs
}

// ChatRun is one run of the chat phase.
type ChatRun struct {
	Writes        bool       `json:"writes"`
	Result        *RunResult `json:"result"`
	Creates       int64      `json:"creates"`
	CreateErrors  int64      `json:"create_errors"`
	CreatesPerSec float64    `json:"creates_per_second"`
}

// ChatFigures is the chat phase's outcome.
type ChatFigures struct {
	Keys            int        `json:"keys"`
	Node            string     `json:"node"`
	Runs            []*ChatRun `json:"runs"`
	QuietRPS        float64    `json:"quiet_rps"` // medians over the runs
	WritesRPS       float64    `json:"writes_rps"`
	QuietP99Ms      float64    `json:"quiet_p99_ms"`
	WritesP99Ms     float64    `json:"writes_p99_ms"`
	ThroughputRatio float64    `json:"throughput_ratio"`  // writes ÷ quiet: target ≥ 0.9
	P99Ratio        float64    `json:"p99_ratio"`         // writes ÷ quiet: target ≤ 1.2
	LoadAvg         string     `json:"loadavg,omitempty"` // before / after the runs
	// The same ratios within each pair of adjacent runs (alone and with
	// writes, in either order): on a busy machine they show how much
	// of the ratio of medians is noise between pairs.
	PairThroughputRatios []float64 `json:"pair_throughput_ratios,omitempty"`
	PairP99Ratios        []float64 `json:"pair_p99_ratios,omitempty"`
	Cores                int       `json:"cores,omitempty"`
	CPU                  *ChatCPU  `json:"cpu,omitempty"`
}

// chat runs the chat phase against the leader, with mockllm as upstream.
func (sc *scaleSet) chat(cfg ChatConfig, keys int, logf func(string, ...any)) (*ChatFigures, error) {
	leader, err := sc.leader()
	if err != nil {
		return nil, err
	}
	secret, mockPid, err := sc.chatSetup(leader)
	if err != nil {
		return nil, err
	}
	t := &Target{Name: "tollgate", URL: "http://" + leader.HTTP + "/v1/chat/completions", Body: chatBody("bench", false, 1000),
		Header: http.Header{"Authorization": {"Bearer " + secret}, "Content-Type": {"application/json"}},
		Shape:  "choices", MinBytes: 1000}
	admin := pb.NewKeyServiceClient(sc.conns[sc.index(leader)])
	f := &ChatFigures{Keys: keys, Node: sc.names[sc.index(leader)], Cores: runtime.NumCPU()}
	mon := &Monitor{Gateway: leader.Pid, Mock: mockPid, Interval: time.Second}
	before := loadAvg()
	for rep := range cfg.Reps {
		order := []bool{false, true}
		if rep%2 == 1 {
			order = []bool{true, false}
		}
		for _, writes := range order {
			r := sc.profiledChatRun(rep, t, admin, mon, cfg, writes, fmt.Sprintf("chat-%d-%d", rep, len(f.Runs)), logf)
			f.Runs = append(f.Runs, r)
			logf("scale: chat at %d keys, writes %v: %.0f req/s, p99 %.2f ms, errors %d; %d creates (%.0f/s, %d failed)",
				keys, writes, r.Result.Throughput, r.Result.Lat.P99/1e3, r.Result.Errors, r.Creates, r.CreatesPerSec, r.CreateErrors)
		}
	}
	f.summarize()
	f.LoadAvg = before + " / " + loadAvg()
	return f, nil
}

// chatSetup starts mockllm, adds the route "bench" to it and creates an
// unlimited key for the chat traffic; it returns the key's secret and the
// mock's pid.
func (sc *scaleSet) chatSetup(leader *Gateway) (string, int, error) {
	mockAddr, err := freeAddr()
	if err != nil {
		return "", 0, err
	}
	mock, err := startChild("mockllm", filepath.Join(sc.tmp, "mockllm.log"), "", nil, sc.bin.Mockllm, "--addr", mockAddr, "--quiet")
	if err != nil {
		return "", 0, err
	}
	if _, err := waitStatus(mock, "http://"+mockAddr+"/v1/models", 200, 10*time.Millisecond, 30*time.Second); err != nil {
		return "", 0, err
	}
	if _, err := leader.ctl("model", "add", "bench", "--provider", "openai-compatible", "--base-url", "http://"+mockAddr+"/v1",
		"--upstream-model", "m?size=1000"); err != nil {
		return "", 0, err
	}
	secret, err := leader.createKey("chat")
	return secret, mock.pid(), err
}

// chatWarmup is the unrecorded start of every chat run.
const chatWarmup = time.Second

// chatRun is one closed-loop chat run, with key creates at cfg.CreateRate
// alongside when writes is set (over the warm-up and the measurement).
func chatRun(t *Target, admin pb.KeyServiceClient, mon *Monitor, cfg ChatConfig, writes bool, prefix string) *ChatRun {
	const warmup = chatWarmup
	r := &ChatRun{Writes: writes}
	var wg sync.WaitGroup
	if writes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Creates, r.CreateErrors = pacedCreates(admin, cfg.CreateRate, warmup+cfg.Dur, prefix)
			r.CreatesPerSec = float64(r.Creates) / (warmup + cfg.Dur).Seconds()
		}()
	}
	r.Result = ClosedLoop{Clients: cfg.Clients, Warmup: warmup, Dur: cfg.Dur, MaxRequests: 5_000_000}.Run(t, mon)
	wg.Wait()
	return r
}

// profiledChatRun is chatRun; with -scale-profile, the first pair's runs
// also leave a CPU profile of the node over their warm-up and measurement
// (cpu-chat-alone.pprof, cpu-chat-writes.pprof).
func (sc *scaleSet) profiledChatRun(rep int, t *Target, admin pb.KeyServiceClient, mon *Monitor, cfg ChatConfig, writes bool, prefix string,
	logf func(string, ...any)) *ChatRun {
	if rep > 0 || sc.prof == nil {
		return chatRun(t, admin, mon, cfg, writes, prefix)
	}
	name := "cpu-chat-" + map[bool]string{false: "alone", true: "writes"}[writes] + ".pprof"
	done := sc.prof.cpu(name, chatWarmup+cfg.Dur)
	r := chatRun(t, admin, mon, cfg, writes, prefix)
	if err := <-done; err != nil {
		logf("scale: chat CPU profile %s: %v", name, err)
	}
	return r
}

// pacedCreates creates keys on a fixed schedule (the i-th at start +
// i/rate) for d, from a few workers so that a slow create does not delay
// the next; it returns the creates that succeeded and those that failed.
func pacedCreates(admin pb.KeyServiceClient, rate float64, d time.Duration, prefix string) (ok, failed int64) {
	sched := newSchedule(time.Now(), rate, d)
	var next, okN, failN atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= sched.n {
					return
				}
				time.Sleep(time.Until(sched.at(i)))
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := admin.CreateKey(ctx, &pb.CreateKeyRequest{Name: fmt.Sprintf("%s-%d", prefix, i)})
				cancel()
				if err != nil {
					failN.Add(1)
				} else {
					okN.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return okN.Load(), failN.Load()
}

// summarize computes the medians and the ratios.
func (f *ChatFigures) summarize() {
	median := func(writes bool, v func(*RunResult) float64) float64 {
		var xs []float64
		for _, r := range f.Runs {
			if r.Writes == writes {
				xs = append(xs, v(r.Result))
			}
		}
		return median(xs)
	}
	rps := func(r *RunResult) float64 { return r.Throughput }
	p99 := func(r *RunResult) float64 { return r.Lat.P99 / 1e3 }
	f.QuietRPS, f.WritesRPS = median(false, rps), median(true, rps)
	f.QuietP99Ms, f.WritesP99Ms = median(false, p99), median(true, p99)
	if f.QuietRPS > 0 {
		f.ThroughputRatio = f.WritesRPS / f.QuietRPS
	}
	if f.QuietP99Ms > 0 {
		f.P99Ratio = f.WritesP99Ms / f.QuietP99Ms
	}
	f.CPU = chatCPU(f.Runs, f.Cores)
	f.PairThroughputRatios, f.PairP99Ratios = nil, nil
	for i := 0; i+1 < len(f.Runs); i += 2 {
		quiet, writes := f.Runs[i].Result, f.Runs[i+1].Result
		if f.Runs[i].Writes {
			quiet, writes = writes, quiet
		}
		if quiet.Throughput > 0 && quiet.Lat.P99 > 0 {
			f.PairThroughputRatios = append(f.PairThroughputRatios, writes.Throughput/quiet.Throughput)
			f.PairP99Ratios = append(f.PairP99Ratios, writes.Lat.P99/quiet.Lat.P99)
		}
	}
}

// write writes the chat phase's section of the scale report: every run,
// the medians, and the ratios against issue 12's targets.
func (c *ChatFigures) write(b *strings.Builder, cfg ChatConfig) {
	fmt.Fprintf(b, "\n## Chat traffic while keys are created (%d keys, to %s)\n\n", c.Keys, c.Node)
	fmt.Fprintf(b, "%d closed-loop clients for %v per run (after 1 s of warm-up), alone and while key creates arrive at %.0f/s through the admin API,\n",
		cfg.Clients, cfg.Dur, cfg.CreateRate)
	b.WriteString("alternating (alone, with writes, with writes, alone, ...), each run:\n\n| | req/s | p99 | creates/s |\n|---|---|---|---|\n")
	for _, run := range c.Runs {
		fmt.Fprintf(b, "| %s | %.0f | %.2f ms | %.0f (%d failed) |\n", map[bool]string{false: "alone", true: "with writes"}[run.Writes],
			run.Result.Throughput, run.Result.Lat.P99/1e3, run.CreatesPerSec, run.CreateErrors)
	}
	if c.LoadAvg != "" {
		fmt.Fprintf(b, "\nLoad average (1, 5, 15 min) before / after the chat runs: %s.\n", c.LoadAvg)
	}
	fmt.Fprintf(b, "\nMedians: alone %.0f req/s, p99 %.2f ms; with writes %.0f req/s, p99 %.2f ms.\n", c.QuietRPS, c.QuietP99Ms, c.WritesRPS, c.WritesP99Ms)
	fmt.Fprintf(b, "Throughput with writes ÷ alone: %.2f (target ≥ 0.9: %s); p99 with writes ÷ alone: %.2f (target ≤ 1.2: %s).\n",
		c.ThroughputRatio, metWord(c.ThroughputRatio >= 0.9), c.P99Ratio, metWord(c.P99Ratio > 0 && c.P99Ratio <= 1.2))
	if len(c.PairThroughputRatios) > 0 {
		fmt.Fprintf(b, "Within each pair of adjacent runs: throughput %s; p99 %s.\n", ratioList(c.PairThroughputRatios), ratioList(c.PairP99Ratios))
	}
	if c.CPU != nil {
		c.CPU.write(b, c.ThroughputRatio)
	}
}

func metWord(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

// ratioList is "0.57, 0.83, 0.43" for the ratios.
func ratioList(rs []float64) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%.2f", r)
	}
	return strings.Join(parts, ", ")
}
