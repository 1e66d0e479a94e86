package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"
)

// Config is what the command line chose.
type Config struct {
	Quick       bool          `json:"quick"`
	Scenarios   []string      `json:"scenarios"`
	Reps        int           `json:"repetitions"`
	Warmup      time.Duration `json:"warmup_ns"`
	Dur         time.Duration `json:"measure_ns"`
	OpenDur     time.Duration `json:"open_loop_ns"`
	RateDur     time.Duration `json:"slow_upstream_ns"`
	SoakDur     time.Duration `json:"soak_ns"`
	Clients     []int         `json:"clients"`
	Rates       []int         `json:"rates"`
	SmallConc   int           `json:"small_clients"` // clients of f, g, h, i
	MaxRequests int64         `json:"max_requests_per_phase"`
	MaxWorkers  int           `json:"max_open_loop_workers"`
	ReadyReps   int           `json:"ready_repetitions"`
	// Refs are the built-in reference proxies run (refs.go), Compare the
	// gateways given with -compare, ProfileDir where -profile keeps the
	// node's profiles.
	Refs       []string `json:"refs"`
	Compare    []*Ref   `json:"compare,omitempty"`
	ProfileDir string   `json:"profile_dir,omitempty"`
	NodeArgs   []string `json:"node_args,omitempty"` // -node-args
}

// Point is one measured configuration of a scenario (e.g. 10 clients):
// every repetition of both targets and their medians.
type Point struct {
	Label       string       `json:"label"`
	Param       float64      `json:"param"` // clients or requests/s
	Direct      *RunResult   `json:"direct"`
	Gateway     *RunResult   `json:"tollgate"`
	Ratio       float64      `json:"throughput_ratio"` // tollgate / direct
	AddedLat    Percentiles  `json:"added_latency"`
	AddedTTFT   *Percentiles `json:"added_ttft,omitempty"`
	AddedGap    *Percentiles `json:"added_gap,omitempty"`
	DirectRuns  []*RunResult `json:"direct_runs"`
	GatewayRuns []*RunResult `json:"tollgate_runs"`
	// Refs are the reference proxies' medians (HAProxy, Go, -compare), by
	// name, and RefRuns every repetition of them.
	Refs    map[string]*RunResult   `json:"refs,omitempty"`
	RefRuns map[string][]*RunResult `json:"ref_runs,omitempty"`
}

// Scenario is one lettered scenario of issue 7 and its points.
type Scenario struct {
	ID     string   `json:"id"`
	Title  string   `json:"title"`
	What   string   `json:"what"`
	Points []*Point `json:"points,omitempty"`
	Notes  []string `json:"notes,omitempty"`
}

// Footprint is scenario (j).
type Footprint struct {
	BinaryMB         float64   `json:"tollgate_binary_mb"`
	DevMB            float64   `json:"tollgate_dev_build_mb"`
	MockMB           float64   `json:"mockllm_binary_mb"`
	FirstReadyMS     float64   `json:"first_start_ready_ms"`
	ReadyMS          []float64 `json:"restart_ready_ms"`
	ReadyMedianMS    float64   `json:"restart_ready_median_ms"`
	RSSRestMB        float64   `json:"rss_at_rest_mb"`
	RSSRestRestartMB float64   `json:"rss_at_rest_after_restart_mb"`
	RSSAfterLoadMB   float64   `json:"rss_at_rest_after_load_mb"`
	// RSSMinuteAfterLoadMB is the RSS RestAfterLoadS seconds after the
	// last load scenario (a minute; 10 s in quick mode).
	RSSMinuteAfterLoadMB float64 `json:"rss_minute_after_load_mb,omitempty"`
	RestAfterLoadS       float64 `json:"rest_after_load_s,omitempty"`
}

// Soak is scenario (k).
type Soak struct {
	Rate          float64     `json:"rate"`
	Dur           float64     `json:"duration_s"`
	Warmup        float64     `json:"warmup_s"`
	Result        *RunResult  `json:"result"`
	Samples       []RSSSample `json:"rss_samples"`
	FirstMB       float64     `json:"rss_first_mb"`
	LastMB        float64     `json:"rss_last_mb"`
	SlopeMBPerMin float64     `json:"rss_growth_mb_per_min"` // least squares over the measured samples
	// LateMBPerMin is the slope over the second half only: a bounded
	// warm-up (the ledger's first memtables filling) shows in the whole
	// window's slope but not here; a leak shows in both.
	LateMBPerMin float64 `json:"rss_growth_second_half_mb_per_min"`
}

// bench is the state of one run of the harness.
type bench struct {
	cfg         Config
	bin         *Binaries
	gw          *Gateway
	mock        *child
	mockBase    string // http://host:port/v1
	secret      string
	header      http.Header
	mon         *Monitor
	logf        func(format string, args ...any)
	interrupted func() bool
	// refs are measured beside Tollgate (see refs.go); compareHeader, if
	// set, replaces the key header for the -compare gateways.
	refs          []*Ref
	compareHeader http.Header
	prof          *profiler // -profile: the node's profiles of (c) and (b)
}

// padText is filler for request bodies.
const padText = "The quick brown fox jumps over the lazy dog while the gateway forwards every byte. "

// chatBody returns a chat completion request for model, padded with a
// user message to exactly size bytes (or the minimum if size is smaller).
func chatBody(model string, stream bool, size int) []byte {
	m, _ := json.Marshal(model)
	head := `{"model":` + string(m)
	if stream {
		head += `,"stream":true`
	}
	head += `,"max_tokens":256,"messages":[{"role":"system","content":"You are a benchmark."},{"role":"user","content":"`
	tail := `"}]}`
	n := size - len(head) - len(tail)
	var pad strings.Builder
	for pad.Len() < n {
		pad.WriteString(padText)
	}
	p := pad.String()
	if n >= 0 {
		p = p[:n]
	} else {
		p = "hi"
	}
	return []byte(head + p + tail)
}

// embedBody is an embeddings request for model.
func embedBody(model string) []byte {
	m, _ := json.Marshal(model)
	return []byte(`{"model":` + string(m) + `,"input":"` + strings.Repeat(padText, 3) + `"}`)
}

// kind is what a scenario sends.
type kind int

const (
	kindChat kind = iota
	kindStream
	kindEmbed
)

// pair returns the direct and the Tollgate target for a route: the same
// request, with the public model name for Tollgate and the upstream
// model string (with its mock directives) for the mock.
func (b *bench) pair(route, upstream string, k kind, size, chunks int) (*Target, *Target) {
	mk := func(name, base, model string) *Target {
		t := &Target{Name: name, Header: b.header}
		switch k {
		case kindEmbed:
			t.URL, t.Body, t.Shape, t.MinBytes = base+"/embeddings", embedBody(model), "data", 64
		case kindStream:
			t.URL, t.Body, t.Stream, t.Chunks = base+"/chat/completions", chatBody(model, true, size), true, chunks
		default:
			t.URL, t.Body, t.Shape, t.MinBytes = base+"/chat/completions", chatBody(model, false, size), "choices", 1000
		}
		return t
	}
	return mk("direct", b.mockBase, upstream), mk("tollgate", "http://"+b.gw.HTTP+"/v1", route)
}

func upstreamOf(route string) string {
	for _, r := range Routes {
		if r.Name == route {
			return r.Upstream
		}
	}
	if route == FailoverRoute {
		return FailoverUpstream
	}
	panic("unknown route " + route)
}

// smoke sends one request to t and fails unless it is valid.
func smoke(t *Target) error {
	client, tr := newTransport(1)
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := newWorker(t, client)
	w.record = true
	w.one(ctx, time.Now())
	if w.ok != 1 {
		return fmt.Errorf("%s %s (%.60s…): the first request failed: %v", t.Name, t.URL, t.Body, w.errSamples)
	}
	return nil
}

// runner is one measurement of one target.
type runner func(t *Target, mon *Monitor) *RunResult

// compare measures direct and Tollgate alternately, cfg.Reps times each
// (ABBA order so neither always goes first), and reports the medians.
func (b *bench) compare(scn, label string, param float64, run runner, d, g *Target) *Point {
	p := &Point{Label: label, Param: param}
	lineup := b.lineup(scn, d, g)
	for rep := 0; rep < b.cfg.Reps && !b.interrupted(); rep++ {
		for _, e := range lineup.order(rep) {
			if b.interrupted() {
				break
			}
			t := e.t
			r := b.profiled(scn, param, rep, t == g, func() *RunResult { return run(t, e.mon) })
			b.logf("  (%s) %-12s rep %d/%d %-8s %8.0f req/s  p50 %9s  p99 %9s  errors %d  cpu gw/mock/load %.2f/%.2f/%.2f  gw rss %.1f MB",
				scn, label, rep+1, b.cfg.Reps, t.Name, r.Throughput, fmtUS(r.Lat.P50), fmtUS(r.Lat.P99), r.Errors,
				r.Usage.GatewayCPU, r.Usage.MockCPU, r.Usage.LoadCPU, r.Usage.GatewayRSS)
			for msg, n := range r.ErrSamples {
				b.logf("      error ×%d: %s", n, msg)
			}
			p.record(t, d, g, r)
		}
	}
	p.Direct, p.Gateway = medianRun(p.DirectRuns), medianRun(p.GatewayRuns)
	for name, rs := range p.RefRuns {
		p.Refs[name] = medianRun(rs)
	}
	if p.Direct != nil && p.Gateway != nil {
		if p.Direct.Throughput > 0 {
			p.Ratio = p.Gateway.Throughput / p.Direct.Throughput
		}
		p.AddedLat = diff(p.Gateway.Lat, p.Direct.Lat)
		if p.Gateway.TTFT != nil && p.Direct.TTFT != nil {
			a, g := diff(*p.Gateway.TTFT, *p.Direct.TTFT), diff(*p.Gateway.Gap, *p.Direct.Gap)
			p.AddedTTFT, p.AddedGap = &a, &g
		}
	}
	return p
}

func diff(a, b Percentiles) Percentiles {
	return Percentiles{Count: a.Count, Mean: a.Mean - b.Mean, P50: a.P50 - b.P50, P90: a.P90 - b.P90,
		P99: a.P99 - b.P99, P999: a.P999 - b.P999, Max: a.Max - b.Max}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// medianOf applies median to one field of every run.
func medianOf[T any](rs []T, f func(T) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return median(xs)
}

func medianPct(ps []Percentiles) Percentiles {
	return Percentiles{
		Count: uint64(medianOf(ps, func(p Percentiles) float64 { return float64(p.Count) })),
		Mean:  medianOf(ps, func(p Percentiles) float64 { return p.Mean }),
		P50:   medianOf(ps, func(p Percentiles) float64 { return p.P50 }),
		P90:   medianOf(ps, func(p Percentiles) float64 { return p.P90 }),
		P99:   medianOf(ps, func(p Percentiles) float64 { return p.P99 }),
		P999:  medianOf(ps, func(p Percentiles) float64 { return p.P999 }),
		Max:   medianOf(ps, func(p Percentiles) float64 { return p.Max }),
	}
}

// medianRun is a RunResult whose every figure is the median over rs,
// except OK, Errors and Unsent, which are totals (an error in any
// repetition counts), and the error samples, which are merged.
func medianRun(rs []*RunResult) *RunResult {
	if len(rs) == 0 {
		return nil
	}
	m := &RunResult{Target: rs[0].Target}
	var lat, ttft, gap, lag []Percentiles
	for _, r := range rs {
		m.OK += r.OK
		m.Errors += r.Errors
		m.Unsent += r.Unsent
		lat = append(lat, r.Lat)
		if r.TTFT != nil {
			ttft, gap = append(ttft, *r.TTFT), append(gap, *r.Gap)
		}
		if r.SendLag != nil {
			lag = append(lag, *r.SendLag)
		}
		for k, v := range r.ErrSamples {
			if m.ErrSamples == nil {
				m.ErrSamples = map[string]int{}
			}
			m.ErrSamples[k] += v
		}
	}
	m.Elapsed = medianOf(rs, func(r *RunResult) float64 { return r.Elapsed })
	m.Throughput = medianOf(rs, func(r *RunResult) float64 { return r.Throughput })
	m.Lat = medianPct(lat)
	if len(ttft) > 0 {
		t, g := medianPct(ttft), medianPct(gap)
		m.TTFT, m.Gap = &t, &g
	}
	if len(lag) > 0 {
		l := medianPct(lag)
		m.SendLag = &l
	}
	m.Usage = Usage{
		GatewayCPU:   medianOf(rs, func(r *RunResult) float64 { return r.Usage.GatewayCPU }),
		MockCPU:      medianOf(rs, func(r *RunResult) float64 { return r.Usage.MockCPU }),
		LoadCPU:      medianOf(rs, func(r *RunResult) float64 { return r.Usage.LoadCPU }),
		GatewayRSS:   medianOf(rs, func(r *RunResult) float64 { return r.Usage.GatewayRSS }),
		GatewayRSSAv: medianOf(rs, func(r *RunResult) float64 { return r.Usage.GatewayRSSAv }),
	}
	return m
}

// scenarioInfo describes every scenario, in run order.
var scenarioInfo = []struct{ ID, Title, What string }{
	{"j", "Footprint", "Binary size; RSS of an idle node after start and configuration; time from process start to /readyz 200 on a fresh data dir and, after SIGTERM, on the existing one; idle RSS again after all load."},
	{"a", "Closed loop, non-streaming", "N clients each send the next chat completion as soon as the last is answered; ~1 KB request, ~1.3 KB response (mock `size=1000`)."},
	{"b", "Closed loop, streaming", "As (a) with `stream: true` and 50 chunks sent back to back (mock `chunks=50`); latency is the whole stream, also time to first chunk and the gap between chunks."},
	{"c", "32 connections flat out", "32 closed-loop clients, non-streaming as (a): the throughput ceiling, CPU per request and RSS under load."},
	{"d", "Open loop 3,000 req/s", "Requests sent on a fixed schedule of 3,000/s whatever the answers do; latency from the intended send time, so queueing shows."},
	{"e", "Open loop, 300 ms upstream", "Open loop at 1,000, 2,000 and 5,000 req/s against an upstream that waits 300 ms before answering (mock `latency=300ms`): thousands of requests in flight."},
	{"f", "Paced streams", "Streams of 50 chunks 5 ms apart (mock `chunks=50&interval=5ms`) from a few closed-loop clients: time to first token and inter-chunk gap added by the gateway."},
	{"g", "64 KB requests", "Closed loop, non-streaming, 64 KB request bodies."},
	{"h", "Embeddings", "Closed loop, `/v1/embeddings` with a short input."},
	{"i", "Failover", "Closed loop against a route whose priority-0 deployment is a closed port and whose priority-1 deployment is the mock; direct is the mock alone."},
	{"k", "Soak", "Open loop of 200 streams/s (50 chunks) through Tollgate only, on a freshly restarted node after an unrecorded warm-up; the gateway's RSS every second and its growth per minute (least-squares slope)."},
}

func (b *bench) newScenario(id string) *Scenario {
	for _, s := range scenarioInfo {
		if s.ID == id {
			return &Scenario{ID: id, Title: s.Title, What: s.What}
		}
	}
	panic("unknown scenario " + id)
}

func (b *bench) closed(clients int) runner {
	return ClosedLoop{Clients: clients, Warmup: b.cfg.Warmup, Dur: b.cfg.Dur, MaxRequests: b.cfg.MaxRequests}.Run
}

func (b *bench) open(rate float64, dur, lat time.Duration) runner {
	return OpenLoop{Rate: rate, Warmup: b.cfg.Warmup, Dur: dur, ExpectLat: lat, MaxWorkers: b.cfg.MaxWorkers,
		Grace: 10*time.Second + 2*lat}.Run
}

// runScenario measures one of the comparative scenarios.
func (b *bench) runScenario(id string) *Scenario {
	s := b.newScenario(id)
	switch id {
	case "a", "b":
		route, k := "bench", kindChat
		if id == "b" {
			route, k = "bench-stream", kindStream
		}
		d, g := b.pair(route, upstreamOf(route), k, 1024, 50)
		levels := b.cfg.Clients
		if id == "b" {
			levels = withLevel(levels, StreamRatioClients)
		}
		for _, c := range levels {
			if b.interrupted() {
				break
			}
			s.Points = append(s.Points, b.compare(id, fmt.Sprintf("%d clients", c), float64(c), b.closed(c), d, g))
		}
	case "c":
		d, g := b.pair("bench", upstreamOf("bench"), kindChat, 1024, 0)
		s.Points = append(s.Points, b.compare(id, "32 clients", 32, b.closed(32), d, g))
	case "d":
		d, g := b.pair("bench", upstreamOf("bench"), kindChat, 1024, 0)
		s.Points = append(s.Points, b.compare(id, "3000 req/s", 3000, b.open(3000, b.cfg.OpenDur, 2*time.Millisecond), d, g))
	case "e":
		d, g := b.pair("bench-slow", upstreamOf("bench-slow"), kindChat, 1024, 0)
		for _, r := range b.cfg.Rates {
			if b.interrupted() {
				break
			}
			s.Points = append(s.Points, b.compare(id, fmt.Sprintf("%d req/s", r), float64(r), b.open(float64(r), b.cfg.RateDur, 300*time.Millisecond), d, g))
		}
	case "f":
		d, g := b.pair("bench-paced", upstreamOf("bench-paced"), kindStream, 1024, 50)
		s.Points = append(s.Points, b.compare(id, fmt.Sprintf("%d clients", b.cfg.SmallConc), float64(b.cfg.SmallConc), b.closed(b.cfg.SmallConc), d, g))
	case "g":
		d, g := b.pair("bench", upstreamOf("bench"), kindChat, 64<<10, 0)
		s.Points = append(s.Points, b.compare(id, fmt.Sprintf("%d clients", b.cfg.SmallConc), float64(b.cfg.SmallConc), b.closed(b.cfg.SmallConc), d, g))
	case "h":
		d, g := b.pair("bench-embed", upstreamOf("bench-embed"), kindEmbed, 0, 0)
		s.Points = append(s.Points, b.compare(id, fmt.Sprintf("%d clients", b.cfg.SmallConc), float64(b.cfg.SmallConc), b.closed(b.cfg.SmallConc), d, g))
	case "i":
		d, g := b.pair(FailoverRoute, FailoverUpstream, kindChat, 1024, 0)
		s.Points = append(s.Points, b.compare(id, fmt.Sprintf("%d clients", b.cfg.SmallConc), float64(b.cfg.SmallConc), b.closed(b.cfg.SmallConc), d, g))
	}
	return s
}

// smokeAll checks every route once, direct and through Tollgate, before
// anything is measured.
func (b *bench) smokeAll() error {
	checks := [][2]*Target{}
	add := func(d, g *Target) { checks = append(checks, [2]*Target{d, g}) }
	add(b.pair("bench", upstreamOf("bench"), kindChat, 1024, 0))
	add(b.pair("bench", upstreamOf("bench"), kindChat, 64<<10, 0))
	add(b.pair("bench-stream", upstreamOf("bench-stream"), kindStream, 1024, 50))
	add(b.pair("bench-paced", upstreamOf("bench-paced"), kindStream, 1024, 50))
	add(b.pair("bench-embed", upstreamOf("bench-embed"), kindEmbed, 0, 0))
	add(b.pair(FailoverRoute, FailoverUpstream, kindChat, 1024, 0))
	for _, c := range checks {
		for _, t := range c {
			if err := smoke(t); err != nil {
				return err
			}
		}
	}
	// The slow route once, through Tollgate only (300 ms each way is enough).
	_, g := b.pair("bench-slow", upstreamOf("bench-slow"), kindChat, 1024, 0)
	return smoke(g)
}

// footprint measures (j): sizes, RSS at rest, time to ready on a restart.
func (b *bench) footprint(fp *Footprint, firstReady time.Duration) error {
	size := func(p string) float64 {
		st, err := os.Stat(p)
		if err != nil {
			return 0
		}
		return float64(st.Size()) / (1 << 20)
	}
	fp.BinaryMB, fp.DevMB, fp.MockMB = size(b.bin.Tollgate), size(b.bin.Dev), size(b.bin.Mockllm)
	fp.FirstReadyMS = float64(firstReady) / 1e6
	rest := 2 * time.Second
	if b.cfg.Quick {
		rest = time.Second
	}
	time.Sleep(rest)
	var err error
	if fp.RSSRestMB, err = rssMB(b.gw.Pid()); err != nil {
		return err
	}
	for i := 0; i < b.cfg.ReadyReps && !b.interrupted(); i++ {
		if err := b.gw.Stop(); err != nil {
			return err
		}
		d, err := b.gw.Start()
		if err != nil {
			return err
		}
		fp.ReadyMS = append(fp.ReadyMS, float64(d)/1e6)
		b.logf("  (j) restart %d/%d: ready in %.0f ms", i+1, b.cfg.ReadyReps, float64(d)/1e6)
	}
	fp.ReadyMedianMS = median(fp.ReadyMS)
	time.Sleep(rest)
	fp.RSSRestRestartMB, _ = rssMB(b.gw.Pid())
	return nil
}

// soak runs (k): an open loop of streams through Tollgate only.
func (b *bench) soak() *Soak {
	const rate = 200
	_, g := b.pair("bench-stream", upstreamOf("bench-stream"), kindStream, 1024, 50)
	mon := &Monitor{Gateway: b.mon.Gateway, Mock: b.mon.Mock, Interval: b.mon.Interval, Keep: true}
	warm := soakWarmup(b.cfg.SoakDur)
	r := OpenLoop{Rate: rate, Warmup: warm, Dur: b.cfg.SoakDur, ExpectLat: 10 * time.Millisecond, MaxWorkers: b.cfg.MaxWorkers,
		Grace: 10 * time.Second}.Run(g, mon)
	s := &Soak{Rate: rate, Dur: b.cfg.SoakDur.Seconds(), Warmup: warm.Seconds(), Result: r, Samples: r.Usage.Samples}
	r.Usage.Samples = nil
	if n := len(s.Samples); n > 0 {
		s.FirstMB, s.LastMB = s.Samples[0].MB, s.Samples[n-1].MB
		s.SlopeMBPerMin = rssSlope(s.Samples, 0) * 60
		s.LateMBPerMin = rssSlope(s.Samples, 0.5) * 60
	}
	b.logf("  (k) %.0f streams/s for %v after %v warm-up: %d ok, %d errors, RSS %.1f → %.1f MB, growth %+.2f MB/min",
		float64(rate), b.cfg.SoakDur, warm, r.OK, r.Errors, s.FirstMB, s.LastMB, s.SlopeMBPerMin)
	return s
}

// soakWarmup is the unrecorded load before the soak is measured, so the
// heap of a fresh process reaching its working size is not read as growth:
// a quarter of the soak, at most 30 s.
func soakWarmup(d time.Duration) time.Duration { return min(d/4, 30*time.Second) }

// rssSlope is the least-squares slope (MB per second) of the samples
// after skipping the first `skip` fraction of the time span (warm-up).
func rssSlope(ss []RSSSample, skip float64) float64 {
	if len(ss) < 2 {
		return 0
	}
	t0 := ss[0].T + skip*(ss[len(ss)-1].T-ss[0].T)
	var n, sx, sy, sxx, sxy float64
	for _, s := range ss {
		if s.T < t0 {
			continue
		}
		n++
		sx += s.T
		sy += s.MB
		sxx += s.T * s.T
		sxy += s.T * s.MB
	}
	den := n*sxx - sx*sx
	if n < 2 || math.Abs(den) < 1e-12 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}
